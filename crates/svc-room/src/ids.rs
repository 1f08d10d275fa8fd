//! LiveKit-style identifiers. Official clients check the prefixes (`RM_`, `PA_`, `TR_`) and the
//! Rust SDK `unwrap()`s the parse, so every id the room hands out has the right shape.
//!
//! Each room draws its ids from its own [`Ids`]: from entropy in the server, from a seed in the
//! virtual-time tests, so that a failing run replays with the same ids.

use rand::distributions::Alphanumeric;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Length of the random part, as in LiveKit's own ids.
const RANDOM_LEN: usize = 12;

/// A room's source of ids.
pub(crate) struct Ids {
    rng: StdRng,
}

impl Ids {
    /// Unpredictable ids (the server).
    pub(crate) fn from_entropy() -> Ids {
        Ids { rng: StdRng::from_entropy() }
    }

    /// The same ids for the same seed (tests).
    #[cfg(test)]
    pub(crate) fn seeded(seed: u64) -> Ids {
        Ids { rng: StdRng::seed_from_u64(seed) }
    }

    fn alphanumerics(&mut self, count: usize) -> String {
        (&mut self.rng).sample_iter(&Alphanumeric).take(count).map(char::from).collect()
    }

    /// A new room id: `RM_` + random.
    pub(crate) fn room_sid(&mut self) -> String {
        format!("RM_{}", self.alphanumerics(RANDOM_LEN))
    }

    /// A new participant id: `PA_` + random.
    pub(crate) fn participant_sid(&mut self) -> String {
        format!("PA_{}", self.alphanumerics(RANDOM_LEN))
    }

    /// A new microphone audio track id: `TR_AM` + random (audio, microphone), as LiveKit names them.
    pub(crate) fn audio_track_sid(&mut self) -> String {
        format!("TR_AM{}", self.alphanumerics(RANDOM_LEN))
    }

    /// A new id with LiveKit's `prefix` (`AW_` agent worker, `AJ_` agent job, `AD_` agent
    /// dispatch).
    pub(crate) fn prefixed(&mut self, prefix: &str) -> String {
        format!("{prefix}{}", self.alphanumerics(RANDOM_LEN))
    }

    /// A new ICE username fragment. The UDP demultiplexer routes STUN by it, so it must be unique
    /// across the process: 16 alphanumerics give ~95 bits.
    pub(crate) fn ice_ufrag(&mut self) -> String {
        self.alphanumerics(16)
    }

    /// A new ICE password (at least 128 bits of randomness, RFC 8445 §5.3).
    pub(crate) fn ice_password(&mut self) -> String {
        self.alphanumerics(32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_prefixes_clients_require() {
        let mut ids = Ids::from_entropy();
        assert!(ids.room_sid().starts_with("RM_"));
        assert!(ids.participant_sid().starts_with("PA_"));
        assert!(ids.audio_track_sid().starts_with("TR_AM"));
        assert_ne!(ids.ice_ufrag(), ids.ice_ufrag());
        assert!(ids.ice_password().len() >= 22);
    }

    #[test]
    fn a_seed_gives_the_same_ids_and_two_rooms_from_entropy_do_not() {
        assert_eq!(Ids::seeded(7).participant_sid(), Ids::seeded(7).participant_sid());
        assert_ne!(Ids::seeded(7).participant_sid(), Ids::seeded(8).participant_sid());
        assert_ne!(Ids::from_entropy().ice_ufrag(), Ids::from_entropy().ice_ufrag());
    }
}
