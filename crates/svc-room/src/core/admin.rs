//! What LiveKit's server API does to a room (`RoomService` calls beyond listing): remove or update
//! a participant, change its subscriptions, mute a published track, set the room's metadata,
//! send data from the server.
//! The Twirp edge (`crate::twirp`) authorises and decodes; this is the room's side.

use std::time::Instant;

use livekit_protocol as proto;

use super::{Body, RoomCore};
use crate::model::LeaveReason;

/// A server API command for one room.
#[derive(Debug, Clone)]
pub(crate) enum AdminCommand {
    /// `RemoveParticipant`: the participant leaves with `PARTICIPANT_REMOVED`.
    RemoveParticipant { identity: String },
    /// `UpdateParticipant`: a non-empty name or metadata replaces it, an attribute with an empty
    /// value is deleted, a permission replaces the participant's.
    UpdateParticipant {
        identity: String,
        name: String,
        metadata: String,
        attributes: std::collections::BTreeMap<String, String>,
        permission: Option<proto::ParticipantPermission>,
    },
    /// `MutePublishedTrack`: the publisher is asked to mute (or unmute) and everyone sees it.
    MutePublishedTrack { identity: String, track_sid: String, muted: bool },
    /// `UpdateRoomMetadata`: everyone gets the room's new info.
    UpdateRoomMetadata { metadata: String },
    /// `SendData`: a packet from the server (no sender identity) to everyone or to the named.
    SendData { packet: proto::DataPacket, reliable: bool },
    /// `UpdateSubscriptions`: the participant subscribes to (or drops) the named tracks, as if
    /// its client had asked.
    UpdateSubscriptions { identity: String, subscription: proto::UpdateSubscription },
}

/// What a server API command answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AdminAnswer {
    /// Done; nothing to report.
    Done,
    /// The participant as it is now.
    Participant(proto::ParticipantInfo),
    /// The track as it is now.
    Track(proto::TrackInfo),
    /// The room as it is now.
    Room(proto::Room),
}

/// Why a server API command failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AdminError {
    /// No participant with that identity.
    #[error("participant {0:?} is not in the room")]
    NoParticipant(String),
    /// The participant has no track with that sid.
    #[error("track {0:?} is not published by the participant")]
    NoTrack(String),
    /// Attributes plus metadata over the per-participant limit.
    #[error("attributes and metadata are limited to {} bytes", super::MAX_PARTICIPANT_STATE_BYTES)]
    TooLarge,
}

impl RoomCore {
    /// Carries out a server API command.
    pub(crate) fn admin(&mut self, now: Instant, command: AdminCommand) -> Result<AdminAnswer, AdminError> {
        match command {
            AdminCommand::RemoveParticipant { identity } => {
                let key = self.key_of(&identity)?;
                self.remove_participant(now, key, LeaveReason::ParticipantRemoved, true);
                Ok(AdminAnswer::Done)
            }
            AdminCommand::UpdateSubscriptions { identity, subscription } => {
                let key = self.key_of(&identity)?;
                self.handle_subscription(now, key, subscription);
                Ok(AdminAnswer::Done)
            }
            AdminCommand::UpdateParticipant { identity, name, metadata, attributes, permission } => {
                let key = self.key_of(&identity)?;
                let participant = self.participants.get_mut(&key).ok_or(AdminError::NoParticipant(identity))?;
                let changed = participant
                    .apply_state_update(
                        (!name.is_empty()).then_some(name),
                        (!metadata.is_empty()).then_some(metadata),
                        attributes,
                    )
                    .map_err(|()| AdminError::TooLarge)?;
                let mut updated = changed.is_some();
                if let Some(permission) = permission {
                    participant.permissions.can_publish = permission.can_publish;
                    participant.permissions.can_subscribe = permission.can_subscribe;
                    participant.permissions.can_publish_data = permission.can_publish_data;
                    participant.permissions.can_update_metadata = permission.can_update_metadata;
                    participant.permissions.hidden = permission.hidden;
                    if changed.is_none() {
                        participant.version += 1;
                    }
                    updated = true;
                }
                let info = participant.to_proto();
                if updated {
                    self.broadcast_update(key, true);
                }
                Ok(AdminAnswer::Participant(info))
            }
            AdminCommand::MutePublishedTrack { identity, track_sid, muted } => {
                let key = self.key_of(&identity)?;
                let participant = self.participants.get(&key).ok_or(AdminError::NoParticipant(identity))?;
                if !participant.tracks.contains_key(&track_sid) {
                    return Err(AdminError::NoTrack(track_sid));
                }
                if matches!(participant.body, Body::Remote(_)) {
                    // The publisher mutes its own track; its mute request then updates the
                    // track for everyone, as a client's own mute does.
                    self.outputs.push_back(super::CoreOutput::Signal {
                        to: key,
                        message: proto::signal_response::Message::Mute(proto::MuteTrackRequest {
                            sid: track_sid.clone(),
                            muted,
                        }),
                    });
                }
                self.handle_mute(now, key, proto::MuteTrackRequest { sid: track_sid.clone(), muted });
                let info = self.participants.get(&key).and_then(|p| p.tracks.get(&track_sid)).map(|t| t.info.clone());
                info.map(AdminAnswer::Track).ok_or(AdminError::NoTrack(track_sid))
            }
            AdminCommand::UpdateRoomMetadata { metadata } => {
                self.metadata = metadata;
                let room = self.room_info();
                for key in self.remote_keys() {
                    self.outputs.push_back(super::CoreOutput::Signal {
                        to: key,
                        message: proto::signal_response::Message::RoomUpdate(proto::RoomUpdate {
                            room: Some(room.clone()),
                        }),
                    });
                }
                Ok(AdminAnswer::Room(room))
            }
            AdminCommand::SendData { mut packet, reliable } => {
                // From the server: no sender, unsequenced.
                packet.participant_identity.clear();
                #[allow(deprecated)]
                packet.participant_sid.clear();
                packet.sequence = 0;
                self.route_packet(now, super::SERVER_KEY, reliable, packet);
                Ok(AdminAnswer::Done)
            }
        }
    }

    fn key_of(&self, identity: &str) -> Result<super::Key, AdminError> {
        self.by_identity.get(identity).copied().ok_or_else(|| AdminError::NoParticipant(identity.to_owned()))
    }
}
