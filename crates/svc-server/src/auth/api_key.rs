//! API key format, generation and hashing.
//!
//! A key is `svc_sk_` + 12 lookup characters + 32 secret characters (base62). The lookup part is
//! stored in plain text and indexed, so a presented key is found without scanning; the whole key
//! is stored only as its SHA-256 digest and compared in constant time. Keys carry 190 bits of
//! randomness, so a fast hash is the right tool (a password hash would only add latency).

use rand::Rng;
use rand::distributions::Alphanumeric;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Prefix every API key starts with, so leaked keys are recognizable by secret scanners.
pub const API_KEY_PREFIX: &str = "svc_sk_";
const LOOKUP_LEN: usize = 12;
const SECRET_LEN: usize = 32;

/// A freshly generated key: the secret (shown once) and what is stored.
#[derive(Debug, Clone)]
pub struct GeneratedKey {
    /// The full key, to hand to the user once.
    pub secret: String,
    /// The indexed lookup part.
    pub lookup: String,
    /// Hex SHA-256 of `secret`.
    pub hash: String,
}

/// Generates a new random key.
pub fn generate() -> GeneratedKey {
    let mut rng = rand::thread_rng();
    let body: String = (&mut rng).sample_iter(&Alphanumeric).take(LOOKUP_LEN + SECRET_LEN).map(char::from).collect();
    let secret = format!("{API_KEY_PREFIX}{body}");
    GeneratedKey { lookup: body[..LOOKUP_LEN].to_owned(), hash: hash(&secret), secret }
}

/// The lookup part of a presented key, or `None` if it does not have the key format.
pub fn lookup_of(presented: &str) -> Option<&str> {
    let body = presented.strip_prefix(API_KEY_PREFIX)?;
    (body.len() == LOOKUP_LEN + SECRET_LEN && body.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then(|| &body[..LOOKUP_LEN])
}

/// Hex SHA-256 of a key.
pub fn hash(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Whether `presented` hashes to `stored_hash`, compared in constant time.
pub fn matches(presented: &str, stored_hash: &str) -> bool {
    hash(presented).as_bytes().ct_eq(stored_hash.as_bytes()).into()
}

/// The displayable, non-secret start of a key (`svc_sk_AbCdEfGhIjKl…`).
pub fn display_prefix(lookup: &str) -> String {
    format!("{API_KEY_PREFIX}{lookup}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_match() {
        let key = generate();
        assert_eq!(key.secret.len(), API_KEY_PREFIX.len() + 44);
        assert_eq!(lookup_of(&key.secret), Some(key.lookup.as_str()));
        assert!(matches(&key.secret, &key.hash));
        let mut tampered = key.secret.clone();
        tampered.pop();
        tampered.push(if key.secret.ends_with('a') { 'b' } else { 'a' });
        assert!(!matches(&tampered, &key.hash));
        assert_ne!(generate().secret, key.secret);
    }

    #[test]
    fn rejects_malformed_keys() {
        for bad in [
            "",
            "svc_sk_",
            "svc_sk_short",
            "sk_live_0000000000000000000000000000000000000000000000",
            &format!("svc_sk_{}", "-".repeat(44)),
        ] {
            assert_eq!(lookup_of(bad), None, "{bad}");
        }
    }
}
