//! Upstream speech-to-speech providers (Gemini Live, OpenAI Realtime, OpenAI GPT-Live, xAI Grok).
//!
//! Layout (see ARCHITECTURE.md):
//! - the provider interface itself (`SessionSetup` in, `ProviderInput` in, `ProviderEvent` out,
//!   the `ProviderSession` handle) is `svc-provider-core`'s, below this transport.
//! - [`codec`]: the sans-IO contract ([`codec::Codec`]: `handle_*(now, …)` / `poll_*()`), plus the
//!   state every codec shares. Codecs never do IO and never read the clock.
//! - one codec per protocol: [`gemini`], [`realtime`] (OpenAI Realtime and xAI), [`gpt_live`].
//! - [`driver`]: the one IO shell — a Tokio task owning a WebSocket (rustls, webpki roots) and a
//!   codec, with bounded channels to the runtime.
//! - [`family`]: **the family table** ([`family::FAMILIES`]): per upstream family its account,
//!   input rate and codec; the one place a family is added.
//! - [`endpoint`]: keys and base URLs from the ecosystem's environment variables.
//! - [`usage`]: usage mapping onto the nine token fields (resampling is `svc-audio`'s).
//! - [`recording`] and [`replay`]: the upstream exchange as JSON Lines (`svc provider check
//!   --record`) and a codec fed a recording in virtual time.

pub mod check;
pub mod codec;
pub mod driver;
pub mod endpoint;
pub mod family;
pub mod gemini;
pub mod gpt_live;
pub mod realtime;
pub mod recording;
pub mod replay;
mod rotation;
pub mod unread;
pub mod usage;

use svc_provider_core::SessionSetup;
use svc_provider_core::session::ProviderSession;
use tokio_util::sync::CancellationToken;

use crate::codec::Codec;
use crate::endpoint::{Family, ProviderEnv};

/// Why an adapter cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The model's family has no key in the environment.
    #[error("no API key for {alias}: set {variable}")]
    NoKey {
        /// Provider alias.
        alias: String,
        /// The variable(s) to set.
        variable: &'static str,
    },
    /// The catalog names a family this crate does not know.
    #[error("unknown provider family `{0}`")]
    UnknownFamily(String),
}

/// The rate a model's adapter takes user audio at natively: send
/// [`svc_provider_core::ProviderInput::NativeAudio`] at this rate and the adapter does not resample. `None` for
/// a family this crate does not know.
pub fn input_rate_hz(model: &svc_domain::model::ResolvedModel) -> Option<u32> {
    Family::from_catalog(&model.family).map(|family| family.spec().input_rate_hz)
}

/// The codec for `setup`'s provider, connecting with the credentials in `env`.
///
/// # Errors
///
/// [`StartError`] when the family is unknown or has no key.
pub fn codec_for(setup: SessionSetup, env: &ProviderEnv) -> Result<Box<dyn Codec>, StartError> {
    let family = Family::from_catalog(&setup.model.family)
        .ok_or_else(|| StartError::UnknownFamily(setup.model.family.clone()))?;
    let credentials = env.credentials(family).ok_or_else(|| StartError::NoKey {
        alias: setup.model.alias.as_str().to_owned(),
        variable: ProviderEnv::key_variable(family),
    })?;
    Ok((family.spec().codec)(setup, credentials, env))
}

/// Starts an adapter for `setup`: its codec in the WebSocket driver.
///
/// # Errors
///
/// [`StartError`] when the family is unknown or has no key.
pub fn start(
    setup: SessionSetup,
    env: &ProviderEnv,
    shutdown: CancellationToken,
) -> Result<ProviderSession, StartError> {
    Ok(driver::spawn(codec_for(setup, env)?, shutdown))
}
