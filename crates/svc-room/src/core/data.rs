//! Data packets: channel setup, the per-sender budget, LiveKit's routing rules (destinations,
//! sender fields set by the room, transcriptions only from agents), and the bounded reliable
//! backlog of a subscriber whose SCTP buffer is full.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

impl RoomCore {
    pub(super) fn channel_open(&mut self, key: Key, role: PcRole, id: ChannelId, label: &str) {
        let Some(Body::Remote(remote)) = self.participants.get_mut(&key).map(|p| &mut p.body) else { return };
        match role {
            PcRole::Publisher => {
                // `_data_track` and unknown labels are accepted and ignored.
                let reliable = match label {
                    "_reliable" => true,
                    "_lossy" => false,
                    _ => return,
                };
                remote.publisher_channels.insert(id, reliable);
            }
            PcRole::Subscriber => {
                if Some(id) == remote.subscriber_reliable {
                    remote.reliable_open = true;
                    if let Some(mut channel) = remote.subscriber.rtc.channel(id) {
                        channel.set_buffered_amount_low_threshold(RELIABLE_LOW_THRESHOLD);
                    }
                } else if Some(id) == remote.subscriber_lossy {
                    remote.lossy_open = true;
                }
                // Flush what waited for the channels, in order.
                let waiting = std::mem::take(&mut remote.pending_packets);
                for (reliable, bytes) in waiting {
                    write_packet(remote, reliable, bytes);
                }
                self.mark_dirty(key, PcRole::Subscriber);
            }
        }
    }

    pub(super) fn handle_client_packet(&mut self, now: Instant, key: Key, reliable: bool, bytes: &[u8]) {
        let Some(sender) = self.participants.get_mut(&key) else { return };
        if bytes.len() > MAX_DATA_PACKET_BYTES || !sender.permissions.can_publish_data {
            return;
        }
        if !sender.data_budget.admit(now, bytes.len()) {
            if sender.data_budget.dropped.is_power_of_two() {
                tracing::info!(room = %self.name, identity = %sender.identity, dropped = sender.data_budget.dropped,
                    "data packets over budget dropped");
            }
            return;
        }
        let Ok(mut packet) = proto::DataPacket::decode(bytes) else { return };
        if reliable && packet.sequence > 0 {
            if packet.sequence <= sender.last_reliable_sequence {
                return;
            }
            sender.last_reliable_sequence = packet.sequence;
        }
        // Transcriptions from non-agents and metrics are not forwarded (as in LiveKit).
        match &packet.value {
            None | Some(proto::data_packet::Value::Metrics(_)) => return,
            Some(proto::data_packet::Value::Transcription(_)) if sender.kind != ParticipantKind::Agent => return,
            _ => {}
        }
        // Sender fields are filled in by the room, never trusted.
        packet.participant_sid = sender.sid.clone();
        packet.participant_identity = if sender.permissions.hidden { String::new() } else { sender.identity.clone() };
        #[allow(deprecated)]
        {
            packet.kind =
                if reliable { proto::data_packet::Kind::Reliable } else { proto::data_packet::Kind::Lossy } as i32;
            if let Some(proto::data_packet::Value::User(user)) = &mut packet.value {
                user.participant_sid = packet.participant_sid.clone();
                user.participant_identity = packet.participant_identity.clone();
                if packet.destination_identities.is_empty() && !user.destination_identities.is_empty() {
                    packet.destination_identities = user.destination_identities.clone();
                }
            }
        }
        self.route_packet(now, key, reliable, packet);
    }

    /// Sends an RPC packet from the server (`PerformRpc`): no sender identity, to `destination`.
    pub(crate) fn send_server_rpc(&mut self, now: Instant, destination: String, value: proto::data_packet::Value) {
        #[allow(deprecated)]
        let packet = proto::DataPacket {
            kind: proto::data_packet::Kind::Reliable as i32,
            destination_identities: vec![destination],
            value: Some(value),
            ..Default::default()
        };
        self.route_packet(now, SERVER_KEY, true, packet);
        self.flush(now);
    }

    /// Delivers a packet (sender fields already set) to its destinations, or everyone else. An
    /// RPC acknowledgement or response addressed to no identity answers the server's own call
    /// (`PerformRpc`): it goes to the actor's RPC bookkeeping.
    pub(super) fn route_packet(&mut self, now: Instant, from: Key, reliable: bool, packet: proto::DataPacket) {
        if let [to_server] = packet.destination_identities.as_slice()
            && to_server.is_empty()
            && let Some(value @ (proto::data_packet::Value::RpcAck(_) | proto::data_packet::Value::RpcResponse(_))) =
                packet.value
        {
            self.outputs.push_back(CoreOutput::ServerRpc { from_identity: packet.participant_identity, packet: value });
            return;
        }
        let encoded: Arc<[u8]> = Arc::from(packet.encode_to_vec());
        let destinations: HashSet<&str> = packet.destination_identities.iter().map(String::as_str).collect();
        let targets: Vec<Key> = self
            .participants
            .iter()
            .filter(|(key, participant)| {
                **key != from && (destinations.is_empty() || destinations.contains(participant.identity.as_str()))
            })
            .map(|(key, _)| *key)
            .collect();
        for target in targets {
            let Some(participant) = self.participants.get_mut(&target) else { continue };
            match &mut participant.body {
                Body::Remote(remote) => {
                    let open = if reliable { remote.reliable_open } else { remote.lossy_open };
                    if open {
                        write_packet(remote, reliable, encoded.clone());
                        self.mark_dirty(target, PcRole::Subscriber);
                    } else if remote.pending_packets.len() < MAX_PENDING_PACKETS {
                        remote.pending_packets.push_back((reliable, encoded.clone()));
                    }
                }
                Body::Local(_) => {
                    let output = match &packet.value {
                        Some(proto::data_packet::Value::User(user)) => {
                            LocalOutput::Event(RoomEvent::Data(DataMessage {
                                from_identity: packet.participant_identity.clone(),
                                from_sid: packet.participant_sid.clone(),
                                topic: user.topic.clone(),
                                payload: Bytes::copy_from_slice(&user.payload),
                                reliable,
                            }))
                        }
                        Some(
                            value @ (proto::data_packet::Value::RpcRequest(_)
                            | proto::data_packet::Value::RpcAck(_)
                            | proto::data_packet::Value::RpcResponse(_)),
                        ) => LocalOutput::Rpc {
                            from_identity: packet.participant_identity.clone(),
                            packet: value.clone(),
                        },
                        _ => continue,
                    };
                    self.outputs.push_back(CoreOutput::Local { to: target, output });
                }
            }
        }
        // The signature is the sans-IO contract; this step needs no time.
        let _ = now;
    }
}

/// Writes a packet to a subscriber's data channel. A reliable packet the SCTP send buffer cannot
/// take now (`Ok(false)`: str0m buffers 128 KiB across channels, and a burst of chunked messages
/// fills it) waits in the subscriber's backlog, in order, and goes out as SCTP acknowledges
/// ([`flush_backlog`] on `ChannelBufferedAmountLow`); a lossy one is dropped. The backlog is
/// bounded: a client that cannot keep up with [`MAX_RELIABLE_BACKLOG_BYTES`] loses data rather
/// than growing the server's memory.
pub(super) fn write_packet(remote: &mut RemotePeer, reliable: bool, bytes: Arc<[u8]>) {
    if reliable && !remote.reliable_backlog.is_empty() {
        push_backlog(remote, bytes);
        return;
    }
    let id = if reliable { remote.subscriber_reliable } else { remote.subscriber_lossy };
    if let Some(mut channel) = id.and_then(|id| remote.subscriber.rtc.channel(id)) {
        match channel.write(true, &bytes) {
            Ok(true) => {}
            Ok(false) if reliable => push_backlog(remote, bytes),
            Ok(false) => tracing::debug!("lossy data channel buffer full; packet dropped"),
            Err(error) => tracing::debug!(%error, "data channel write failed"),
        }
    }
}

pub(super) fn push_backlog(remote: &mut RemotePeer, bytes: Arc<[u8]>) {
    if remote.reliable_backlog_bytes + bytes.len() > MAX_RELIABLE_BACKLOG_BYTES {
        tracing::warn!(
            backlog = remote.reliable_backlog_bytes,
            "subscriber cannot keep up with reliable data; packet dropped"
        );
        return;
    }
    remote.reliable_backlog_bytes += bytes.len();
    remote.reliable_backlog.push_back(bytes);
}

/// Writes waiting reliable packets while the SCTP buffer takes them; returns whether any went.
pub(super) fn flush_backlog(remote: &mut RemotePeer) -> bool {
    let Some(id) = remote.subscriber_reliable else { return false };
    let mut wrote = false;
    while let Some(front) = remote.reliable_backlog.front() {
        let Some(mut channel) = remote.subscriber.rtc.channel(id) else { break };
        match channel.write(true, front) {
            Ok(true) => {
                remote.reliable_backlog_bytes -= front.len();
                remote.reliable_backlog.pop_front();
                wrote = true;
            }
            Ok(false) => break,
            Err(error) => {
                tracing::debug!(%error, "data channel write failed; backlog dropped");
                remote.reliable_backlog.clear();
                remote.reliable_backlog_bytes = 0;
                break;
            }
        }
    }
    wrote
}

/// A token bucket over packets and bytes.
pub(super) struct TokenBucket {
    packets: f64,
    bytes: f64,
    refreshed: Instant,
    pub(super) dropped: u64,
}

impl TokenBucket {
    pub(super) fn new(now: Instant) -> TokenBucket {
        TokenBucket { packets: DATA_BURST_PACKETS, bytes: DATA_BURST_BYTES, refreshed: now, dropped: 0 }
    }

    pub(super) fn admit(&mut self, now: Instant, size: usize) -> bool {
        let elapsed = now.saturating_duration_since(self.refreshed).as_secs_f64();
        self.refreshed = now.max(self.refreshed);
        self.packets = (self.packets + elapsed * DATA_PACKETS_PER_SECOND).min(DATA_BURST_PACKETS);
        self.bytes = (self.bytes + elapsed * DATA_BYTES_PER_SECOND).min(DATA_BURST_BYTES);
        if self.packets >= 1.0 && self.bytes >= size as f64 {
            self.packets -= 1.0;
            self.bytes -= size as f64;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}
