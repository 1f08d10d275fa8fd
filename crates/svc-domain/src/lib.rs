//! Domain types of svc: what the rest of the system may assume once input has been parsed.
//!
//! Everything here is pure: no IO, no clock, no async. Wire shapes live in `svc-wire`; this crate
//! turns them into types whose invariants hold (a [`ScopeSet`] is always expanded, an
//! [`ExternalUserId`] is never empty, a [`Host`] is always normalized) so that code behind the
//! boundary never re-checks.

pub mod builtin;
pub mod host;
pub mod limits;
pub mod model;
pub mod parse;
pub mod requests;
pub mod scope;
pub mod session_config;
pub mod settings;
pub mod start;
pub mod tools;

pub use host::Host;
pub use scope::{Scope, ScopeSet, UnissuedScope, UnknownScope};
pub use settings::WorkspaceSettings;
