//! The REST error envelope and the one table of typed error codes.
//!
//! Every non-2xx response except the authentication layer's 401 carries
//! `{"error": {"type", "code"?, "message", "errors"?}}`. Each typed code has exactly one type and
//! one HTTP status, fixed in [`ErrorCode::TABLE`]; a snapshot test pins the table.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The envelope's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorType {
    /// A rejection the caller can act on.
    ApiError,
    /// The request body, query or path failed schema validation; see `errors`.
    ValidationError,
    /// Something broke on the server side; the request may be retried.
    InternalError,
}

macro_rules! error_codes {
    ($( $(#[doc = $doc:literal])* $variant:ident = ($wire:literal, $status:literal, $kind:ident); )*) => {
        /// A machine-readable rejection code. Clients match on it, never on the message.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum ErrorCode {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl ErrorCode {
            /// Every code with its wire string, HTTP status and envelope type.
            pub const TABLE: &'static [(ErrorCode, &'static str, u16, ErrorType)] = &[
                $( (ErrorCode::$variant, $wire, $status, ErrorType::$kind), )*
            ];

            /// The wire slug.
            pub const fn as_str(self) -> &'static str {
                match self { $( ErrorCode::$variant => $wire, )* }
            }

            /// The HTTP status this code is always sent with.
            pub const fn http_status(self) -> u16 {
                match self { $( ErrorCode::$variant => $status, )* }
            }

            /// The envelope type this code is always sent with.
            pub const fn error_type(self) -> ErrorType {
                match self { $( ErrorCode::$variant => ErrorType::$kind, )* }
            }
        }
    };
}

error_codes! {
    /// SDK version below the supported floor.
    SdkUnsupported = ("sdk_unsupported", 400, ApiError);
    /// Reserved: current servers never send it.
    VersionMismatch = ("version_mismatch", 400, ApiError);
    /// The workspace's free voice grant is spent.
    FreeMinutesExhausted = ("free_minutes_exhausted", 402, ApiError);
    /// The workspace's prepaid credit cannot cover a session.
    InsufficientCredits = ("insufficient_credits", 402, ApiError);
    /// The workspace's monthly quota is used up.
    QuotaExceeded = ("quota_exceeded", 429, ApiError);
    /// The workspace's plan does not include the resolved provider.
    ProviderNotEntitled = ("provider_not_entitled", 403, ApiError);
    /// Tool spec problems; the message lists every one.
    InvalidToolConfig = ("invalid_tool_config", 422, ApiError);
    /// A catalog name that does not resolve in this workspace.
    UnknownAgent = ("unknown_agent", 422, ApiError);
    /// A catalog agent whose stored configuration could not be loaded.
    AgentConfigUnavailable = ("agent_config_unavailable", 422, ApiError);
    /// A catalog greeting over 4000 chars after substitution.
    GreetingTooLong = ("greeting_too_long", 422, ApiError);
    /// Unknown, unavailable or mismatched model.
    ModelUnavailable = ("model_unavailable", 422, ApiError);
    /// Instructions over 131,072 chars.
    InstructionsTooLong = ("instructions_too_long", 422, ApiError);
    /// Tools declared with provider_b_live delegation `client` or `svc`.
    DelegationToolsUnsupported = ("delegation_tools_unsupported", 422, ApiError);
    /// Delegation `svc` without `resources:read`.
    SvcDelegationScopeRequired = ("svc_delegation_scope_required", 403, ApiError);
    /// The workspace has its maximum number of live sessions.
    ConcurrentSessionLimit = ("concurrent_session_limit", 429, ApiError);
    /// A knob of the unselected turn detector.
    TurnDetectionKnobMismatch = ("turn_detection_knob_mismatch", 422, ApiError);
    /// A turn detector the provider cannot run.
    TurnDetectionUnsupported = ("turn_detection_unsupported", 422, ApiError);
    /// `thinking_level` on a model that takes none.
    ThinkingLevelUnsupported = ("thinking_level_unsupported", 422, ApiError);
    /// Dial with a minted end-user token.
    DialRequiresApiKey = ("dial_requires_api_key", 403, ApiError);
    /// Phone calls are disabled for the workspace.
    PhoneCallsDisabled = ("phone_calls_disabled", 403, ApiError);
    /// The workspace's dial minute limit is reached.
    MinuteLimitExceeded = ("minute_limit_exceeded", 403, ApiError);
    /// The number is on the workspace's do-not-call list.
    DoNotCall = ("do_not_call", 403, ApiError);
    /// `caller_number` is not an ACTIVE number of the workspace's pool.
    CallerNumberNotAvailable = ("caller_number_not_available", 400, ApiError);
    /// Dial into an unknown session.
    SessionNotFound = ("session_not_found", 404, ApiError);
    /// Dial into a session that is no longer live.
    SessionNotLive = ("session_not_live", 409, ApiError);
    /// The session already has a dial-out.
    SessionAlreadyDialed = ("session_already_dialed", 409, ApiError);
    /// The consent check could not run; retry.
    ConsentCheckUnavailable = ("consent_check_unavailable", 503, ApiError);
}

/// One segment of a `loc` path: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum LocSegment {
    /// An object key.
    Key(String),
    /// An array index.
    Index(u64),
}

/// A path into the request (`["body", "agent", "tools", 3, "name"]`).
pub type Loc = Vec<LocSegment>;

/// One validation problem. `msg` describes the rule; payload values are never echoed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ValidationIssue {
    /// Where the problem is: object keys (strings) and array indexes (integers) from the root of
    /// the request (`body`, `query`, `path` or `header`).
    #[schema(value_type = Vec<LocSegment>)]
    pub loc: Loc,
    /// A short machine slug (`missing`, `string_too_long`, `extra_forbidden`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Human-readable rule that failed.
    pub msg: String,
}

/// The error object inside the envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Error category.
    #[serde(rename = "type")]
    pub kind: ErrorType,
    /// Typed rejection code; absent on untyped errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    /// Human-readable text, not part of the contract.
    pub message: String,
    /// Validation problems, on `validation_error` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<ValidationIssue>>,
    /// Structured extras of a code (e.g. `limit` and `active` on `concurrent_session_limit`).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub extras: serde_json::Map<String, serde_json::Value>,
}

/// `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorEnvelope {
    /// The error.
    pub error: ErrorBody,
}

/// The authentication layer's 401 body, `{"detail": "..."}` (the spec's one exception to the envelope).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuthErrorBody {
    /// What was wrong with the credential.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_strings_match_serde_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for (code, wire, status, kind) in ErrorCode::TABLE {
            assert!(seen.insert(*wire));
            assert_eq!(serde_json::to_value(code).expect("serializes"), serde_json::json!(wire));
            assert_eq!(code.as_str(), *wire);
            assert_eq!(code.http_status(), *status);
            assert_eq!(code.error_type(), *kind);
        }
    }

    /// The table is part of the public contract: changing a row must be a deliberate edit here.
    #[test]
    fn code_table_snapshot() {
        let rendered: Vec<String> =
            ErrorCode::TABLE.iter().map(|(_, wire, status, _)| format!("{status} {wire}")).collect();
        assert_eq!(
            rendered.join("\n"),
            "400 sdk_unsupported
400 version_mismatch
402 free_minutes_exhausted
402 insufficient_credits
429 quota_exceeded
403 provider_not_entitled
422 invalid_tool_config
422 unknown_agent
422 agent_config_unavailable
422 greeting_too_long
422 model_unavailable
422 instructions_too_long
422 delegation_tools_unsupported
403 svc_delegation_scope_required
429 concurrent_session_limit
422 turn_detection_knob_mismatch
422 turn_detection_unsupported
422 thinking_level_unsupported
403 dial_requires_api_key
403 phone_calls_disabled
403 minute_limit_exceeded
403 do_not_call
400 caller_number_not_available
404 session_not_found
409 session_not_live
409 session_already_dialed
503 consent_check_unavailable"
        );
    }

    #[test]
    fn envelope_omits_absent_fields_and_flattens_extras() {
        let mut extras = serde_json::Map::new();
        extras.insert("limit".into(), 2.into());
        extras.insert("active".into(), 2.into());
        let envelope = ErrorEnvelope {
            error: ErrorBody {
                kind: ErrorType::ApiError,
                code: Some(ErrorCode::ConcurrentSessionLimit),
                message: "too many".into(),
                errors: None,
                extras,
            },
        };
        assert_eq!(
            serde_json::to_value(&envelope).expect("serializes"),
            serde_json::json!({"error": {"type": "api_error", "code": "concurrent_session_limit",
                "message": "too many", "limit": 2, "active": 2}})
        );
    }
}
