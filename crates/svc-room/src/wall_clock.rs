//! The wall clock, where the room's shells need it (join times, pongs, token and webhook
//! times); the sans-IO cores are handed its readings instead.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 for a clock set before it).
pub(crate) fn unix_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(0))
}

/// Seconds since the Unix epoch (0 for a clock set before it).
pub(crate) fn unix_seconds() -> i64 {
    unix_ms() / 1000
}
