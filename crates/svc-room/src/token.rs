//! LiveKit access tokens: HS256 JWTs whose `iss` names the API key (the server looks up the
//! secret by it), `sub` is the participant identity, and the `video` grant scopes the bearer to
//! one room. The claim names and defaults follow LiveKit's `protocol/auth` package so that tokens
//! minted here are accepted by a real LiveKit server too (the scale path), and tokens minted by
//! LiveKit tooling are accepted by the embedded room.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// The room's API key and secret.
#[derive(Clone)]
pub struct RoomCredentials {
    /// API key (`iss` of every token).
    pub api_key: String,
    secret: Vec<u8>,
}

impl std::fmt::Debug for RoomCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoomCredentials").field("api_key", &self.api_key).finish_non_exhaustive()
    }
}

/// The `video` grant, in LiveKit's camelCase spelling. Absent booleans keep LiveKit's defaults
/// (`canPublish`/`canSubscribe` absent = allowed, `canUpdateOwnMetadata` absent = denied).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoomGrant {
    /// May join `room`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub room_join: bool,
    /// The room.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub room: String,
    /// May publish tracks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_publish: Option<bool>,
    /// May subscribe to tracks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_subscribe: Option<bool>,
    /// May send data packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_publish_data: Option<bool>,
    /// May change its own name, metadata and attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_update_own_metadata: Option<bool>,
    /// May register as an agent worker.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agent: bool,
    /// Invisible to other participants.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    /// Server API: may create and delete rooms (`RoomService.CreateRoom`, `DeleteRoom`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub room_create: bool,
    /// Server API: may list rooms.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub room_list: bool,
    /// Server API: may administer `room` (its participants, metadata, data).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub room_admin: bool,
}

/// The `sip` grant: LiveKit's SIP service (`livekit.SIP/*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SipGrant {
    /// May manage trunks and dispatch rules (and list them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin: bool,
    /// May place calls (`CreateSIPParticipant`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub call: bool,
}

impl SipGrant {
    fn is_empty(&self) -> bool {
        !self.admin && !self.call
    }
}

/// The claims of a room access token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomToken {
    /// API key.
    pub iss: String,
    /// Participant identity (a server API token may have none: the Node SDK leaves it out).
    #[serde(default)]
    pub sub: String,
    /// Not before, epoch seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// Expiry, epoch seconds (required).
    pub exp: i64,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Participant kind, lowercase (`standard`, `agent`, `sip`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Opaque participant metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<String>,
    /// Initial participant attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
    /// Room grant.
    #[serde(default)]
    pub video: RoomGrant,
    /// SIP grant (server API callers of `livekit.SIP`).
    #[serde(default, skip_serializing_if = "SipGrant::is_empty")]
    pub sip: SipGrant,
    /// How the room is set up if this join creates it (LiveKit's `roomConfig`: timeouts, the
    /// participant cap, metadata, agents to dispatch).
    #[serde(default, rename = "roomConfig", skip_serializing_if = "Option::is_none")]
    pub room_config: Option<livekit_protocol::RoomConfiguration>,
}

/// Why a room token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoomTokenError {
    /// Past `exp` (beyond the leeway).
    #[error("token has expired")]
    Expired,
    /// `iss` names no known API key.
    #[error("unknown API key")]
    UnknownKey,
    /// Bad signature, algorithm, shape, or missing `exp`/`sub`.
    #[error("invalid token")]
    Invalid,
    /// Signing failed.
    #[error("could not sign token: {0}")]
    Sign(String),
}

/// Leeway LiveKit allows on `exp` and `nbf`: clients and servers may be on different machines.
pub const LEEWAY_SECONDS: u64 = 60;

impl RoomCredentials {
    /// Credentials from an API key and its secret.
    pub fn new(api_key: impl Into<String>, secret: impl AsRef<[u8]>) -> RoomCredentials {
        RoomCredentials { api_key: api_key.into(), secret: secret.as_ref().to_vec() }
    }

    /// Signs `claims` (whose `iss` is replaced by this API key).
    pub fn mint(&self, mut claims: RoomToken) -> Result<String, RoomTokenError> {
        claims.iss = self.api_key.clone();
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(&self.secret))
            .map_err(|error| RoomTokenError::Sign(error.to_string()))
    }

    /// The `Authorization` header of a webhook whose body is `body`, as LiveKit signs one: an
    /// HS256 token from this key, valid five minutes from `now_seconds` (Unix), whose `sha256`
    /// claim is the body's SHA-256 in standard base64 (receivers compare it to the body they got).
    pub fn sign_webhook(&self, body: &[u8], now_seconds: i64) -> Result<String, RoomTokenError> {
        use sha2::Digest as _;
        #[derive(Serialize)]
        struct WebhookClaims<'a> {
            iss: &'a str,
            nbf: i64,
            exp: i64,
            sha256: String,
            video: RoomGrant,
        }
        let claims = WebhookClaims {
            iss: &self.api_key,
            nbf: now_seconds,
            exp: now_seconds + 300,
            sha256: base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(body)),
            video: RoomGrant::default(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(&self.secret))
            .map_err(|error| RoomTokenError::Sign(error.to_string()))
    }

    /// A join token for an end user's participant: join `room`, publish, subscribe, send data
    /// and update its own attributes and metadata.
    pub fn participant_token(
        &self,
        room: &str,
        identity: &str,
        name: Option<&str>,
        expires_at: i64,
    ) -> Result<String, RoomTokenError> {
        self.mint(member_claims(room, identity, name, expires_at))
    }

    /// A join token for an agent (kind `agent`, as LiveKit mints one for a dispatched job): what
    /// [`RoomCredentials::participant_token`] grants, with `attributes` set from the start.
    pub fn agent_token(
        &self,
        room: &str,
        identity: &str,
        name: Option<&str>,
        attributes: BTreeMap<String, String>,
        expires_at: i64,
    ) -> Result<String, RoomTokenError> {
        let mut claims = member_claims(room, identity, name, expires_at);
        claims.kind = Some("agent".to_owned());
        claims.attributes = attributes;
        claims.video.agent = true;
        self.mint(claims)
    }

    /// A token carrying `grant` and no identity, valid until `expires_at` (epoch seconds): what a
    /// server API caller (`roomCreate`, `roomAdmin`, …) or an agent worker (`agent`) presents.
    pub fn grant_token(&self, grant: RoomGrant, expires_at: i64) -> Result<String, RoomTokenError> {
        self.server_token(grant, SipGrant::default(), expires_at)
    }

    /// As [`RoomCredentials::grant_token`], with a `sip` grant too (LiveKit's SIP service).
    pub fn server_token(&self, grant: RoomGrant, sip: SipGrant, expires_at: i64) -> Result<String, RoomTokenError> {
        self.mint(RoomToken {
            iss: String::new(),
            sub: String::new(),
            nbf: None,
            exp: expires_at,
            name: None,
            kind: None,
            metadata: None,
            attributes: BTreeMap::new(),
            video: grant,
            room_config: None,
            sip,
        })
    }

    /// Verifies a token signed with this key (HS256 only, `exp` required, 60 s leeway).
    pub fn verify(&self, token: &str) -> Result<RoomToken, RoomTokenError> {
        let claims = self.verify_signed(token)?;
        if claims.sub.is_empty() {
            return Err(RoomTokenError::Invalid);
        }
        Ok(claims)
    }

    /// Verifies a server API token: as [`RoomCredentials::verify`], but it needs no identity
    /// (the server SDKs sign their requests with an empty `sub`).
    pub fn verify_server_api(&self, token: &str) -> Result<RoomToken, RoomTokenError> {
        self.verify_signed(token)
    }

    fn verify_signed(&self, token: &str) -> Result<RoomToken, RoomTokenError> {
        let issuer = peek_issuer(token)?;
        if issuer != self.api_key {
            return Err(RoomTokenError::UnknownKey);
        }
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp", "iss"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<RoomToken>(token, &DecodingKey::from_secret(&self.secret), &validation)
            .map_err(|error| match error.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => RoomTokenError::Expired,
                _ => RoomTokenError::Invalid,
            })?;
        Ok(data.claims)
    }
}

/// Reads `iss` without verifying, to pick the secret (LiveKit's "iss → secret" lookup).
fn peek_issuer(token: &str) -> Result<String, RoomTokenError> {
    #[derive(Deserialize)]
    struct Issuer {
        iss: String,
    }
    let payload = token.split('.').nth(1).ok_or(RoomTokenError::Invalid)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).map_err(|_| RoomTokenError::Invalid)?;
    serde_json::from_slice::<Issuer>(&bytes).map(|claims| claims.iss).map_err(|_| RoomTokenError::Invalid)
}

/// A room member's claims: join `room`, publish, subscribe, send data and update its own
/// attributes and metadata.
fn member_claims(room: &str, identity: &str, name: Option<&str>, expires_at: i64) -> RoomToken {
    RoomToken {
        iss: String::new(),
        sub: identity.to_owned(),
        nbf: None,
        exp: expires_at,
        name: name.map(str::to_owned),
        kind: None,
        metadata: None,
        attributes: BTreeMap::new(),
        video: RoomGrant {
            room_join: true,
            room: room.to_owned(),
            can_publish: Some(true),
            can_subscribe: Some(true),
            can_publish_data: Some(true),
            can_update_own_metadata: Some(true),
            ..RoomGrant::default()
        },
        room_config: None,
        sip: SipGrant::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
    }

    #[test]
    fn participant_tokens_carry_livekit_claims() {
        let credentials = RoomCredentials::new("APIsvc", "a-secret-of-enough-length-0123456789");
        let token = credentials.participant_token("room-1", "user-1", Some("Ann"), now() + 600).expect("mint");
        let payload = token.split('.').nth(1).expect("payload");
        let json: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("b64")).expect("json");
        assert_eq!(json["iss"], "APIsvc");
        assert_eq!(json["sub"], "user-1");
        assert_eq!(
            json["video"],
            serde_json::json!({"roomJoin": true, "room": "room-1", "canPublish": true, "canSubscribe": true,
                               "canPublishData": true, "canUpdateOwnMetadata": true})
        );
        let claims = credentials.verify(&token).expect("verify");
        assert_eq!(claims.video.room, "room-1");
        assert_eq!(claims.name.as_deref(), Some("Ann"));
    }

    #[test]
    fn refuses_bad_tokens() {
        let credentials = RoomCredentials::new("APIsvc", "a-secret-of-enough-length-0123456789");
        let other = RoomCredentials::new("APIsvc", "another-secret-of-enough-length-99");
        let foreign = RoomCredentials::new("APIother", "a-secret-of-enough-length-0123456789");
        let valid = || credentials.participant_token("r", "u", None, now() + 600).expect("mint");
        assert_eq!(
            credentials.verify(&other.participant_token("r", "u", None, now() + 600).expect("mint")),
            Err(RoomTokenError::Invalid)
        );
        assert_eq!(
            credentials.verify(&foreign.participant_token("r", "u", None, now() + 600).expect("mint")),
            Err(RoomTokenError::UnknownKey)
        );
        // Within the leeway still valid; beyond it expired.
        assert!(credentials.verify(&credentials.participant_token("r", "u", None, now() - 30).expect("mint")).is_ok());
        assert_eq!(
            credentials.verify(&credentials.participant_token("r", "u", None, now() - 120).expect("mint")),
            Err(RoomTokenError::Expired)
        );
        assert_eq!(
            credentials.verify(&credentials.participant_token("r", "", None, now() + 600).expect("mint")),
            Err(RoomTokenError::Invalid)
        );
        let token = valid();
        let mut parts: Vec<&str> = token.split('.').collect();
        let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        parts[0] = &none_header;
        assert_eq!(credentials.verify(&parts.join(".")), Err(RoomTokenError::Invalid));
        let no_exp = URL_SAFE_NO_PAD.encode(br#"{"iss":"APIsvc","sub":"u","video":{"roomJoin":true,"room":"r"}}"#);
        let header = token.split('.').next().expect("header");
        let unsigned = format!("{header}.{no_exp}");
        let signature = jsonwebtoken::crypto::sign(
            unsigned.as_bytes(),
            &EncodingKey::from_secret(b"a-secret-of-enough-length-0123456789"),
            Algorithm::HS256,
        )
        .expect("sign");
        assert_eq!(credentials.verify(&format!("{unsigned}.{signature}")), Err(RoomTokenError::Invalid));
        for junk in ["", "a.b.c", "....", "x"] {
            assert!(credentials.verify(junk).is_err());
        }
    }
}
