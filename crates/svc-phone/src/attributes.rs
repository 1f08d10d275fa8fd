//! The SIP participant's attributes, under LiveKit's names (`livekit/attrs.go` in
//! livekit/protocol; docs.livekit.io "SIP participant"), so agents written for LiveKit SIP read
//! them unchanged.

use std::collections::BTreeMap;

/// LiveKit's SIP call id: here the dial's id (`dial_id`).
pub const CALL_ID: &str = "sip.callID";
/// The SIP Call-ID header of the call toward the trunk.
pub const CALL_ID_FULL: &str = "sip.callIDFull";
/// The call's state: [`CallStatus`].
pub const CALL_STATUS: &str = "sip.callStatus";
/// The number external to svc: for dial-out, the number dialled.
pub const PHONE_NUMBER: &str = "sip.phoneNumber";
/// Our number on the trunk: the caller number presented.
pub const TRUNK_PHONE_NUMBER: &str = "sip.trunkPhoneNumber";
/// The outbound trunk's id, for calls placed through LiveKit's SIP API.
pub const TRUNK_ID: &str = "sip.trunkID";

/// `sip.callStatus` values (LiveKit's: `dialing`, `ringing`, `active`, `hangup`; LiveKit's
/// `automation`, for DTMF sent before the call counts as active, is not used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    /// The INVITE is out.
    Dialing,
    /// The phone rings (180/183).
    Ringing,
    /// Answered: audio flows.
    Active,
    /// Over (hung up by either side, or never answered).
    Hangup,
}

impl CallStatus {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Dialing => "dialing",
            CallStatus::Ringing => "ringing",
            CallStatus::Active => "active",
            CallStatus::Hangup => "hangup",
        }
    }
}

/// The attributes a SIP participant joins with.
pub fn initial(dial_id: &str, sip_call_id: &str, phone_number: &str, trunk_number: &str) -> BTreeMap<String, String> {
    let mut attributes = status(CallStatus::Dialing);
    attributes.insert(CALL_ID.to_owned(), dial_id.to_owned());
    attributes.insert(CALL_ID_FULL.to_owned(), sip_call_id.to_owned());
    attributes.insert(PHONE_NUMBER.to_owned(), phone_number.to_owned());
    if !trunk_number.is_empty() {
        attributes.insert(TRUNK_PHONE_NUMBER.to_owned(), trunk_number.to_owned());
    }
    attributes
}

/// The update for a status change.
pub fn status(status: CallStatus) -> BTreeMap<String, String> {
    BTreeMap::from([(CALL_STATUS.to_owned(), status.as_str().to_owned())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn livekit_names_and_values() {
        let attributes = initial("d1", "abc@host", "+15550199", "+15550100");
        assert_eq!(attributes.get("sip.callStatus").map(String::as_str), Some("dialing"));
        assert_eq!(attributes.get("sip.callID").map(String::as_str), Some("d1"));
        assert_eq!(attributes.get("sip.callIDFull").map(String::as_str), Some("abc@host"));
        assert_eq!(attributes.get("sip.phoneNumber").map(String::as_str), Some("+15550199"));
        assert_eq!(attributes.get("sip.trunkPhoneNumber").map(String::as_str), Some("+15550100"));
        let statuses: Vec<_> = [CallStatus::Dialing, CallStatus::Ringing, CallStatus::Active, CallStatus::Hangup]
            .map(CallStatus::as_str)
            .to_vec();
        assert_eq!(statuses, ["dialing", "ringing", "active", "hangup"]);
        assert!(!initial("d1", "c", "+1", "").contains_key("sip.trunkPhoneNumber"));
    }
}
