// The SDK's pure parts under node's test runner: parsing, chunking, the event queue, the
// lifecycle, the ready latch, the turn timer and the REST client (against a fake fetch).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

import { SvcApi, SvcApiError, SDK_HEADER_VALUE, type SessionConfig, type ToolResponsePolicy } from '../src/api.js';
import {
  CHUNK_BYTES,
  ENVELOPE_THRESHOLD_BYTES,
  ENVELOPE_TIMEOUT_MS,
  MAX_OPEN_ENVELOPES,
  Reassembler,
  encodeMessage,
} from '../src/chunking.js';
import { Lifecycle, agentStateFromAttribute } from '../src/lifecycle.js';
import { MARKER_TYPES, parseServerEvent } from '../src/protocol.js';
import { EVENT_QUEUE_CAPACITY, EventQueue } from '../src/queue.js';
import { ReadyLatch } from '../src/ready.js';
import { TurnTimer } from '../src/turns.js';
import { SDK_NAME, SDK_VERSION } from '../src/version.js';

const decode = (bytes: Uint8Array) => JSON.parse(new TextDecoder().decode(bytes));

describe('version', () => {
  it('matches package.json', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    assert.equal(SDK_NAME, pkg.name);
    assert.equal(SDK_VERSION, pkg.version);
  });
});

describe('parseServerEvent', () => {
  it('reads every known type with defaults', () => {
    assert.deepEqual(parseServerEvent({ type: 'ready', session_id: 's', agent: null, rejected_tools: [], max_session_seconds: null }), {
      type: 'ready', session_id: 's', agent: null, rejected_tools: [], max_session_seconds: null,
    });
    assert.deepEqual(parseServerEvent({ type: 'error', code: 'internal_error', message: 'm' }), {
      type: 'error', code: 'internal_error', message: 'm', fatal: false,
    });
    assert.deepEqual(parseServerEvent({ type: 'model-text', text: 'hi' }), { type: 'model-text', text: 'hi', is_final: false });
    assert.deepEqual(parseServerEvent({ type: 'tool-invocation', request_id: 'r', tool_call_id: 'c', name: 'n', args: { a: 1 } }), {
      type: 'tool-invocation', request_id: 'r', tool_call_id: 'c', name: 'n', args: { a: 1 }, origin: 'realtime', executable: true,
    });
    assert.equal(parseServerEvent({ type: 'svc.usage', total_tokens: 7 }).type, 'svc.usage');
    assert.deepEqual(
      parseServerEvent({ type: 'dial-progress', dial_id: 'd', status: 'ended', reason: 'hangup', ended_by: 'phone', duration_seconds: 12.5 }),
      { type: 'dial-progress', dial_id: 'd', status: 'ended', reason: 'hangup', sip_status: null, ended_by: 'phone', duration_seconds: 12.5, digit: null },
    );
    assert.equal(parseServerEvent({ type: 'dial-progress', dial_id: 'd', status: 'exploded' }).type, 'unknown');
    for (const marker of MARKER_TYPES) assert.deepEqual(parseServerEvent({ type: marker, extra: 1 }), { type: marker });
  });

  it('surfaces unknown types and malformed known ones as unknown events', () => {
    assert.deepEqual(parseServerEvent({ type: 'svc.future-thing', x: 1 }), {
      type: 'unknown', raw_type: 'svc.future-thing', message: { type: 'svc.future-thing', x: 1 },
    });
    assert.equal(parseServerEvent({ type: 'transcript', role: 'BOT', text: 'x' }).type, 'unknown');
    assert.equal(parseServerEvent({ type: 'transcript', role: 'USER' }).type, 'unknown');
    assert.equal(parseServerEvent([1, 2]).type, 'unknown');
    assert.equal(parseServerEvent(null).type, 'unknown');
    assert.equal(parseServerEvent({ type: 5 }).type, 'unknown');
  });
});

describe('chunking', () => {
  it('sends small messages whole and large ones as 8,000-byte envelope chunks', () => {
    const small = { type: 'send-text', content: 'x'.repeat(ENVELOPE_THRESHOLD_BYTES - 40) };
    assert.equal(encodeMessage(small).length, 1);
    const large = { type: 'send-text', content: 'é'.repeat(25_000) }; // two bytes each: 50 KB
    const chunks = encodeMessage(large, () => 'env-1').map(decode);
    const bytes = new TextEncoder().encode(JSON.stringify(large)).length;
    assert.equal(chunks.length, Math.ceil(bytes / CHUNK_BYTES));
    chunks.forEach((chunk, seq) => {
      assert.equal(chunk.type, 'envelope-chunk');
      assert.equal(chunk.envelope_id, 'env-1');
      assert.equal(chunk.seq, seq);
      assert.equal(chunk.total, chunks.length);
    });
    // Reassembled (as the server does, renamed), in any order, it is the message again.
    const reassembler = new Reassembler();
    const outcomes = chunks.reverse().map((chunk) => reassembler.accept({ ...chunk, type: 'server-envelope-chunk' }));
    assert.deepEqual(outcomes.at(-1), { kind: 'message', message: large });
    assert.ok(outcomes.slice(0, -1).every((o) => o.kind === 'pending'));
    assert.equal(reassembler.openEnvelopes, 0);
  });

  it('drops malformed, duplicate, oversized and stale chunks and bounds open envelopes', () => {
    let now = 0;
    const reassembler = new Reassembler(() => now);
    const chunk = (id: string, seq: number, total: number, data = btoa('{}')) => ({ envelope_id: id, seq, total, data });
    assert.equal(reassembler.accept({ envelope_id: 'a', seq: 2, total: 2, data: '' }).kind, 'dropped');
    assert.equal(reassembler.accept(chunk('a', 0, 500)).kind, 'dropped');
    assert.equal(reassembler.accept(chunk('a', 0, 2, '!!!')).kind, 'dropped');
    assert.equal(reassembler.accept(chunk('a', 0, 2, btoa('x'.repeat(CHUNK_BYTES + 1)))).kind, 'dropped');
    assert.equal(reassembler.accept(chunk('a', 0, 2)).kind, 'pending');
    assert.equal(reassembler.accept(chunk('a', 0, 2)).kind, 'dropped', 'duplicate');
    assert.equal(reassembler.accept(chunk('a', 1, 3)).kind, 'dropped', 'total mismatch');
    for (let i = 0; i < MAX_OPEN_ENVELOPES + 2; i++) reassembler.accept(chunk(`e${i}`, 0, 2));
    assert.equal(reassembler.openEnvelopes, MAX_OPEN_ENVELOPES);
    assert.ok((reassembler.dropped.evicted ?? 0) >= 2);
    now += ENVELOPE_TIMEOUT_MS + 1;
    reassembler.accept(chunk('late', 0, 2));
    assert.equal(reassembler.openEnvelopes, 1, 'stale envelopes expire');
    assert.equal(reassembler.accept(chunk('bad', 0, 1, btoa('not json'))).kind, 'dropped');
    assert.deepEqual(reassembler.dropped.malformed, 1);
    assert.deepEqual(reassembler.dropped.bad_message, 1);
  });
});

describe('EventQueue', () => {
  it('holds 1,024 events, drops and counts the overflow, and drains after close', async () => {
    const queue = new EventQueue<number>();
    assert.equal(queue.capacity, EVENT_QUEUE_CAPACITY);
    for (let i = 0; i < 1100; i++) queue.push(i);
    assert.equal(queue.length, 1024);
    assert.equal(queue.dropped, 76);
    assert.equal(await queue.next(), 0);
    queue.close();
    assert.equal(queue.push(5), false);
    let count = 1;
    for await (const value of queue) {
      assert.equal(value, count);
      count += 1;
    }
    assert.equal(count, 1024);
    assert.equal(await queue.next(), undefined);
  });

  it('hands an event straight to a waiting reader', async () => {
    const queue = new EventQueue<string>(1);
    const next = queue.next();
    queue.push('a');
    assert.equal(await next, 'a');
    queue.push('b');
    queue.push('c');
    assert.equal(queue.dropped, 1);
  });
});

describe('Lifecycle', () => {
  it('walks idle → connecting → connected ⇄ reconnecting → disconnected and latches', () => {
    const lifecycle = new Lifecycle();
    assert.equal(lifecycle.state.kind, 'idle');
    assert.equal(lifecycle.apply({ kind: 'handshake-ok' }), null, 'nothing before start');
    assert.equal(lifecycle.apply({ kind: 'start' })?.kind, 'connecting');
    assert.equal(lifecycle.apply({ kind: 'permission' })?.transport, 'requesting-permission');
    assert.equal(lifecycle.apply({ kind: 'room-connecting' })?.transport, 'connecting');
    assert.equal(lifecycle.apply({ kind: 'room-connected' })?.transport, 'connected');
    assert.deepEqual(lifecycle.apply({ kind: 'handshake-ok' }), { kind: 'connected', transport: 'ready', reason: null, detail: null });
    assert.equal(lifecycle.apply({ kind: 'transport-drop' })?.kind, 'reconnecting');
    assert.equal(lifecycle.apply({ kind: 'rotation' }), null, 'already reconnecting, transport still down');
    const back = lifecycle.apply({ kind: 'recovered', of: 'transport' });
    assert.deepEqual([back?.kind, back?.transport], ['reconnecting', 'ready'], 'the transport is back; the rotation still runs');
    assert.equal(lifecycle.apply({ kind: 'recovered', of: 'rotation' })?.kind, 'connected');
    assert.equal(lifecycle.apply({ kind: 'ending' })?.transport, 'disconnecting');
    assert.deepEqual(lifecycle.apply({ kind: 'ended', reason: 'client_ended' }), {
      kind: 'disconnected', transport: 'disconnected', reason: 'client_ended', detail: null,
    });
    for (const input of [{ kind: 'start' }, { kind: 'handshake-ok' }, { kind: 'ended', reason: 'server_ended' }] as const) {
      assert.equal(lifecycle.apply(input), null, `latched against ${input.kind}`);
    }
    assert.equal(lifecycle.state.reason, 'client_ended');
  });

  it('fails a handshake and a transport with the transport state `failed`', () => {
    const handshake = new Lifecycle();
    handshake.apply({ kind: 'start' });
    assert.equal(handshake.apply({ kind: 'rotation' }), null, 'rotation needs a connected session');
    assert.deepEqual(handshake.apply({ kind: 'ended', reason: 'handshake_failed', detail: '429 concurrent_session_limit' }), {
      kind: 'disconnected', transport: 'failed', reason: 'handshake_failed', detail: '429 concurrent_session_limit',
    });
    const transport = new Lifecycle();
    transport.apply({ kind: 'start' });
    transport.apply({ kind: 'handshake-ok' });
    transport.apply({ kind: 'transport-drop' });
    assert.equal(transport.apply({ kind: 'ended', reason: 'transport_error' })?.transport, 'failed');
  });

  it('maps lk.agent.state onto the agent vocabulary', () => {
    assert.equal(agentStateFromAttribute('speaking'), 'speaking');
    assert.equal(agentStateFromAttribute('initializing'), 'idle');
    assert.equal(agentStateFromAttribute(undefined), 'idle');
  });
});

describe('ReadyLatch', () => {
  const frame = { type: 'ready' as const, session_id: 's', agent: null, rejected_tools: [{ name: 'web_search', reason: 'not_configured' }], max_session_seconds: 60 };

  it('latches on the frame first and ignores the attribute after', () => {
    const latch = new ReadyLatch();
    assert.equal(latch.offerFrame(frame)?.source, 'frame');
    assert.equal(latch.offerAttribute(JSON.stringify(frame)), null);
    assert.equal(latch.offerFrame(frame), null);
  });

  it('latches on a degraded attribute and completes it from a later frame', () => {
    const latch = new ReadyLatch();
    assert.equal(latch.offerAttribute('not json'), null);
    const degraded = latch.offerAttribute(JSON.stringify({ type: 'ready', session_id: 's', max_session_seconds: 60 }));
    assert.deepEqual([degraded?.source, degraded?.complete, degraded?.event.max_session_seconds], ['attribute', false, 60]);
    const completed = latch.offerFrame(frame);
    assert.deepEqual([completed?.source, completed?.complete, completed?.event.rejected_tools.length], ['attribute', true, 1]);
  });
});

describe('TurnTimer', () => {
  it('measures from the last loud microphone moment to the first agent audio', () => {
    const timer = new TurnTimer();
    timer.micVoice(1000);
    timer.micVoice(1500);
    timer.userStopped(2100); // the server's detector waited a pause
    assert.equal(timer.agentLevel(1400, true), null, 'audio before the end of speech is not a reply');
    assert.equal(timer.agentLevel(2200, false), null);
    assert.deepEqual(timer.agentLevel(2400, true), { ms: 900, basis: 'audio', trigger: 'speech' });
    assert.equal(timer.agentLevel(2500, true), null, 'once per turn');
  });

  it('does not take the tail of the previous response for the reply', () => {
    const timer = new TurnTimer();
    timer.userSent(100, 'text'); // typed while the agent was still speaking
    assert.equal(timer.agentLevel(101, true), null);
    assert.equal(timer.agentLevel(300, true), null);
    assert.equal(timer.agentLevel(320, false), null);
    assert.deepEqual(timer.agentLevel(900, true), { ms: 800, basis: 'audio', trigger: 'text' });
  });

  it('falls back to the marker, measures typed turns, and abandons a barged-in turn', () => {
    const timer = new TurnTimer();
    timer.userSent(100, 'text');
    timer.botStarted(700);
    assert.deepEqual(timer.agentTurnComplete(), { ms: 600, basis: 'marker', trigger: 'text' });
    timer.userSent(1000, 'activity-end');
    timer.reset();
    assert.equal(timer.agentLevel(1200, false), null);
    assert.equal(timer.agentLevel(1250, true), null);
    timer.userStopped(5000); // no microphone level known: the marker's arrival is the end
    timer.agentLevel(5100, false);
    assert.deepEqual(timer.agentLevel(5300, true), { ms: 300, basis: 'audio', trigger: 'speech' });
  });
});

describe('SvcApi', () => {
  type Call = { url: string; init: RequestInit };
  const fakeFetch = (status: number, body: unknown, calls: Call[]) =>
    (async (url: string, init: RequestInit) => {
      calls.push({ url, init });
      return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', 'x-request-id': 'req-1' } });
    }) as unknown as typeof fetch;

  it('stamps the SDK on a start, in the body and the X-Svc-SDK header', async () => {
    const calls: Call[] = [];
    const response = { livekit_url: 'ws://h/room', token: 't', room_name: 'r', session_id: 's', timings: {} };
    const api = new SvcApi({ baseUrl: 'http://h:8080/', credential: async () => 'key-1', fetch: fakeFetch(200, response, calls) });
    assert.deepEqual(await api.startSession({ agent: { type: 'inline', greeting: 'Hi' } as never }), response);
    const [call] = calls;
    assert.equal(call?.url, 'http://h:8080/api/v1/external/realtime/session/start');
    const headers = call?.init.headers as Record<string, string>;
    assert.equal(headers.Authorization, 'Bearer key-1');
    assert.equal(headers['X-Svc-SDK'], SDK_HEADER_VALUE);
    assert.equal(headers['Content-Type'], 'application/json');
    assert.deepEqual(JSON.parse(call?.init.body as string), {
      agent: { type: 'inline', greeting: 'Hi' }, type: 'session-config', sdk: { name: SDK_NAME, version: SDK_VERSION },
    });
  });

  it('sends an inline agent\'s tool-response policy as typed', async () => {
    const calls: Call[] = [];
    const response = { livekit_url: 'ws://h/room', token: 't', room_name: 'r', session_id: 's', timings: {} };
    const api = new SvcApi({ baseUrl: 'http://h:8080', credential: async () => 'key-1', fetch: fakeFetch(200, response, calls) });
    const policy: ToolResponsePolicy = {
      default: { behavior: 'non_blocking', scheduling: 'when_idle' },
      overrides: { lookup_order: { behavior: 'blocking' } },
    };
    const config: SessionConfig = {
      agent: {
        type: 'inline',
        tools: [{ kind: 'client', name: 'lookup_order', description: 'Find an order.' }, { kind: 'web_search' }],
        tool_response_policy: policy,
      },
    };
    await api.startSession(config);
    assert.deepEqual(JSON.parse(calls[0]?.init.body as string).agent.tool_response_policy, policy);
  });

  it('turns the error envelope (and a 401 detail) into SvcApiError', async () => {
    const envelope = { error: { type: 'api_error', code: 'concurrent_session_limit', message: 'Too many live sessions' } };
    const api = new SvcApi({ baseUrl: 'http://h', credential: 'k', fetch: fakeFetch(429, envelope, []) });
    await assert.rejects(api.startSession({}), (error: SvcApiError) => {
      assert.deepEqual([error.status, error.type, error.code, error.message, error.requestId], [429, 'api_error', 'concurrent_session_limit', 'Too many live sessions', 'req-1']);
      assert.deepEqual(error.details, {});
      return true;
    });
    const unauthorized = new SvcApi({ baseUrl: 'http://h', credential: 'k', fetch: fakeFetch(401, { detail: 'Invalid API key' }, []) });
    await assert.rejects(unauthorized.verify(), { status: 401, message: 'Invalid API key' });
    const offline = new SvcApi({ baseUrl: 'http://h', credential: 'k', fetch: (async () => { throw new TypeError('fetch failed'); }) as never });
    await assert.rejects(offline.verify(), { status: 0, type: 'network_error' });
  });

  it("keeps each code's structured extras, as svc sends them beside the message", async () => {
    const rejections: [number, Record<string, unknown>][] = [
      [429, { code: 'concurrent_session_limit', limit: 5, active: 5 }],
      [402, { code: 'free_minutes_exhausted', granted_minutes: 60, used_minutes: 61 }],
      [402, { code: 'insufficient_credits', balance_cents: 0, top_up_path: '/billing/credits' }],
      [429, { code: 'quota_exceeded', meter: 'voice_minutes', included: 100, used: 100, reset_at: 1_767_225_600 }],
      [403, { code: 'provider_not_entitled', provider: 'provider_b', allowed_providers: ['provider_a'], plan: 'free', upgrade_path: '/billing/plans' }],
      [400, { code: 'sdk_unsupported', min_version: '1.4.0' }],
    ];
    for (const [status, fields] of rejections) {
      const { code, ...extras } = fields;
      const envelope = { error: { type: 'api_error', code, message: `refused: ${code}`, ...extras } };
      const api = new SvcApi({ baseUrl: 'http://h', credential: 'k', fetch: fakeFetch(status, envelope, []) });
      await assert.rejects(api.startSession({}), (error: SvcApiError) => {
        assert.deepEqual([error.status, error.code, error.message], [status, code, `refused: ${code}`]);
        assert.deepEqual(error.details, extras, `${code}'s extras`);
        return true;
      });
    }
    // A 422 keeps its issues apart from the extras; an extra a newer server adds is kept by name.
    const invalid = { error: { type: 'validation_error', message: 'm', errors: [{ loc: ['body'], type: 'missing', msg: 'x' }], retry_after: 3 } };
    const api = new SvcApi({ baseUrl: 'http://h', credential: 'k', fetch: fakeFetch(422, invalid, []) });
    await assert.rejects(api.startSession({}), (error: SvcApiError) => {
      assert.equal(error.errors.length, 1);
      assert.deepEqual(error.details, { retry_after: 3 });
      return true;
    });
  });

  it('builds list queries', async () => {
    const calls: Call[] = [];
    const api = new SvcApi({ baseUrl: 'http://h', credential: 'k', fetch: fakeFetch(200, [], calls) });
    await api.listSessions({ limit: 5 });
    await api.listSessions();
    assert.deepEqual(calls.map((c) => c.url), ['http://h/api/v1/external/sessions?limit=5', 'http://h/api/v1/external/sessions']);
  });
});
