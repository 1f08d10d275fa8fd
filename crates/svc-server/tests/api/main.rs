//! HTTP tests through the real router, each on SQLite and Postgres.

mod common;

mod agents;
mod auth;
mod dial;
mod errors;
mod import;
mod matrix;
mod scopes;
mod server_tools;
mod sessions;
mod start;
mod support;
mod tokens;
