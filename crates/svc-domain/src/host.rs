//! Normalized host names for credential host binding.
//!
//! A credential works only on its workspace's host. Comparing raw `Host` headers would make
//! `Localhost:8080` and `localhost` different hosts, so both sides are normalized first: lowercase,
//! no port, no trailing dot, and the loopback spellings (`localhost`, `127.0.0.1`, `[::1]`) folded
//! into `localhost` so a developer's curl works however they spell their own machine.

use std::fmt;

/// A normalized host name (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Host(String);

/// A host string that is not a host name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a valid host name")]
pub struct InvalidHost(pub String);

impl Host {
    /// Parses a `Host` header value or a bare host name, with or without a port.
    pub fn parse(raw: &str) -> Result<Self, InvalidHost> {
        let invalid = || InvalidHost(raw.chars().take(64).collect());
        let trimmed = raw.trim();
        let name = if let Some(rest) = trimmed.strip_prefix('[') {
            // IPv6 literal: `[addr]` or `[addr]:port`.
            let end = rest.find(']').ok_or_else(invalid)?;
            let after = &rest[end + 1..];
            if !(after.is_empty() || valid_port(after.strip_prefix(':').unwrap_or("x"))) {
                return Err(invalid());
            }
            format!("[{}]", &rest[..end])
        } else {
            match trimmed.rsplit_once(':') {
                Some((name, port)) if valid_port(port) => name.to_owned(),
                Some(_) => return Err(invalid()),
                None => trimmed.to_owned(),
            }
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '[' | ']');
        if name.is_empty() || name.len() > 253 || !name.chars().all(allowed) {
            return Err(invalid());
        }
        Ok(Host(match name.as_str() {
            "127.0.0.1" | "[::1]" | "localhost" => "localhost".to_owned(),
            _ => name,
        }))
    }

    /// The normalized name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn valid_port(port: &str) -> bool {
    !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(raw: &str) -> String {
        Host::parse(raw).expect(raw).as_str().to_owned()
    }

    #[test]
    fn strips_port_case_and_trailing_dot() {
        assert_eq!(host("API.Example.com:8443"), "api.example.com");
        assert_eq!(host("api.example.com."), "api.example.com");
        assert_eq!(host("[2001:db8::1]:80"), "[2001:db8::1]");
    }

    #[test]
    fn folds_loopback_spellings() {
        for raw in ["localhost", "localhost:8080", "127.0.0.1:8080", "[::1]:8080", "LOCALHOST"] {
            assert_eq!(host(raw), "localhost");
        }
    }

    #[test]
    fn rejects_garbage() {
        for raw in ["", ":80", "a b", "host:port", "evil.com/path", "[::1", "x:123456"] {
            assert!(Host::parse(raw).is_err(), "{raw:?} parsed");
        }
    }
}
