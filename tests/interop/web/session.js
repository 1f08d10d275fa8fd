// Browser client of an svc session, on the official `livekit-client` (npm), for the end-to-end
// session tests: the same conversation as ../../e2e/session_client.py's `conversation` scenario,
// inside headless Chromium (driven by drive.mjs --session). The driver starts the session over
// REST and hands the page the credentials; the page joins, latches `ready` from the frame or the
// `svc.ready` attribute, listens to the greeting, turns the microphone on (Chromium's fake device
// plays the WAV once), waits for the spoken turn, types a turn, and ends the session. What the
// agent says is recorded (recorder.js) and judged by the Rust test.
import { Room, RoomEvent, Track, version as livekitVersion } from 'livekit-client';
import { PcmRecorder } from './recorder.js';

const logElement = document.getElementById('log');
const t0 = performance.now();
const now = () => +((performance.now() - t0) / 1000).toFixed(3);
function log(message) {
  const line = `${now()} ${message}`;
  logElement.textContent += line + '\n';
  console.log(line);
}
log(`livekit-client ${livekitVersion} loaded`);

class Failure extends Error {}

class Session {
  constructor(config) {
    this.config = config;
    this.room = new Room();
    this.events = [];
    this.waiters = [];
    this.chunks = new Map();
    this.observations = {};
    this.readyFrameAt = null;
    this.readyAttributeAt = null;
    this.recorder = null;
    this.deadline = Date.now() + config.timeoutSeconds * 1000;
  }

  push(message) {
    message._t = now();
    this.events.push(message);
    if (message.type === 'ready' && this.readyFrameAt === null) this.readyFrameAt = message._t;
    this.waiters.splice(0).forEach((wake) => wake());
  }

  onData(payload) {
    let message;
    try {
      message = JSON.parse(new TextDecoder().decode(payload));
    } catch {
      return;
    }
    if (message.type === 'server-envelope-chunk') {
      const parts = this.chunks.get(message.envelope_id) ?? new Map();
      parts.set(message.seq, Uint8Array.from(atob(message.data), (c) => c.charCodeAt(0)));
      this.chunks.set(message.envelope_id, parts);
      if (parts.size < message.total) return;
      this.chunks.delete(message.envelope_id);
      const bytes = [...Array(message.total).keys()].flatMap((seq) => [...parts.get(seq)]);
      message = JSON.parse(new TextDecoder().decode(new Uint8Array(bytes)));
    }
    this.push(message);
  }

  onAttributes(attributes) {
    if (attributes['svc.ready'] && this.readyAttributeAt === null) {
      this.readyAttributeAt = now();
      this.observations.ready_attribute = JSON.parse(attributes['svc.ready']);
      this.waiters.splice(0).forEach((wake) => wake());
    }
  }

  async waitFor(what, predicate, seconds, after = 0) {
    const limit = Math.min(Date.now() + seconds * 1000, this.deadline);
    for (;;) {
      const found = this.events.slice(after).find(predicate);
      if (found) return found;
      if (Date.now() > limit) {
        throw new Failure(`no ${what} within ${seconds} s; types seen: ${this.events.map((e) => e.type).slice(-40).join(' ')}`);
      }
      await new Promise((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  }

  waitType(type, seconds, after = 0, role = null) {
    return this.waitFor(`${type} ${role ?? ''}`, (e) => e.type === type && (role === null || e.role === role), seconds, after);
  }

  async send(message) {
    await this.room.localParticipant.publishData(new TextEncoder().encode(JSON.stringify(message)), { reliable: true, topic: 'svc' });
  }

  async run() {
    const { livekit_url: url, token } = this.config.start;
    this.room.on(RoomEvent.DataReceived, (payload) => this.onData(payload));
    this.room.on(RoomEvent.ParticipantAttributesChanged, (_changed, participant) => this.onAttributes(participant.attributes));
    this.room.on(RoomEvent.TrackSubscribed, (track) => {
      if (track.kind === Track.Kind.Audio && !this.recorder) this.recorder = new PcmRecorder(track.mediaStreamTrack, log);
    });
    this.room.on(RoomEvent.Disconnected, (reason) => {
      this.observations.disconnected_at = now();
      this.observations.disconnect_reason = reason;
      this.waiters.splice(0).forEach((wake) => wake());
    });
    const joining = performance.now();
    await this.room.connect(url, token, { autoSubscribe: true, singlePeerConnection: false });
    this.observations.room_ms = Math.round(performance.now() - joining);
    this.observations.joined_at = now();
    // The attribute may already be there at join: read it, do not only wait for its event
    // (livekit-client drops attribute events that arrive before connect() resolves).
    for (const participant of this.room.remoteParticipants.values()) this.onAttributes(participant.attributes);
    await this.waitFor('ready', () => this.readyFrameAt !== null || this.readyAttributeAt !== null, 15);
    await this.waitFor('the ready frame and attribute', () => this.readyFrameAt !== null && this.readyAttributeAt !== null, 10);
    const frame = this.events.find((e) => e.type === 'ready');
    this.observations.ready_frame = Object.fromEntries(Object.entries(frame).filter(([key]) => !key.startsWith('_')));
    // The greeting, heard to its end.
    await this.waitType('turn-complete', 20, 0, 'ASSISTANT');
    // The microphone: Chromium's fake device plays the WAV once. Chromium's own voice processing
    // is off, so that what reaches the provider can be compared with the WAV.
    let mark = this.events.length;
    await this.room.localParticipant.setMicrophoneEnabled(true, { echoCancellation: false, noiseSuppression: false, autoGainControl: false });
    this.observations.mic_at = now();
    await this.waitType('user-started-speaking', 15, mark);
    await this.waitType('turn-complete', 25, mark, 'ASSISTANT');
    // A typed turn.
    mark = this.events.length;
    await this.send({ type: 'send-text', content: 'What time is it?' });
    await this.waitType('turn-complete', 15, mark, 'ASSISTANT');
    await this.send({ type: 'ping' });
    await this.waitType('pong', 5);
    await this.send({ type: 'end' });
    await this.waitType('session-ended', 10);
    await this.waitFor('the room to close', () => this.observations.disconnected_at !== undefined, 10);
  }
}

let current = null;

window.runSession = async (config) => {
  current = new Session(config);
  let failure = null;
  try {
    await current.run();
  } catch (error) {
    failure = error instanceof Failure ? error.message : `${error?.name}: ${error?.message}`;
  }
  return window.sessionResult(failure);
};

window.sessionResult = async (failure) => {
  const session = current;
  if (session?.recorder) {
    await session.recorder.flush();
    session.recorder.stop();
  }
  await session?.room.disconnect().catch(() => {});
  return {
    ok: failure === null,
    failures: failure === null ? [] : [failure],
    events: session?.events ?? [],
    observations: { ...(session?.observations ?? {}), ready_frame_at: session?.readyFrameAt, ready_attribute_at: session?.readyAttributeAt },
  };
};

// The driver streams the recording out as it goes (keeps the page's memory flat).
setInterval(() => current?.recorder?.flush(), 1000);
