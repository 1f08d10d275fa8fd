//! HTTP digest authentication as SIP uses it (RFC 3261 §22, RFC 2617; MD5 only).
//!
//! The challenge parameters are read here rather than through rsip's typed
//! `WwwAuthenticate`, which rejects the common `qop="auth,auth-int"` list.

use md5::{Digest as _, Md5};

/// Longest challenge header value read.
const MAX_CHALLENGE_LEN: usize = 2048;

/// Username and password for the trunk's digest challenges.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Digest username (often the trunk account, not the caller number).
    pub username: String,
    /// Digest password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password never reaches a log line.
        f.debug_struct("Credentials").field("username", &self.username).finish_non_exhaustive()
    }
}

/// One `WWW-Authenticate` / `Proxy-Authenticate` digest challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// Protection space.
    pub realm: String,
    /// Server nonce.
    pub nonce: String,
    /// Returned unchanged.
    pub opaque: Option<String>,
    /// `algorithm`, when given (absent means MD5).
    pub algorithm: Option<String>,
    /// The server offers `qop=auth`.
    pub qop_auth: bool,
    /// The previous nonce expired; a retry with the same credentials is expected to work.
    pub stale: bool,
}

impl Challenge {
    /// Reads a digest challenge; `None` for another scheme or a challenge without realm/nonce.
    pub fn parse(value: &str) -> Option<Challenge> {
        if value.len() > MAX_CHALLENGE_LEN {
            return None;
        }
        let value = value.trim_start();
        let (scheme, rest) = value.split_once(|c: char| c.is_ascii_whitespace())?;
        if !scheme.eq_ignore_ascii_case("Digest") {
            return None;
        }
        let params = auth_params(rest)?;
        let find = |name: &str| params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let qop_auth =
            find("qop").is_some_and(|qop| qop.split(',').any(|option| option.trim().eq_ignore_ascii_case("auth")));
        Some(Challenge {
            realm: find("realm")?,
            nonce: find("nonce")?,
            opaque: find("opaque"),
            algorithm: find("algorithm"),
            qop_auth,
            stale: find("stale").is_some_and(|stale| stale.eq_ignore_ascii_case("true")),
        })
    }

    /// We can answer it: MD5 (the RFC 2617 default); not MD5-sess, SHA-256 or auth-int alone.
    pub fn is_supported(&self) -> bool {
        self.algorithm.as_deref().is_none_or(|algorithm| algorithm.eq_ignore_ascii_case("MD5"))
    }

    /// The `Authorization` / `Proxy-Authorization` value answering this challenge for `method`
    /// on `uri`. With `qop=auth` offered, `cnonce` is used with nonce count 1.
    pub fn authorization(&self, credentials: &Credentials, method: &str, uri: &str, cnonce: &str) -> String {
        let qop = self.qop_auth.then_some(("00000001", cnonce));
        let response = digest_response(credentials, &self.realm, &self.nonce, method, uri, qop);
        let mut value = format!(
            "Digest username=\"{}\", realm=\"{}\", nonce=\"{}\", uri=\"{}\", response=\"{}\", algorithm=MD5",
            credentials.username, self.realm, self.nonce, uri, response
        );
        if let Some((nc, cnonce)) = qop {
            // RFC 2617 §3.2.2: qop and nc are unquoted tokens in the answer.
            value.push_str(&format!(", qop=auth, nc={nc}, cnonce=\"{cnonce}\""));
        }
        if let Some(opaque) = &self.opaque {
            value.push_str(&format!(", opaque=\"{opaque}\""));
        }
        value
    }
}

/// The digest `response` (RFC 2617 §3.2.2.1): `KD(H(A1), nonce ":" [nc ":" cnonce ":" qop ":"] H(A2))`
/// with A1 = user:realm:password and A2 = method:uri. `qop` is `(nc, cnonce)` for `qop=auth`.
pub fn digest_response(
    credentials: &Credentials,
    realm: &str,
    nonce: &str,
    method: &str,
    uri: &str,
    qop: Option<(&str, &str)>,
) -> String {
    let ha1 = md5_hex(&format!("{}:{realm}:{}", credentials.username, credentials.password));
    let ha2 = md5_hex(&format!("{method}:{uri}"));
    match qop {
        Some((nc, cnonce)) => md5_hex(&format!("{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}")),
        None => md5_hex(&format!("{ha1}:{nonce}:{ha2}")),
    }
}

fn md5_hex(text: &str) -> String {
    Md5::digest(text.as_bytes()).iter().map(|byte| format!("{byte:02x}")).collect()
}

/// `name=value` pairs separated by commas; values may be quoted strings with `\` escapes.
fn auth_params(text: &str) -> Option<Vec<(String, String)>> {
    let mut params = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace() || *c == ',') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(params);
        }
        let mut name = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_ascii_whitespace() {
                break;
            }
            name.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') || name.is_empty() {
            return None;
        }
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '\\' => value.push(chars.next()?),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' || c.is_ascii_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        if params.len() >= 32 {
            return None;
        }
        params.push((name, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mufasa() -> Credentials {
        Credentials { username: "Mufasa".into(), password: "Circle Of Life".into() }
    }

    #[test]
    fn rfc2617_worked_example() {
        // RFC 2617 §3.5: GET /dir/index.html with qop=auth, nc=00000001, cnonce="0a4f113b".
        let response = digest_response(
            &mufasa(),
            "testrealm@host.com",
            "dcd98b7102dd2f0e8b11d0f600bfb0c093",
            "GET",
            "/dir/index.html",
            Some(("00000001", "0a4f113b")),
        );
        assert_eq!(response, "6629fae49393a05397450978507c4ef1");
    }

    #[test]
    fn rfc2617_challenge_is_read_and_answered() {
        let challenge = Challenge::parse(
            "Digest realm=\"testrealm@host.com\", qop=\"auth,auth-int\", \
             nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\", opaque=\"5ccc069c403ebaf9f0171e9517f40e41\"",
        )
        .expect("value");
        assert!(challenge.qop_auth && !challenge.stale && challenge.is_supported());
        let value = challenge.authorization(&mufasa(), "GET", "/dir/index.html", "0a4f113b");
        assert_eq!(
            value,
            "Digest username=\"Mufasa\", realm=\"testrealm@host.com\", nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\", \
             uri=\"/dir/index.html\", response=\"6629fae49393a05397450978507c4ef1\", algorithm=MD5, qop=auth, \
             nc=00000001, cnonce=\"0a4f113b\", opaque=\"5ccc069c403ebaf9f0171e9517f40e41\""
        );
    }

    #[test]
    fn without_qop_the_rfc2069_form() {
        // H(A1)=939e7578ed9e3c518a452acee763bce9 and H(A2) of "GET:/dir/index.html", RFC 2069 style.
        let response = digest_response(
            &mufasa(),
            "testrealm@host.com",
            "dcd98b7102dd2f0e8b11d0f600bfb0c093",
            "GET",
            "/dir/index.html",
            None,
        );
        assert_eq!(response, "670fd8c2df070c60b045671b8b24ff02");
    }

    #[test]
    fn odd_challenges() {
        assert!(Challenge::parse("Basic realm=\"x\"").is_none());
        assert!(Challenge::parse("Digest realm=\"x\"").is_none(), "no nonce");
        assert!(Challenge::parse("Digest realm=\"x, nonce=\"y\"").is_none(), "unterminated quote");
        let stale = Challenge::parse("digest nonce=abc,realm=r,stale=TRUE,algorithm=SHA-256").expect("parses");
        assert!(stale.stale && !stale.is_supported() && !stale.qop_auth);
        let escaped = Challenge::parse(r#"Digest realm="a\"b", nonce="n""#).expect("parses");
        assert_eq!(escaped.realm, "a\"b");
    }
}
