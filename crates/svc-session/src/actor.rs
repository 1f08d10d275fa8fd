//! The session actor: one task per session that owns the [`SessionCore`], the room connection
//! ([`AgentRoom`]), the provider adapter's channels, the user-audio decoder, the recording and the
//! writer task. It turns room and provider events and timers into `handle_*` calls and carries
//! out the core's outputs; nothing else touches the session's state.
//!
//! The user's audio is decoded here, straight to the provider's input rate (libopus decodes
//! natively at 16 and 24 kHz), optionally through the noise filter, and only for the bound
//! participant: other participants' frames cost nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use svc_audio::{PushOutcome, TrackDecoder, TrackDecoderConfig};
use svc_provider_core::session::ProviderSession;
use svc_provider_core::{ProviderEvent, ProviderInput};
use tokio::sync::mpsc::error::TrySendError;
use tokio_util::sync::CancellationToken;

use crate::core::{DialUpdate, EndStatus, Finish, Output, Peer, Persist, SessionCore, ToolJob, ToolJobOutcome};
use crate::external_room::SessionOwner;
use crate::input::InputAudio;
use crate::media::{MediaCounts, MediaTotals};
use crate::persist::{FinalRecord, Persister};
use crate::phone_call::{DialStep, RoomDials};
use crate::recording::{AGENT, RecordingFile, StereoAligner, USER};
use crate::room::{AgentRoom, AgentRoomEvent, CloseReason};

/// How often the session's heartbeat is refreshed (the reaper ends sessions 60 s stale).
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(15);
/// How long a session's end waits, with its room still open, for the phone call it hung up to
/// say how it ended (a BYE's answer takes a round trip to the trunk; a CANCEL's 487 as long),
/// so that the clients hear `dial-progress` before the room closes.
const DIAL_HANGUP_GRACE: Duration = Duration::from_secs(2);
/// How long, all told, a session's end waits for its phone call's last word for the timeline
/// (the call task hangs up within a second of the room closing; an RTCP BYE waits 2 s for the
/// SIP BYE).
const DIAL_END_GRACE: Duration = Duration::from_secs(4);
/// How long the adapter gets to answer open calls and close its socket after `Close`.
const PROVIDER_CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The session's clock: tokio's, which is the system's monotonic clock in production and the
/// paused, hand-advanced clock in tests (`tests/actor_shell.rs`). Read through tokio so that the
/// core sees the same time as the timers the actor sleeps on; with `Instant::now()` a paused test
/// clock runs ahead of it and every timer fires before the core thinks it is due.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// What the rest of the server can ask of a running session.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionCommand {
    /// End the session now, saying `reason` in `session-ended`.
    End {
        /// The slug.
        reason: String,
    },
    /// A phone dial-out was placed into the session's room.
    DialPlaced {
        /// The dial.
        dial_id: String,
        /// The callee.
        phone_number: String,
        /// The caller id presented (asked for, else the trunk's).
        caller_number: String,
        /// Hangs the call up when the session ends before it.
        hangup: svc_phone::HangupHandle,
    },
    /// The dial-out moved on.
    Dial(DialUpdate),
    /// The server is draining: the session ends by `ends_at` unless it ends first.
    Drain {
        /// When the drain ends it (`server_shutdown`).
        ends_at: Instant,
    },
}

/// The recording of a session in progress.
#[derive(Debug)]
pub struct Recording {
    /// Places both sides on one timeline.
    pub aligner: StereoAligner,
    /// Where it goes.
    pub file: RecordingFile,
    /// Brings the agent's PCM (the provider's output rate) to the recording's rate when they
    /// differ: made for the first rate seen, remade if it changes.
    pub agent_resampler: Option<(u32, svc_audio::resample::Resampler)>,
    /// The agent's frame at the recording's rate (reused, so a frame costs no allocation).
    pub agent_scratch: Vec<i16>,
    /// The next block of the file (reused).
    pub bytes: Vec<u8>,
}

/// The recording is written in blocks of this much audio (at most this much more is held in
/// memory, ~13 KB at 16 kHz).
const RECORDING_BLOCK_MS: u64 = 200;

impl Recording {
    /// A recording written to `file`, both lanes placed by `aligner`.
    pub fn new(aligner: StereoAligner, file: RecordingFile) -> Recording {
        Recording { aligner, file, agent_resampler: None, agent_scratch: Vec::new(), bytes: Vec::new() }
    }

    /// Adds the agent's PCM at `rate_hz`, just played at `now`.
    fn push_agent(&mut self, now: Instant, pcm: &[i16], rate_hz: u32) {
        let rate = self.aligner.rate_hz();
        if rate_hz == rate {
            self.aligner.push(AGENT, now, pcm);
            return;
        }
        if self.agent_resampler.as_ref().is_none_or(|(from, _)| *from != rate_hz) {
            match svc_audio::resample::Resampler::new(rate_hz, rate) {
                Ok(resampler) => self.agent_resampler = Some((rate_hz, resampler)),
                Err(error) => {
                    tracing::debug!(%error, rate_hz, "the agent's audio cannot be recorded at this rate");
                    return;
                }
            }
        }
        let Some((_, resampler)) = self.agent_resampler.as_mut() else { return };
        self.agent_scratch.clear();
        resampler.process(pcm, &mut self.agent_scratch);
        self.aligner.push(AGENT, now, &self.agent_scratch);
    }
}

/// Everything one session runs with.
pub struct SessionActor<R: AgentRoom> {
    /// The session.
    pub core: SessionCore,
    /// The room.
    pub room: R,
    /// The provider adapter.
    pub provider: ProviderSession,
    /// Storage.
    pub persister: Persister,
    /// Decoding (and filtering) of the bound participant's audio.
    pub input: InputAudio,
    /// The recording, when one is kept.
    pub recording: Option<Recording>,
    /// The server is shutting down.
    pub shutdown: CancellationToken,
    /// Requests from the rest of the server (the runtime's registry hands out the sender).
    pub commands: tokio::sync::mpsc::Receiver<SessionCommand>,
    /// `Instant` and epoch µs of the same moment (stored times).
    pub clock_origin: (Instant, i64),
    /// Hangs up the session's phone call, once one was placed.
    pub dial_hangup: Option<svc_phone::HangupHandle>,
    /// The calls the LiveKit server placed into the session's room (external rooms).
    pub room_dials: RoomDials,
    /// Which node runs the session (external rooms, where another node can take it over):
    /// checked before the end is stored and the room deleted.
    pub owner: Option<SessionOwner>,
    /// What this session's media paths lost or sent late (the room's and the core's shares are
    /// read when it ends).
    pub media: MediaCounts,
    /// The runtime's sums over ended sessions, which this session's counts join at its end.
    pub media_totals: Arc<MediaTotals>,
    /// The backends of the server tools that need one (search, vision).
    pub tool_backends: Arc<svc_tools::ToolBackends>,
    /// The session's running tool jobs (at most the core's `MAX_TOOL_JOBS`): dropped, and so
    /// aborted, with the actor.
    pub tool_jobs: ToolJobs,
}

/// The tasks of a session's backend tool jobs, by call id.
#[derive(Debug, Default)]
pub struct ToolJobs {
    tasks: tokio::task::JoinSet<(String, ToolJobOutcome)>,
    handles: HashMap<String, tokio::task::AbortHandle>,
}

impl ToolJobs {
    fn start(&mut self, job: ToolJob, backends: Arc<svc_tools::ToolBackends>) {
        let ToolJob { call_id, tool, arguments, frame } = job;
        let id = call_id.clone();
        let handle = self.tasks.spawn(async move {
            let outcome = backends.run(tool, &arguments, frame.as_ref()).await;
            (id, outcome)
        });
        self.handles.insert(call_id, handle);
    }

    fn abort(&mut self, call_id: &str) {
        if let Some(handle) = self.handles.remove(call_id) {
            handle.abort();
        }
    }

    /// The next finished job; pending forever while none runs.
    async fn next(&mut self) -> (String, ToolJobOutcome) {
        loop {
            match self.tasks.join_next().await {
                Some(Ok((call_id, outcome))) => {
                    self.handles.remove(&call_id);
                    return (call_id, outcome);
                }
                // An aborted job (its answer went out already) or a panicked one (its backstop
                // answers the model): nothing to report.
                Some(Err(_)) => {}
                None => std::future::pending::<()>().await,
            }
        }
    }
}

impl<R: AgentRoom> std::fmt::Debug for SessionActor<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionActor").field("session", &self.core.session_id()).finish_non_exhaustive()
    }
}

/// The bound participant's track being decoded.
struct Decoding {
    identity: Arc<str>,
    track: Arc<str>,
    decoder: TrackDecoder,
    /// Each frame's PCM at the decode rate; reused, so decoding allocates nothing per frame.
    decoded: Vec<i16>,
}

impl<R: AgentRoom> SessionActor<R> {
    fn now_us(&self, now: Instant) -> i64 {
        let (origin, origin_us) = self.clock_origin;
        origin_us + i64::try_from(now.saturating_duration_since(origin).as_micros()).unwrap_or(0)
    }

    /// Runs the session to its end, then stores the end and closes the room.
    pub async fn run(mut self) -> Finish {
        let session_id = self.core.session_id().to_owned();
        let mut heartbeat = tokio::time::interval(HEARTBEAT_EVERY);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut bound: Option<String> = None;
        let mut decoding: Option<Decoding> = None;
        let mut provider_open = true;
        let mut shutdown_seen = false;
        let mut commands_open = true;
        // Both live across turns of the loop (about 150 a second while both sides talk): made
        // afresh each turn, they registered and removed a timer and a cancellation waiter.
        let mut shutdown = std::pin::pin!(self.shutdown.child_token().cancelled_owned());
        let mut timer = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
        let finish = loop {
            if let Some(finish) = self.carry_outputs(&mut bound, &mut decoding).await {
                break finish;
            }
            self.persister.flush();
            let deadline = self.core.poll_timeout();
            if let Some(at) = deadline.map(tokio::time::Instant::from_std)
                && timer.deadline() != at
            {
                timer.as_mut().reset(at);
            }
            tokio::select! {
                biased;
                () = &mut shutdown, if !shutdown_seen => {
                    shutdown_seen = true;
                    self.core.handle_shutdown(now());
                }
                command = self.commands.recv(), if commands_open => match command {
                    Some(SessionCommand::End { reason }) => self.core.handle_end_request(now(), &reason),
                    Some(SessionCommand::DialPlaced { dial_id, phone_number, caller_number, hangup }) => {
                        self.core.handle_dial_placed(now(), &dial_id, &phone_number, &caller_number);
                        self.dial_hangup = Some(hangup);
                    }
                    Some(SessionCommand::Dial(update)) => self.core.handle_dial_update(now(), update),
                    Some(SessionCommand::Drain { ends_at }) => self.core.handle_drain(now(), ends_at),
                    // The registry dropped its sender: nothing more will be asked.
                    None => commands_open = false,
                },
                event = self.room.next_event() => self.on_room_event(event, bound.as_deref(), &mut decoding),
                event = self.provider.events.recv(), if provider_open => {
                    let now = now();
                    match event {
                        Some(event) => self.core.handle_provider_event(now, event),
                        None => {
                            provider_open = false;
                            self.core.handle_provider_event(now, ProviderEvent::Closed { reason: "the adapter stopped".into() });
                        }
                    }
                }
                (call_id, outcome) = self.tool_jobs.next() => {
                    self.core.handle_tool_job_done(now(), &call_id, outcome);
                }
                () = &mut timer, if deadline.is_some() => self.core.handle_timeout(now()),
                _ = heartbeat.tick() => {
                    let now = now();
                    let usage = self.core.usage_totals(now).record();
                    self.persister.heartbeat(self.now_us(now), Some(usage));
                    self.flush_recording(now);
                }
            }
        };
        let media = self.media_counts();
        if media.input_dropped() > 0 || media.output_dropped > 0 {
            tracing::warn!(session.id = %session_id, media = %media.to_json(), "audio frames dropped");
        }
        self.media_totals.add(&media);
        self.teardown(&finish).await;
        finish
    }

    /// Moves recorded audio that is old enough into the file, a block at a time (called with
    /// every frame; writing per frame cost ~1.5 % of svc's CPU at 100 sessions).
    fn flush_recording(&mut self, now: Instant) {
        let Some(recording) = self.recording.as_mut() else { return };
        if recording.aligner.ready(now) < u64::from(recording.aligner.rate_hz()) * RECORDING_BLOCK_MS / 1000 {
            return;
        }
        recording.aligner.drain_bytes(now, &mut recording.bytes);
        if let Err(error) = recording.file.append_bytes(&recording.bytes) {
            tracing::warn!(session.id = %self.core.session_id(), %error, "recording write failed; recording stops");
            if let Some(recording) = self.recording.take() {
                recording.file.discard();
            }
            self.core.handle_recording_failed(now, &format!("writing the recording: {error}"));
            self.media.recordings_failed = 1;
        }
    }

    /// The session's counts so far: its own, the room's and the core's.
    fn media_counts(&self) -> MediaCounts {
        let inbound = self.room.inbound_drops();
        let outbound = self.room.outbound_media();
        MediaCounts {
            input_dropped_room_queue: inbound.room_queue,
            input_dropped_agent_queue: inbound.participant_queue,
            output_dropped: self.media.output_dropped + self.core.output_frames_overflowed() + outbound.dropped,
            output_late: self.media.output_late + outbound.late,
            ..self.media
        }
    }

    /// Carries out every output; returns the end once the core is finished.
    async fn carry_outputs(&mut self, bound: &mut Option<String>, decoding: &mut Option<Decoding>) -> Option<Finish> {
        while let Some(output) = self.core.poll_output() {
            match output {
                // Handed over without waiting; failures come back from `next_event`.
                Output::Data { json, to } => self.room.send_data(json, to),
                Output::Attributes(attributes) => self.room.set_attributes(attributes),
                Output::Provider(input) => self.send_to_provider(input).await,
                Output::Audio { opus, due, silence, pcm } => {
                    // The PCM the frame was encoded from: the recording decodes nothing.
                    if !silence
                        && let Some(recording) = self.recording.as_mut()
                        && let Some((pcm, rate_hz)) = pcm
                    {
                        recording.push_agent(now(), &pcm, rate_hz);
                    }
                    self.flush_recording(now());
                    // The room's sink counts what it drops and what leaves late.
                    if let Err(error) = self.room.try_push_audio(opus, due) {
                        tracing::debug!(session.id = %self.core.session_id(), %error, "agent audio not sent");
                    }
                }
                Output::BindInput(identity) => {
                    *bound = identity;
                    *decoding = None;
                }
                Output::Persist(mut record) => {
                    // The end's entry carries what only the shell counted.
                    if let Persist::Timeline { kind: "session.ended", data, .. } = &mut record
                        && let Some(fields) = data.as_object_mut()
                    {
                        fields.insert("media".to_owned(), self.media_counts().to_json());
                    }
                    let now = now();
                    let now_us = self.now_us(now);
                    // An assistant turn changes the usage: it goes with the same batch, so a node
                    // that takes the session over counts every turn stored before.
                    let turn = matches!(record, Persist::Turn { role: "assistant", .. });
                    self.persister.push(record, now_us);
                    if turn {
                        self.persister.heartbeat(now_us, Some(self.core.usage_totals(now).record()));
                    }
                }
                Output::RunTool(job) => self.tool_jobs.start(job, self.tool_backends.clone()),
                Output::AbortTool { call_id } => self.tool_jobs.abort(&call_id),
                Output::Finished(finish) => return Some(finish),
            }
        }
        None
    }

    async fn send_to_provider(&mut self, input: ProviderInput) {
        match input {
            // Audio is not worth stalling the session for: a frame the adapter cannot take now
            // is dropped (it is 20 ms; the adapter buffers across reconnects itself).
            audio @ ProviderInput::NativeAudio(_) => match self.provider.input.try_send(audio) {
                Ok(()) | Err(TrySendError::Closed(_)) => {}
                Err(TrySendError::Full(_)) => self.media.input_dropped_provider_queue += 1,
            },
            input => {
                // The provider task ended; its end event follows.
                let _ = self.provider.input.send(input).await;
            }
        }
    }

    fn on_room_event(&mut self, event: AgentRoomEvent, bound: Option<&str>, decoding: &mut Option<Decoding>) {
        let now = now();
        match event {
            AgentRoomEvent::Peer(peer) => self.core.handle_peer(
                now,
                Peer {
                    identity: peer.identity,
                    is_agent: peer.is_agent,
                    active: peer.active,
                    publishes_audio: peer.publishes_audio,
                },
            ),
            AgentRoomEvent::PeerLeft { identity, deliberate } => {
                // A phone's call ends before its participant's leave can end the session.
                let steps = self.room_dials.on_left(now, self.now_us(now), &identity);
                self.apply_dial_steps(now, steps);
                self.core.handle_peer_left(now, &identity, deliberate);
            }
            AgentRoomEvent::PhoneCall(call) => {
                let steps = self.room_dials.on_snapshot(now, self.now_us(now), call);
                self.apply_dial_steps(now, steps);
            }
            AgentRoomEvent::Audio(frame) => {
                if bound != Some(&*frame.identity) {
                    return;
                }
                let fresh = decoding.as_ref().is_none_or(|d| d.track != frame.track || d.identity != frame.identity);
                if fresh {
                    let Ok(decoder) =
                        TrackDecoder::with_rate(TrackDecoderConfig::default(), self.input.decode_rate_hz())
                    else {
                        return;
                    };
                    *decoding = Some(Decoding {
                        identity: frame.identity.clone(),
                        track: frame.track.clone(),
                        decoder,
                        decoded: Vec::with_capacity(svc_audio::FRAME_SAMPLES),
                    });
                }
                let Some(decoding) = decoding.as_mut() else { return };
                self.decode(now, decoding, frame.rtp_timestamp, &frame.opus);
            }
            AgentRoomEvent::Data { from, payload } => {
                if let Err(dropped) = self.core.handle_data(now, &from, &payload) {
                    tracing::debug!(session.id = %self.core.session_id(), from = %from, reason = %dropped, "client message dropped");
                }
            }
            AgentRoomEvent::ToolResult(call) => {
                let answer =
                    self.core.handle_tool_result(now, &call.caller, &call.payload).map_err(|r| r.message().to_owned());
                self.room.answer_tool_result(&call, answer);
            }
            AgentRoomEvent::CommandFailed { command, error } => {
                tracing::debug!(session.id = %self.core.session_id(), command, %error, "room command failed");
            }
            AgentRoomEvent::Gone => self.core.handle_room_closed(now),
            AgentRoomEvent::EndRequested { reason } => self.core.handle_end_request(now, &reason),
        }
    }

    /// Decodes one of the user's packets (the room delivers them in order: str0m waits a moment
    /// for a missing one, `svc_room`'s `AUDIO_REORDER_WAIT`), counts what the network lost, and
    /// hands the audio on.
    fn decode(&mut self, now: Instant, decoding: &mut Decoding, rtp_timestamp: u64, opus: &[u8]) {
        decoding.decoded.clear();
        match decoding.decoder.push(rtp_timestamp, opus, &mut decoding.decoded) {
            Ok(PushOutcome::Decoded { filled, .. }) if filled > 0 => {
                self.media.input_concealed_ms += (filled as u64 * 1000) / u64::from(self.input.decode_rate_hz());
            }
            Ok(PushOutcome::DroppedLate) => self.media.input_dropped_late += 1,
            Ok(_) | Err(_) => {}
        }
        if decoding.decoded.is_empty() {
            return;
        }
        // The one allocation per frame: the PCM the provider's channel takes ownership of.
        let pcm = self.input.process(&decoding.decoded);
        if let Some(recording) = self.recording.as_mut() {
            recording.aligner.push(USER, now, &pcm);
        }
        self.flush_recording(now);
        self.core.handle_user_audio(now, pcm);
    }

    /// What a call the LiveKit server placed into the room came to: the core reports it, the
    /// writer stores its outcome.
    fn apply_dial_steps(&mut self, now: Instant, steps: Vec<DialStep>) {
        for step in steps {
            match step {
                DialStep::Placed { dial_id, phone_number, caller_number } => {
                    tracing::info!(session.id = %self.core.session_id(), dial.id = %dial_id, "the phone of a dial joined the room");
                    self.core.handle_dial_placed(now, &dial_id, &phone_number, &caller_number);
                }
                DialStep::Update(update) => {
                    tracing::info!(dial.id = %update.dial_id, status = update.status.as_str(), reason = ?update.reason, "dial progress");
                    self.core.handle_dial_update(now, update);
                }
                DialStep::Finished(record) => self.persister.dial_outcome(record),
            }
        }
    }

    /// The core's last records and data after its end (a phone call's last word).
    fn carry_late_outputs(&mut self, now: Instant, room_open: bool) {
        while let Some(output) = self.core.poll_output() {
            match output {
                Output::Persist(record) => self.persister.push(record, self.now_us(now)),
                Output::Data { json, to } if room_open => self.room.send_data(json, to),
                _ => {}
            }
        }
    }

    /// A phone call ends with its session (its hangup ended the session, or the session hangs
    /// it up): its last progress, which says how and when, goes to the clients while the room is
    /// open and into the session's timeline before the end is stored. Waits until `deadline`.
    async fn await_dial_end(&mut self, deadline: tokio::time::Instant, room_open: bool) {
        while self.core.dial_in_progress() {
            let Ok(Some(command)) = tokio::time::timeout_at(deadline, self.commands.recv()).await else { break };
            if let SessionCommand::Dial(update) = command {
                let now = now();
                self.core.handle_dial_update(now, update);
                self.carry_late_outputs(now, room_open);
            }
        }
    }

    /// The core sent `Close`: the adapter answers open calls and closes its socket, within
    /// [`PROVIDER_CLOSE_GRACE`], or is cancelled.
    async fn close_provider(&mut self) {
        if tokio::time::timeout(PROVIDER_CLOSE_GRACE, &mut self.provider.task).await.is_err() {
            self.provider.shutdown.cancel();
        }
    }

    /// The session runs on `node` now (this node was cut off from the LiveKit server, not dead,
    /// and LiveKit gave the job to `node`, which took the session over): this node leaves the
    /// room to it and writes nothing more. The session's end and its recording, which `node`
    /// continues, are that node's.
    async fn leave_to(mut self, node: &str) {
        tracing::warn!(session.id = %self.core.session_id(), %node,
            "another node runs the session now; this node leaves it without ending it");
        if let Some(recording) = self.recording.take() {
            recording.file.leave_unfinished();
        }
        self.close_provider().await;
        self.room.close(CloseReason::Superseded).await;
        self.persister.abandon();
    }

    async fn teardown(mut self, finish: &Finish) {
        // No job outlives its session (the core answered or abandoned every one).
        self.tool_jobs.tasks.abort_all();
        if let Some(owner) = &self.owner
            && let Some(node) = owner.taken_over_by().await
        {
            return self.leave_to(&node).await;
        }
        let session_id = self.core.session_id().to_owned();
        let now = now();
        let ended_us = self.now_us(now);
        let recording = match self.recording.take() {
            Some(mut recording) => {
                let rest = recording.aligner.drain_all();
                let written = recording.file.append(&rest);
                match written.and_then(|()| recording.file.finish()) {
                    Ok(artifact) => artifact,
                    Err(error) => {
                        tracing::warn!(session.id = %session_id, %error, "the recording could not be finished");
                        self.core.handle_recording_failed(now, &format!("finishing the recording: {error}"));
                        self.media_totals.add(&MediaCounts { recordings_failed: 1, ..MediaCounts::default() });
                        while let Some(output) = self.core.poll_output() {
                            if let Output::Persist(record) = output {
                                self.persister.push(record, ended_us);
                            }
                        }
                        None
                    }
                }
            }
            None => None,
        };
        self.close_provider().await;
        let grace_ends = tokio::time::Instant::now() + DIAL_END_GRACE;
        if self.core.dial_in_progress()
            && let Some(hangup) = self.dial_hangup.take()
        {
            // Every leg drops with the session; the phone's goes first, so that the clients
            // still in the room hear `dial-progress` say so before the room closes.
            hangup.hang_up("session_ended");
            self.await_dial_end(tokio::time::Instant::now() + DIAL_HANGUP_GRACE, true).await;
        }
        if self.room_dials.in_progress() {
            // Deleting the room (below) hangs the LiveKit server's call up; the clients hear
            // so first.
            let at = crate::actor::now();
            let steps = self.room_dials.on_session_end(at, self.now_us(at));
            self.apply_dial_steps(at, steps);
            self.carry_late_outputs(at, true);
        }
        let reason =
            if finish.reason == "server_shutdown" { CloseReason::ServerShutdown } else { CloseReason::SessionEnded };
        self.room.close(reason).await;
        self.await_dial_end(grace_ends, false).await;
        let (status, usage) = match finish.status {
            EndStatus::Completed if finish.usage.had_activity() => ("completed", Some(finish.usage.record())),
            EndStatus::Completed => ("completed", None),
            EndStatus::Error => ("error", None),
        };
        self.persister.finish(FinalRecord { status, ended_us, usage, recording }).await;
        tracing::info!(session.id = %session_id, reason = %finish.reason, status, "session ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agents_24_khz_speech_is_recorded_at_16_khz() {
        // Gemini and the local provider speak at 24 kHz into a 16 kHz recording.
        let origin = Instant::now();
        let dir = std::env::temp_dir().join(format!("svc-actor-rec-{}", std::process::id()));
        let file = RecordingFile::create(&dir, "s", 16_000).expect("a recording file");
        let mut recording = Recording::new(StereoAligner::new(16_000, origin), file);
        // One second of a 440 Hz tone at 24 kHz, in 20 ms frames.
        let tone: Vec<i16> = (0..24_000)
            .map(|i| ((i as f64 * 440.0 * std::f64::consts::TAU / 24_000.0).sin() * 8_000.0) as i16)
            .collect();
        for (n, frame) in tone.chunks(480).enumerate() {
            recording.push_agent(origin + std::time::Duration::from_millis(20 * (n as u64 + 1)), frame, 24_000);
        }
        let interleaved = recording.aligner.drain_all();
        let agent: Vec<i16> = interleaved.iter().skip(AGENT).step_by(2).copied().collect();
        let loud = agent.iter().filter(|sample| sample.unsigned_abs() > 4_000).count();
        assert!(agent.len() >= 15_000, "about a second at 16 kHz: {}", agent.len());
        assert!(loud > 4_000, "the tone is in the agent's lane: {loud} loud samples");
        recording.file.discard();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
