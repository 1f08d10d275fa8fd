//! The telephone media path (placeholder docs, completed below).

pub mod g711;
pub mod packet;
pub mod resample;
pub mod jitter;
pub mod dtmf;
pub mod rtcp;
