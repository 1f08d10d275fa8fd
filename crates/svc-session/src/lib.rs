//! The session runtime: what happens after a session start, until the session ends.
//!
//! - [`core`]: [`core::SessionCore`], the sans-IO session state machine (turns, tools, hooks,
//!   caps, chunking, transcripts, usage), tested in virtual time.

pub mod core;
