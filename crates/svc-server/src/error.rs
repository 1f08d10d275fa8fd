//! `ApiError`: the one error type of the HTTP edge, rendered into the spec's envelope.
//!
//! Typed rejections carry an [`ErrorCode`] whose status and type come from the code table in
//! `svc-wire`; untyped ones carry a status and message. Authentication failures are the spec's
//! exception: 401 with `{"detail": …}`. Internal errors are logged once, here, and never leak
//! their cause to the client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use svc_domain::Scope;
use svc_wire::error::AuthErrorBody;
use svc_wire::{ErrorBody, ErrorCode, ErrorEnvelope, ErrorType, ValidationIssue};

/// An error response of the API.
#[derive(Debug)]
pub enum ApiError {
    /// 401 from the authentication layer: `{"detail": …}`.
    Unauthorized(String),
    /// A typed rejection.
    Coded {
        /// The code (fixes status and type).
        code: ErrorCode,
        /// Human-readable text.
        message: String,
        /// Structured extras of the code.
        extras: serde_json::Map<String, serde_json::Value>,
    },
    /// An untyped `api_error`.
    Api {
        /// Status.
        status: StatusCode,
        /// Human-readable text.
        message: String,
    },
    /// 422 `validation_error` with every problem found.
    Validation(Vec<ValidationIssue>),
    /// 500 `internal_error`; the cause is logged, not sent.
    Internal(anyhow::Error),
}

impl ApiError {
    /// 403 naming the missing scopes, in the one format the spec fixes.
    pub fn missing_scopes(missing: &[Scope]) -> ApiError {
        let list: Vec<&str> = missing.iter().map(|scope| scope.as_str()).collect();
        ApiError::forbidden(format!("API key missing required scopes: {}", list.join(", ")))
    }

    /// 403 when a credential's scopes cannot be resolved (checks fail closed).
    pub fn missing_scope_information() -> ApiError {
        ApiError::forbidden("Missing scope information")
    }

    /// Untyped 403.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::Api { status: StatusCode::FORBIDDEN, message: message.into() }
    }

    /// Untyped 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::Api { status: StatusCode::NOT_FOUND, message: message.into() }
    }

    /// Untyped 400.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::Api { status: StatusCode::BAD_REQUEST, message: message.into() }
    }

    /// Untyped error with any status.
    pub fn status(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError::Api { status, message: message.into() }
    }

    /// A typed rejection without extras.
    pub fn code(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError::Coded { code, message: message.into(), extras: serde_json::Map::new() }
    }

    /// 422 with a single problem.
    pub fn invalid(loc: svc_wire::Loc, kind: &str, msg: impl Into<String>) -> ApiError {
        ApiError::Validation(vec![ValidationIssue { loc, kind: kind.to_owned(), msg: msg.into() }])
    }

    /// The status this error is sent with.
    pub fn status_code(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Coded { code, .. } => {
                StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
            ApiError::Api { status, .. } => *status,
            ApiError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<svc_store::StoreError> for ApiError {
    fn from(error: svc_store::StoreError) -> Self {
        match error {
            // Not the request's fault and not a bug: say so, so clients retry.
            svc_store::StoreError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "database unavailable");
                ApiError::status(StatusCode::SERVICE_UNAVAILABLE, "The database is unavailable; retry with backoff")
            }
            other => ApiError::Internal(other.into()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status_code();
        let body = match self {
            ApiError::Unauthorized(detail) => return (status, axum::Json(AuthErrorBody { detail })).into_response(),
            ApiError::Coded { code, message, extras } => {
                ErrorBody { kind: code.error_type(), code: Some(code), message, errors: None, extras }
            }
            ApiError::Api { message, .. } => ErrorBody {
                kind: ErrorType::ApiError,
                code: None,
                message,
                errors: None,
                extras: serde_json::Map::new(),
            },
            ApiError::Validation(errors) => ErrorBody {
                kind: ErrorType::ValidationError,
                code: None,
                message: validation_summary(&errors),
                errors: Some(errors),
                extras: serde_json::Map::new(),
            },
            ApiError::Internal(error) => {
                tracing::error!(error = format!("{error:#}"), "request failed with an internal error");
                ErrorBody {
                    kind: ErrorType::InternalError,
                    code: None,
                    message: "Internal server error".to_owned(),
                    errors: None,
                    extras: serde_json::Map::new(),
                }
            }
        };
        (status, axum::Json(ErrorEnvelope { error: body })).into_response()
    }
}

fn validation_summary(errors: &[ValidationIssue]) -> String {
    match errors.len() {
        1 => "Request validation failed: 1 problem".to_owned(),
        n => format!("Request validation failed: {n} problems"),
    }
}

/// Result alias of handlers.
pub type ApiResult<T> = Result<T, ApiError>;
