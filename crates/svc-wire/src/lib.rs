//! Wire types of svc's public contract, shared by the server and client SDKs: REST bodies
//! ([`rest`]), the error envelope and code table ([`error`]), and the data-channel protocol
//! ([`events`]).
//!
//! Types here are dumb and serde-shaped: they say what travels, not what is valid. Validation and
//! invariants live in `svc-domain`. Architecture invariant: this crate depends on no IO crate
//! (no tokio, axum or sqlx), so an SDK can use it anywhere.

pub mod error;
pub mod events;
pub mod rest;

pub use error::{ErrorBody, ErrorCode, ErrorEnvelope, ErrorType, Loc, LocSegment, ValidationIssue};
