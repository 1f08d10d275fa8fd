//! One outbound call: the INVITE and what follows it (RFC 3261 §13 as UAC, §9 CANCEL, §15 BYE,
//! §22 authentication), and the requests the remote sends inside its dialog (§12.2.2, §14).

use std::net::SocketAddr;
use std::time::Instant;

use rsip::headers as h;
use rsip::headers::UntypedHeader as _;
use rsip::message::HasHeaders as _;
use rsip::{Header, Method, SipMessage};

use crate::auth::Challenge;
use crate::dialog::{ALLOW, Dialog, Party, RequestSpec, Shared};
use crate::message::{self, Dropped, Incoming};
use crate::model::{CallEventKind, CallId, EndReason, FailReason, Party as Side};
use crate::sdp::{self, Direction, LocalMedia};
use crate::transaction::{ClientTx, Final, Fired, ServerFired, ServerTx};

/// A response to build: status, reason phrase, extra headers, `(content type, body)`.
type Answer = (u16, &'static str, Vec<Header>, Option<(&'static str, Vec<u8>)>);

/// Most answered requests remembered per call (for retransmissions).
const MAX_SERVER_TX: usize = 16;
/// Most challenges answered for one request (a second one is only answered when `stale`).
const MAX_AUTH_ATTEMPTS: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// INVITE sent, no provisional yet.
    Calling,
    /// A provisional arrived.
    Early,
    /// Answered and ACKed.
    Up,
    /// Failed or ended and reported; only transactions run out.
    Over,
}

/// We want the INVITE to stop (local hangup or ring timeout).
#[derive(Debug, Clone, Copy)]
struct Cancel {
    reason: FailReason,
    sent: bool,
    /// §9.1: no final response 64·T1 after the CANCEL means the INVITE is over.
    give_up_at: Option<Instant>,
}

/// The ACK we sent for a 2xx, re-sent for each retransmission of that 2xx (§13.2.2.4).
#[derive(Debug)]
struct Acked {
    remote_tag: String,
    bytes: Vec<u8>,
    until: Instant,
}

/// One outbound call.
#[derive(Debug)]
pub(crate) struct Call {
    pub id: CallId,
    party: Party,
    local_tag: String,
    request_uri: String,
    /// The last CSeq we used.
    cseq: u32,
    /// CSeq and branch of the current INVITE (a challenge starts a new one).
    invite_cseq: u32,
    invite_branch: String,
    phase: Phase,
    trying_seen: bool,
    dialog: Option<Dialog>,
    media: LocalMedia,
    sdp_session: u64,
    sdp_version: u64,
    ring_deadline: Option<Instant>,
    cancel: Option<Cancel>,
    invite_auth_attempts: u32,
    bye_auth_attempts: u32,
    /// Our 200 to a re-INVITE without SDP carried an offer; its ACK carries the answer.
    offer_in_200: Option<u32>,
    clients: Vec<ClientTx>,
    servers: Vec<ServerTx>,
    acked: Option<Acked>,
}

impl Call {
    /// Creates the call and sends its INVITE.
    pub fn start(sh: &mut Shared, now: Instant, to_number: &str, from_number: &str, media: LocalMedia) -> Call {
        let call_id = format!("{}@svc", sh.token(24));
        let local_tag = sh.token(12);
        let domain = sh.domain.clone();
        let request_uri = Shared::uri(to_number, &domain);
        let party = Party {
            call_id: call_id.clone(),
            from: format!("<{}>;tag={local_tag}", Shared::uri(from_number, &domain)),
            to: format!("<{request_uri}>"),
            contact: format!("<{}>", Shared::uri(from_number, &sh.config.advertised_addr.to_string())),
            user_agent: sh.config.user_agent.clone(),
        };
        let sdp_session = u64::from(sh.rng_u32());
        let mut call = Call {
            id: CallId(call_id),
            party,
            local_tag,
            request_uri: request_uri.clone(),
            cseq: 1,
            invite_cseq: 1,
            invite_branch: String::new(),
            phase: Phase::Calling,
            trying_seen: false,
            dialog: None,
            media,
            sdp_session,
            sdp_version: 1,
            ring_deadline: Some(now + sh.config.ring_timeout),
            cancel: None,
            invite_auth_attempts: 0,
            bye_auth_attempts: 0,
            offer_in_200: None,
            clients: Vec::new(),
            servers: Vec::new(),
            acked: None,
        };
        call.send_invite(sh, now, None);
        sh.emit(&call.id, now, CallEventKind::Dialing { request_uri });
        call
    }

    /// Transactions this call holds.
    pub fn transactions(&self) -> usize {
        self.clients.len() + self.servers.len()
    }

    fn send_invite(&mut self, sh: &mut Shared, now: Instant, auth: Option<Header>) {
        let branch = sh.branch();
        let body = self.media.render(self.sdp_session, self.sdp_version, Direction::SendRecv).into_bytes();
        let bytes = self.party.request(RequestSpec {
            method: Method::Invite,
            uri: &self.request_uri,
            via: sh.via(&branch),
            cseq: self.invite_cseq,
            to: &self.party.to,
            routes: &[],
            extra: auth.into_iter().collect(),
            body: Some(("application/sdp", body)),
        });
        self.invite_branch = branch.clone();
        self.clients.push(ClientTx::new(
            now,
            Method::Invite,
            self.invite_cseq,
            branch,
            bytes.clone(),
            sh.config.timers,
        ));
        sh.send(bytes);
    }

    /// Builds the ACK for a non-2xx final (§17.1.1.3): the INVITE's Request-URI, Via and
    /// CSeq number, the response's To.
    fn non_2xx_ack(&self, sh: &Shared, response: &SipMessage) -> Vec<u8> {
        let to = response
            .headers()
            .iter()
            .find_map(|h| match h {
                Header::To(to) => Some(to.value().to_owned()),
                _ => None,
            })
            .unwrap_or_else(|| self.party.to.clone());
        self.party.request(RequestSpec {
            method: Method::Ack,
            uri: &self.request_uri,
            via: sh.via(&self.invite_branch),
            cseq: self.invite_cseq,
            to: &to,
            routes: &[],
            extra: Vec::new(),
            body: None,
        })
    }

    /// A request inside `dialog` with a new transaction (BYE) or none (ACK for a 2xx).
    fn dialog_request(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        dialog: &Dialog,
        method: Method,
        cseq: u32,
        extra: Vec<Header>,
    ) -> Vec<u8> {
        let branch = sh.branch();
        let (uri, routes) = dialog.routing();
        let to = format!("{};tag={}", self.party.to, dialog.remote_tag);
        let bytes = self.party.request(RequestSpec {
            method,
            uri: &uri,
            via: sh.via(&branch),
            cseq,
            to: &to,
            routes: &routes,
            extra,
            body: None,
        });
        if method != Method::Ack {
            self.clients.push(ClientTx::new(now, method, cseq, branch, bytes.clone(), sh.config.timers));
        }
        sh.send(bytes.clone());
        bytes
    }

    fn send_bye(&mut self, sh: &mut Shared, now: Instant, dialog: &Dialog, auth: Option<Header>) {
        self.cseq += 1;
        let cseq = self.cseq;
        self.dialog_request(sh, now, dialog, Method::Bye, cseq, auth.into_iter().collect());
    }

    /// Sends the CANCEL once the INVITE has a provisional response (§9.1: not before).
    fn try_cancel(&mut self, sh: &mut Shared, now: Instant) {
        let Some(cancel) = self.cancel.as_mut() else { return };
        let proceeding = self
            .clients
            .iter()
            .any(|tx| tx.method == Method::Invite && tx.cseq == self.invite_cseq && tx.is_proceeding());
        if cancel.sent || !proceeding {
            return;
        }
        cancel.sent = true;
        cancel.give_up_at = Some(now + sh.config.timers.transaction_timeout());
        let bytes = self.party.request(RequestSpec {
            method: Method::Cancel,
            uri: &self.request_uri,
            via: sh.via(&self.invite_branch),
            cseq: self.invite_cseq,
            to: &self.party.to,
            routes: &[],
            extra: Vec::new(),
            body: None,
        });
        let tx = ClientTx::new(
            now,
            Method::Cancel,
            self.invite_cseq,
            self.invite_branch.clone(),
            bytes.clone(),
            sh.config.timers,
        );
        self.clients.push(tx);
        sh.send(bytes);
    }

    fn fail(&mut self, sh: &mut Shared, now: Instant, status: Option<u16>, reason_phrase: String, reason: FailReason) {
        if self.phase == Phase::Over {
            return;
        }
        self.phase = Phase::Over;
        self.ring_deadline = None;
        if self.clients.iter().any(|tx| tx.method == Method::Invite && tx.is_pending()) {
            // An INVITE still open must not outlive the call (a BYE on the early dialog):
            // CANCEL it, and give it up 64·T1 later if nothing comes.
            self.cancel.get_or_insert(Cancel { reason, sent: false, give_up_at: None });
            self.try_cancel(sh, now);
        } else {
            self.cancel = None;
        }
        sh.emit(&self.id, now, CallEventKind::Failed { status, reason_phrase, reason });
    }

    /// Local hangup: CANCEL before the answer, BYE after it.
    pub fn hangup(&mut self, sh: &mut Shared, now: Instant) {
        match self.phase {
            Phase::Calling | Phase::Early => {
                if self.cancel.is_none() {
                    self.cancel = Some(Cancel { reason: FailReason::Canceled, sent: false, give_up_at: None });
                }
                self.try_cancel(sh, now);
            }
            Phase::Up => {
                if let Some(dialog) = self.dialog.clone() {
                    self.send_bye(sh, now, &dialog, None);
                }
                self.phase = Phase::Over;
                sh.emit(&self.id, now, CallEventKind::Ended { by: Side::Local, reason: EndReason::Hangup });
            }
            Phase::Over => {}
        }
    }

    /// A response whose top Via branch is `branch` and CSeq `(cseq, method)`.
    pub fn on_response(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        incoming: &Incoming,
        branch: &str,
        cseq: u32,
        method: Method,
    ) -> Result<(), Dropped> {
        let SipMessage::Response(response) = &incoming.message else { return Err(Dropped::Stray) };
        let status = response.status_code.code();
        let Some(index) = self.clients.iter().position(|tx| tx.branch == branch && tx.method == method) else {
            // A 2xx retransmitted after its transaction ended still carries the INVITE's branch.
            let ours = branch == self.invite_branch && cseq == self.invite_cseq;
            if method == Method::Invite && (200..300).contains(&status) && ours {
                self.on_late_2xx(sh, now, &incoming.message);
                return Ok(());
            }
            return Err(Dropped::Stray);
        };
        if status < 200 {
            self.clients[index].on_provisional();
            if method == Method::Invite && cseq == self.invite_cseq {
                self.on_invite_provisional(sh, now, &incoming.message, status);
            }
            return Ok(());
        }
        let is_invite = method == Method::Invite;
        let ack = if is_invite && status >= 300 { self.non_2xx_ack(sh, &incoming.message) } else { Vec::new() };
        match self.clients[index].on_final(now, status, || ack) {
            Final::New => {
                if let Some(ack) = self.clients[index].ack().map(<[u8]>::to_vec) {
                    sh.send(ack);
                }
                match method {
                    Method::Invite if cseq == self.invite_cseq => {
                        self.on_invite_final(sh, now, incoming, status);
                    }
                    Method::Bye if status == 401 || status == 407 => self.retry_bye(sh, now, &incoming.message, status),
                    // A 200 to CANCEL means the 487 is coming; a 481 that the final crossed it.
                    // Either way the INVITE's own final response decides.
                    _ => {}
                }
            }
            Final::ResendAck(ack) => sh.send(ack),
            Final::Absorbed => {
                if is_invite && (200..300).contains(&status) {
                    self.on_late_2xx(sh, now, &incoming.message);
                }
            }
        }
        Ok(())
    }

    fn on_invite_provisional(&mut self, sh: &mut Shared, now: Instant, response: &SipMessage, status: u16) {
        match self.phase {
            Phase::Calling => self.phase = Phase::Early,
            Phase::Early => {}
            // Over with the INVITE still open: the CANCEL may only go now.
            Phase::Over => return self.try_cancel(sh, now),
            Phase::Up => return,
        }
        if status == 100 {
            if !self.trying_seen {
                self.trying_seen = true;
                sh.emit(&self.id, now, CallEventKind::Trying);
            }
        } else {
            if self.dialog.is_none() {
                self.dialog = Dialog::from_response(response, &self.request_uri);
            }
            let early_media = (!response.body().is_empty())
                .then(|| sdp::parse(response.body()).ok()?.negotiated(&self.media))
                .flatten();
            sh.emit(&self.id, now, CallEventKind::Ringing { status, early_media });
        }
        self.try_cancel(sh, now);
    }

    fn on_invite_final(&mut self, sh: &mut Shared, now: Instant, incoming: &Incoming, status: u16) {
        let response = &incoming.message;
        if (200..300).contains(&status) {
            self.on_first_2xx(sh, now, response);
            return;
        }
        if self.phase == Phase::Over {
            return;
        }
        if (status == 401 || status == 407) && self.cancel.is_none() && self.retry_invite(sh, now, response, status) {
            return;
        }
        let reason = match self.cancel {
            Some(cancel) if status == 487 => cancel.reason,
            _ => FailReason::from_status(status),
        };
        self.fail(sh, now, Some(status), incoming.reason_phrase.clone(), reason);
    }

    /// Answers a challenge (§22.2) with a new INVITE: CSeq + 1, new branch, same Call-ID and
    /// From tag. Returns false when it cannot (no credentials, unsupported, or tried already).
    fn retry_invite(&mut self, sh: &mut Shared, now: Instant, response: &SipMessage, status: u16) -> bool {
        let Some(header) = self.answer_challenge(
            sh,
            response,
            status,
            Method::Invite,
            &self.request_uri.clone(),
            self.invite_auth_attempts,
        ) else {
            return false;
        };
        self.invite_auth_attempts += 1;
        sh.emit(&self.id, now, CallEventKind::AuthChallenge { status });
        self.cseq += 1;
        self.invite_cseq = self.cseq;
        self.dialog = None;
        self.phase = Phase::Calling;
        self.send_invite(sh, now, Some(header));
        true
    }

    fn retry_bye(&mut self, sh: &mut Shared, now: Instant, response: &SipMessage, status: u16) {
        let Some(dialog) = self.dialog.clone() else { return };
        let (uri, _) = dialog.routing();
        if let Some(header) = self.answer_challenge(sh, response, status, Method::Bye, &uri, self.bye_auth_attempts) {
            self.bye_auth_attempts += 1;
            self.send_bye(sh, now, &dialog, Some(header));
        }
    }

    /// The Authorization (401) or Proxy-Authorization (407) header answering the response's
    /// challenge, if we may answer it: credentials configured, MD5, and either the first try
    /// or a `stale` nonce.
    fn answer_challenge(
        &self,
        sh: &mut Shared,
        response: &SipMessage,
        status: u16,
        method: Method,
        uri: &str,
        attempts: u32,
    ) -> Option<Header> {
        let credentials = sh.config.credentials.clone()?;
        let challenge = response.headers().iter().find_map(|h| match (h, status) {
            (Header::WwwAuthenticate(value), 401) => Challenge::parse(value.value()),
            (Header::ProxyAuthenticate(value), 407) => Challenge::parse(value.value()),
            _ => None,
        })?;
        let allowed = attempts == 0 || (challenge.stale && attempts < MAX_AUTH_ATTEMPTS);
        if !challenge.is_supported() || !allowed {
            return None;
        }
        let cnonce = sh.token(16);
        let value = challenge.authorization(&credentials, &method.to_string(), uri, &cnonce);
        Some(if status == 401 {
            Header::Authorization(h::Authorization::new(value))
        } else {
            Header::ProxyAuthorization(h::ProxyAuthorization::new(value))
        })
    }

    fn on_first_2xx(&mut self, sh: &mut Shared, now: Instant, response: &SipMessage) {
        let Some(dialog) = Dialog::from_response(response, &self.request_uri) else {
            // §12.1.2 needs the To tag to form the dialog; without it we cannot ACK or BYE.
            self.fail(sh, now, Some(200), "2xx without a To tag".into(), FailReason::IncompatibleMedia);
            return;
        };
        let ack = self.dialog_request(sh, now, &dialog, Method::Ack, self.invite_cseq, Vec::new());
        self.acked = Some(Acked {
            remote_tag: dialog.remote_tag.clone(),
            bytes: ack,
            until: now + sh.config.timers.transaction_timeout(),
        });
        self.dialog = Some(dialog.clone());
        if let Some(cancel) = self.cancel {
            // The answer crossed our CANCEL (or a hangup came before any provisional):
            // complete the handshake and end the dialog at once (§15).
            self.send_bye(sh, now, &dialog, None);
            self.fail(sh, now, None, "answered after cancel; hung up".into(), cancel.reason);
            return;
        }
        if self.phase == Phase::Over {
            self.send_bye(sh, now, &dialog, None);
            return;
        }
        match sdp::parse(response.body()).map(|remote| remote.negotiated(&self.media)) {
            Ok(Some(remote)) => {
                self.phase = Phase::Up;
                self.ring_deadline = None;
                sh.emit(&self.id, now, CallEventKind::Answered { remote });
            }
            outcome => {
                self.send_bye(sh, now, &dialog, None);
                let why = match outcome {
                    Ok(_) => "answer declined the audio stream or has no codec we offered".to_owned(),
                    Err(error) => format!("answer without usable SDP: {error}"),
                };
                self.fail(sh, now, Some(200), why, FailReason::IncompatibleMedia);
            }
        }
    }

    /// A 2xx after the INVITE transaction ended: a retransmission (re-send the ACK) or the
    /// answer of another fork (ACK it and hang it up at once, §13.2.2.4).
    fn on_late_2xx(&mut self, sh: &mut Shared, now: Instant, response: &SipMessage) {
        let tag = message::to_tag(response);
        if let Some(acked) = &self.acked
            && tag.as_deref() == Some(acked.remote_tag.as_str())
        {
            let bytes = acked.bytes.clone();
            sh.send(bytes);
            return;
        }
        if matches!(self.phase, Phase::Calling | Phase::Early) && self.acked.is_none() {
            // No answer yet and its transaction gone: it is the answer.
            self.on_first_2xx(sh, now, response);
            return;
        }
        if let Some(dialog) = self.dialog.clone()
            && self.phase == Phase::Up
            && tag.as_deref() == Some(dialog.remote_tag.as_str())
        {
            // A retransmission later than 64·T1: ACK it again from the dialog, never re-answer.
            self.dialog_request(sh, now, &dialog, Method::Ack, self.invite_cseq, Vec::new());
            return;
        }
        if let Some(fork) = Dialog::from_response(response, &self.request_uri) {
            self.dialog_request(sh, now, &fork, Method::Ack, self.invite_cseq, Vec::new());
            self.send_bye(sh, now, &fork, None);
        }
    }

    /// A request with this call's Call-ID, from `source`.
    pub fn on_request(
        &mut self,
        sh: &mut Shared,
        now: Instant,
        source: SocketAddr,
        incoming: &Incoming,
        may_remember: bool,
    ) -> Result<(), Dropped> {
        let SipMessage::Request(request) = &incoming.message else { return Err(Dropped::Stray) };
        let message = &incoming.message;
        let cseq = message::cseq_number(message).ok_or_else(|| Dropped::Malformed("CSeq".into()))?;
        let branch = message::top_branch(message).map(|(b, _)| b).unwrap_or_default();
        if request.method == Method::Ack {
            self.on_ack(sh, now, cseq, message);
            return Ok(());
        }
        if let Some(tx) =
            self.servers.iter().find(|tx| !branch.is_empty() && tx.branch == branch && tx.method == request.method)
        {
            // A retransmission: answer from the cache (§17.2.1, §17.2.2).
            sh.send_to(source, tx.response.clone());
            return Ok(());
        }
        let in_dialog =
            self.dialog.as_ref().is_some_and(|d| message::from_tag(message).as_deref() == Some(d.remote_tag.as_str()))
                && message::to_tag(message).as_deref() == Some(self.local_tag.as_str());
        let (status, reason, extra, body) = if !in_dialog || self.phase == Phase::Over && request.method != Method::Bye
        {
            (481, "Call/Transaction Does Not Exist", Vec::new(), None)
        } else if incoming.unknown_method.is_some() {
            (501, "Not Implemented", vec![allow()], None)
        } else if self.dialog.as_ref().and_then(|d| d.remote_cseq).is_some_and(|last| cseq <= last) {
            (500, "CSeq Out Of Order", Vec::new(), None)
        } else {
            if let Some(dialog) = self.dialog.as_mut() {
                dialog.remote_cseq = Some(cseq);
            }
            self.in_dialog_request(sh, now, message, request.method)
        };
        let bytes = message::response(message, status, reason, None, extra, body);
        sh.send_to(source, bytes.clone());
        if status >= 200 && !branch.is_empty() && may_remember {
            if self.servers.len() >= MAX_SERVER_TX {
                self.servers.remove(0);
            }
            let method = request.method;
            self.servers.push(ServerTx::new(now, method, cseq, branch, status, bytes, source, sh.config.timers));
        }
        Ok(())
    }

    fn in_dialog_request(&mut self, sh: &mut Shared, now: Instant, request: &SipMessage, method: Method) -> Answer {
        match method {
            Method::Bye => {
                match self.phase {
                    Phase::Up => {
                        self.phase = Phase::Over;
                        sh.emit(&self.id, now, CallEventKind::Ended { by: Side::Remote, reason: EndReason::Hangup });
                    }
                    Phase::Calling | Phase::Early => {
                        // A BYE on the early dialog ends the attempt; the INVITE's final (487)
                        // may still come and is absorbed by its transaction.
                        self.fail(sh, now, None, "BYE before the answer".into(), FailReason::Rejected);
                    }
                    Phase::Over => {}
                }
                (200, "OK", Vec::new(), None)
            }
            // We never leave a server INVITE transaction open to cancel: finals go out at once.
            Method::Cancel => (481, "Call/Transaction Does Not Exist", Vec::new(), None),
            Method::Invite if self.phase == Phase::Up => self.on_reinvite(sh, now, request),
            Method::Invite => (491, "Request Pending", Vec::new(), None),
            Method::Options => (200, "OK", vec![allow(), Header::Accept(h::Accept::new("application/sdp"))], None),
            Method::Info => {
                let body = request.body();
                match message::content_type(request).as_deref() {
                    _ if body.is_empty() => (200, "OK", Vec::new(), None),
                    Some("application/dtmf-relay") | Some("application/dtmf") => {
                        if let Some((digit, duration_ms)) = parse_dtmf(body) {
                            sh.emit(&self.id, now, CallEventKind::Dtmf { digit, duration_ms });
                            (200, "OK", Vec::new(), None)
                        } else {
                            (400, "Bad DTMF Body", Vec::new(), None)
                        }
                    }
                    _ => (
                        415,
                        "Unsupported Media Type",
                        vec![Header::Accept(h::Accept::new("application/dtmf-relay"))],
                        None,
                    ),
                }
            }
            _ => (405, "Method Not Allowed", vec![allow()], None),
        }
    }

    /// A re-INVITE in a confirmed dialog: a target refresh and a new offer (or a request for
    /// ours). Answered with our media, `o=` version + 1, direction mirrored (hold).
    fn on_reinvite(&mut self, sh: &mut Shared, now: Instant, request: &SipMessage) -> Answer {
        let (media, direction) = if request.body().is_empty() {
            self.offer_in_200 = message::cseq(request).map(|(cseq, _)| cseq);
            (self.media.clone(), Direction::SendRecv)
        } else {
            let Ok(offer) = sdp::parse(request.body()) else {
                return (488, "Not Acceptable Here", Vec::new(), None);
            };
            let (Some(answer), Some(remote)) = (self.media.answer_to(&offer), offer.clone().negotiated(&self.media))
            else {
                return (488, "Not Acceptable Here", Vec::new(), None);
            };
            sh.emit(&self.id, now, CallEventKind::RemoteMediaChanged { remote });
            (answer, offer.direction.answer())
        };
        if let Some(dialog) = self.dialog.as_mut() {
            dialog.refresh(request);
        }
        self.sdp_version += 1;
        let body = media.render(self.sdp_session, self.sdp_version, direction).into_bytes();
        let contact = Header::Contact(h::Contact::new(self.party.contact.clone()));
        (200, "OK", vec![contact, allow()], Some(("application/sdp", body)))
    }

    fn on_ack(&mut self, sh: &mut Shared, now: Instant, cseq: u32, request: &SipMessage) {
        let Some(tx) =
            self.servers.iter_mut().find(|tx| tx.method == Method::Invite && tx.cseq == cseq && tx.awaiting_ack())
        else {
            return;
        };
        tx.on_ack(now);
        if self.offer_in_200 == Some(cseq) {
            self.offer_in_200 = None;
            if let Some(remote) = sdp::parse(request.body()).ok().and_then(|remote| remote.negotiated(&self.media)) {
                sh.emit(&self.id, now, CallEventKind::RemoteMediaChanged { remote });
            }
        }
    }

    /// Next instant [`Call::on_timeout`] wants.
    pub fn deadline(&self) -> Option<Instant> {
        let clients = self.clients.iter().filter_map(ClientTx::deadline);
        let servers = self.servers.iter().map(ServerTx::deadline);
        let own = [self.ring_deadline, self.cancel.and_then(|c| c.give_up_at), self.acked.as_ref().map(|a| a.until)];
        clients.chain(servers).chain(own.into_iter().flatten()).min()
    }

    /// Runs every timer due at `now`.
    pub fn on_timeout(&mut self, sh: &mut Shared, now: Instant) {
        if self.ring_deadline.is_some_and(|at| at <= now) {
            self.ring_deadline = None;
            if matches!(self.phase, Phase::Calling | Phase::Early) && self.cancel.is_none() {
                self.cancel = Some(Cancel { reason: FailReason::NoAnswer, sent: false, give_up_at: None });
                self.try_cancel(sh, now);
            }
        }
        if let Some(cancel) = self.cancel
            && cancel.give_up_at.is_some_and(|at| at <= now)
        {
            for tx in self.clients.iter_mut().filter(|tx| tx.method == Method::Invite && tx.is_pending()) {
                tx.abandon();
            }
            self.cancel = None;
            self.fail(sh, now, None, "no final response after CANCEL".into(), cancel.reason);
        }
        if self.acked.as_ref().is_some_and(|a| a.until <= now) {
            self.acked = None;
        }
        let mut timed_out = Vec::new();
        for tx in &mut self.clients {
            match tx.on_timeout(now) {
                Some(Fired::Retransmit(bytes)) => sh.send(bytes),
                Some(Fired::TimedOut) => timed_out.push((tx.method, tx.cseq)),
                None => {}
            }
        }
        for (method, cseq) in timed_out {
            if method == Method::Invite && cseq == self.invite_cseq {
                let reason = self.cancel.map_or(FailReason::Timeout, |c| c.reason);
                self.fail(sh, now, None, "no response to INVITE (Timer B)".into(), reason);
            }
        }
        let mut ack_timeouts = false;
        for tx in &mut self.servers {
            match tx.on_timeout(now) {
                Some(ServerFired::Retransmit(bytes, to)) => sh.send_to(to, bytes),
                Some(ServerFired::AckTimeout { success }) => ack_timeouts |= success,
                None => {}
            }
        }
        if ack_timeouts && self.phase == Phase::Up {
            if let Some(dialog) = self.dialog.clone() {
                self.send_bye(sh, now, &dialog, None);
            }
            self.phase = Phase::Over;
            sh.emit(&self.id, now, CallEventKind::Ended { by: Side::Local, reason: EndReason::AckTimeout });
        }
        self.clients.retain(|tx| !tx.is_terminated());
        self.servers.retain(|tx| !tx.is_expired(now));
    }

    /// Some client transaction still waits for a final response.
    pub fn has_pending_requests(&self) -> bool {
        self.clients.iter().any(ClientTx::is_pending)
    }

    /// Reported, and nothing left to retransmit or absorb: the core may forget the call.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Over && self.clients.is_empty() && self.servers.is_empty() && self.acked.is_none()
    }
}

fn allow() -> Header {
    Header::Allow(h::Allow::new(ALLOW))
}

/// `application/dtmf-relay` (`Signal=5\r\nDuration=160`) or `application/dtmf` (`5`).
fn parse_dtmf(body: &[u8]) -> Option<(char, Option<u32>)> {
    let text = std::str::from_utf8(body).ok()?;
    let mut signal = None;
    let mut duration = None;
    for line in text.lines().take(16) {
        match line.split_once('=') {
            Some((key, value)) if key.trim().eq_ignore_ascii_case("signal") => signal = Some(value.trim()),
            Some((key, value)) if key.trim().eq_ignore_ascii_case("duration") => duration = value.trim().parse().ok(),
            None if signal.is_none() && !line.trim().is_empty() => signal = Some(line.trim()),
            _ => {}
        }
    }
    let signal = signal?;
    let digit = match signal {
        "10" => '*',
        "11" => '#',
        "16" => 'F',
        s if s.len() == 1 => s.chars().next()?.to_ascii_uppercase(),
        _ => return None,
    };
    matches!(digit, '0'..='9' | '*' | '#' | 'A'..='D' | 'F').then_some((digit, duration))
}

#[cfg(test)]
mod tests {
    use super::parse_dtmf;

    #[test]
    fn dtmf_bodies() {
        assert_eq!(parse_dtmf(b"Signal=5\r\nDuration=160\r\n"), Some(('5', Some(160))));
        assert_eq!(parse_dtmf(b"Signal= #\r\n"), Some(('#', None)));
        assert_eq!(parse_dtmf(b"Signal=11"), Some(('#', None)));
        assert_eq!(parse_dtmf(b"a"), Some(('A', None)));
        assert_eq!(parse_dtmf(b"Signal=x"), None);
        assert_eq!(parse_dtmf(b"Signal=55"), None);
    }
}
