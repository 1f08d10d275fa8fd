//! Upstream speech-to-speech providers (Gemini Live, OpenAI Realtime, OpenAI GPT-Live, xAI Grok).
//!
//! Layout (see ARCHITECTURE.md):
//! - [`api`]: the provider interface — [`api::SessionSetup`] in, [`api::ProviderInput`] in,
//!   [`api::ProviderEvent`] out. The same closed enums for every upstream.
//! - [`codec`]: the sans-IO contract ([`codec::Codec`]: `handle_*(now, …)` / `poll_*()`), plus the
//!   state every codec shares. Codecs never do IO and never read the clock.
//! - one codec per protocol: [`gemini`], [`realtime`] (OpenAI Realtime and xAI), [`gpt_live`].
//! - [`driver`]: the one IO shell — a Tokio task owning a WebSocket (rustls, webpki roots) and a
//!   codec, with bounded channels to the runtime.
//! - [`endpoint`]: keys and base URLs from the ecosystem's environment variables.
//! - [`usage`] and [`resample`]: usage mapping onto the nine token fields; 48 kHz ⇄ provider rates.

pub mod api;
pub mod check;
pub mod codec;
pub mod driver;
pub mod endpoint;
pub mod gemini;
pub mod gpt_live;
pub mod http;
pub mod realtime;
pub mod resample;
pub mod usage;

use tokio_util::sync::CancellationToken;

use crate::api::SessionSetup;
use crate::codec::{Codec, ConnectRequest};
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
/// [`api::ProviderInput::NativeAudio`] at this rate and the adapter does not resample. `None` for
/// a family this crate does not know.
pub fn input_rate_hz(model: &svc_domain::model::ResolvedModel) -> Option<u32> {
    Some(match Family::from_catalog(&model.family)? {
        Family::Gemini => gemini::INPUT_RATE_HZ,
        Family::OpenAi | Family::Xai => realtime::RATE_HZ,
        Family::OpenAiLive => gpt_live::RATE_HZ,
    })
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
    let bearer = vec![("authorization".to_owned(), format!("Bearer {}", credentials.api_key))];
    Ok(match family {
        Family::OpenAi => {
            let url = endpoint::openai_realtime_url(credentials, &setup.model.model_id);
            Box::new(realtime::RealtimeCodec::new(
                setup,
                realtime::Dialect::OpenAi,
                ConnectRequest { url, headers: bearer },
            ))
        }
        Family::Xai => {
            let url = endpoint::xai_realtime_url(credentials, &setup.model.model_id);
            Box::new(realtime::RealtimeCodec::new(
                setup,
                realtime::Dialect::Xai,
                ConnectRequest { url, headers: bearer },
            ))
        }
        Family::Gemini => {
            let url = endpoint::gemini_url(credentials, &env.gemini_api_version);
            let headers = vec![("x-goog-api-key".to_owned(), credentials.api_key.clone())];
            Box::new(gemini::GeminiCodec::new(setup, ConnectRequest { url, headers }))
        }
        Family::OpenAiLive => {
            let url = endpoint::gpt_live_url(credentials);
            let backend = gpt_live::Backend {
                url: endpoint::responses_url(credentials),
                headers: bearer.clone(),
                model: svc_backend_model(&setup),
            };
            Box::new(gpt_live::GptLiveCodec::new(setup, ConnectRequest { url, headers: bearer }, backend))
        }
    })
}

/// The backend model of `svc` delegation: the session's `responses_model`, else the catalog's
/// default for provider_b_live.
fn svc_backend_model(setup: &SessionSetup) -> String {
    if let svc_domain::model::Knobs::ProviderBLive(knobs) = &setup.model.knobs
        && let Some(model) = &knobs.responses_model
    {
        return model.clone();
    }
    setup.model.default_responses_model.clone().unwrap_or_else(|| "gpt-5.6-luna".to_owned())
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
) -> Result<driver::ProviderSession, StartError> {
    Ok(driver::spawn(codec_for(setup, env)?, shutdown))
}
