//! LiveKit's SIP service (`livekit.SIP`) over a dialer the server installs: the room cannot place
//! a phone call itself (svc-phone sits a layer above it and joins its calls to rooms), so it
//! defines what it needs, [`SipDialer`], and `svc serve` plugs its phone service in
//! ([`crate::RoomServer::set_sip_dialer`]).
//!
//! This module holds the SIP service's rules without HTTP: which `CreateSIPParticipant` request
//! is a dial ([`SipDial::from_livekit`]: LiveKit's defaults, identity `sip_<number>`; the fields
//! svc cannot honour refused rather than ignored) and how a failed dial is answered
//! ([`SipDialError::twirp`]: LiveKit's table from SIP status to Twirp code, with the
//! `sip_status_code`/`sip_status` metadata the SDKs turn into their `SipCallError`). The Twirp
//! edge (`twirp.rs`) checks grants and encodes.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::BoxFuture;
use livekit_protocol as proto;

/// The outbound trunk a dialer calls through, as `ListSIPOutboundTrunk` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SipTrunk {
    /// `ST_…`, stable for the same configuration (API callers keep it in their code).
    pub id: String,
    /// A display name.
    pub name: String,
    /// The trunk's host and port.
    pub address: String,
    /// The numbers calls present (the configured caller number).
    pub numbers: Vec<String>,
    /// The digest user name, when the trunk challenges.
    pub auth_username: String,
}

/// One call through LiveKit's `CreateSIPParticipant`.
#[derive(Debug, Clone, PartialEq)]
pub struct SipDial {
    /// The room the phone joins (opened if it is not).
    pub room: String,
    /// LiveKit's call id (`SCL_…`): the `sip.callID` attribute, and the answer's `sip_call_id`.
    pub call_id: String,
    /// The trunk called through: the `sip.trunkID` attribute.
    pub trunk_id: String,
    /// The number dialled (`sip_call_to`).
    pub number: String,
    /// The number presented (`sip_number`); `None`: the trunk's.
    pub caller_number: Option<String>,
    /// The phone participant's identity (default `sip_<number>`, as LiveKit's).
    pub identity: String,
    /// Its name; empty: the number (or `Phone` when the number is hidden).
    pub name: String,
    /// Its metadata.
    pub metadata: String,
    /// Its attributes besides the `sip.*` ones the call sets (which win).
    pub attributes: BTreeMap<String, String>,
    /// Leave `sip.phoneNumber` and `sip.trunkPhoneNumber` out.
    pub hide_phone_number: bool,
    /// How long it may ring; `None`: the dialer's configured ring timeout.
    pub ringing_timeout: Option<Duration>,
    /// Hang up this long after the answer; `None`: no limit.
    pub max_call_duration: Option<Duration>,
    /// Answer the API call only once the phone answered (or failed to).
    pub wait_until_answered: bool,
}

/// Why a dial did not go through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SipDialError {
    /// The far end refused with a final SIP status (busy, declined, not found, …).
    #[error("sip status {status}: {reason}")]
    Rejected {
        /// The SIP status code.
        status: u16,
        /// Its reason phrase (or svc's slug for it).
        reason: String,
    },
    /// Nobody answered within the ringing timeout.
    #[error("no answer within the ringing timeout")]
    NoAnswer,
    /// It failed without a SIP status (no response from the trunk, media we cannot use, …).
    #[error("the call failed: {0}")]
    Failed(String),
    /// The number is not one svc dials (E.164).
    #[error("not an E.164 number: {0:?}")]
    InvalidNumber(String),
    /// As many calls are in progress as the dialer allows, or the room is full.
    #[error("{0}")]
    AtCapacity(String),
    /// The dialer is shutting down or could not start the call.
    #[error("{0}")]
    Unavailable(String),
}

/// A refusal in Twirp's terms: code, message and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SipRefusal {
    pub code: &'static str,
    pub msg: String,
    pub meta: Vec<(&'static str, String)>,
}

impl SipRefusal {
    fn new(code: &'static str, msg: impl Into<String>) -> SipRefusal {
        SipRefusal { code, msg: msg.into(), meta: Vec::new() }
    }
}

/// Places phone calls into rooms: what the room's SIP service stands on.
pub trait SipDialer: Send + Sync + 'static {
    /// The trunk calls go through.
    fn outbound_trunk(&self) -> SipTrunk;

    /// Dials `dial.number` and joins the phone to `dial.room` as `dial.identity` (kind SIP, with
    /// LiveKit's `sip.*` attributes). Answers once the participant is in the room, or, with
    /// `wait_until_answered`, once the phone answered. The call then lives on its own (its
    /// ringing timeout and longest duration included) until either side hangs up.
    fn dial(&self, dial: SipDial) -> BoxFuture<'static, Result<(), SipDialError>>;
}

impl SipDial {
    /// The dial a `CreateSIPParticipant` request asks for, through `trunk`, as call `call_id`.
    pub(crate) fn from_livekit(
        request: proto::CreateSipParticipantRequest,
        trunk: &SipTrunk,
        call_id: String,
    ) -> Result<SipDial, SipRefusal> {
        if request.trunk.is_some() {
            return Err(SipRefusal::new(
                "unimplemented",
                format!("svc dials through the trunk in its configuration; name it as sip_trunk_id {:?}", trunk.id),
            ));
        }
        if request.sip_trunk_id.is_empty() {
            return Err(SipRefusal::new(
                "invalid_argument",
                format!("sip_trunk_id is required (svc's outbound trunk is {:?})", trunk.id),
            ));
        }
        if request.sip_trunk_id != trunk.id {
            return Err(SipRefusal::new("not_found", format!("no outbound trunk {:?}", request.sip_trunk_id)));
        }
        if request.sip_call_to.is_empty() {
            return Err(SipRefusal::new("invalid_argument", "sip_call_to is required"));
        }
        unsupported(&request)?;
        let identity = match request.participant_identity.as_str() {
            "" => format!("sip_{}", request.sip_call_to),
            identity => identity.to_owned(),
        };
        Ok(SipDial {
            room: request.room_name,
            call_id,
            trunk_id: request.sip_trunk_id,
            caller_number: Some(request.sip_number).filter(|number| !number.is_empty()),
            number: request.sip_call_to,
            identity,
            name: request.participant_name,
            metadata: request.participant_metadata,
            attributes: request.participant_attributes.into_iter().collect(),
            hide_phone_number: request.hide_phone_number,
            ringing_timeout: duration("ringing_timeout", request.ringing_timeout)?,
            max_call_duration: duration("max_call_duration", request.max_call_duration)?,
            wait_until_answered: request.wait_until_answered,
        })
    }
}

/// What svc's dial-out cannot do is refused, not silently dropped: a caller relying on DTMF
/// digits or custom headers reaching the far end must learn they will not. (Ringback tones,
/// noise cancellation, header forwarding into attributes and codec choices only change how the
/// call sounds or what it reports; those are accepted and not applied: API-DESIGN.md.)
fn unsupported(request: &proto::CreateSipParticipantRequest) -> Result<(), SipRefusal> {
    let require = proto::SipMediaEncryption::SipMediaEncryptRequire as i32;
    // Older SDKs set the request's own field, newer ones `media.encryption`.
    #[allow(deprecated)]
    let srtp_required = request.media_encryption == require
        || request.media.as_ref().and_then(|media| media.encryption) == Some(require);
    let refused = [
        (!request.dtmf.is_empty(), "dtmf (svc's dial-out does not send DTMF)"),
        (!request.headers.is_empty(), "headers (svc's dial-out sends no custom SIP headers)"),
        (request.sip_request_uri.is_some(), "sip_request_uri"),
        (request.sip_to_header.is_some(), "sip_to_header"),
        (request.sip_from_header.is_some(), "sip_from_header"),
        (!request.to_user_override.is_empty(), "to_user_override"),
        (srtp_required, "required SRTP"),
    ];
    match refused.iter().find(|(set, _)| *set) {
        Some((_, what)) => Err(SipRefusal::new("unimplemented", format!("not supported by svc's dial-out: {what}"))),
        None => Ok(()),
    }
}

fn duration(field: &str, value: Option<pbjson_types::Duration>) -> Result<Option<Duration>, SipRefusal> {
    let Some(value) = value else { return Ok(None) };
    let (Ok(seconds), Ok(nanos)) = (u64::try_from(value.seconds), u32::try_from(value.nanos)) else {
        return Err(SipRefusal::new("invalid_argument", format!("{field} is negative")));
    };
    let duration = Duration::new(seconds, nanos.min(999_999_999));
    Ok(Some(duration).filter(|duration| !duration.is_zero()))
}

impl SipDialError {
    /// The Twirp answer LiveKit gives for this failure.
    pub(crate) fn twirp(&self) -> SipRefusal {
        match self {
            SipDialError::Rejected { status, reason } => sip_status_refusal(*status, reason),
            // What a proxy answers for an INVITE nobody picks up.
            SipDialError::NoAnswer => {
                let mut refusal = sip_status_refusal(408, "no answer");
                refusal.msg = format!("{} (the ringing timeout passed)", refusal.msg);
                refusal
            }
            SipDialError::Failed(_) => SipRefusal::new("unavailable", self.to_string()),
            SipDialError::InvalidNumber(_) => SipRefusal::new("invalid_argument", self.to_string()),
            SipDialError::AtCapacity(_) => SipRefusal::new("resource_exhausted", self.to_string()),
            SipDialError::Unavailable(_) => SipRefusal::new("unavailable", self.to_string()),
        }
    }
}

/// LiveKit's answer for a final SIP status (livekit/protocol `livekit/sip.go`): the Twirp code
/// its table gives, `sip status <code>: <reason>`, and the status as metadata.
fn sip_status_refusal(status: u16, reason: &str) -> SipRefusal {
    let code = match status {
        401 | 402 | 403 | 433 | 470 | 603 | 607 | 608 => "permission_denied",
        404 | 301 | 302 | 410 | 481 | 604 => "not_found",
        407 | 428 | 436 | 437 | 438 | 494 => "unauthenticated",
        408 | 504 => "deadline_exceeded",
        409 | 412 | 482 | 483 | 500 | 501 | 502 | 503 => "failed_precondition",
        416 => "out_of_range",
        440 | 480 | 486 | 600 => "resource_exhausted",
        487 | 491 => "aborted",
        505 | 513 => "invalid_argument",
        300..=499 | 600..=699 => "invalid_argument",
        500..=599 => "failed_precondition",
        _ => "unknown",
    };
    SipRefusal {
        code,
        msg: format!("sip status {status}: {reason}"),
        meta: vec![("sip_status_code", status.to_string()), ("sip_status", reason.to_owned())],
    }
}

/// The trunk as `livekit.SIP` lists it (no password: LiveKit never shows it either).
pub(crate) fn trunk_info(trunk: &SipTrunk) -> proto::SipOutboundTrunkInfo {
    proto::SipOutboundTrunkInfo {
        sip_trunk_id: trunk.id.clone(),
        name: trunk.name.clone(),
        address: trunk.address.clone(),
        transport: proto::SipTransport::Udp as i32,
        numbers: trunk.numbers.clone(),
        auth_username: trunk.auth_username.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trunk() -> SipTrunk {
        SipTrunk {
            id: "ST_abc".into(),
            name: "svc".into(),
            address: "trunk.example.com:5060".into(),
            numbers: vec!["+15550100".into()],
            auth_username: String::new(),
        }
    }

    fn request() -> proto::CreateSipParticipantRequest {
        proto::CreateSipParticipantRequest {
            sip_trunk_id: "ST_abc".into(),
            sip_call_to: "+15550199".into(),
            room_name: "room".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_request_becomes_a_dial_with_livekits_defaults() {
        let dial = SipDial::from_livekit(request(), &trunk(), "SCL_1".into()).expect("dial");
        assert_eq!(dial.identity, "sip_+15550199");
        assert_eq!((dial.caller_number, dial.ringing_timeout, dial.max_call_duration), (None, None, None));
        assert_eq!((dial.call_id.as_str(), dial.trunk_id.as_str()), ("SCL_1", "ST_abc"));

        let mut custom = request();
        custom.participant_identity = "caller".into();
        custom.sip_number = "+15550111".into();
        custom.ringing_timeout = Some(pbjson_types::Duration { seconds: 12, nanos: 0 });
        custom.max_call_duration = Some(pbjson_types::Duration { seconds: 0, nanos: 0 });
        custom.participant_attributes.insert("team".into(), "blue".into());
        let dial = SipDial::from_livekit(custom, &trunk(), "SCL_2".into()).expect("dial");
        assert_eq!(dial.identity, "caller");
        assert_eq!(dial.caller_number.as_deref(), Some("+15550111"));
        assert_eq!(dial.ringing_timeout, Some(Duration::from_secs(12)));
        assert_eq!(dial.max_call_duration, None, "a zero duration is no limit");
        assert_eq!(dial.attributes.get("team").map(String::as_str), Some("blue"));
    }

    #[test]
    fn bad_and_unsupported_requests_are_refused_with_livekits_codes() {
        let refused = |edit: &dyn Fn(&mut proto::CreateSipParticipantRequest)| {
            let mut request = request();
            edit(&mut request);
            SipDial::from_livekit(request, &trunk(), "SCL_1".into()).expect_err("refused").code
        };
        assert_eq!(refused(&|r| r.sip_trunk_id.clear()), "invalid_argument");
        assert_eq!(refused(&|r| r.sip_trunk_id = "ST_other".into()), "not_found");
        assert_eq!(refused(&|r| r.sip_call_to.clear()), "invalid_argument");
        assert_eq!(refused(&|r| r.dtmf = "1234#".into()), "unimplemented");
        assert_eq!(refused(&|r| r.trunk = Some(proto::SipOutboundConfig::default())), "unimplemented");
        assert_eq!(refused(&|r| r.headers.insert("X-A".into(), "b".into()).map(drop).unwrap_or(())), "unimplemented");
        let negative = Some(pbjson_types::Duration { seconds: -1, nanos: 0 });
        assert_eq!(refused(&|r| r.ringing_timeout = negative), "invalid_argument");
    }

    #[test]
    fn sip_failures_map_as_livekit_maps_them() {
        let busy = SipDialError::Rejected { status: 486, reason: "Busy Here".into() }.twirp();
        assert_eq!((busy.code, busy.msg.as_str()), ("resource_exhausted", "sip status 486: Busy Here"));
        assert_eq!(busy.meta, [("sip_status_code", "486".to_owned()), ("sip_status", "Busy Here".to_owned())]);
        let code = |status| SipDialError::Rejected { status, reason: String::new() }.twirp().code;
        assert_eq!(
            [403, 404, 408, 480, 487, 488, 503, 504, 603, 699].map(code),
            [
                "permission_denied",
                "not_found",
                "deadline_exceeded",
                "resource_exhausted",
                "aborted",
                "invalid_argument",
                "failed_precondition",
                "deadline_exceeded",
                "permission_denied",
                "invalid_argument"
            ]
        );
        let no_answer = SipDialError::NoAnswer.twirp();
        assert_eq!(no_answer.code, "deadline_exceeded");
        assert_eq!(no_answer.meta[0], ("sip_status_code", "408".to_owned()));
        assert_eq!(SipDialError::AtCapacity("full".into()).twirp().code, "resource_exhausted");
        assert!(SipDialError::Failed("timeout".into()).twirp().meta.is_empty());
    }
}
