//! Audio: binding a client's m-line to its publication, forwarding Opus frames to every
//! subscriber (remote connections and in-process participants), `track_subscribed`.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

impl RoomCore {
    pub(super) fn bind_publication(&mut self, now: Instant, key: Key, mid: Mid) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let Body::Remote(remote) = &mut participant.body else { return };
        if remote.upstream.contains_key(&mid) {
            return;
        }
        let msid_track = remote.publisher.rtc.media(mid).map(|media| media.track_id().to_owned()).unwrap_or_default();
        // LiveKit matches the msid track id to the `cid` of add_track, then falls back to the
        // first pending audio publication.
        let position = remote
            .pending_publications
            .iter()
            .position(|(cid, _)| *cid == msid_track)
            .or(if remote.pending_publications.is_empty() { None } else { Some(0) });
        let Some(position) = position else {
            tracing::info!(room = %self.name, "audio m-line without a matching add_track");
            return;
        };
        let (_, track_sid) = remote.pending_publications.remove(position);
        remote.upstream.insert(mid, Arc::from(track_sid.as_str()));
        let Some(track) = participant.tracks.get_mut(&track_sid) else { return };
        track.bound = true;
        track.info.mid = mid.to_string();
        let publication =
            TrackPublication { sid: track.info.sid.clone(), name: track.info.name.clone(), muted: track.info.muted };
        participant.version += 1;
        let identity = participant.identity.clone();
        let (participant_sid, info) = (participant.sid.clone(), track.info.clone());
        // TrackInfo reaches everyone before any offer that carries the track.
        self.broadcast_update(key, false);
        self.notify_track(notify::events::TRACK_PUBLISHED, &participant_sid, &identity, info);
        let locals = self.local_keys_except(key);
        for local in &locals {
            self.local_event(
                *local,
                RoomEvent::TrackPublished { participant_identity: identity.clone(), track: publication.clone() },
            );
        }
        if !locals.is_empty() {
            self.mark_track_subscribed(key, &track_sid);
        }
        for other in self.remote_keys() {
            if other != key {
                self.renegotiate(now, other);
            }
        }
    }

    pub(super) fn track_owner(&self, track_sid: &str) -> Option<Key> {
        self.participants.iter().find(|(_, participant)| participant.tracks.contains_key(track_sid)).map(|(k, _)| *k)
    }

    pub(super) fn mark_track_subscribed(&mut self, owner: Key, track_sid: &str) {
        let Some(participant) = self.participants.get_mut(&owner) else { return };
        let Some(track) = participant.tracks.get_mut(track_sid) else { return };
        if track.announced_subscribed {
            return;
        }
        track.announced_subscribed = true;
        if matches!(participant.body, Body::Remote(_)) {
            self.outputs.push_back(CoreOutput::Signal {
                to: owner,
                message: proto::signal_response::Message::TrackSubscribed(proto::TrackSubscribed {
                    track_sid: track_sid.to_owned(),
                }),
            });
        }
    }

    pub(super) fn forward_media(
        &mut self,
        now: Instant,
        key: Key,
        mid: Mid,
        time: MediaTime,
        network_time: Instant,
        payload: Arc<[u8]>,
    ) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let Body::Remote(remote) = &mut participant.body else { return };
        remote.last_media_activity = now;
        // libwebrtc sends padding-only packets for bandwidth probing; they carry no audio.
        if payload.is_empty() {
            return;
        }
        let Some(track_sid) = remote.upstream.get(&mid).cloned() else { return };
        let identity = participant.frame_identity.clone();
        let rtp = time.rebase(Frequency::FORTY_EIGHT_KHZ).numer();
        self.deliver_audio(now, key, &identity, &track_sid, rtp, network_time, payload);
    }

    /// Sends one Opus frame of `track_sid` to everyone subscribed to it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn deliver_audio(
        &mut self,
        now: Instant,
        publisher: Key,
        identity: &Arc<str>,
        track_sid: &Arc<str>,
        rtp: u64,
        received_at: Instant,
        payload: Arc<[u8]>,
    ) {
        let mut local_frame: Option<RemoteAudioFrame> = None;
        let mut keys = std::mem::take(&mut self.audio_keys);
        keys.clear();
        keys.extend(self.participants.keys().copied().filter(|k| *k != publisher));
        for &other in &keys {
            let Some(target) = self.participants.get_mut(&other) else { continue };
            match &mut target.body {
                Body::Remote(remote) => {
                    let (Some(mid), Some(pt)) = (remote.downstream.get(&**track_sid).copied(), remote.downstream_pt)
                    else {
                        continue;
                    };
                    if let Some(writer) = remote.subscriber.rtc.writer(mid) {
                        let time = MediaTime::new(rtp, Frequency::FORTY_EIGHT_KHZ);
                        if let Err(error) = writer.write(pt, now, time, payload.clone()) {
                            tracing::debug!(%error, "downstream audio write failed");
                        }
                        self.dirty.mark((other, PcRole::Subscriber));
                    }
                }
                Body::Local(_) => {
                    let frame = local_frame.get_or_insert_with(|| RemoteAudioFrame {
                        participant_identity: identity.clone(),
                        track_sid: track_sid.clone(),
                        rtp_timestamp: rtp,
                        received_at,
                        // Shares the packet's buffer: no copy per frame.
                        opus: Bytes::from_owner(payload.clone()),
                    });
                    self.outputs.push_back(CoreOutput::Local {
                        to: other,
                        output: LocalOutput::Event(RoomEvent::AudioFrame(frame.clone())),
                    });
                }
            }
        }
        self.audio_keys = keys;
    }
}
