//! Signalling and SDP: the client's publisher offers, the room's subscriber offers (one at a
//! time, renegotiated when the tracks a participant should receive change), trickle, add_track,
//! subscriptions, and the str0m connections themselves.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

impl RoomCore {
    /// One message from a remote participant's signal connection. Ping and pong are answered by
    /// the connection itself.
    pub(crate) fn handle_signal(&mut self, now: Instant, key: Key, message: proto::signal_request::Message) {
        use proto::signal_request::Message as M;
        if !self.participants.contains_key(&key) {
            return;
        }
        match message {
            M::Offer(offer) => self.handle_publisher_offer(now, key, offer),
            M::Answer(answer) => self.handle_subscriber_answer(now, key, answer),
            M::Trickle(trickle) => self.handle_trickle(key, trickle),
            M::AddTrack(request) => self.handle_add_track(now, key, request),
            M::Mute(mute) => self.handle_mute(now, key, mute),
            M::Subscription(subscription) => self.handle_subscription(now, key, subscription),
            M::UpdateMetadata(update) => self.handle_update_metadata(now, key, update),
            M::Leave(_) => self.remove_participant(now, key, LeaveReason::ClientInitiated, false),
            // Video, layers, permissions, sync state, simulation, data tracks and blobs are not
            // supported by an audio-only room; clients do not wait for answers to them.
            _ => {}
        }
        self.flush(now);
    }

    pub(super) fn handle_publisher_offer(&mut self, now: Instant, key: Key, offer: proto::SessionDescription) {
        let parsed = match SdpOffer::from_sdp_string(&offer.sdp) {
            Ok(parsed) => parsed,
            Err(error) => {
                tracing::info!(room = %self.name, %error, "publisher offer is not valid SDP");
                self.remove_participant(now, key, LeaveReason::StateMismatch, true);
                return;
            }
        };
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        match remote.publisher.rtc.sdp_api().accept_offer(parsed) {
            Ok(answer) => {
                self.outputs.push_back(CoreOutput::Signal {
                    to: key,
                    message: proto::signal_response::Message::Answer(proto::SessionDescription {
                        r#type: "answer".to_owned(),
                        sdp: answer.to_sdp_string(),
                        id: offer.id,
                        mid_to_track_id: HashMap::new(),
                    }),
                });
                self.mark_dirty(key, PcRole::Publisher);
            }
            Err(error) => {
                tracing::info!(room = %self.name, %error, "publisher offer rejected");
                self.remove_participant(now, key, LeaveReason::StateMismatch, true);
            }
        }
    }

    pub(super) fn handle_subscriber_answer(&mut self, now: Instant, key: Key, answer: proto::SessionDescription) {
        let parsed = match SdpAnswer::from_sdp_string(&answer.sdp) {
            Ok(parsed) => parsed,
            Err(error) => {
                tracing::info!(room = %self.name, %error, "subscriber answer is not valid SDP");
                self.remove_participant(now, key, LeaveReason::StateMismatch, true);
                return;
            }
        };
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        let Some((offer_id, pending)) = remote.pending_offer.take() else {
            tracing::debug!(room = %self.name, "subscriber answer without an outstanding offer");
            return;
        };
        if answer.id != 0 && answer.id != offer_id {
            // An answer to an older offer; keep waiting for the current one.
            remote.pending_offer = Some((offer_id, pending));
            return;
        }
        if let Err(error) = remote.subscriber.rtc.sdp_api().accept_answer(pending, parsed) {
            tracing::info!(room = %self.name, %error, "subscriber answer rejected");
            self.remove_participant(now, key, LeaveReason::StateMismatch, true);
            return;
        }
        remote.downstream_pt = opus_pt(&mut remote.subscriber.rtc, &remote.downstream);
        // Publishers learn their track reached a subscriber.
        let subscribed: Vec<String> = remote.downstream.keys().cloned().collect();
        let again = std::mem::take(&mut remote.renegotiate);
        self.mark_dirty(key, PcRole::Subscriber);
        for track_sid in subscribed {
            if let Some(owner) = self.track_owner(&track_sid) {
                self.mark_track_subscribed(owner, &track_sid);
            }
        }
        if again {
            self.renegotiate(now, key);
        }
    }

    pub(super) fn handle_trickle(&mut self, key: Key, trickle: proto::TrickleRequest) {
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        // ICE-lite learns the client's address from its checks; trickled candidates only help
        // when they parse (mDNS `.local` names do not).
        let Ok(init) = serde_json::from_str::<serde_json::Value>(&trickle.candidate_init) else { return };
        let Some(text) = init.get("candidate").and_then(|c| c.as_str()).filter(|c| !c.is_empty()) else { return };
        let Ok(candidate) = Candidate::from_sdp_string(text) else { return };
        let (connection, role) = if trickle.target == proto::SignalTarget::Subscriber as i32 {
            (&mut remote.subscriber, PcRole::Subscriber)
        } else {
            (&mut remote.publisher, PcRole::Publisher)
        };
        connection.rtc.add_remote_candidate(candidate);
        self.mark_dirty(key, role);
    }

    pub(super) fn handle_add_track(&mut self, now: Instant, key: Key, request: proto::AddTrackRequest) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let audio = request.r#type == proto::TrackType::Audio as i32;
        if !participant.permissions.can_publish || !audio || participant.tracks.len() >= MAX_TRACKS_PER_PARTICIPANT {
            // LiveKit answers nothing here either: the client's publish times out with its own
            // clear error ("publication of local track timed out"). The log says why.
            tracing::info!(room = %self.name, identity = %participant.identity, audio, "add_track refused");
            // The signature is the sans-IO contract; this step needs no time.
            let _ = now;
            return;
        }
        let Body::Remote(remote) = &mut participant.body else { return };
        let sid = self.ids.audio_track_sid();
        #[allow(deprecated)]
        let info = proto::TrackInfo {
            sid: sid.clone(),
            r#type: proto::TrackType::Audio as i32,
            name: request.name.clone(),
            muted: request.muted,
            source: request.source,
            mime_type: "audio/opus".to_owned(),
            disable_red: true,
            stream: request.stream.clone(),
            audio_features: request.audio_features.clone(),
            ..Default::default()
        };
        remote.pending_publications.push((request.cid.clone(), sid.clone()));
        participant
            .tracks
            .insert(sid, Track { info: info.clone(), bound: false, announced_subscribed: false, local: None });
        self.outputs.push_back(CoreOutput::Signal {
            to: key,
            message: proto::signal_response::Message::TrackPublished(proto::TrackPublishedResponse {
                cid: request.cid,
                track: Some(info),
            }),
        });
    }

    pub(super) fn handle_subscription(&mut self, now: Instant, key: Key, subscription: proto::UpdateSubscription) {
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        let sids = subscription
            .track_sids
            .into_iter()
            .chain(subscription.participant_tracks.into_iter().flat_map(|tracks| tracks.track_sids));
        for sid in sids.take(64) {
            if subscription.subscribe {
                remote.subscriptions.insert(sid);
            } else {
                remote.subscriptions.remove(&sid);
            }
        }
        self.renegotiate(now, key);
    }

    /// Brings a remote participant's subscriber connection in line with what it should carry:
    /// the data channels and one sendonly audio m-line per subscribed track. One offer at a time.
    pub(super) fn renegotiate(&mut self, now: Instant, key: Key) {
        let wanted: Vec<(String, String)> = {
            let Some(participant) = self.participants.get(&key) else { return };
            let Body::Remote(remote) = &participant.body else { return };
            if !participant.permissions.can_subscribe {
                Vec::new()
            } else {
                self.participants
                    .iter()
                    .filter(|(other, _)| **other != key)
                    .flat_map(|(_, other)| {
                        other
                            .tracks
                            .values()
                            .filter(|track| track.bound)
                            .map(|track| (other.sid.clone(), track.info.sid.clone()))
                    })
                    .filter(|(_, track_sid)| remote.auto_subscribe || remote.subscriptions.contains(track_sid))
                    .collect()
            }
        };
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        if remote.pending_offer.is_some() {
            remote.renegotiate = true;
            return;
        }
        let first_offer = remote.next_offer_id == 1;
        let wanted_sids: HashSet<&str> = wanted.iter().map(|(_, track)| track.as_str()).collect();
        let stale: Vec<(String, Mid)> = remote
            .downstream
            .iter()
            .filter(|(track, _)| !wanted_sids.contains(track.as_str()))
            .map(|(track, mid)| (track.clone(), *mid))
            .collect();
        let added: Vec<(String, String)> =
            wanted.into_iter().filter(|(_, track)| !remote.downstream.contains_key(track)).collect();
        if !first_offer && stale.is_empty() && added.is_empty() {
            return;
        }
        let mut api = remote.subscriber.rtc.sdp_api();
        if first_offer {
            let reliable = api.add_channel_with_config(ChannelConfig {
                label: "_reliable".to_owned(),
                ordered: true,
                reliability: Reliability::Reliable,
                negotiated: None,
                protocol: String::new(),
            });
            let lossy = api.add_channel_with_config(ChannelConfig {
                label: "_lossy".to_owned(),
                ordered: false,
                reliability: Reliability::MaxRetransmits { retransmits: 0 },
                negotiated: None,
                protocol: String::new(),
            });
            remote.subscriber_reliable = Some(reliable);
            remote.subscriber_lossy = Some(lossy);
        }
        for (track, mid) in &stale {
            api.stop_media(*mid);
            remote.downstream.remove(track);
        }
        for (participant_sid, track_sid) in &added {
            // Clients recover publisher and track from the msid: "<PA_sid>|<TR_sid> <TR_sid>".
            let mid = api.add_media(
                MediaKind::Audio,
                Direction::SendOnly,
                Some(format!("{participant_sid}|{track_sid}")),
                Some(track_sid.clone()),
                None,
            );
            remote.downstream.insert(track_sid.clone(), mid);
        }
        let Some((offer, pending)) = api.apply() else { return };
        let id = remote.next_offer_id;
        remote.next_offer_id += 1;
        remote.pending_offer = Some((id, pending));
        self.outputs.push_back(CoreOutput::Signal {
            to: key,
            message: proto::signal_response::Message::Offer(proto::SessionDescription {
                r#type: "offer".to_owned(),
                sdp: offer.to_sdp_string(),
                id,
                mid_to_track_id: HashMap::new(),
            }),
        });
        self.mark_dirty(key, PcRole::Subscriber);
        // The signature is the sans-IO contract; this step needs no time.
        let _ = now;
    }

    pub(super) fn new_remote_peer(&mut self, now: Instant, key: Key, auto_subscribe: bool) -> RemotePeer {
        let publisher = self.new_rtc(now, key, PcRole::Publisher);
        let subscriber = self.new_rtc(now, key, PcRole::Subscriber);
        RemotePeer {
            publisher: PeerConnection::new(publisher, now),
            subscriber: PeerConnection::new(subscriber, now),
            publisher_channels: HashMap::new(),
            subscriber_reliable: None,
            subscriber_lossy: None,
            reliable_open: false,
            lossy_open: false,
            pending_packets: VecDeque::new(),
            reliable_backlog: VecDeque::new(),
            reliable_backlog_bytes: 0,
            pending_offer: None,
            renegotiate: false,
            next_offer_id: 1,
            downstream: HashMap::new(),
            downstream_pt: None,
            upstream: HashMap::new(),
            pending_publications: Vec::new(),
            auto_subscribe,
            subscriptions: HashSet::new(),
            subscriber_connected: false,
            last_media_activity: now,
        }
    }

    pub(super) fn new_rtc(&mut self, now: Instant, key: Key, role: PcRole) -> Rtc {
        let ufrag = self.ids.ice_ufrag();
        let mut rtc = Rtc::builder()
            .set_ice_lite(true)
            .clear_codecs()
            .enable_opus(true, false)
            .set_dtls_cert(self.settings.dtls_cert.clone())
            .set_local_ice_credentials(IceCreds { ufrag: ufrag.clone(), pass: self.ids.ice_password() })
            .set_stats_interval(None)
            .set_reordering_timeout_audio(Some(AUDIO_REORDER_WAIT))
            .build(now);
        for address in &self.settings.candidates {
            match Candidate::host(*address, "udp") {
                Ok(candidate) => {
                    rtc.add_local_candidate(candidate);
                }
                Err(error) => tracing::warn!(%address, %error, "unusable host candidate"),
            }
        }
        self.outputs.push_back(CoreOutput::RouteAdded { ufrag, key, role });
        rtc
    }
}

pub(super) fn opus_pt(rtc: &mut Rtc, downstream: &HashMap<String, Mid>) -> Option<Pt> {
    let mid = downstream.values().next().copied()?;
    let writer = rtc.writer(mid)?;

    writer.payload_params().next().map(|params| params.pt())
}
