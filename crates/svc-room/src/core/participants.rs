//! Joining and leaving, and what everyone learns of a participant: the join response, updates
//! with rising versions, leave reasons, attribute and metadata changes.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

impl RoomCore {
    /// Admits a remote (WebRTC) participant: answers with the join response and the first
    /// subscriber offer, and tells everyone else.
    pub(crate) fn join_remote(&mut self, now: Instant, now_ms: i64, request: JoinRequest) -> Key {
        self.kick_duplicate(now, &request.identity);
        let key = self.allocate_key();
        let remote = self.new_remote_peer(now, key, request.auto_subscribe);
        let identity = request.identity.clone();
        let participant = Participant_::new(
            self.ids.participant_sid(),
            request,
            (now, now_ms),
            proto::participant_info::State::Joined,
            Body::Remote(Box::new(remote)),
        );
        self.participants.insert(key, participant);
        self.by_identity.insert(identity, key);

        let join = self.join_response(key);
        self.outputs.push_back(CoreOutput::Signal { to: key, message: proto::signal_response::Message::Join(join) });
        self.broadcast_update(key, false);
        self.announce_joined_to_locals(key);
        self.renegotiate(now, key);
        self.note_occupancy(now);
        self.flush(now);
        key
    }

    /// Admits an in-process participant. It sees everyone already present as join events.
    pub(crate) fn join_local(&mut self, now: Instant, now_ms: i64, request: JoinRequest) -> Key {
        self.kick_duplicate(now, &request.identity);
        let key = self.allocate_key();
        let identity = request.identity.clone();
        // In-process participants may do everything, and speak RPC v1 (client protocol 0).
        let request = JoinRequest { permissions: Permissions::ALL, client_protocol: 0, ..request };
        let participant = Participant_::new(
            self.ids.participant_sid(),
            request,
            (now, now_ms),
            proto::participant_info::State::Active,
            Body::Local(LocalPeer),
        );
        self.participants.insert(key, participant);
        self.by_identity.insert(identity, key);

        let others: Vec<Key> = self.participants.keys().copied().filter(|other| *other != key).collect();
        for other in others {
            let Some(participant) = self.participants.get(&other) else { continue };
            if participant.permissions.hidden {
                continue;
            }
            let snapshot = participant.snapshot();
            let tracks: Vec<TrackPublication> = participant
                .tracks
                .values()
                .filter(|track| track.bound)
                .map(|track| TrackPublication {
                    sid: track.info.sid.clone(),
                    name: track.info.name.clone(),
                    muted: track.info.muted,
                })
                .collect();
            let identity = participant.identity.clone();
            self.local_event(key, RoomEvent::ParticipantJoined(snapshot));
            for track in tracks {
                self.local_event(
                    key,
                    RoomEvent::TrackPublished { participant_identity: identity.clone(), track: track.clone() },
                );
                self.mark_track_subscribed(other, &track.sid);
            }
        }
        self.broadcast_update(key, false);
        self.announce_joined_to_locals(key);
        self.notify_joined(key);
        self.note_occupancy(now);
        self.flush(now);
        key
    }

    /// Whether `request` would find the room full: `max_participants` (0: no cap) counts
    /// everyone but agents, as LiveKit counts its "independent" participants; someone rejoining
    /// with an identity already present replaces it, so takes no new place.
    pub(crate) fn is_full_for(&self, request: &JoinRequest) -> bool {
        if self.max_participants == 0 || request.kind == ParticipantKind::Agent {
            return false;
        }
        let counted = self
            .participants
            .values()
            .filter(|participant| {
                participant.kind != ParticipantKind::Agent && participant.identity != request.identity
            })
            .count();
        counted >= usize::try_from(self.max_participants).unwrap_or(usize::MAX)
    }

    pub(super) fn allocate_key(&mut self) -> Key {
        let key = self.next_key;
        self.next_key += 1;
        key
    }

    pub(super) fn kick_duplicate(&mut self, now: Instant, identity: &str) {
        if let Some(existing) = self.by_identity.get(identity).copied() {
            self.remove_participant(now, existing, LeaveReason::DuplicateIdentity, true);
        }
    }

    /// Removes a participant, telling it why (a leave before its connection closes) and
    /// telling everyone else it left.
    pub(crate) fn remove_participant(&mut self, now: Instant, key: Key, reason: LeaveReason, notify_self: bool) {
        let Some(mut participant) = self.participants.remove(&key) else { return };
        if self.by_identity.get(&participant.identity) == Some(&key) {
            self.by_identity.remove(&participant.identity);
        }
        match &mut participant.body {
            Body::Remote(remote) => {
                if notify_self {
                    self.outputs.push_back(CoreOutput::Signal {
                        to: key,
                        message: proto::signal_response::Message::Leave(leave_request(reason, false)),
                    });
                }
                self.outputs.push_back(CoreOutput::CloseSignal { to: key });
                remote.publisher.rtc.disconnect();
                remote.subscriber.rtc.disconnect();
                self.outputs.push_back(CoreOutput::RoutesRemoved { key });
            }
            Body::Local(_) => {
                if notify_self {
                    self.outputs.push_back(CoreOutput::Local {
                        to: key,
                        output: LocalOutput::Event(RoomEvent::Disconnected { reason }),
                    });
                }
            }
        }
        // Its connections may still be marked dirty: the drain skips keys that are gone.
        self.note_occupancy(now);

        if participant.kind == ParticipantKind::Agent {
            self.outputs.push_back(CoreOutput::AgentLeft { identity: participant.identity.clone() });
        }
        let was_active = participant.state == proto::participant_info::State::Active;
        participant.state = proto::participant_info::State::Disconnected;
        participant.version += 1;
        self.notify_left(&participant, reason, was_active);
        if !participant.permissions.hidden {
            let mut info = participant.to_proto();
            info.disconnect_reason = reason.to_proto() as i32;
            let removed_tracks: Vec<String> =
                participant.tracks.values().filter(|track| track.bound).map(|track| track.info.sid.clone()).collect();
            let others: Vec<Key> = self.participants.keys().copied().collect();
            for other in others {
                let Some(target) = self.participants.get(&other) else { continue };
                match &target.body {
                    Body::Remote(_) => self.outputs.push_back(CoreOutput::Signal {
                        to: other,
                        message: proto::signal_response::Message::Update(proto::ParticipantUpdate {
                            participants: vec![info.clone()],
                        }),
                    }),
                    Body::Local(_) => {
                        for track_sid in &removed_tracks {
                            self.local_event(
                                other,
                                RoomEvent::TrackUnpublished {
                                    participant_identity: participant.identity.clone(),
                                    track_sid: track_sid.clone(),
                                },
                            );
                        }
                        self.local_event(
                            other,
                            RoomEvent::ParticipantLeft {
                                identity: participant.identity.clone(),
                                sid: participant.sid.clone(),
                                reason,
                            },
                        );
                    }
                }
            }
            // Their tracks leave everyone's subscriber connection.
            let remotes: Vec<Key> = self.remote_keys();
            for other in remotes {
                self.renegotiate(now, other);
            }
        }
        self.flush(now);
    }

    /// Closes the room once the reliable data already sent to the clients has been delivered
    /// (every byte acknowledged), or after `linger` at most; meanwhile it runs as before, so the
    /// acknowledgements and retransmissions flow. A session's last words (`session-ended`) then
    /// survive a lost packet on a bad network: SCTP resends it only after a second or more, and a
    /// room closed at once would have taken it down unsent. The core says [`CoreOutput::Expired`]
    /// when it has closed.
    pub(crate) fn close_after_delivery(&mut self, now: Instant, reason: LeaveReason, linger: Duration) {
        if self.closing.is_some() {
            return;
        }
        if self.closed {
            // Closed already (idle): say so again, so that nothing waits on a close.
            self.outputs.push_back(CoreOutput::Expired);
            return;
        }
        self.closing = Some((reason, now + linger));
        self.close_if_delivered(now);
    }

    /// While closing: closes when nothing reliable is in flight or the linger is over; true if
    /// it did.
    pub(super) fn close_if_delivered(&mut self, now: Instant) -> bool {
        let Some((reason, until)) = self.closing else { return false };
        if now < until && self.reliable_in_flight() {
            return false;
        }
        self.closing = None;
        self.close(now, reason);
        self.outputs.push_back(CoreOutput::Expired);
        true
    }

    /// Whether any client still has reliable data waiting or unacknowledged.
    fn reliable_in_flight(&mut self) -> bool {
        self.participants.values_mut().any(|participant| match &mut participant.body {
            Body::Remote(remote) => {
                let unacknowledged = remote
                    .subscriber_reliable
                    .and_then(|id| remote.subscriber.rtc.channel(id))
                    .is_some_and(|mut channel| channel.buffered_amount() > 0);
                unacknowledged || !remote.reliable_backlog.is_empty()
            }
            Body::Local(_) => false,
        })
    }

    /// Closes the room: everyone gets a leave with the reason.
    pub(crate) fn close(&mut self, now: Instant, reason: LeaveReason) {
        self.closed = true;
        let keys: Vec<Key> = self.participants.keys().copied().collect();
        for key in keys {
            self.remove_participant(now, key, reason, true);
        }
        self.finished(match reason {
            LeaveReason::RoomDeleted => proto::RoomEndReason::RoomEndApiDelete,
            LeaveReason::ServerShutdown => proto::RoomEndReason::RoomEndServerShutdown,
            _ => proto::RoomEndReason::RoomEndUnknown,
        });
    }

    /// The participant's signal connection ended (without a leave, or after one).
    pub(crate) fn signal_closed(&mut self, now: Instant, key: Key, reason: LeaveReason) {
        self.remove_participant(now, key, reason, false);
    }

    pub(super) fn remote_keys(&self) -> Vec<Key> {
        self.participants
            .iter()
            .filter(|(_, participant)| matches!(participant.body, Body::Remote(_)))
            .map(|(key, _)| *key)
            .collect()
    }

    pub(super) fn handle_mute(&mut self, now: Instant, key: Key, mute: proto::MuteTrackRequest) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let Some(track) = participant.tracks.get_mut(&mute.sid) else { return };
        if track.info.muted == mute.muted {
            return;
        }
        track.info.muted = mute.muted;
        participant.version += 1;
        self.broadcast_update(key, true);
        // The signature is the sans-IO contract; this step needs no time.
        let _ = now;
    }

    pub(super) fn handle_update_metadata(&mut self, now: Instant, key: Key, update: proto::UpdateParticipantMetadata) {
        let Some(participant) = self.participants.get_mut(&key) else { return };
        let mut broadcast = false;
        let reason = if !participant.permissions.can_update_metadata {
            proto::request_response::Reason::NotAllowed
        } else {
            match participant.apply_state_update(
                (!update.name.is_empty()).then_some(update.name),
                (!update.metadata.is_empty()).then_some(update.metadata),
                update.attributes.into_iter().collect(),
            ) {
                Ok(changed) => {
                    broadcast = changed.is_some();
                    proto::request_response::Reason::Ok
                }
                Err(()) => proto::request_response::Reason::LimitExceeded,
            }
        };
        let message = match reason {
            proto::request_response::Reason::Ok => String::new(),
            proto::request_response::Reason::NotAllowed => "the token does not grant canUpdateOwnMetadata".to_owned(),
            _ => format!("attributes and metadata are limited to {MAX_PARTICIPANT_STATE_BYTES} bytes"),
        };
        self.outputs.push_back(CoreOutput::Signal {
            to: key,
            message: proto::signal_response::Message::RequestResponse(proto::RequestResponse {
                request_id: update.request_id,
                reason: reason as i32,
                message,
                request: None,
            }),
        });
        // The answer first, then the update everyone (the sender included) sees.
        if broadcast {
            self.broadcast_update(key, true);
        }
        // The signature is the sans-IO contract; this step needs no time.
        let _ = now;
    }

    pub(super) fn local_keys_except(&self, except: Key) -> Vec<Key> {
        self.participants
            .iter()
            .filter(|(key, participant)| **key != except && matches!(participant.body, Body::Local(_)))
            .map(|(key, _)| *key)
            .collect()
    }

    pub(super) fn join_response(&self, key: Key) -> proto::JoinResponse {
        let participant = self.participants.get(&key).map(Participant_::to_proto);
        let others = self
            .participants
            .iter()
            .filter(|(other, p)| **other != key && !p.permissions.hidden)
            .map(|(_, p)| p.to_proto())
            .collect();
        proto::JoinResponse {
            room: Some(self.room_info()),
            participant,
            other_participants: others,
            server_version: SERVER_VERSION.to_owned(),
            ice_servers: Vec::new(),
            subscriber_primary: true,
            alternative_url: String::new(),
            client_configuration: Some(proto::ClientConfiguration {
                resume_connection: proto::ClientConfigSetting::Disabled as i32,
                ..Default::default()
            }),
            server_region: String::new(),
            ping_timeout: self.settings.ping_timeout,
            ping_interval: self.settings.ping_interval,
            server_info: Some(self.settings.server_info()),
            sif_trailer: Vec::new(),
            enabled_publish_codecs: Vec::new(),
            fast_publish: true,
        }
    }

    pub(super) fn room_info(&self) -> proto::Room {
        proto::Room {
            sid: self.sid.clone(),
            name: self.name.clone(),
            creation_time: self.created_at_ms / 1000,
            creation_time_ms: self.created_at_ms,
            num_participants: u32::try_from(self.participants.len()).unwrap_or(u32::MAX),
            num_publishers: u32::try_from(self.participants.values().filter(|p| !p.tracks.is_empty()).count())
                .unwrap_or(u32::MAX),
            metadata: self.metadata.clone(),
            empty_timeout: u32::try_from(self.empty_timeout.as_secs()).unwrap_or(u32::MAX),
            departure_timeout: u32::try_from(self.departure_timeout.as_secs()).unwrap_or(u32::MAX),
            max_participants: self.max_participants,
            ..Default::default()
        }
    }

    /// Sends the participant's current info to everyone (and to itself when asked: clients
    /// resolve `setAttributes` by seeing their own update).
    pub(super) fn broadcast_update(&mut self, key: Key, include_self: bool) {
        let Some(participant) = self.participants.get(&key) else { return };
        if participant.permissions.hidden {
            return;
        }
        let info = participant.to_proto();
        let snapshot = participant.snapshot();
        let targets: Vec<(Key, bool)> = self
            .participants
            .iter()
            .filter(|(other, _)| include_self || **other != key)
            .map(|(other, p)| (*other, matches!(p.body, Body::Local(_))))
            .collect();
        for (target, local) in targets {
            if local {
                if target != key {
                    self.local_event(
                        target,
                        RoomEvent::ParticipantUpdated { participant: snapshot.clone(), changed_attributes: Vec::new() },
                    );
                }
            } else {
                self.outputs.push_back(CoreOutput::Signal {
                    to: target,
                    message: proto::signal_response::Message::Update(proto::ParticipantUpdate {
                        participants: vec![info.clone()],
                    }),
                });
            }
        }
    }

    /// In-process participants learn of a new participant as a join (updates follow).
    pub(super) fn announce_joined_to_locals(&mut self, key: Key) {
        let Some(participant) = self.participants.get(&key) else { return };
        if participant.permissions.hidden {
            return;
        }
        let snapshot = participant.snapshot();
        for local in self.local_keys_except(key) {
            self.local_event(local, RoomEvent::ParticipantJoined(snapshot.clone()));
        }
    }
}

impl Participant_ {
    /// A participant as it joins at `now` (`now_ms` on the wall clock), version 1, no tracks.
    fn new(
        sid: String,
        request: JoinRequest,
        (now, now_ms): (Instant, i64),
        state: proto::participant_info::State,
        body: Body,
    ) -> Participant_ {
        Participant_ {
            sid,
            frame_identity: Arc::from(request.identity.as_str()),
            identity: request.identity,
            name: request.name,
            metadata: request.metadata,
            attributes: request.attributes,
            kind: request.kind,
            permissions: request.permissions,
            client_protocol: request.client_protocol,
            joined_at_ms: now_ms,
            version: 1,
            state,
            tracks: BTreeMap::new(),
            last_reliable_sequence: 0,
            data_budget: TokenBucket::new(now),
            body,
        }
    }

    pub(super) fn to_proto(&self) -> proto::ParticipantInfo {
        proto::ParticipantInfo {
            sid: self.sid.clone(),
            identity: self.identity.clone(),
            state: self.state as i32,
            tracks: self.tracks.values().filter(|track| track.bound).map(|track| track.info.clone()).collect(),
            metadata: self.metadata.clone(),
            joined_at: self.joined_at_ms / 1000,
            joined_at_ms: self.joined_at_ms,
            name: self.name.clone(),
            version: self.version,
            permission: Some(self.permissions.to_proto(self.kind)),
            is_publisher: self.tracks.values().any(|track| track.bound),
            kind: self.kind.to_proto() as i32,
            attributes: self.attributes.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            // The agent speaks RPC v1 only; clients then use v1 packets toward it.
            client_protocol: self.client_protocol,
            ..Default::default()
        }
    }

    pub(super) fn snapshot(&self) -> Participant {
        Participant {
            sid: self.sid.clone(),
            identity: self.identity.clone(),
            name: self.name.clone(),
            kind: self.kind,
            metadata: self.metadata.clone(),
            attributes: self.attributes.clone(),
            tracks: self
                .tracks
                .values()
                .filter(|track| track.bound)
                .map(|track| TrackPublication {
                    sid: track.info.sid.clone(),
                    name: track.info.name.clone(),
                    muted: track.info.muted,
                })
                .collect(),
            active: self.state == proto::participant_info::State::Active,
        }
    }

    /// Applies a name/metadata/attribute change (empty attribute value deletes). Returns the
    /// changed attribute keys, `None` when nothing changed, `Err` when over the size limit.
    pub(super) fn apply_state_update(
        &mut self,
        name: Option<String>,
        metadata: Option<String>,
        attributes: BTreeMap<String, String>,
    ) -> Result<Option<Vec<String>>, ()> {
        let mut next = self.attributes.clone();
        let mut changed = Vec::new();
        for (key, value) in attributes {
            let previous = if value.is_empty() { next.remove(&key) } else { next.insert(key.clone(), value.clone()) };
            if previous.as_deref() != Some(value.as_str()) && !(value.is_empty() && previous.is_none()) {
                changed.push(key);
            }
        }
        let metadata_next = metadata.unwrap_or_else(|| self.metadata.clone());
        let size: usize = next.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() + metadata_next.len();
        if size > MAX_PARTICIPANT_STATE_BYTES {
            return Err(());
        }
        let name_changed = name.as_ref().is_some_and(|name| *name != self.name);
        let metadata_changed = metadata_next != self.metadata;
        if changed.is_empty() && !name_changed && !metadata_changed {
            return Ok(None);
        }
        self.attributes = next;
        self.metadata = metadata_next;
        if let Some(name) = name {
            self.name = name;
        }
        self.version += 1;
        Ok(Some(changed))
    }
}

/// A leave with LiveKit's action for it: reconnect when the client may come back, else disconnect.
pub(crate) fn leave_request(reason: LeaveReason, can_reconnect: bool) -> proto::LeaveRequest {
    proto::LeaveRequest {
        can_reconnect,
        reason: reason.to_proto() as i32,
        action: if can_reconnect {
            proto::leave_request::Action::Reconnect
        } else {
            proto::leave_request::Action::Disconnect
        } as i32,
        regions: None,
    }
}
