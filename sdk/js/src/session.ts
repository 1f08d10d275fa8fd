// One voice session from the browser: start it over REST, join its room with livekit-client, latch
// readiness, speak the data-channel protocol, answer client tools, and report the lifecycle.
//
// The pure rules live beside this file (lifecycle.ts, ready.ts, chunking.ts, queue.ts, turns.ts,
// protocol.ts) and are tested with node's test runner; this file is the IO shell around them and
// is tested in Chromium against `svc serve` (crates/svc-server/tests/sdk_e2e.rs).

import {
  ConnectionState,
  DisconnectReason as LkDisconnectReason,
  type LocalAudioTrack,
  type Participant,
  ParticipantKind,
  type RemoteAudioTrack,
  type RemoteParticipant,
  type RemoteTrack,
  Room,
  RoomEvent,
  Track,
  createLocalAudioTrack,
} from 'livekit-client';

import { type SessionConfig, type StartResponse, SvcApi, type ApiOptions, SvcApiError } from './api.js';
import { bytesToBase64 } from './base64.js';
import { Reassembler, encodeMessage } from './chunking.js';
import { type AgentState, type DisconnectReason, Lifecycle, type LifecycleInput, type SessionState, agentStateFromAttribute } from './lifecycle.js';
import { type ClientMessage, type ServerEvent, type ToolInvocationEvent, parseServerEvent } from './protocol.js';
import { EventQueue } from './queue.js';
import { type Readiness, ReadyLatch } from './ready.js';
import { type TurnLatency, TurnTimer } from './turns.js';
import { LevelMeter, VOICE_THRESHOLD_DBFS } from './audio.js';

/** The RPC method that answers a `tool-invocation`. */
export const TOOL_RESULT_METHOD = 'svc.tool_result';
/** LiveKit's RPC payload limit, each way. */
export const MAX_RPC_PAYLOAD_BYTES = 15_360;
/** The data topic svc's agent sends on (and this SDK sends with). */
export const DATA_TOPIC = 'svc';

/** Events of the SDK itself, beside the server's. */
export type SdkEvent =
  | { type: 'sdk.state'; state: SessionState }
  | { type: 'sdk.agent-state'; state: AgentState }
  | { type: 'sdk.ready'; readiness: Readiness }
  | { type: 'sdk.sent'; message: ClientMessage }
  | { type: 'sdk.turn-latency'; latency: TurnLatency }
  | { type: 'sdk.tool-answered'; request_id: string; name: string; ok: boolean; error: string | null };

/** Everything a session reports, in order. */
export type SessionEvent = ServerEvent | SdkEvent;
type EventOf<T extends SessionEvent['type']> = Extract<SessionEvent, { type: T }>;

/** A background job a tool handler started: answered at once, finished by `tool_job_result`. */
export class BackgroundJob {
  constructor(
    readonly jobId: string,
    readonly work: () => Promise<{ result?: Record<string, unknown>; summary?: string }>,
  ) {}
}

/** What a tool handler gets beside the arguments. */
export interface ToolContext {
  invocation: ToolInvocationEvent;
  session: VoiceSession;
  /**
   * Runs `work` in the background: the model is told at once that the job started
   * (`{status: "started", job_id}`), and `tool_job_result` reports the outcome when `work` settles
   * (its `summary` is what the model hears; a throw reports `failed` with the error's message).
   */
  background(work: () => Promise<{ result?: Record<string, unknown>; summary?: string }>): BackgroundJob;
}

/**
 * Runs a client tool. The returned value (any JSON) is the result the model gets; a throw answers
 * with the error's message.
 */
export type ToolHandler = (args: Record<string, unknown>, context: ToolContext) => unknown | Promise<unknown>;

export interface VoiceSessionOptions extends ApiOptions {
  /** Handlers of the client tools the session config declares, by tool name. */
  tools?: Record<string, ToolHandler>;
  /** Publish the microphone (default true); false joins listen-only. */
  microphone?: boolean | MediaTrackConstraints;
  /** Play the agent through an audio element the SDK adds to the page (default true). */
  playAudio?: boolean;
  /** How long to wait for `ready` after joining (default 20 s); then the start fails. */
  readyTimeoutMs?: number;
  /** Keepalive interval (default 15 s). */
  pingIntervalMs?: number;
  /** How long `end()` waits for the server to close the room (default 5 s). */
  endTimeoutMs?: number;
}

let jobCounter = 0;
const monotonic = () => performance.now();
const encoder = new TextEncoder();

/**
 * A voice session. `start()` once; it resolves when the agent is ready (and rejects, with the
 * session `disconnected` as `handshake_failed`, when it is not). Listen with `on()` or read
 * `events` (a bounded queue of 1,024 events; overflow drops and counts in `events.dropped`).
 */
export class VoiceSession {
  readonly api: SvcApi;
  /** Every event in order (server events and the SDK's own). One reader. */
  readonly events = new EventQueue<SessionEvent>();
  /** The start response (credentials, session id, server timings), once the POST answered. */
  credentials: StartResponse | null = null;
  /** Client-side connect timings, once ready. */
  connectTimings: { mic_ms?: number; request_ms: number; room_ms: number; ready_ms: number } | null = null;
  /** Round-trip of the last ping, in ms. */
  lastPingRttMs: number | null = null;

  private readonly lifecycle = new Lifecycle();
  private readonly latch = new ReadyLatch();
  private readonly reassembler = new Reassembler();
  private readonly turns = new TurnTimer();
  private readonly listeners = new Map<string, Set<(event: SessionEvent) => void>>();
  private room: Room | null = null;
  private micTrack: LocalAudioTrack | null = null;
  private agentTrack: RemoteAudioTrack | null = null;
  private agentIdentity: string | null = null;
  private audioElements: HTMLMediaElement[] = [];
  private agentStateValue: AgentState = 'idle';
  private mutedValue = false;
  private readyWaiters: ((readiness: Readiness | null) => void)[] = [];
  private timers: ReturnType<typeof setInterval>[] = [];
  private meters: LevelMeter[] = [];
  private pingSentAt: number | null = null;
  private endRequested: DisconnectReason | null = null;
  private serverEnded: string | null = null;
  private fatalError: string | null = null;
  private answered = new Set<string>();

  constructor(private readonly options: VoiceSessionOptions) {
    this.api = new SvcApi(options);
  }

  // --- State -------------------------------------------------------------------------------------

  /** Lifecycle, transport state and disconnect reason. */
  get state(): SessionState {
    return this.lifecycle.state;
  }
  /** The agent's state (`lk.agent.state`). */
  get agentState(): AgentState {
    return this.agentStateValue;
  }
  /** Readiness, once latched. */
  get readiness(): Readiness | null {
    return this.latch.value;
  }
  get sessionId(): string | null {
    return this.credentials?.session_id ?? null;
  }
  get muted(): boolean {
    return this.mutedValue;
  }
  /** The published microphone track (for a level meter), if any. */
  get microphoneTrack(): MediaStreamTrack | null {
    return this.micTrack?.mediaStreamTrack ?? null;
  }
  /** The agent's voice, once subscribed. */
  get agentAudioTrack(): MediaStreamTrack | null {
    return this.agentTrack?.mediaStreamTrack ?? null;
  }
  /** Events the bounded queue dropped. */
  get droppedEvents(): number {
    return this.events.dropped;
  }

  /** Calls `listener` for every event of `type` (`'*'` for all); returns the unsubscribe. */
  on<T extends SessionEvent['type']>(type: T, listener: (event: EventOf<T>) => void): () => void;
  on(type: '*', listener: (event: SessionEvent) => void): () => void;
  on(type: string, listener: (event: never) => void): () => void {
    const set = this.listeners.get(type) ?? new Set();
    set.add(listener as (event: SessionEvent) => void);
    this.listeners.set(type, set);
    return () => set.delete(listener as (event: SessionEvent) => void);
  }

  // --- Start -------------------------------------------------------------------------------------

  /**
   * POSTs the session config, joins the room, publishes the microphone, and waits for `ready`.
   * Single attempt: a session that fails or ends stays `disconnected`; start a new one.
   */
  async start(config: SessionConfig = {}): Promise<Readiness> {
    if (this.lifecycle.state.kind !== 'idle') throw new Error('a VoiceSession starts once; create a new one');
    this.transition({ kind: 'start' });
    const begun = monotonic();
    try {
      // The microphone prompt and the POST run side by side: both take a human or a network.
      const wantMic = this.options.microphone !== false;
      if (wantMic) this.transition({ kind: 'permission' });
      const mic = wantMic ? this.openMicrophone() : Promise.resolve(null);
      const requested = monotonic();
      const credentials = await this.api.startSession(config);
      const requestMs = monotonic() - requested;
      this.credentials = credentials;
      const micResult = await mic.catch((error: Error) => {
        throw new Error(`microphone: ${error.message}`);
      });
      if (this.endRequested) throw new Error('closed while starting');

      this.transition({ kind: 'room-connecting' });
      // Signalling v0 straight away: svc's room answers only v0, and livekit-client's v1 probe
      // (the default) costs a round trip and logs its refusal, token and all, as a console error.
      // A LiveKit server speaks v0 too.
      const room = new Room({ adaptiveStream: false, dynacast: false, disconnectOnPageLeave: true, singlePeerConnection: false });
      this.room = room;
      this.wire(room);
      const joining = monotonic();
      await room.connect(credentials.livekit_url, credentials.token, { autoSubscribe: true });
      const roomMs = monotonic() - joining;
      this.transition({ kind: 'room-connected' });
      // livekit-client drops attribute events that arrive before connect() resolves: read them now.
      for (const participant of room.remoteParticipants.values()) this.inspectParticipant(participant);
      if (micResult) {
        await room.localParticipant.publishTrack(micResult.track, { source: Track.Source.Microphone, dtx: false });
      }
      const readiness = await this.waitForReady(joining);
      if (readiness === null) throw new Error(this.endRequested ? 'closed while starting' : `no ready within ${this.readyTimeoutMs} ms`);
      const readyMs = monotonic() - joining;
      // The client waits for readiness before its first send (spec, session start), and binds the
      // agent's input after publishing its audio: so `bind-input` is the first message out.
      if (micResult) await this.send({ type: 'bind-input' });
      this.connectTimings = {
        ...(micResult ? { mic_ms: Math.round(micResult.ms) } : {}),
        request_ms: Math.round(requestMs),
        room_ms: Math.round(roomMs),
        ready_ms: Math.round(readyMs),
      };
      this.transition({ kind: 'handshake-ok' });
      // The one connect-timings report of the session.
      void this.send({ type: 'connect-timings', ...this.connectTimings, server: credentials.timings as Record<string, unknown> });
      this.startKeepalive();
      this.startLevelSampling();
      void begun;
      return readiness;
    } catch (error) {
      const detail = error instanceof SvcApiError ? `${error.status} ${error.code ?? error.type}: ${error.message}` : (error as Error).message;
      const reason = this.endRequested ?? 'handshake_failed';
      await this.teardown(reason, detail);
      throw error;
    }
  }

  private get readyTimeoutMs(): number {
    return this.options.readyTimeoutMs ?? 20_000;
  }

  private async openMicrophone(): Promise<{ track: LocalAudioTrack; ms: number }> {
    const asked = monotonic();
    const constraints = typeof this.options.microphone === 'object' ? this.options.microphone : {};
    const track = await createLocalAudioTrack({ echoCancellation: true, noiseSuppression: true, autoGainControl: true, ...constraints });
    this.micTrack = track;
    return { track, ms: monotonic() - asked };
  }

  private waitForReady(since: number): Promise<Readiness | null> {
    if (this.latch.value) return Promise.resolve(this.latch.value);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), Math.max(0, this.readyTimeoutMs - (monotonic() - since)));
      this.readyWaiters.push((readiness) => {
        clearTimeout(timer);
        resolve(readiness);
      });
    });
  }

  // --- Room wiring -------------------------------------------------------------------------------

  private wire(room: Room): void {
    room.on(RoomEvent.DataReceived, (payload, participant) => this.onData(payload, participant));
    room.on(RoomEvent.ParticipantConnected, (participant) => this.inspectParticipant(participant));
    room.on(RoomEvent.ParticipantAttributesChanged, (_changed, participant) => this.inspectParticipant(participant));
    room.on(RoomEvent.TrackSubscribed, (track, _publication, participant) => this.onTrack(track, participant));
    room.on(RoomEvent.Reconnecting, () => this.transition({ kind: 'transport-drop' }));
    room.on(RoomEvent.Reconnected, () => this.transition({ kind: 'recovered', of: 'transport' }));
    room.on(RoomEvent.Disconnected, (reason) => void this.onRoomClosed(reason));
  }

  private isAgent(participant: Participant | undefined): boolean {
    return participant !== undefined && participant.kind === ParticipantKind.AGENT;
  }

  private inspectParticipant(participant: Participant): void {
    // After the end nothing the departing room reports changes the session any more.
    if (!this.isAgent(participant) || this.state.kind === 'disconnected') return;
    this.agentIdentity ??= participant.identity;
    const readiness = this.latch.offerAttribute(participant.attributes['svc.ready']);
    if (readiness) this.onReadiness(readiness);
    const state = agentStateFromAttribute(participant.attributes['lk.agent.state']);
    if (state !== this.agentStateValue) {
      this.agentStateValue = state;
      this.emit({ type: 'sdk.agent-state', state });
    }
  }

  private onReadiness(readiness: Readiness): void {
    this.emit({ type: 'sdk.ready', readiness });
    for (const wake of this.readyWaiters.splice(0)) wake(readiness);
  }

  private onTrack(track: RemoteTrack, participant: RemoteParticipant): void {
    if (track.kind !== Track.Kind.Audio || !this.isAgent(participant)) return;
    this.agentTrack = track as RemoteAudioTrack;
    if (this.options.playAudio !== false && typeof document !== 'undefined') {
      const element = track.attach();
      element.style.display = 'none';
      document.body.appendChild(element);
      this.audioElements.push(element);
    }
    this.startLevelSampling();
  }

  private onData(payload: Uint8Array, participant: RemoteParticipant | undefined): void {
    // Only the agent speaks the protocol; another participant's data is not the server's.
    if (participant !== undefined && !this.isAgent(participant)) return;
    if (participant) this.agentIdentity ??= participant.identity;
    let message: unknown;
    try {
      message = JSON.parse(new TextDecoder().decode(payload));
    } catch {
      this.dispatch(parseServerEvent(null));
      return;
    }
    if (typeof message === 'object' && message !== null && (message as { type?: unknown }).type === 'server-envelope-chunk') {
      const outcome = this.reassembler.accept(message as Record<string, unknown>);
      if (outcome.kind !== 'message') return;
      message = outcome.message;
    }
    this.dispatch(parseServerEvent(message));
  }

  /** Acts on one server event, then reports it. */
  private dispatch(event: ServerEvent): void {
    const t = monotonic();
    switch (event.type) {
      case 'ready': {
        const readiness = this.latch.offerFrame(event);
        if (readiness) this.onReadiness(readiness);
        break;
      }
      case 'reconnecting':
        this.transition({ kind: 'rotation' });
        break;
      case 'svc.reconnected':
        this.transition({ kind: 'recovered', of: 'rotation' });
        break;
      case 'pong':
        if (this.pingSentAt !== null) this.lastPingRttMs = Math.round(t - this.pingSentAt);
        this.pingSentAt = null;
        break;
      case 'session-ended':
        this.serverEnded = event.reason || 'ended';
        // The server closes the room next; if that never arrives, leave ourselves.
        setTimeout(() => void this.teardown('server_ended', this.serverEnded ?? undefined), 3_000);
        break;
      case 'error':
        if (event.fatal) this.fatalError = `${event.code}: ${event.message}`;
        break;
      case 'user-started-speaking':
        this.turns.reset();
        break;
      case 'user-stopped-speaking':
        this.turns.userStopped(t);
        break;
      case 'bot-started-speaking':
        this.turns.botStarted(t);
        break;
      case 'turn-complete':
        if (event.role === 'ASSISTANT') {
          const latency = this.turns.agentTurnComplete();
          if (latency) this.emit({ type: 'sdk.turn-latency', latency });
        }
        break;
      case 'tool-invocation':
        // Reported first, so a log shows the invocation before its answer.
        this.emit(event);
        void this.runTool(event);
        return;
      default:
        break;
    }
    this.emit(event);
  }

  private emit(event: SessionEvent): void {
    this.events.push(event);
    for (const type of [event.type, '*']) {
      for (const listener of this.listeners.get(type) ?? []) {
        try {
          listener(event);
        } catch (error) {
          console.error(`svc-js: a '${type}' listener threw`, error);
        }
      }
    }
  }

  private transition(input: LifecycleInput): void {
    const state = this.lifecycle.apply(input);
    if (state) this.emit({ type: 'sdk.state', state });
  }

  // --- Tools -------------------------------------------------------------------------------------

  private async runTool(invocation: ToolInvocationEvent): Promise<void> {
    if (!invocation.executable || this.answered.has(invocation.request_id)) return;
    this.answered.add(invocation.request_id);
    const handler = this.options.tools?.[invocation.name];
    let answer: { result: unknown } | { error: string };
    let job: BackgroundJob | null = null;
    if (!handler) {
      answer = { error: `this client has no handler for the tool ${invocation.name}` };
    } else {
      const context: ToolContext = {
        invocation,
        session: this,
        background: (work) => new BackgroundJob(`job_${Date.now().toString(36)}_${++jobCounter}`, work),
      };
      try {
        const value = await handler(invocation.args, context);
        if (value instanceof BackgroundJob) {
          job = value;
          answer = { result: { status: 'started', job_id: value.jobId } };
        } else {
          answer = { result: value === undefined ? null : value };
        }
      } catch (error) {
        answer = { error: error instanceof Error ? error.message : String(error) };
      }
    }
    let payload = JSON.stringify({ request_id: invocation.request_id, tool_call_id: invocation.tool_call_id, ...answer });
    if (encoder.encode(payload).length > MAX_RPC_PAYLOAD_BYTES) {
      answer = { error: `the tool result is larger than ${MAX_RPC_PAYLOAD_BYTES} bytes` };
      job = null;
      payload = JSON.stringify({ request_id: invocation.request_id, tool_call_id: invocation.tool_call_id, ...answer });
    }
    let rpcError: string | null = null;
    try {
      const room = this.room;
      const agent = this.agentIdentity ?? (this.sessionId ? `agent-${this.sessionId}` : null);
      if (!room || !agent) throw new Error('not in a room');
      await room.localParticipant.performRpc({ destinationIdentity: agent, method: TOOL_RESULT_METHOD, payload, responseTimeout: 10_000 });
    } catch (error) {
      rpcError = (error as Error).message;
    }
    const ok = rpcError === null && 'result' in answer;
    this.emit({ type: 'sdk.tool-answered', request_id: invocation.request_id, name: invocation.name, ok, error: rpcError ?? ('error' in answer ? answer.error : null) });
    if (job && rpcError === null) void this.finishJob(invocation.name, job);
  }

  private async finishJob(toolName: string, job: BackgroundJob): Promise<void> {
    try {
      const outcome = await job.work();
      await this.sendJobResult({ job_id: job.jobId, tool_name: toolName, status: 'completed', ...outcome });
    } catch (error) {
      await this.sendJobResult({ job_id: job.jobId, tool_name: toolName, status: 'failed', error: error instanceof Error ? error.message : String(error) });
    }
  }

  // --- Sending -----------------------------------------------------------------------------------

  /**
   * Sends one protocol message (chunked when its JSON passes 12,000 bytes). Only once the agent
   * is ready: the spec has the client wait for readiness before its first send, and the server
   * may drop what comes earlier.
   */
  async send(message: ClientMessage): Promise<void> {
    const room = this.room;
    if (!room || room.state !== ConnectionState.Connected) throw new Error(`cannot send ${message.type}: the session is ${this.state.kind}`);
    if (this.latch.value === null) throw new Error(`cannot send ${message.type}: the agent is not ready yet`);
    for (const payload of encodeMessage(message)) {
      await room.localParticipant.publishData(payload as Uint8Array<ArrayBuffer>, { reliable: true, topic: DATA_TOPIC });
    }
    if (message.type !== 'ping') this.emit({ type: 'sdk.sent', message });
  }

  /** Mutes or unmutes the microphone: outbound audio stops, and the server is told. */
  async mute(muted: boolean): Promise<void> {
    this.mutedValue = muted;
    if (this.micTrack) await (muted ? this.micTrack.mute() : this.micTrack.unmute());
    await this.send({ type: 'mute', muted });
  }

  /** A typed user turn; the model answers. */
  async sendText(content: string): Promise<void> {
    await this.send({ type: 'send-text', content });
    this.turns.userSent(monotonic(), 'text');
  }

  /** A background note for the model (1 to 4,096 characters); opens no turn. */
  sendContext(content: string): Promise<void> {
    if (content.length < 1 || content.length > 4096) return Promise.reject(new RangeError('send-context content must be 1 to 4096 characters'));
    return this.send({ type: 'send-context', content });
  }

  /** One image frame (JPEG, PNG or WebP); `streamId` labels concurrent video streams. */
  async sendImage(image: Blob | Uint8Array, options: { mimeType?: string; streamId?: string } = {}): Promise<void> {
    const bytes = image instanceof Uint8Array ? image : new Uint8Array(await image.arrayBuffer());
    const mime_type = options.mimeType ?? (image instanceof Blob && image.type ? image.type : 'image/jpeg');
    await this.send({ type: 'send-image', mime_type, data: bytesToBase64(bytes), stream_id: options.streamId ?? 'camera' });
  }

  /** End of the user's turn under manual turn-taking (not a session end). */
  async activityEnd(): Promise<void> {
    await this.send({ type: 'activity-end' });
    this.turns.userSent(monotonic(), 'activity-end');
  }

  /** Hands text to the voice model (provider_b_live delegation). */
  delegationAppend(channel: 'thinking' | 'commentary' | 'instructions', content: string, delegationId?: string): Promise<void> {
    if (content.length < 1 || content.length > 4096) return Promise.reject(new RangeError('delegation-append content must be 1 to 4096 characters'));
    return this.send({ type: 'delegation-append', channel, content, ...(delegationId ? { delegation_id: delegationId } : {}) });
  }

  /** The terminal result of a background client tool. */
  sendJobResult(result: {
    job_id: string;
    tool_name: string;
    status: 'completed' | 'failed';
    result?: Record<string, unknown>;
    summary?: string;
    error?: string;
  }): Promise<void> {
    return this.send({ type: 'tool_job_result', ...result });
  }

  // --- Ending ------------------------------------------------------------------------------------

  /**
   * Ends the session: tells the server (`end`), waits for it to close the room, then leaves.
   * Before readiness nothing may be sent, so it just leaves (the server ends the session as
   * `participant_left`).
   */
  async end(): Promise<void> {
    if (this.state.kind === 'disconnected' || this.state.kind === 'idle') return;
    this.endRequested = 'client_ended';
    this.transition({ kind: 'ending' });
    const room = this.room;
    if (room && room.state === ConnectionState.Connected && this.latch.value !== null) {
      const closed = new Promise<void>((resolve) => room.once(RoomEvent.Disconnected, () => resolve()));
      try {
        await this.send({ type: 'end' });
        await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, this.options.endTimeoutMs ?? 5_000))]);
      } catch {
        // the room is gone already
      }
    } else {
      for (const wake of this.readyWaiters.splice(0)) wake(null);
    }
    await this.teardown('client_ended');
  }

  /** Leaves without ending the session on the server's side first (it ends as `participant_left`). */
  async close(): Promise<void> {
    if (this.state.kind === 'disconnected' || this.state.kind === 'idle') return;
    this.endRequested = 'client_closed';
    for (const wake of this.readyWaiters.splice(0)) wake(null);
    await this.teardown('client_closed');
  }

  private async onRoomClosed(reason: LkDisconnectReason | undefined): Promise<void> {
    let ours: DisconnectReason;
    let detail: string | undefined;
    if (this.endRequested) ours = this.endRequested;
    // livekit-client leaving on its own account: the page is being left (disconnectOnPageLeave).
    else if (reason === LkDisconnectReason.CLIENT_INITIATED) ours = 'client_closed';
    else if (this.serverEnded !== null) [ours, detail] = ['server_ended', this.serverEnded];
    else if (this.fatalError !== null) [ours, detail] = ['server_ended', this.fatalError];
    else if (
      reason === LkDisconnectReason.ROOM_DELETED ||
      reason === LkDisconnectReason.SERVER_SHUTDOWN ||
      reason === LkDisconnectReason.PARTICIPANT_REMOVED ||
      reason === LkDisconnectReason.ROOM_CLOSED
    ) {
      [ours, detail] = ['server_ended', LkDisconnectReason[reason]];
    } else {
      [ours, detail] = [this.state.kind === 'connecting' ? 'handshake_failed' : 'transport_error', reason === undefined ? undefined : LkDisconnectReason[reason]];
    }
    for (const wake of this.readyWaiters.splice(0)) wake(null);
    await this.teardown(ours, detail);
  }

  /** Releases everything once; the state latches at `disconnected`. */
  private async teardown(reason: DisconnectReason, detail?: string): Promise<void> {
    if (this.state.kind === 'disconnected') return;
    // The agent goes with the room: it no longer listens, thinks or speaks (said first, so a
    // listener of the end reads the agent's state as it now is).
    if (this.agentStateValue !== 'idle') {
      this.agentStateValue = 'idle';
      this.emit({ type: 'sdk.agent-state', state: 'idle' });
    }
    this.transition({ kind: 'ended', reason, ...(detail ? { detail } : {}) });
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    for (const meter of this.meters.splice(0)) meter.close();
    for (const element of this.audioElements.splice(0)) element.remove();
    const room = this.room;
    if (room && room.state !== ConnectionState.Disconnected) await room.disconnect(true).catch(() => {});
    this.micTrack?.stop();
    this.events.close();
  }

  // --- Keepalive and levels ----------------------------------------------------------------------

  private startKeepalive(): void {
    const interval = this.options.pingIntervalMs ?? 15_000;
    this.timers.push(
      setInterval(() => {
        if (this.state.kind !== 'connected' && this.state.kind !== 'reconnecting') return;
        this.pingSentAt = monotonic();
        void this.send({ type: 'ping' }).catch(() => {});
      }, interval),
    );
  }

  private levelTimer: ReturnType<typeof setInterval> | null = null;
  private micMeter: LevelMeter | null = null;
  private agentMeter: LevelMeter | null = null;

  /** Samples the microphone and the agent every 20 ms for the turn timer (browser only). */
  private startLevelSampling(): void {
    if (typeof AudioContext === 'undefined' || this.state.kind === 'disconnected') return;
    try {
      if (!this.micMeter && this.micTrack) this.meters.push((this.micMeter = new LevelMeter(this.micTrack.mediaStreamTrack)));
      if (!this.agentMeter && this.agentTrack) this.meters.push((this.agentMeter = new LevelMeter(this.agentTrack.mediaStreamTrack)));
    } catch {
      return; // no Web Audio: the markers stand in
    }
    if (this.levelTimer !== null || this.lifecycle.state.kind !== 'connected') return;
    this.levelTimer = setInterval(() => {
      const t = monotonic();
      if (this.micMeter && !this.mutedValue && this.micMeter.dbfs() > VOICE_THRESHOLD_DBFS) this.turns.micVoice(t);
      if (this.agentMeter) {
        const latency = this.turns.agentLevel(t, this.agentMeter.dbfs() > VOICE_THRESHOLD_DBFS);
        if (latency) this.emit({ type: 'sdk.turn-latency', latency });
      }
    }, 20);
    this.timers.push(this.levelTimer);
  }
}
