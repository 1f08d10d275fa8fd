//! LiveKit-style identifiers. Official clients check the prefixes (`RM_`, `PA_`, `TR_`) and the
//! Rust SDK `unwrap()`s the parse, so every id the room hands out has the right shape.

use rand::Rng;
use rand::distributions::Alphanumeric;

/// Length of the random part, as in LiveKit's own ids.
const RANDOM_LEN: usize = 12;

fn random_suffix() -> String {
    rand::thread_rng().sample_iter(&Alphanumeric).take(RANDOM_LEN).map(char::from).collect()
}

/// A new room id: `RM_` + random.
pub(crate) fn room_sid() -> String {
    format!("RM_{}", random_suffix())
}

/// A new participant id: `PA_` + random.
pub(crate) fn participant_sid() -> String {
    format!("PA_{}", random_suffix())
}

/// A new microphone audio track id: `TR_AM` + random (audio, microphone), as LiveKit names them.
pub(crate) fn audio_track_sid() -> String {
    format!("TR_AM{}", random_suffix())
}

/// A new ICE username fragment. The UDP demultiplexer routes STUN by it, so it must be unique
/// across the process: 16 alphanumerics give ~95 bits.
pub(crate) fn ice_ufrag() -> String {
    rand::thread_rng().sample_iter(&Alphanumeric).take(16).map(char::from).collect()
}

/// A new ICE password (at least 128 bits of randomness, RFC 8445 §5.3).
pub(crate) fn ice_password() -> String {
    rand::thread_rng().sample_iter(&Alphanumeric).take(32).map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_prefixes_clients_require() {
        assert!(room_sid().starts_with("RM_"));
        assert!(participant_sid().starts_with("PA_"));
        assert!(audio_track_sid().starts_with("TR_AM"));
        assert_ne!(ice_ufrag(), ice_ufrag());
        assert!(ice_password().len() >= 22);
    }
}
