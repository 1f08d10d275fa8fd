//! The JWTs svc issues: minted end-user tokens and workspace user access tokens.
//!
//! HS256 only. Verification pins the algorithm (so `alg: none` and algorithm confusion fail),
//! requires `exp`, `iss`, `aud` and `sub`, and allows no clock leeway: svc both issues and
//! verifies these tokens, so there is no foreign clock to forgive. A valid signature is not
//! enough: the grant named by `jti` must exist and be unrevoked (checked by the caller).

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// `iss` of every token svc issues.
pub const ISSUER: &str = "svc";
/// `aud` of every API token (room join tokens use a different audience).
pub const AUDIENCE: &str = "svc-api";

/// Claims of an svc API token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer.
    pub iss: String,
    /// Audience.
    pub aud: String,
    /// Subject: the external user id (end-user tokens) or user id.
    pub sub: String,
    /// Expiry, epoch seconds.
    pub exp: i64,
    /// Issue time, epoch seconds.
    pub iat: i64,
    /// Grant id (revocation handle).
    pub jti: String,
    /// Token kind: `end_user`, `user_access` or `acts_as_user`.
    pub kind: String,
    /// Workspace id.
    pub ws: String,
    /// Project id (end-user tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prj: Option<String>,
    /// Space-separated scopes (end-user tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The acting user (acts-as-user tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<String>,
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// Past `exp`.
    #[error("token has expired")]
    Expired,
    /// Anything else: bad signature, wrong algorithm, malformed, wrong issuer or audience.
    #[error("token is invalid")]
    Invalid,
}

/// Signing and verification keys.
#[derive(Clone)]
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JwtKeys(..)")
    }
}

impl JwtKeys {
    /// Keys from a shared secret.
    pub fn new(secret: &[u8]) -> JwtKeys {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = 0;
        JwtKeys { encoding: EncodingKey::from_secret(secret), decoding: DecodingKey::from_secret(secret), validation }
    }

    /// Signs claims.
    pub fn sign(&self, claims: &Claims) -> anyhow::Result<String> {
        Ok(jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)?)
    }

    /// Verifies a token and returns its claims.
    pub fn verify(&self, token: &str) -> Result<Claims, JwtError> {
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation).map(|data| data.claims).map_err(
            |error| match error.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => JwtError::Expired,
                _ => JwtError::Invalid,
            },
        )
    }
}

/// A random 64-byte secret, base64url, for first start.
pub fn random_secret() -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut bytes = [0u8; 64];
    rand::thread_rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    fn claims(exp: i64) -> Claims {
        Claims {
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            sub: "user-1".into(),
            exp,
            iat: 0,
            jti: "grant".into(),
            kind: "end_user".into(),
            ws: "ws".into(),
            prj: Some("p".into()),
            scope: Some("realtime:start".into()),
            act: None,
        }
    }

    fn now() -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
    }

    #[test]
    fn round_trip() {
        let keys = JwtKeys::new(b"0123456789abcdef0123456789abcdef");
        let token = keys.sign(&claims(now() + 60)).expect("sign");
        assert_eq!(keys.verify(&token).expect("valid").sub, "user-1");
    }

    #[test]
    fn attacks_are_rejected() {
        let keys = JwtKeys::new(b"0123456789abcdef0123456789abcdef");
        let other = JwtKeys::new(b"another-secret-another-secret-xx");
        let good = keys.sign(&claims(now() + 60)).expect("sign");
        let payload = good.split('.').nth(1).expect("payload").to_owned();

        // alg: none, with and without a signature.
        let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        assert_eq!(keys.verify(&format!("{none_header}.{payload}.")), Err(JwtError::Invalid));
        assert_eq!(keys.verify(&format!("{none_header}.{payload}")), Err(JwtError::Invalid));
        // Another algorithm in the header, signature kept.
        let hs512 = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS512","typ":"JWT"}"#);
        let sig = good.split('.').nth(2).expect("sig");
        assert_eq!(keys.verify(&format!("{hs512}.{payload}.{sig}")), Err(JwtError::Invalid));
        // Signed with another key.
        assert_eq!(keys.verify(&other.sign(&claims(now() + 60)).expect("sign")), Err(JwtError::Invalid));
        // Tampered payload.
        let mut forged = claims(now() + 60);
        forged.scope = Some("realtime:start resources:read".into());
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).expect("json"));
        let header = good.split('.').next().expect("header");
        assert_eq!(keys.verify(&format!("{header}.{forged_payload}.{sig}")), Err(JwtError::Invalid));
        // Expired by one second.
        assert_eq!(keys.verify(&keys.sign(&claims(now() - 1)).expect("sign")), Err(JwtError::Expired));
        // Wrong audience or issuer.
        let mut wrong_aud = claims(now() + 60);
        wrong_aud.aud = "livekit".into();
        assert_eq!(keys.verify(&keys.sign(&wrong_aud).expect("sign")), Err(JwtError::Invalid));
        let mut wrong_iss = claims(now() + 60);
        wrong_iss.iss = "someone-else".into();
        assert_eq!(keys.verify(&keys.sign(&wrong_iss).expect("sign")), Err(JwtError::Invalid));
        // Garbage.
        for junk in ["", "a.b.c", "not a token", "....", &"x".repeat(10_000)] {
            assert_eq!(keys.verify(junk), Err(JwtError::Invalid));
        }
    }
}
