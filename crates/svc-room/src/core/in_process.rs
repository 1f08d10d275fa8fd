//! In-process participants (the session runtime's agent): their commands, paced audio tracks
//! and events, without a WebRTC hop.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

impl RoomCore {
    /// A command from an in-process participant.
    pub(crate) fn handle_local(&mut self, now: Instant, key: Key, command: LocalCommand) -> LocalReply {
        if !self.participants.contains_key(&key) {
            return LocalReply::Failed(LocalError::NotInRoom);
        }
        let reply = match command {
            LocalCommand::PublishAudio { name } => self.publish_local_audio(now, key, name),
            LocalCommand::UnpublishTrack { track_sid } => self.unpublish_local(now, key, &track_sid),
            LocalCommand::PushAudio { track_sid, pcm } => self.push_local_audio(now, key, &track_sid, &pcm),
            LocalCommand::PushOpus { track_sid, opus, media_time } => {
                self.push_local_opus(now, key, &track_sid, opus, media_time)
            }
            LocalCommand::ClearAudio { track_sid } => match self.local_track(key, &track_sid) {
                Some(local) => LocalReply::Cleared { discarded_samples: local.queue.clear() },
                None => LocalReply::Failed(LocalError::UnknownTrack(track_sid)),
            },
            LocalCommand::SendData { payload, topic, reliable, destinations } => {
                if payload.len() > MAX_DATA_PACKET_BYTES - 1024 {
                    return LocalReply::Failed(LocalError::PacketTooLarge(payload.len()));
                }
                #[allow(deprecated)]
                let value = proto::data_packet::Value::User(proto::UserPacket {
                    payload: payload.to_vec(),
                    topic,
                    destination_identities: destinations.clone(),
                    ..Default::default()
                });
                self.send_local_packet(now, key, reliable, destinations, value);
                LocalReply::Done
            }
            LocalCommand::SendRpc { destination, value } => {
                self.send_local_packet(now, key, true, vec![destination], value);
                LocalReply::Done
            }
            LocalCommand::SetAttributes { attributes } => self.update_local_state(key, None, attributes),
            LocalCommand::SetMetadata { metadata } => self.update_local_state(key, Some(metadata), BTreeMap::new()),
            LocalCommand::RemoveParticipant { identity } => match self.by_identity.get(&identity).copied() {
                Some(target) => {
                    self.remove_participant(now, target, LeaveReason::ParticipantRemoved, true);
                    LocalReply::Removed(true)
                }
                None => LocalReply::Removed(false),
            },
            LocalCommand::Leave => {
                self.remove_participant(now, key, LeaveReason::ClientInitiated, false);
                LocalReply::Done
            }
        };
        self.flush(now);
        reply
    }

    pub(super) fn local_track(&mut self, key: Key, track_sid: &str) -> Option<&mut LocalTrack> {
        self.participants.get_mut(&key)?.tracks.get_mut(track_sid)?.local.as_mut()
    }

    pub(super) fn publish_local_audio(&mut self, now: Instant, key: Key, name: String) -> LocalReply {
        let Some(participant) = self.participants.get_mut(&key) else {
            return LocalReply::Failed(LocalError::NotInRoom);
        };
        if participant.tracks.len() >= MAX_TRACKS_PER_PARTICIPANT {
            return LocalReply::Failed(LocalError::TooManyTracks);
        }
        let encoder = match OpusEncoder::new_voice() {
            Ok(encoder) => encoder,
            Err(error) => return LocalReply::Failed(LocalError::Encoder(error.to_string())),
        };
        let sid = self.ids.audio_track_sid();
        let counters = Arc::new(TrackCounters::default());
        #[allow(deprecated)]
        let info = proto::TrackInfo {
            sid: sid.clone(),
            r#type: proto::TrackType::Audio as i32,
            name: name.clone(),
            source: proto::TrackSource::Microphone as i32,
            mime_type: "audio/opus".to_owned(),
            disable_red: true,
            ..Default::default()
        };
        participant.tracks.insert(
            sid.clone(),
            Track {
                info: info.clone(),
                bound: true,
                announced_subscribed: false,
                local: Some(LocalTrack {
                    queue: AudioOutQueue::new(OutQueueConfig::default()),
                    encoder,
                    counters: counters.clone(),
                    rtp_base: 0,
                    last_rtp: 0,
                    last_opus: None,
                }),
            },
        );
        participant.version += 1;
        let (identity, participant_sid) = (participant.identity.clone(), participant.sid.clone());
        self.broadcast_update(key, false);
        self.notify_track(notify::events::TRACK_PUBLISHED, &participant_sid, &identity, info);
        let publication = TrackPublication { sid: sid.clone(), name, muted: false };
        for local in self.local_keys_except(key) {
            self.local_event(
                local,
                RoomEvent::TrackPublished { participant_identity: identity.clone(), track: publication.clone() },
            );
        }
        for other in self.remote_keys() {
            self.renegotiate(now, other);
        }
        LocalReply::TrackPublished { track_sid: sid, counters }
    }

    pub(super) fn unpublish_local(&mut self, now: Instant, key: Key, track_sid: &str) -> LocalReply {
        let Some(participant) = self.participants.get_mut(&key) else {
            return LocalReply::Failed(LocalError::NotInRoom);
        };
        let Some(removed) = participant.tracks.remove(track_sid) else {
            return LocalReply::Failed(LocalError::UnknownTrack(track_sid.to_owned()));
        };
        participant.version += 1;
        let (identity, participant_sid) = (participant.identity.clone(), participant.sid.clone());
        self.broadcast_update(key, false);
        self.notify_track(notify::events::TRACK_UNPUBLISHED, &participant_sid, &identity, removed.info);
        for local in self.local_keys_except(key) {
            self.local_event(
                local,
                RoomEvent::TrackUnpublished { participant_identity: identity.clone(), track_sid: track_sid.to_owned() },
            );
        }
        for other in self.remote_keys() {
            self.renegotiate(now, other);
        }
        LocalReply::Done
    }

    pub(super) fn push_local_audio(&mut self, now: Instant, key: Key, track_sid: &str, pcm: &[i16]) -> LocalReply {
        let Some(local) = self.local_track(key, track_sid) else {
            return LocalReply::Failed(LocalError::UnknownTrack(track_sid.to_owned()));
        };
        if let Err(error) = local.queue.push_pcm(pcm) {
            return LocalReply::Failed(LocalError::AudioQueueFull(error.to_string()));
        }
        // The first frame of a talkspurt is due at once.
        self.send_local_audio(now, key, track_sid);
        LocalReply::Done
    }

    /// Sends one pre-encoded 20 ms Opus frame at once: the caller paces (a relay of frames that
    /// arrive paced, such as an echo or a forwarded stream, or a player with its own clock). RTP
    /// time advances by one frame, or by the time since the previous frame when more passed, so
    /// receivers see real time. That time is the frame's `media_time` when the caller keeps a
    /// media clock (a frame sent a few milliseconds late then still follows its predecessor by
    /// exactly one frame, instead of opening a false gap that receivers fill with concealment),
    /// else the time it arrived.
    pub(super) fn push_local_opus(
        &mut self,
        now: Instant,
        key: Key,
        track_sid: &Arc<str>,
        opus: Bytes,
        media_time: Option<Instant>,
    ) -> LocalReply {
        let Some(participant) = self.participants.get_mut(&key) else {
            return LocalReply::Failed(LocalError::NotInRoom);
        };
        let identity = participant.frame_identity.clone();
        let Some(local) = participant.tracks.get_mut(&**track_sid).and_then(|t| t.local.as_mut()) else {
            return LocalReply::Failed(LocalError::UnknownTrack(track_sid.to_string()));
        };
        if opus.is_empty() || opus.len() > 1275 {
            // 1275 bytes is the largest Opus frame (RFC 6716 §3.4).
            local.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return LocalReply::Failed(LocalError::Encoder(format!("not an Opus frame: {} bytes", opus.len())));
        }
        const FRAME: u64 = svc_audio::FRAME_SAMPLES as u64;
        let at = media_time.unwrap_or(now);
        if now > at + LATE_AFTER {
            local.counters.late.fetch_add(1, Ordering::Relaxed);
        }
        let rtp = match local.last_opus {
            None => 0,
            Some((last, rtp)) => {
                let elapsed_frames = (at.saturating_duration_since(last).as_micros() as u64 + 10_000) / 20_000;
                rtp + FRAME * elapsed_frames.max(1)
            }
        };
        local.last_opus = Some((at, rtp));
        local.counters.played_samples.fetch_add(FRAME, Ordering::Relaxed);
        self.deliver_audio(now, key, &identity, track_sid, rtp, now, Arc::from(opus.as_ref()));
        LocalReply::Done
    }

    /// Sends every frame of an in-process track that is due.
    pub(super) fn send_local_audio(&mut self, now: Instant, key: Key, track_sid: &str) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let identity = participant.frame_identity.clone();
        let Some(local) = participant.tracks.get_mut(track_sid).and_then(|t| t.local.as_mut()) else { return };
        let mut frames = Vec::new();
        while let Some(frame) = local.queue.poll_frame(now) {
            let encoded = match local.encoder.encode_frame(&frame.pcm) {
                Ok(encoded) => encoded,
                Err(error) => {
                    tracing::warn!(%error, "opus encode failed");
                    continue;
                }
            };
            // Extend the 32-bit RTP clock so str0m sees a monotonic 64-bit time.
            if frame.rtp_timestamp < local.last_rtp {
                local.rtp_base += 1 << 32;
            }
            local.last_rtp = frame.rtp_timestamp;
            frames.push((local.rtp_base + u64::from(frame.rtp_timestamp), encoded));
        }
        local.counters.played_samples.store(local.queue.played_samples(), Ordering::Relaxed);
        let track_sid: Arc<str> = Arc::from(track_sid);
        for (rtp, encoded) in frames {
            self.deliver_audio(now, key, &identity, &track_sid, rtp, now, Arc::from(encoded));
        }
    }

    pub(super) fn send_local_packet(
        &mut self,
        now: Instant,
        key: Key,
        reliable: bool,
        destinations: Vec<String>,
        value: proto::data_packet::Value,
    ) {
        let Some(sender) = self.participants.get(&key) else { return };
        #[allow(deprecated)]
        let packet = proto::DataPacket {
            kind: if reliable { proto::data_packet::Kind::Reliable } else { proto::data_packet::Kind::Lossy } as i32,
            participant_identity: sender.identity.clone(),
            destination_identities: destinations,
            // Unsequenced: receivers dedupe only packets with a sequence.
            sequence: 0,
            participant_sid: sender.sid.clone(),
            value: Some(value),
        };
        self.route_packet(now, key, reliable, packet);
    }

    pub(super) fn update_local_state(
        &mut self,
        key: Key,
        metadata: Option<String>,
        attributes: BTreeMap<String, String>,
    ) -> LocalReply {
        let Some(participant) = self.participants.get_mut(&key) else {
            return LocalReply::Failed(LocalError::NotInRoom);
        };
        match participant.apply_state_update(None, metadata, attributes) {
            Ok(Some(_)) => {
                self.broadcast_update(key, false);
                LocalReply::Done
            }
            Ok(None) => LocalReply::Done,
            Err(()) => LocalReply::Failed(LocalError::StateTooLarge),
        }
    }

    pub(super) fn local_event(&mut self, to: Key, event: RoomEvent) {
        self.outputs.push_back(CoreOutput::Local { to, output: LocalOutput::Event(event) });
    }
}
