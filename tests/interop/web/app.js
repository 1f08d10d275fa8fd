// Browser peer of the svc room interop protocol, on the official `livekit-client` (npm).
//
// The same protocol as ../py/lk_peer.py (described in ../README.md), run inside headless Chromium by
// drive.mjs. The microphone is Chromium's fake capture device playing a WAV (it loops the file);
// what is heard from the peer is recorded with WebAudio at 48 kHz and streamed to the driver, which
// judges it with ../py/compare.py, the same judge the Python peer uses.
//
// The driver calls `window.runPeer(config)` and gets `{ok, failures, observations}` back. Every
// wait is bounded by the config's deadline: a server that never answers yields a result naming
// what was still missing.
import {
  ConnectionError,
  DataPacket_Kind,
  Room,
  RoomEvent,
  RpcError,
  Track,
  version as livekitVersion,
} from 'livekit-client';
import { PcmRecorder } from './recorder.js';

// The protocol's names (keep in sync with ../py/lk_peer.py and ../README.md).
const DATA_TOPIC = 'interop.data';
const CONTROL_TOPIC = 'interop.control';
const DONE_MESSAGE = 'interop.done';
const ECHO_METHOD = 'interop.echo';
const MISSING_METHOD = 'interop.missing'; // registered by nobody: must fail with 1400
const READY_ATTRIBUTE = 'interop.ready'; // "1" once connected and serving: safe to set the role now
const ROLE_ATTRIBUTE = 'interop.role'; // the attribute whose change event each peer must see
const RELIABLE_SEQS = [1, 2, 3];
const LOSSY_SEQ = 4;
const UNSUPPORTED_METHOD = 1400;
const OTHER_ROLE = { caller: 'responder', responder: 'caller' };
const REQUIRED_CHECKS = ['peer_joined', 'peer_attribute', 'data', 'rpc_echo', 'rpc_unsupported', 'rpc_served', 'audio'];
const SAMPLE_RATE = 48000;
const CONNECT_TIMEOUT_MS = 15000;

const logElement = document.getElementById('log');
function log(message) {
  const line = `${(performance.now() / 1000).toFixed(3)} ${message}`;
  logElement.textContent += line + '\n';
  console.log(line);
}
log(`livekit-client ${livekitVersion} loaded`);

class PeerFailure extends Error {}

// A named expectation: met once, with a line saying what was (or was not yet) observed.
class Check {
  constructor(name) {
    this.name = name;
    this.met = false;
    this.failed = null; // a definitive failure: waiting longer cannot fix it
    this.detail = 'nothing observed yet';
    this.at = null;
    this.waiters = [];
  }
  ok(detail, at) {
    if (this.met || this.failed !== null) return;
    Object.assign(this, { met: true, detail, at: +at.toFixed(3) });
    this.waiters.splice(0).forEach((w) => w.resolve());
  }
  fail(detail) {
    if (this.failed !== null) return;
    this.failed = detail;
    this.waiters.splice(0).forEach((w) => w.reject(new PeerFailure(`${this.name}: ${detail}`)));
  }
  wait() {
    if (this.met) return Promise.resolve();
    if (this.failed !== null) return Promise.reject(new PeerFailure(`${this.name}: ${this.failed}`));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
  problem() {
    if (this.failed !== null) return `${this.name}: ${this.failed}`;
    return this.met ? null : `${this.name}: not met (${this.detail})`;
  }
}

class BrowserPeer {
  constructor(config) {
    this.config = config;
    this.role = config.role;
    this.peer = config.peer;
    this.started = performance.now();
    this.deadline = this.started + config.timeoutSeconds * 1000;
    this.checks = Object.fromEntries(
      [...REQUIRED_CHECKS, 'peer_ready', 'peer_done', 'peer_left'].map((name) => [name, new Check(name)]),
    );
    this.failures = [];
    this.observations = {
      role: this.role,
      peer: this.peer,
      single_pc: config.singlePeerConnection ?? 'default',
      livekit_client: livekitVersion,
      user_agent: navigator.userAgent,
    };
    this.receivedReliable = new Map();
    this.timers = [];
    this.recording = null;
  }

  now() {
    return (performance.now() - this.started) / 1000;
  }

  // Await with the run's deadline (or a smaller limit); a timeout names `what`.
  async bounded(what, promise, limitMs = Infinity) {
    const budget = Math.max(0, Math.min(limitMs, this.deadline - performance.now()));
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new PeerFailure(`timed out after ${this.now().toFixed(1)} s waiting for ${what}`)), budget);
    });
    try {
      return await Promise.race([promise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  // --- Events ------------------------------------------------------------------------------------

  notePeerPresent(participant) {
    if (participant.identity !== this.peer) return;
    this.checks.peer_joined.ok(`${participant.identity} (${participant.sid}) is in the room`, this.now());
    this.notePeerReady(participant);
  }

  // Readiness may come as a snapshot or as an event: only the role's event is checked.
  notePeerReady(participant) {
    if (participant.attributes[READY_ATTRIBUTE] === '1') this.checks.peer_ready.ok(`${READY_ATTRIBUTE}=1`, this.now());
  }

  onAttributesChanged(changed, participant) {
    if (participant.identity !== this.peer) return;
    this.notePeerReady(participant);
    if (!(ROLE_ATTRIBUTE in changed)) return;
    const value = changed[ROLE_ATTRIBUTE];
    const expected = OTHER_ROLE[this.role];
    if (value === expected) this.checks.peer_attribute.ok(`attribute change event ${ROLE_ATTRIBUTE}=${value}`, this.now());
    else this.checks.peer_attribute.fail(`attribute change event ${ROLE_ATTRIBUTE}=${JSON.stringify(value)}, expected ${JSON.stringify(expected)}`);
  }

  onData(payload, participant, kind, topic) {
    const sender = participant?.identity ?? null;
    const text = new TextDecoder().decode(payload);
    const reliable = kind === DataPacket_Kind.RELIABLE;
    if (topic === CONTROL_TOPIC) {
      if (text === DONE_MESSAGE && sender === this.peer) this.checks.peer_done.ok(`${DONE_MESSAGE} from ${sender}`, this.now());
      else this.failures.push(`control: unexpected packet ${JSON.stringify(text.slice(0, 80))} from ${sender}`);
      return;
    }
    (this.observations.data_received ||= []).push({ topic, sender, reliable, payload: text.slice(0, 200), at: +this.now().toFixed(3) });
    let message = null;
    try {
      message = JSON.parse(text);
    } catch {
      // judged below as a wrong payload
    }
    const check = this.checks.data;
    if (topic !== DATA_TOPIC) {
      check.fail(`packet on topic ${JSON.stringify(topic)}, expected ${JSON.stringify(DATA_TOPIC)}: ${text.slice(0, 80)}`);
      return;
    }
    if (sender !== this.peer || message?.from !== this.peer) {
      check.fail(`packet from participant ${JSON.stringify(sender)} with payload ${text.slice(0, 80)}; expected from ${JSON.stringify(this.peer)}`);
      return;
    }
    if (!reliable) {
      this.observations.lossy_received = true;
      return;
    }
    const count = (this.receivedReliable.get(message.seq) ?? 0) + 1;
    this.receivedReliable.set(message.seq, count);
    if (count > 1) check.fail(`reliable seq ${message.seq} delivered ${count} times`);
    const got = [...this.receivedReliable.keys()].sort();
    check.detail = `reliable seqs received [${got}], expected [${RELIABLE_SEQS}]`;
    if (RELIABLE_SEQS.every((seq) => got.includes(seq))) check.ok(check.detail, this.now());
  }

  onTrackSubscribed(track, publication, participant) {
    log(`subscribed to ${track.kind} track ${track.sid} of ${participant.identity} (source ${publication.source})`);
    if (participant.identity !== this.peer || track.kind !== Track.Kind.Audio) return;
    this.observations.peer_track = { sid: track.sid, source: publication.source, at: +this.now().toFixed(3) };
    if (publication.source !== Track.Source.Microphone) {
      this.checks.audio.fail(`peer's audio track has source ${publication.source}, expected ${Track.Source.Microphone}`);
    }
    if (!this.recording) this.startRecording(track);
  }

  // --- Media -------------------------------------------------------------------------------------

  startRecording(track) {
    this.recording = new PcmRecorder(track.mediaStreamTrack, log);
    this.timers.push(setInterval(() => this.recording.flush(), 250));
    this.judgeAudio();
  }

  // Re-check the recording every second until it holds the peer's sentence.
  async judgeAudio() {
    // One loop of the sentence plus a window: then every part of it has been heard once.
    const need = this.config.expectSeconds + 1.5;
    const check = this.checks.audio;
    while (!check.met && check.failed === null && performance.now() < this.deadline) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const heard = this.recording.seconds;
      if (heard < need) {
        check.detail = `${heard.toFixed(1)} s recorded; judging from ${need.toFixed(1)} s`;
        continue;
      }
      await this.recording.flush();
      const verdict = await window.interopJudgeAudio(need);
      verdict.total_recorded_seconds = +heard.toFixed(2);
      this.observations.audio = verdict;
      check.detail = verdict.reason ?? '';
      if (verdict.ok) check.ok(`correlation ${verdict.correlation} coverage ${verdict.coverage}`, this.now());
    }
  }

  // --- The protocol ------------------------------------------------------------------------------

  async run() {
    const room = new Room(this.config.singlePeerConnection === null ? {} : { singlePeerConnection: this.config.singlePeerConnection });
    this.room = room;
    room
      .on(RoomEvent.ParticipantConnected, (p) => {
        log(`participant connected: ${p.identity} attributes=${JSON.stringify(p.attributes)}`);
        this.notePeerPresent(p);
      })
      .on(RoomEvent.ParticipantDisconnected, (p) => {
        log(`participant disconnected: ${p.identity}`);
        if (p.identity === this.peer) this.checks.peer_left.ok(`ParticipantDisconnected for ${p.identity}`, this.now());
      })
      .on(RoomEvent.ParticipantAttributesChanged, (changed, p) => this.onAttributesChanged(changed, p))
      .on(RoomEvent.DataReceived, (payload, p, kind, topic) => this.onData(payload, p, kind, topic))
      .on(RoomEvent.TrackSubscribed, (track, publication, p) => this.onTrackSubscribed(track, publication, p))
      .on(RoomEvent.Disconnected, (reason) => {
        this.observations.disconnected_reason ??= reason;
      });

    // Steps as numbered in ../README.md.
    // 1. Connect. livekit-client retries forever on some server answers (a bare 404 from
    //    /rtc/validate), so the deadline here is ours, not the SDK's.
    try {
      await this.bounded('connect()', room.connect(this.config.url, this.config.token), CONNECT_TIMEOUT_MS);
    } catch (error) {
      if (error instanceof ConnectionError) {
        throw new PeerFailure(`connect: ConnectionError: ${error.message} (reason ${error.reason}, status ${error.status ?? '-'})`);
      }
      throw error;
    }
    const me = room.localParticipant;
    this.observations.connected_at = +this.now().toFixed(3);
    this.observations.identity = me.identity;
    this.observations.room = { name: room.name, sid: await this.bounded('room sid', room.getSid(), 5000) };
    log(`connected as ${me.identity} to room ${room.name} in ${this.now().toFixed(2)} s`);

    // 2. Serve RPC before anyone can know we are ready (the attribute below says so).
    room.registerRpcMethod(ECHO_METHOD, async (data) => {
      if (data.callerIdentity === this.peer) {
        this.checks.rpc_served.ok(`${ECHO_METHOD} called by ${data.callerIdentity} with ${JSON.stringify(data.payload)}`, this.now());
      } else {
        this.checks.rpc_served.fail(`${ECHO_METHOD} called by ${JSON.stringify(data.callerIdentity)}, expected ${JSON.stringify(this.peer)}`);
      }
      return 'echo:' + data.payload;
    });

    // 3. Publish the microphone (the fake device). The browser's own echo cancellation, noise
    //    suppression and gain control would reshape the speech; the test is about transport.
    const publication = await this.bounded(
      'setMicrophoneEnabled() to publish',
      me.setMicrophoneEnabled(true, { echoCancellation: false, noiseSuppression: false, autoGainControl: false }),
      15000,
    );
    this.observations.published_track = { sid: publication?.trackSid, at: +this.now().toFixed(3) };

    // 4. Ready: say we are connected and serving; wait until the peer says the same. Only then
    //    set the role: livekit-client drops attribute events that arrive before its connect()
    //    has finished, so an earlier change could go unseen.
    await this.bounded(`setAttributes(${READY_ATTRIBUTE}) to be confirmed`, me.setAttributes({ [READY_ATTRIBUTE]: '1' }), 10000);
    for (const participant of room.remoteParticipants.values()) this.notePeerPresent(participant);
    await this.bounded(`peer ${JSON.stringify(this.peer)} to join`, this.untilPeerLeaves('peer_joined'));
    await this.bounded(`the peer's ${READY_ATTRIBUTE}=1`, this.untilPeerLeaves('peer_ready'));

    // 5. Role. Both keys: the result is the same whether the server merges or replaces.
    const attributes = { [READY_ATTRIBUTE]: '1', [ROLE_ATTRIBUTE]: this.role };
    await this.bounded(`setAttributes(${ROLE_ATTRIBUTE}) to be confirmed`, me.setAttributes(attributes), 10000);
    await this.bounded(`the peer's ${ROLE_ATTRIBUTE} attribute change event`, this.untilPeerLeaves('peer_attribute'));

    // 6. Exercise data and RPC toward the peer (its role event says it serves RPC).
    this.sendData();
    this.callRpc();

    // 7, 8. Done once everything expected of the peer has been seen.
    await this.bounded('every check to pass', Promise.all(REQUIRED_CHECKS.map((name) => this.untilPeerLeaves(name))));
    await this.bounded(`${DONE_MESSAGE} to be sent`, me.publishData(new TextEncoder().encode(DONE_MESSAGE), { reliable: true, topic: CONTROL_TOPIC }), 10000);
    this.observations.done_sent_at = +this.now().toFixed(3);
    log(`all checks passed after ${this.now().toFixed(2)} s; sent ${DONE_MESSAGE}`);

    // 9. The caller leaves once both are done; the responder stays (serving RPC and audio) until
    //    it has seen the caller leave.
    if (this.role === 'caller') {
      await this.bounded(`the responder's ${DONE_MESSAGE}`, this.checks.peer_done.wait());
      await new Promise((resolve) => setTimeout(resolve, 300)); // let our done leave the data channel
    } else {
      await this.bounded("the caller's ParticipantDisconnected", this.checks.peer_left.wait());
      if (!this.checks.peer_done.met) this.failures.push(`the caller left without sending ${DONE_MESSAGE}`);
    }
    await this.leave();
  }

  // A check's wait that fails at once if it failed or if the peer has left meanwhile.
  untilPeerLeaves(name) {
    const check = this.checks[name];
    const left = this.checks.peer_left.wait().then(() => {
      throw new PeerFailure(`the peer left (at ${this.checks.peer_left.at} s) while we waited for ${name}: ${check.detail}`);
    });
    return Promise.race([check.wait(), left]);
  }

  async sendData() {
    const me = this.room.localParticipant;
    const encode = (seq) => new TextEncoder().encode(JSON.stringify({ from: me.identity, seq }));
    try {
      for (const seq of RELIABLE_SEQS) await me.publishData(encode(seq), { reliable: true, topic: DATA_TOPIC });
      await me.publishData(encode(LOSSY_SEQ), { reliable: false, topic: DATA_TOPIC });
      this.observations.data_sent_at = +this.now().toFixed(3);
    } catch (error) {
      this.failures.push(`publishData: ${error?.name}: ${error?.message}`);
    }
  }

  async callRpc() {
    const me = this.room.localParticipant;
    const payload = `hello from ${me.identity}`;
    const call = (method, body) => me.performRpc({ destinationIdentity: this.peer, method, payload: body, responseTimeout: 10000 });
    try {
      const answer = await call(ECHO_METHOD, payload);
      if (answer === 'echo:' + payload) this.checks.rpc_echo.ok(`${ECHO_METHOD} answered ${JSON.stringify(answer)}`, this.now());
      else this.checks.rpc_echo.fail(`${ECHO_METHOD} answered ${JSON.stringify(answer)}, expected ${JSON.stringify('echo:' + payload)}`);
    } catch (error) {
      this.checks.rpc_echo.fail(`${ECHO_METHOD} raised ${describeRpcError(error)}`);
    }
    try {
      const answer = await call(MISSING_METHOD, '?');
      this.checks.rpc_unsupported.fail(`${MISSING_METHOD} answered ${JSON.stringify(answer)}, expected RpcError ${UNSUPPORTED_METHOD}`);
    } catch (error) {
      if (error instanceof RpcError && error.code === UNSUPPORTED_METHOD) {
        this.checks.rpc_unsupported.ok(`${MISSING_METHOD} raised RpcError ${error.code}`, this.now());
      } else {
        this.checks.rpc_unsupported.fail(`${MISSING_METHOD} raised ${describeRpcError(error)}, expected RpcError ${UNSUPPORTED_METHOD}`);
      }
    }
  }

  async leave() {
    if (!this.room) return;
    // Its own 5 s, not the run's deadline: after a timeout we still want to leave cleanly.
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('did not finish within 5 s')), 5000);
    });
    try {
      await Promise.race([this.room.disconnect(), timeout]);
      this.observations.left_at ??= +this.now().toFixed(3);
    } catch (error) {
      this.failures.push(`disconnect(): ${error.message}`);
    } finally {
      clearTimeout(timer);
    }
  }

  result(error) {
    const failures = error ? [error, ...this.failures] : [...this.failures];
    if ('connected_at' in this.observations) {
      for (const name of REQUIRED_CHECKS) {
        const problem = this.checks[name].problem();
        if (problem && !failures.includes(problem)) failures.push(problem);
      }
    }
    this.observations.checks = Object.fromEntries(
      Object.entries(this.checks).map(([name, c]) => [name, { met: c.met, at: c.at, detail: c.failed ?? c.detail }]),
    );
    this.observations.elapsed = +this.now().toFixed(3);
    return { ok: failures.length === 0, failures, observations: this.observations };
  }

  stop() {
    this.timers.forEach(clearInterval);
    this.recording?.stop();
  }
}

function describeRpcError(error) {
  return error instanceof RpcError ? `RpcError ${error.code}: ${error.message}` : `${error?.name}: ${error?.message}`;
}

let current = null;

window.runPeer = async (config) => {
  const peer = new BrowserPeer(config);
  current = peer;
  let error = null;
  try {
    await peer.run();
  } catch (failure) {
    error = failure instanceof PeerFailure ? failure.message : `unexpected ${failure?.name}: ${failure?.message}`;
    log(`failed: ${error}`);
    await peer.leave();
  }
  if (peer.recording) await peer.recording.flush();
  peer.stop();
  const result = peer.result(error);
  log(`result: ${JSON.stringify({ ok: result.ok, failures: result.failures })}`);
  return result;
};

// For the driver when runPeer itself is stuck: what has been seen so far.
window.partialResult = (reason) => (current ? current.result(reason) : { ok: false, failures: [reason], observations: {} });

// The harness checking itself, without any server: the fake microphone goes through a local
// RTCPeerConnection pair (real Opus, real jitter buffer) into the same recorder the peer uses,
// and the driver judges what arrives like a peer would. If this cannot reach the correlation
// threshold, no room test could.
let selfCheck = null;

window.selfCheckStart = async () => {
  const mic = await navigator.mediaDevices.getUserMedia({
    audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false },
  });
  const sender = new RTCPeerConnection();
  const receiver = new RTCPeerConnection();
  sender.onicecandidate = (event) => event.candidate && receiver.addIceCandidate(event.candidate);
  receiver.onicecandidate = (event) => event.candidate && sender.addIceCandidate(event.candidate);
  const remote = new Promise((resolve) => {
    receiver.ontrack = (event) => resolve(event.track);
  });
  sender.addTrack(mic.getAudioTracks()[0], mic);
  await sender.setLocalDescription(await sender.createOffer());
  await receiver.setRemoteDescription(sender.localDescription);
  await receiver.setLocalDescription(await receiver.createAnswer());
  await sender.setRemoteDescription(receiver.localDescription);
  const recorder = new PcmRecorder(await remote, log);
  selfCheck = { mic, sender, receiver, recorder, timer: setInterval(() => recorder.flush(), 250) };
};

window.selfCheckStop = async () => {
  const { mic, sender, receiver, recorder, timer } = selfCheck;
  clearInterval(timer);
  await recorder.flush();
  recorder.stop();
  const codec = [...(await receiver.getStats()).values()].find((s) => s.type === 'codec')?.mimeType;
  sender.close();
  receiver.close();
  mic.getTracks().forEach((t) => t.stop());
  log(`self check: recorded ${recorder.seconds.toFixed(2)} s through ${codec}`);
  return { recorded_seconds: +recorder.seconds.toFixed(2), codec };
};
