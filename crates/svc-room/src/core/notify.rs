//! What the room tells webhook receivers: LiveKit's webhook events, built where the core learns
//! what happened and handed out as [`CoreOutput::Webhook`]. The actor stamps each with its id and
//! time and queues it for the receivers (`crate::webhook`), so the core stays sans-IO and a slow
//! receiver never reaches it.
//!
//! When, as livekit-server decides it: `room_started` when the room opens; `participant_joined`
//! when a participant becomes active (a client once its media is up, an in-process participant
//! at once); `participant_left` when an active participant goes, `participant_connection_aborted`
//! when one that never became active does; `track_published` when a track's media is bound and
//! `track_unpublished` when it goes (its owner leaving included); `room_finished` last, with why
//! the room ended. Track events carry the participant's sid and identity only, and the room's sid
//! and name only, as LiveKit's do.

// The parent's types and imports: this file only adds methods by concern.
use super::*;

/// LiveKit's names for the events, as receivers switch on them.
pub(crate) mod events {
    pub(crate) const ROOM_STARTED: &str = "room_started";
    pub(crate) const ROOM_FINISHED: &str = "room_finished";
    pub(crate) const PARTICIPANT_JOINED: &str = "participant_joined";
    pub(crate) const PARTICIPANT_LEFT: &str = "participant_left";
    pub(crate) const PARTICIPANT_CONNECTION_ABORTED: &str = "participant_connection_aborted";
    pub(crate) const TRACK_PUBLISHED: &str = "track_published";
    pub(crate) const TRACK_UNPUBLISHED: &str = "track_unpublished";
}

impl RoomCore {
    /// The room is open (after what a `CreateRoom` asked for is applied): `room_started`.
    pub(crate) fn opened(&mut self) {
        let room = self.room_info();
        self.notify(events::ROOM_STARTED, room, None, None);
    }

    /// The room is over: `room_finished`, once, after everyone's `participant_left`.
    pub(super) fn finished(&mut self, reason: proto::RoomEndReason) {
        if self.finished {
            return;
        }
        self.finished = true;
        if self.settings.webhooks {
            let event = proto::WebhookEvent {
                event: events::ROOM_FINISHED.to_owned(),
                room: Some(self.room_info()),
                room_end_reason: reason as i32,
                ..Default::default()
            };
            self.outputs.push_back(CoreOutput::Webhook(Box::new(event)));
        }
    }

    /// A participant became active: `participant_joined`.
    pub(super) fn notify_joined(&mut self, key: Key) {
        if !self.settings.webhooks {
            return;
        }
        let Some(participant) = self.participants.get(&key) else { return };
        let info = participant.to_proto();
        self.notify(events::PARTICIPANT_JOINED, self.room_info(), Some(info), None);
    }

    /// A participant is gone (its last state, with `reason`): `participant_left` if it was
    /// active, `participant_connection_aborted` if it never was. Its tracks go first.
    pub(super) fn notify_left(&mut self, participant: &Participant_, reason: LeaveReason, was_active: bool) {
        if !self.settings.webhooks {
            return;
        }
        let mut info = participant.to_proto();
        info.disconnect_reason = reason.to_proto() as i32;
        for track in &info.tracks {
            self.notify_track(events::TRACK_UNPUBLISHED, &info.sid, &info.identity, track.clone());
        }
        let event = if was_active { events::PARTICIPANT_LEFT } else { events::PARTICIPANT_CONNECTION_ABORTED };
        self.notify(event, self.room_info(), Some(info), None);
    }

    /// A track's media is bound (`track_published`) or the track is gone (`track_unpublished`).
    pub(super) fn notify_track(&mut self, event: &'static str, sid: &str, identity: &str, track: proto::TrackInfo) {
        if !self.settings.webhooks {
            return;
        }
        let room = proto::Room { sid: self.sid.clone(), name: self.name.clone(), ..Default::default() };
        let participant =
            proto::ParticipantInfo { sid: sid.to_owned(), identity: identity.to_owned(), ..Default::default() };
        self.notify(event, room, Some(participant), Some(track));
    }

    fn notify(
        &mut self,
        event: &'static str,
        room: proto::Room,
        participant: Option<proto::ParticipantInfo>,
        track: Option<proto::TrackInfo>,
    ) {
        if !self.settings.webhooks {
            return;
        }
        let event =
            proto::WebhookEvent { event: event.to_owned(), room: Some(room), participant, track, ..Default::default() };
        self.outputs.push_back(CoreOutput::Webhook(Box::new(event)));
    }
}
