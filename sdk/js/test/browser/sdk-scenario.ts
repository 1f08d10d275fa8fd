// The SDK's whole protocol in a browser, against `svc serve` and the fake provider that
// crates/svc-server/tests/playground_e2e.rs scripts. Served from its own origin by drive.mjs, so
// every REST call crosses origins. Returns what it saw; the Rust test judges it.
import { VoiceSession, type SessionEvent } from '../../src/index.js';

declare global {
  interface Window {
    runScenario(baseUrl: string, apiKey: string): Promise<unknown>;
    runUnreadyScenario(baseUrl: string, apiKey: string): Promise<unknown>;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

window.runScenario = async (baseUrl: string, apiKey: string) => {
  const seen: SessionEvent[] = [];
  const observations: Record<string, unknown> = {};
  const toolArgs: Record<string, unknown>[] = [];
  const session = new VoiceSession({
    baseUrl,
    credential: apiKey,
    microphone: false, // listen-only: nothing the fake's detector could take for a turn
    pingIntervalMs: 1_000,
    tools: {
      get_time: (args) => {
        toolArgs.push(args);
        return { time: 'noon' };
      },
      lookup_order: (args, context) => {
        toolArgs.push({ order_id: args.order_id, note_length: String(args.note ?? '').length });
        return context.background(async () => {
          await sleep(300);
          return { summary: 'Order 42 has shipped.', result: { status: 'shipped' } };
        });
      },
    },
  });
  session.on('*', (event) => seen.push(event));
  // The bounded stream, read alongside the listeners.
  let streamed = 0;
  const reader = (async () => {
    for await (const _event of session.events) streamed += 1;
  })();
  const waitFor = async (what: string, predicate: (event: SessionEvent) => boolean, ms = 30_000) => {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = seen.find(predicate);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no ${what} within ${ms} ms; saw ${seen.map((e) => e.type).join(' ')}`);
      await sleep(25);
    }
  };
  const assistantFinals = () =>
    seen.filter((e) => e.type === 'transcript' && e.role === 'ASSISTANT' && e.is_final).map((e) => (e as { text: string }).text);
  const waitForFinals = (n: number) => waitFor(`${n} assistant turns`, () => assistantFinals().length >= n);

  const tools = [
    { kind: 'client', name: 'get_time', description: 'The time of day.', parameters: { type: 'object', properties: {} } },
    {
      kind: 'client',
      name: 'lookup_order',
      description: 'Look up an order by id.',
      parameters: { type: 'object', properties: { order_id: { type: 'string' }, note: { type: 'string' } }, required: ['order_id'] },
    },
  ];
  try {
    const readiness = await session.start({ agent: { type: 'inline', model: 'provider_b', greeting: 'Hello from the agent.', tools } } as never);
    observations.readiness = readiness;
    observations.state_after_start = session.state;
    observations.session_id = session.sessionId;
    observations.connect_timings = session.connectTimings;
    await waitForFinals(1);

    // 50 KB of text: envelope chunks client to server. The model answers with a get_time call.
    await session.sendText('0123456789'.repeat(5_000));
    await waitFor('the get_time answer', (e) => e.type === 'sdk.tool-answered' && e.name === 'get_time');
    await waitForFinals(2);

    // A call whose arguments pass 12 KB (server to client in chunks), answered as a background job.
    await session.sendText('Where is order 42?');
    await waitFor('the lookup_order answer', (e) => e.type === 'sdk.tool-answered' && e.name === 'lookup_order');
    await waitFor('the job result sent', (e) => e.type === 'sdk.sent' && e.message.type === 'tool_job_result');
    await waitForFinals(4);

    await session.sendContext('The user prefers short answers.');
    await session.mute(true);
    await session.mute(false);
    await waitFor('a pong', (e) => e.type === 'pong', 5_000);
    observations.ping_rtt_ms = session.lastPingRttMs;
    observations.agent_state_before_end = session.agentState;
  } catch (error) {
    observations.error = (error as Error).message;
  }
  await session.end();
  await Promise.race([reader, sleep(2_000)]);
  observations.final_state = session.state;
  observations.assistant_finals = assistantFinals();
  observations.tool_args = toolArgs;
  observations.tool_answers = seen.filter((e) => e.type === 'sdk.tool-answered');
  observations.sent_types = seen.filter((e) => e.type === 'sdk.sent').map((e) => (e as { message: { type: string } }).message.type);
  observations.states = seen.filter((e) => e.type === 'sdk.state').map((e) => (e as { state: unknown }).state);
  observations.agent_states = seen.filter((e) => e.type === 'sdk.agent-state').map((e) => (e as { state: string }).state);
  observations.types = seen.map((e) => e.type);
  observations.turn_latencies = seen.filter((e) => e.type === 'sdk.turn-latency');
  observations.unknown = seen.filter((e) => e.type === 'unknown');
  observations.streamed = streamed;
  observations.emitted = seen.length;
  observations.dropped = session.droppedEvents;
  return observations;
};

// With a microphone, against an agent whose provider never gets ready: the SDK publishes its
// microphone, sends nothing (not even `bind-input`: the spec has the client wait for readiness
// before its first send), and gives up after its ready timeout.
window.runUnreadyScenario = async (baseUrl: string, apiKey: string) => {
  const seen: SessionEvent[] = [];
  const session = new VoiceSession({ baseUrl, credential: apiKey, readyTimeoutMs: 4_000 });
  session.on('*', (event) => seen.push(event));
  const observations: Record<string, unknown> = {};
  session.on('sdk.state', (event) => {
    // The moment the room is joined and the microphone about to be published.
    if (event.state.transport === 'connected') observations.microphone_opened = session.microphoneTrack !== null;
  });
  try {
    await session.start({ agent: { type: 'inline', model: 'provider_b' } } as never);
    observations.started = true;
  } catch (error) {
    observations.error = (error as Error).message;
  }
  observations.session_id = session.sessionId;
  observations.final_state = session.state;
  observations.sent_types = seen.filter((e) => e.type === 'sdk.sent').map((e) => (e as { message: { type: string } }).message.type);
  observations.types = seen.map((e) => e.type);
  return observations;
};
