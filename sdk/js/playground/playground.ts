// The playground served by `svc serve` at `/`: talk to an agent, read the transcript and every
// frame both ways, see connect and turn figures, usage and session history. Built on the SDK
// (../src) and bundled into crates/svc-server/playground/ by scripts/build-playground.sh.

import {
  SDK_NAME,
  SDK_VERSION,
  SvcApi,
  SvcApiError,
  LevelMeter,
  VoiceSession,
  type SessionConfig,
  type SessionEvent,
  type ToolHandler,
  type UsageEvent,
} from '../src/index.js';

interface Provider {
  alias: string;
  configured: boolean;
  key_variable: string | null;
  setup: string | null;
}
interface DevCredential {
  api_key: string;
  workspace: string;
  public_url: string;
  default_provider: string;
  providers: Provider[];
}
interface ToolSpec {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
  result?: unknown;
}

const ALIASES = ['provider_a', 'provider_b', 'provider_b_mini', 'provider_b_live', 'provider_c', 'provider_local'];
const STORAGE_KEY = 'svc-playground-agent';

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const element = document.getElementById(id);
  if (!element) throw new Error(`#${id} is missing`);
  return element as T;
};
const el = (tag: string, text = '', attrs: Record<string, string> = {}): HTMLElement => {
  const element = document.createElement(tag);
  element.textContent = text;
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, value);
  return element;
};

const ui = {
  state: $('state'),
  transport: $('transport'),
  agentState: $('agent-state'),
  banner: $('banner'),
  credential: $<HTMLInputElement>('credential'),
  credentialSource: $('credential-source'),
  verifyResult: $('verify-result'),
  model: $<HTMLSelectElement>('model'),
  voice: $<HTMLInputElement>('voice'),
  greeting: $<HTMLInputElement>('greeting'),
  instructions: $<HTMLTextAreaElement>('instructions'),
  tools: $<HTMLTextAreaElement>('tools'),
  toolsError: $('tools-error'),
  talk: $<HTMLButtonElement>('talk-button'),
  end: $<HTMLButtonElement>('end-button'),
  mute: $<HTMLButtonElement>('mute-button'),
  micLevel: $('mic-level'),
  textForm: $<HTMLFormElement>('text-form'),
  textInput: $<HTMLInputElement>('text-input'),
  textSend: $<HTMLButtonElement>('text-send'),
  transcript: $('transcript'),
  log: $('log'),
  history: $('history'),
  figSession: $('fig-session'),
  figConnect: $('fig-connect'),
  figServer: $('fig-server'),
  figTurns: $('fig-turns'),
  figPing: $('fig-ping'),
  figUsage: $('fig-usage'),
};

let dev: DevCredential | null = null;
let session: VoiceSession | null = null;
let micMeter: LevelMeter | null = null;
let meterTimer: ReturnType<typeof setInterval> | null = null;
const turnLatencies: number[] = [];
const started = performance.now();

$('sdk-version').textContent = `${SDK_NAME} ${SDK_VERSION}`;

function api(): SvcApi {
  return new SvcApi({ baseUrl: location.origin, credential: ui.credential.value.trim() });
}

function showBanner(text: string, bad = false): void {
  ui.banner.textContent = text;
  ui.banner.classList.toggle('bad', bad);
  ui.banner.hidden = text === '';
}

// --- Credential -------------------------------------------------------------------------------

async function loadDevCredential(): Promise<void> {
  try {
    const response = await fetch('/playground/credential', { cache: 'no-store' });
    if (!response.ok) {
      ui.credentialSource.textContent = 'This server hands out no development credential: paste an API key (scope realtime:start; realtime:read and realtime:logs for history) or a minted token.';
      fillModels(null);
      return;
    }
    dev = (await response.json()) as DevCredential;
    ui.credential.value = dev.api_key;
    ui.credentialSource.textContent = `Signed in with the "${dev.workspace}" workspace's key of this run of svc serve (loopback only). Paste another credential to use it instead.`;
    if (new URL(dev.public_url).origin !== location.origin) {
      showBanner(`This server's public URL is ${dev.public_url}: open the playground there, since credentials work only on their workspace's host.`, true);
    }
    fillModels(dev);
    void refreshHistory();
  } catch (error) {
    ui.credentialSource.textContent = `Could not ask for a development credential: ${(error as Error).message}`;
    fillModels(null);
  }
}

function fillModels(credential: DevCredential | null): void {
  const saved = loadSaved();
  const providers: Provider[] = credential?.providers ?? ALIASES.map((alias) => ({ alias, configured: true, key_variable: null, setup: null }));
  ui.model.replaceChildren();
  for (const provider of providers) {
    const label = provider.configured ? provider.alias : `${provider.alias} (not set up: ${provider.setup ?? 'see the server log'})`;
    ui.model.append(el('option', label, { value: provider.alias }));
  }
  const preferred = saved?.model ?? providers.find((p) => p.configured)?.alias ?? credential?.default_provider ?? 'provider_a';
  ui.model.value = preferred;
  checkProvider();
}

// --- provider_local's models ---------------------------------------------------------------

interface LocalModels {
  installed: boolean;
  missing: string | null;
  speech: boolean;
  install: { state: 'idle' | 'running' | 'failed' | 'done'; step?: string; done?: number; total?: number; error?: string };
}

let localPoll: number | undefined;
let localChecked = false;

/** Offers to install provider_local's models when it is chosen and they are missing, and says
 * when the machine cannot speak (no espeak-ng). Asks the server once; polls while installing. */
function checkLocalModels(): void {
  const chosen = dev !== null && ui.model.value === 'provider_local';
  $('local-install').hidden = !(chosen && !dev?.providers.find((p) => p.alias === 'provider_local')?.configured);
  if (chosen && !localChecked) {
    localChecked = true;
    void pollLocalModels();
  }
}

async function pollLocalModels(): Promise<void> {
  localPoll = undefined;
  let status: LocalModels;
  try {
    const response = await fetch('/playground/local-models', { cache: 'no-store' });
    if (!response.ok) return;
    status = (await response.json()) as LocalModels;
  } catch {
    return;
  }
  showLocalModels(status);
  if (status.install.state === 'running') localPoll = window.setTimeout(() => void pollLocalModels(), 1000);
}

function showLocalModels(status: LocalModels): void {
  const text = $('local-install-text');
  const button = $<HTMLButtonElement>('local-install-button');
  if (status.installed) {
    const local = dev?.providers.find((p) => p.alias === 'provider_local');
    $('local-install').hidden = true;
    if (local && !local.configured) {
      local.configured = true;
      fillModels(dev);
    }
    if (!status.speech) showBanner('provider_local is installed, but this machine has no espeak-ng: the agent answers in the transcript only (apt-get install espeak-ng to hear it).', true);
    return;
  }
  const install = status.install;
  button.disabled = install.state === 'running';
  if (install.state === 'running') {
    const share = install.total ? ` ${Math.floor(((install.done ?? 0) * 100) / install.total)}%` : '';
    text.textContent = `Installing the local models: ${install.step ?? ''}${share}`;
  } else if (install.state === 'failed') {
    text.textContent = `Installing the local models failed: ${install.error ?? 'see the server log'}`;
  }
}

$('local-install-button').addEventListener('click', () => {
  void (async () => {
    const response = await fetch('/playground/local-models', { method: 'POST', cache: 'no-store' });
    if (response.ok) showLocalModels((await response.json()) as LocalModels);
    if (localPoll === undefined) localPoll = window.setTimeout(() => void pollLocalModels(), 1000);
  })();
});

/** Says which variable to set when the chosen provider has no key on this server. */
function checkProvider(): void {
  checkLocalModels();
  if (!dev) return;
  const chosen = dev.providers.find((p) => p.alias === ui.model.value);
  if (dev.providers.every((p) => !p.configured)) {
    const variables = [...new Set(dev.providers.map((p) => p.key_variable).filter(Boolean))].join(', ');
    showBanner(`No voice provider is configured on this server, so sessions cannot start. Set one of ${variables} in the environment of svc serve and restart it, or run \`svc models install\` for provider_local (no key needed).`, true);
  } else if (chosen && !chosen.configured && chosen.alias === 'provider_local') {
    showBanner('');
  } else if (chosen && !chosen.configured) {
    showBanner(`${chosen.alias} is not set up on this server: ${chosen.setup ?? 'see the server log'}, then restart svc serve; or pick a configured provider.`, true);
  } else {
    showBanner('');
  }
}

async function verify(): Promise<void> {
  ui.verifyResult.textContent = '…';
  try {
    const info = await api().verify();
    const workspace = info.workspace ? `${info.workspace.name} (${info.workspace.slug})` : `user ${info.external_user_id ?? ''}`;
    ui.verifyResult.textContent = `${info.credential}, ${workspace}; ${info.scopes.join(' ')}`;
    if (!info.realtime_voice_available) {
      showBanner("The server's default voice provider has no key. Its operator sets GEMINI_API_KEY, OPENAI_API_KEY or XAI_API_KEY for svc serve.", true);
    }
  } catch (error) {
    ui.verifyResult.textContent = describe(error);
  }
}

// --- Agent form -------------------------------------------------------------------------------

interface Saved {
  model: string;
  voice: string;
  greeting: string;
  instructions: string;
  tools: string;
}
function loadSaved(): Saved | null {
  try {
    return JSON.parse(localStorage.getItem(STORAGE_KEY) ?? 'null') as Saved | null;
  } catch {
    return null;
  }
}
function save(): void {
  const saved: Saved = { model: ui.model.value, voice: ui.voice.value, greeting: ui.greeting.value, instructions: ui.instructions.value, tools: ui.tools.value };
  localStorage.setItem(STORAGE_KEY, JSON.stringify(saved));
}
function restore(): void {
  const saved = loadSaved();
  if (!saved) return;
  ui.voice.value = saved.voice;
  ui.greeting.value = saved.greeting;
  ui.instructions.value = saved.instructions;
  ui.tools.value = saved.tools;
}

function readTools(): ToolSpec[] {
  const parsed: unknown = JSON.parse(ui.tools.value.trim() || '[]');
  if (!Array.isArray(parsed)) throw new Error('client tools: expected a JSON array');
  return parsed.map((tool, index) => {
    if (typeof tool !== 'object' || tool === null || typeof (tool as ToolSpec).name !== 'string') {
      throw new Error(`client tools: entry ${index} needs a "name"`);
    }
    return tool as ToolSpec;
  });
}

function sessionConfig(tools: ToolSpec[]): SessionConfig {
  const agent: Record<string, unknown> = { type: 'inline', model: ui.model.value };
  if (ui.instructions.value.trim()) agent.instructions = ui.instructions.value;
  if (ui.greeting.value.trim()) agent.greeting = ui.greeting.value;
  if (ui.voice.value.trim()) agent.voice = { name: ui.voice.value.trim() };
  if (tools.length > 0) {
    agent.tools = tools.map((tool) => ({
      kind: 'client',
      name: tool.name,
      description: tool.description ?? tool.name,
      parameters: tool.parameters ?? { type: 'object', properties: {} },
    }));
  }
  return { agent } as SessionConfig;
}

// --- Talking ----------------------------------------------------------------------------------

async function talk(): Promise<void> {
  let tools: ToolSpec[];
  try {
    tools = readTools();
    ui.toolsError.hidden = true;
  } catch (error) {
    ui.toolsError.textContent = (error as Error).message;
    ui.toolsError.hidden = false;
    return;
  }
  save();
  const handlers: Record<string, ToolHandler> = {};
  for (const tool of tools) handlers[tool.name] = () => tool.result ?? { ok: true };
  ui.transcript.replaceChildren();
  turnLatencies.length = 0;
  for (const figure of [ui.figSession, ui.figConnect, ui.figServer, ui.figTurns, ui.figPing, ui.figUsage]) figure.textContent = '–';
  const current = new VoiceSession({ baseUrl: location.origin, credential: ui.credential.value.trim(), tools: handlers, pingIntervalMs: 10_000 });
  session = current;
  current.on('*', (event) => onEvent(current, event));
  setControls('starting');
  try {
    const readiness = await current.start(sessionConfig(tools));
    ui.figSession.textContent = current.sessionId ?? '–';
    const timings = current.connectTimings;
    if (timings) {
      const mic = timings.mic_ms === undefined ? '' : `mic ${timings.mic_ms} ms · `;
      ui.figConnect.textContent = `${mic}request ${timings.request_ms} ms · room ${timings.room_ms} ms · ready ${timings.ready_ms} ms`;
    }
    const server = current.credentials?.timings;
    if (server) ui.figServer.textContent = `total ${fmt(server.total_ms)} ms (db ${fmt(server.db_insert_ms)}, dispatch ${fmt(server.dispatch_ms)})`;
    if (readiness.event.rejected_tools.length > 0) {
      showBanner(`Started without: ${readiness.event.rejected_tools.map((t) => `${t.name} (${t.reason})`).join(', ')}`);
    }
    startMeter(current);
    setControls('live');
    void refreshHistory();
  } catch (error) {
    setControls('idle');
    const message = describe(error);
    if (error instanceof SvcApiError && error.status === 503) {
      const provider = dev?.providers.find((p) => p.alias === ui.model.value);
      const hint = provider?.key_variable ? ` Set ${provider.key_variable} in the environment of svc serve and restart it.` : '';
      showBanner(`${message}.${hint}`, true);
    } else {
      showBanner(`Could not start: ${message}`, true);
    }
  }
}

function fmt(value: number | undefined): string {
  return value === undefined ? '?' : value.toFixed(1);
}

function describe(error: unknown): string {
  if (error instanceof SvcApiError) {
    const issues = error.errors.map((issue) => `${JSON.stringify(issue.loc)} ${issue.msg}`).join('; ');
    return `${error.status} ${error.code ?? error.type}: ${error.message}${issues ? ` (${issues})` : ''}`;
  }
  return error instanceof Error ? error.message : String(error);
}

function setControls(phase: 'idle' | 'starting' | 'live'): void {
  ui.talk.disabled = phase !== 'idle';
  ui.end.disabled = phase === 'idle';
  ui.mute.disabled = phase !== 'live';
  ui.textInput.disabled = phase !== 'live';
  ui.textSend.disabled = phase !== 'live';
  if (phase !== 'live') {
    ui.mute.setAttribute('aria-pressed', 'false');
    ui.mute.textContent = 'Mute';
  }
}

function startMeter(current: VoiceSession): void {
  const track = current.microphoneTrack;
  if (!track) return;
  micMeter = new LevelMeter(track);
  meterTimer = setInterval(() => {
    const level = current.muted || !micMeter ? -100 : micMeter.dbfs();
    // -60 dBFS .. 0 dBFS onto the bar.
    ui.micLevel.style.width = `${Math.max(0, Math.min(100, ((level + 60) / 60) * 100))}%`;
  }, 50);
}

function stopMeter(): void {
  if (meterTimer) clearInterval(meterTimer);
  meterTimer = null;
  micMeter?.close();
  micMeter = null;
  ui.micLevel.style.width = '0';
}

// --- Events -----------------------------------------------------------------------------------

function onEvent(current: VoiceSession, event: SessionEvent): void {
  if (current !== session) return;
  logEvent(event);
  switch (event.type) {
    case 'sdk.state':
      ui.state.textContent = event.state.kind + (event.state.reason ? ` (${event.state.reason})` : '');
      ui.state.dataset.kind = event.state.kind;
      // Only a failure is shown as one: an end by either side is the normal way out.
      ui.state.dataset.failed = String(event.state.transport === 'failed');
      ui.transport.textContent = `transport: ${event.state.transport}`;
      if (event.state.kind === 'disconnected') onEnded(current, event.state.detail);
      break;
    case 'sdk.agent-state':
      ui.agentState.textContent = `agent: ${event.state}`;
      break;
    case 'transcript':
      onTranscript(event.role, event.text, event.is_final);
      break;
    case 'model-text':
      if (event.is_final) onTranscript('ASSISTANT', event.text, true);
      break;
    case 'turn-complete':
      currentTurn[event.role] = null;
      break;
    case 'sdk.turn-latency':
      turnLatencies.push(event.latency.ms);
      ui.figTurns.textContent = turnSummary(event.latency.basis);
      break;
    case 'pong':
      ui.figPing.textContent = current.lastPingRttMs === null ? '–' : `${current.lastPingRttMs} ms round trip`;
      break;
    case 'svc.usage':
      ui.figUsage.textContent = usageText(event);
      break;
    case 'session-ending-soon':
      showBanner(`The session ends in ${Math.round(event.seconds_remaining)} s (${event.reason}).`);
      break;
    case 'error':
      if (event.fatal) showBanner(`The session failed: ${event.code}: ${event.message}`, true);
      break;
    default:
      break;
  }
}

function turnSummary(basis: string): string {
  const sorted = [...turnLatencies].sort((a, b) => a - b);
  const median = sorted[Math.floor((sorted.length - 1) / 2)] ?? 0;
  const last = turnLatencies.at(-1) ?? 0;
  return `last ${last} ms · median ${median} ms over ${turnLatencies.length} turn${turnLatencies.length === 1 ? '' : 's'} (end of speech → first agent audio${basis === 'marker' ? ', by marker' : ''}) · ${turnLatencies.join(', ')}`;
}

function usageText(usage: Omit<UsageEvent, 'type'> | Record<string, unknown>): string {
  const u = usage as Record<string, number>;
  return `${u.total_tokens ?? 0} tokens (in: ${u.input_audio_tokens ?? 0} audio, ${u.input_text_tokens ?? 0} text; out: ${u.output_audio_tokens ?? 0} audio, ${u.output_text_tokens ?? 0} text)`;
}

const currentTurn: Record<'USER' | 'ASSISTANT', HTMLElement | null> = { USER: null, ASSISTANT: null };

/** Fragments append to the open turn; the final text replaces them. */
function onTranscript(role: 'USER' | 'ASSISTANT', text: string, isFinal: boolean): void {
  let item = currentTurn[role];
  if (!item) {
    item = el('li', '', { 'data-role': role, 'data-final': 'false' });
    item.append(el('span', role === 'USER' ? 'you' : 'agent', { class: 'who' }), el('span', '', { class: 'text' }));
    ui.transcript.append(item);
    currentTurn[role] = item;
  }
  const body = item.querySelector('.text') as HTMLElement;
  body.textContent = isFinal ? text : (body.textContent ?? '') + text;
  if (isFinal) {
    item.dataset.final = 'true';
    currentTurn[role] = null;
  }
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
}

function logEvent(event: SessionEvent): void {
  const t = ((performance.now() - started) / 1000).toFixed(3);
  let dir = 'in';
  let text: string;
  if (event.type === 'sdk.sent') {
    dir = 'out';
    text = `→ ${JSON.stringify(event.message).slice(0, 600)}`;
  } else if (event.type.startsWith('sdk.')) {
    dir = 'sdk';
    text = `· ${JSON.stringify(event).slice(0, 600)}`;
  } else if (event.type === 'unknown') {
    text = `← (unknown) ${JSON.stringify(event.message).slice(0, 600)}`;
  } else {
    text = `← ${JSON.stringify(event).slice(0, 600)}`;
  }
  const item = el('li', `${t} ${text}`, { 'data-dir': dir, 'data-type': event.type });
  ui.log.append(item);
  while (ui.log.childElementCount > 2000) ui.log.firstElementChild?.remove();
  ui.log.scrollTop = ui.log.scrollHeight;
}

async function onEnded(current: VoiceSession, detail: string | null): Promise<void> {
  stopMeter();
  setControls('idle');
  const state = current.state;
  if (state.reason && state.reason !== 'client_ended' && state.reason !== 'server_ended' && detail) {
    showBanner(`Disconnected (${state.reason}): ${detail}`, true);
  }
  const id = current.sessionId;
  if (!id) return;
  // The server stores the end just after the room closes: wait for it, or the history would
  // still show this session live.
  await storedEnd(current.api, id);
  await refreshHistory();
  try {
    const usage = await current.api.finalUsage(id, 500, 15_000);
    if (current === session) {
      const tokens = usage.tokens ? usageText(usage.tokens as Record<string, unknown>) : 'no token usage reported';
      ui.figUsage.textContent = `${usage.usage_status}: ${fmt(usage.duration_seconds ?? undefined)} s, ${usage.turn_count ?? 0} turns, ${tokens}`;
    }
  } catch (error) {
    if (current === session) ui.figUsage.textContent = describe(error);
  }
}

// --- History ----------------------------------------------------------------------------------

/** Polls the session's record until its end is stored, for at most `timeoutMs`. */
async function storedEnd(client: SvcApi, id: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    try {
      if ((await client.getSession(id)).ended_at !== null) return;
    } catch {
      return; // no realtime:read: the history says why itself
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function refreshHistory(): Promise<void> {
  if (!ui.credential.value.trim()) return;
  try {
    const sessions = await api().listSessions({ limit: 20 });
    const currentId = session?.sessionId ?? null;
    ui.history.replaceChildren(
      ...sessions.map((record) => {
        const when = new Date(record.started_at * 1000).toLocaleString();
        const length = record.ended_at ? ` · ${Math.round(record.ended_at - record.started_at)} s` : ' · live';
        const mine = record.id === currentId;
        const item = el('li', `${when}${length} · ${record.status} · ${record.provider ?? ''}${mine ? ' · this session' : ''}`, {
          'data-session': record.id,
          'aria-current': String(mine),
        });
        item.append(el('span', record.id, { class: 'id' }));
        item.addEventListener('click', () => void showSession(record.id));
        return item;
      }),
    );
  } catch (error) {
    ui.history.replaceChildren(el('li', describe(error)));
  }
}

let recordingUrl: string | null = null;

async function showSession(id: string): Promise<void> {
  const client = api();
  $('history-detail').hidden = false;
  $('detail-title').textContent = id;
  const transcript = $('detail-transcript');
  const timeline = $('detail-timeline');
  const audio = $<HTMLAudioElement>('detail-recording');
  transcript.replaceChildren();
  timeline.replaceChildren();
  audio.hidden = true;
  const [turns, usage, events, recording] = await Promise.allSettled([
    client.getTranscript(id),
    client.getUsage(id),
    client.getTimeline(id),
    client.getRecording(id),
  ]);
  if (turns.status === 'fulfilled') {
    for (const turn of turns.value) {
      const role = turn.role === 'user' ? 'USER' : 'ASSISTANT';
      const item = el('li', '', { 'data-role': role, 'data-final': 'true' });
      item.append(el('span', role === 'USER' ? 'you' : 'agent', { class: 'who' }), el('span', turn.text, { class: 'text' }));
      transcript.append(item);
    }
  } else {
    transcript.append(el('li', `transcript: ${describe(turns.reason)}`));
  }
  $('detail-usage').textContent =
    usage.status === 'fulfilled'
      ? `${usage.value.status} · usage ${usage.value.usage_status} · ${fmt(usage.value.duration_seconds ?? undefined)} s · ${usage.value.turn_count ?? 0} turns · ${usage.value.provider ?? ''} ${usage.value.model ?? ''}`
      : `usage: ${describe(usage.reason)}`;
  if (events.status === 'fulfilled') {
    for (const event of events.value.events) timeline.append(el('li', JSON.stringify(event)));
  } else {
    timeline.append(el('li', `timeline: ${describe(events.reason)}`));
  }
  if (recording.status === 'fulfilled') {
    if (recordingUrl) URL.revokeObjectURL(recordingUrl);
    recordingUrl = URL.createObjectURL(recording.value);
    audio.src = recordingUrl;
    audio.hidden = false;
  }
}

// --- Wiring -----------------------------------------------------------------------------------

ui.talk.addEventListener('click', () => void talk());
ui.end.addEventListener('click', () => void session?.end());
ui.mute.addEventListener('click', () => {
  if (!session) return;
  const muted = !session.muted;
  void session.mute(muted).catch((error) => showBanner(describe(error), true));
  ui.mute.setAttribute('aria-pressed', String(muted));
  ui.mute.textContent = muted ? 'Unmute' : 'Mute';
});
ui.textForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const text = ui.textInput.value.trim();
  if (!text || !session) return;
  ui.textInput.value = '';
  void session.sendText(text).catch((error) => showBanner(describe(error), true));
});
ui.model.addEventListener('change', checkProvider);
$('verify').addEventListener('click', () => void verify());
$('clear-log').addEventListener('click', () => ui.log.replaceChildren());
$('refresh-history').addEventListener('click', () => void refreshHistory());
ui.credential.addEventListener('change', () => void refreshHistory());

restore();
void loadDevCredential();
