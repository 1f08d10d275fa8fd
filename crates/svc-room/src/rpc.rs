//! The RPC bookkeeping of a room's in-process participants (LiveKit's v1 packets), kept by the
//! room's actor, so that no task runs per participant or per call.
//!
//! As callee: a request for an in-process participant is acknowledged at once; a request the
//! participant cannot take (wrong version, payload too large, a method it did not register, its
//! event queue full) is answered with LiveKit's error at once; any other reaches the
//! participant as [`crate::RoomEvent::RpcRequest`], and its answer comes back as a post
//! ([`crate::LocalParticipant::respond_rpc`]). As caller: [`RpcCalls`] holds the calls in
//! flight and resolves them with the acknowledgement and the response the room routes back;
//! the caller's own future keeps the time.

use std::collections::HashMap;
use std::time::Duration;

use livekit_protocol as proto;
use tokio::sync::{mpsc, oneshot};

use crate::actor::RoomCommand;
use crate::core::Key;
use crate::local::{MAX_RPC_PAYLOAD_BYTES, RpcError, rpc_codes};
use crate::model::RpcInvocation;

/// How long a callee has to acknowledge a request (LiveKit's client value).
const RPC_ACK_TIMEOUT: Duration = Duration::from_secs(7);

/// Calls `method` on `destination` for `caller` (an in-process participant, or the server API's
/// `SERVER_KEY`) through the room's `commands`, and waits as LiveKit's clients do: the
/// acknowledgement within 7 s, then the answer within `response_timeout`.
pub(crate) async fn perform(
    commands: &mpsc::Sender<RoomCommand>,
    caller: Key,
    destination: &str,
    method: &str,
    payload: &str,
    response_timeout: Duration,
) -> Result<String, RpcError> {
    if payload.len() > MAX_RPC_PAYLOAD_BYTES {
        return Err(RpcError::new(rpc_codes::REQUEST_PAYLOAD_TOO_LARGE, "request payload too large"));
    }
    let request = proto::RpcRequest {
        id: uuid::Uuid::new_v4().to_string(),
        method: method.to_owned(),
        payload: payload.to_owned(),
        response_timeout_ms: u32::try_from(response_timeout.as_millis()).unwrap_or(u32::MAX),
        version: 1,
        compressed_payload: Vec::new(),
    };
    let (acked_tx, acked) = oneshot::channel();
    let (response_tx, mut response) = oneshot::channel();
    let call = RpcCall { caller, destination: destination.to_owned(), request, acked: acked_tx, response: response_tx };
    if commands.send(RoomCommand::PerformRpc(call)).await.is_err() {
        return Err(RpcError::new(rpc_codes::SEND_FAILED, "failed to send the request"));
    }
    match tokio::time::timeout(RPC_ACK_TIMEOUT, acked).await {
        Ok(Ok(())) => match tokio::time::timeout(response_timeout, response).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(RpcError::new(rpc_codes::RECIPIENT_DISCONNECTED, "recipient disconnected")),
            Err(_) => Err(RpcError::new(rpc_codes::RESPONSE_TIMEOUT, "response timeout")),
        },
        // The room forgot the call unacknowledged: it told why (recipient not found, send
        // failed), or the recipient left.
        Ok(Err(_)) => response
            .try_recv()
            .unwrap_or_else(|_| Err(RpcError::new(rpc_codes::RECIPIENT_DISCONNECTED, "recipient disconnected"))),
        Err(_) => Err(RpcError::new(rpc_codes::CONNECTION_TIMEOUT, "connection timeout")),
    }
}

/// The shortest time a callee is told it has to answer (LiveKit's floor).
const MIN_RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

/// A call an in-process participant makes, on its way to the room's actor.
#[derive(Debug)]
pub(crate) struct RpcCall {
    /// The caller.
    pub(crate) caller: Key,
    /// The callee's identity.
    pub(crate) destination: String,
    /// The request as it goes on the wire.
    pub(crate) request: proto::RpcRequest,
    /// Told when the callee acknowledges.
    pub(crate) acked: oneshot::Sender<()>,
    /// Told the callee's answer.
    pub(crate) response: oneshot::Sender<Result<String, RpcError>>,
}

#[derive(Debug)]
struct PendingCall {
    caller: Key,
    destination: String,
    acked: Option<oneshot::Sender<()>>,
    response: oneshot::Sender<Result<String, RpcError>>,
}

/// The calls in flight of a room's in-process participants, by request id.
#[derive(Debug, Default)]
pub(crate) struct RpcCalls {
    pending: HashMap<String, PendingCall>,
}

impl RpcCalls {
    /// Registers a call and returns who sends what to whom. Calls whose caller stopped waiting
    /// (timed out) are forgotten here, so the table holds only calls someone waits for.
    pub(crate) fn start(&mut self, call: RpcCall) -> (Key, String, proto::data_packet::Value) {
        self.pending.retain(|_, pending| !pending.response.is_closed());
        let RpcCall { caller, destination, request, acked, response } = call;
        self.pending.insert(
            request.id.clone(),
            PendingCall { caller, destination: destination.clone(), acked: Some(acked), response },
        );
        (caller, destination, proto::data_packet::Value::RpcRequest(request))
    }

    /// The call could not be sent.
    pub(crate) fn fail(&mut self, request_id: &str, error: RpcError) {
        if let Some(call) = self.pending.remove(request_id) {
            // The caller gave up waiting; nothing to tell it.
            let _ = call.response.send(Err(error));
        }
    }

    /// An acknowledgement or a response for in-process participant `to` from `from_identity`;
    /// anything else is not a caller's business.
    pub(crate) fn handle_packet(&mut self, to: Key, from_identity: &str, packet: proto::data_packet::Value) {
        match packet {
            proto::data_packet::Value::RpcAck(ack) => {
                if let Some(call) = self.pending.get_mut(&ack.request_id)
                    && call.caller == to
                    && call.destination == from_identity
                    && let Some(acked) = call.acked.take()
                {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = acked.send(());
                }
            }
            proto::data_packet::Value::RpcResponse(response) => {
                let matches = self
                    .pending
                    .get(&response.request_id)
                    .is_some_and(|call| call.caller == to && call.destination == from_identity);
                let Some(call) = matches.then(|| self.pending.remove(&response.request_id)).flatten() else {
                    return;
                };
                // The response may overtake the acknowledgement; it implies one.
                if let Some(acked) = call.acked {
                    // The caller gave up waiting; nothing to tell it.
                    let _ = acked.send(());
                }
                let result = match response.value {
                    Some(proto::rpc_response::Value::Payload(payload)) => Ok(payload),
                    Some(proto::rpc_response::Value::Error(error)) => {
                        Err(RpcError { code: error.code, message: error.message, data: error.data })
                    }
                    Some(proto::rpc_response::Value::CompressedPayload(_)) | None => {
                        Err(RpcError::new(rpc_codes::APPLICATION_ERROR, "unsupported response encoding"))
                    }
                };
                // The caller gave up waiting; nothing to tell it.
                let _ = call.response.send(result);
            }
            _ => {}
        }
    }

    /// `identity` left the room: calls to it fail now (the caller sees the recipient
    /// disconnect) rather than at their timeout.
    pub(crate) fn recipient_left(&mut self, identity: &str) {
        self.pending.retain(|_, call| call.destination != identity);
    }

    /// In-process participant `key` left: nobody waits for its calls any more.
    pub(crate) fn caller_left(&mut self, key: Key) {
        self.pending.retain(|_, call| call.caller != key);
    }
}

/// A request for an in-process participant that registered `registered` methods: the
/// invocation to hand over, or the error to answer it with at once.
pub(crate) fn admit_request(
    request: proto::RpcRequest,
    caller_identity: String,
    registered: impl FnOnce(&str) -> bool,
) -> Result<RpcInvocation, (String, RpcError)> {
    if request.version != 1 {
        return Err((request.id, RpcError::new(1404, "unsupported rpc version")));
    }
    if request.payload.len() > MAX_RPC_PAYLOAD_BYTES {
        return Err((request.id, RpcError::new(rpc_codes::REQUEST_PAYLOAD_TOO_LARGE, "request payload too large")));
    }
    if !registered(&request.method) {
        return Err((request.id, RpcError::new(rpc_codes::UNSUPPORTED_METHOD, "Method not supported at destination")));
    }
    let response_timeout = Duration::from_millis(u64::from(request.response_timeout_ms)).max(MIN_RESPONSE_TIMEOUT);
    Ok(RpcInvocation {
        request_id: request.id,
        caller_identity,
        method: request.method,
        payload: request.payload,
        response_timeout,
    })
}

/// The acknowledgement of request `request_id`.
pub(crate) fn ack(request_id: String) -> proto::data_packet::Value {
    proto::data_packet::Value::RpcAck(proto::RpcAck { request_id })
}

/// The answer to request `request_id`; a payload over LiveKit's limit becomes its error.
pub(crate) fn response(request_id: String, result: Result<String, RpcError>) -> proto::data_packet::Value {
    let result = match result {
        Ok(payload) if payload.len() > MAX_RPC_PAYLOAD_BYTES => {
            Err(RpcError::new(rpc_codes::RESPONSE_PAYLOAD_TOO_LARGE, "response payload too large"))
        }
        result => result,
    };
    let value = match result {
        Ok(payload) => proto::rpc_response::Value::Payload(payload),
        Err(error) => proto::rpc_response::Value::Error(error.to_proto()),
    };
    proto::data_packet::Value::RpcResponse(proto::RpcResponse { request_id, value: Some(value) })
}
