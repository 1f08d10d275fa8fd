//! The models every local session shares, loaded once on first use, and the capacity that
//! bounds how many sessions may use them at once.
//!
//! Whisper and SmolLM2 are read-only after loading and take `&self`, so sessions share one copy
//! (about 300 MB in memory rather than 300 MB per session). Capacity is a plain count: a start
//! beyond it is refused at once with a clear error, because on a small machine one more pipeline
//! would slow every running conversation, not only the new one.

use std::sync::{Arc, Mutex, OnceLock};

use svc_llm::SmolLm;
use svc_stt::WhisperModel;
use url::Url;

use crate::models::{MissingModels, ModelsDir};

/// Where replies come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Brain {
    /// SmolLM2-135M-Instruct, on this machine.
    Embedded,
    /// An OpenAI-compatible chat-completions endpoint (llama.cpp server, Ollama, vLLM).
    Endpoint {
        /// The full `…/chat/completions` address.
        url: Url,
        /// The `model` sent in each request.
        model: String,
        /// Bearer token, when the endpoint wants one.
        api_key: Option<String>,
    },
}

/// How the local provider is set up on this server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    /// Where the models are.
    pub models: ModelsDir,
    /// Where replies come from.
    pub brain: Brain,
    /// Most local sessions at once.
    pub capacity: usize,
    /// Inference threads of each session (its own pool; 0: [`default_threads`]).
    pub threads: usize,
}

/// Inference threads per session when none are configured: the machine's cores shared among
/// the session slots, at least one. On two cores with two slots, one thread each: a session
/// never waits for a thread another session (or other work on the machine) holds, which is
/// what keeps the slow turns bounded (see docs/benchmarks.md, "local provider").
pub fn default_threads(capacity: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    (cores / capacity.max(1)).max(1)
}

/// The default capacity: what a two-core machine holds under the latency target (see
/// docs/benchmarks.md, "local provider").
pub const DEFAULT_CAPACITY: usize = 2;

/// Why a local session cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// The models are not installed.
    #[error(transparent)]
    Missing(#[from] MissingModels),
    /// Every slot is taken.
    #[error("the local provider is at capacity ({0} concurrent sessions on this server); retry later")]
    AtCapacity(usize),
}

/// Where an installation started from the server (the playground's button) stands.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum InstallStatus {
    /// None has run.
    #[default]
    Idle,
    /// One is running.
    Running {
        /// What it is doing.
        step: String,
        /// Bytes of the current download done.
        done: u64,
        /// Its size.
        total: u64,
    },
    /// The last one failed.
    Failed {
        /// Why.
        error: String,
    },
    /// The last one succeeded and the models are loaded.
    Done,
}

/// The shared models and the session count. Cheap to share through an [`Arc`].
pub struct LocalEngines {
    config: LocalConfig,
    install: Mutex<InstallStatus>,
    whisper: OnceLock<Arc<WhisperModel>>,
    smollm: OnceLock<Arc<SmolLm>>,
    /// Serializes loading: two sessions starting together load the models once.
    loading: Mutex<()>,
    /// Which slots are taken; a slot's index names its thread pool.
    slots: Mutex<Vec<bool>>,
    /// Each slot's inference threads, built when the slot is first used.
    pools: Vec<OnceLock<Option<rayon::ThreadPool>>>,
}

impl std::fmt::Debug for LocalEngines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEngines")
            .field("config", &self.config)
            .field("active", &self.active())
            .finish_non_exhaustive()
    }
}

/// A session's slot, taken by the start route before it answers 200 and held by the session
/// until it ends. Clones share the one slot (the start request is cloned on its way to the
/// runtime); the slot frees when the last clone drops, whichever way the session ends or the
/// start fails. The slot's inference threads run the session's models ([`Permit::install`]).
#[derive(Debug, Clone)]
pub struct Permit {
    slot: Arc<Slot>,
}

/// The slot behind a [`Permit`].
#[derive(Debug)]
struct Slot {
    engines: Arc<LocalEngines>,
    index: usize,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut slots) = self.engines.slots.lock()
            && let Some(taken) = slots.get_mut(self.index)
        {
            *taken = false;
        }
    }
}

impl Permit {
    /// Runs `f` (inference) on the slot's own threads, so that everything candle parallelises
    /// with rayon inside it stays on them (blocking; call it off the async runtime).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        let engines = &self.slot.engines;
        let pool = engines.pools.get(self.slot.index).and_then(|cell| {
            cell.get_or_init(|| {
                let threads = engines.threads();
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(move |i| format!("svc-local-{i}"))
                    .build()
                    .inspect_err(|error| tracing::warn!(%error, "provider_local: no inference pool; running inline"))
                    .ok()
            })
            .as_ref()
        });
        match pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

impl LocalEngines {
    /// Engines for `config`; nothing is loaded yet.
    pub fn new(config: LocalConfig) -> Arc<LocalEngines> {
        Arc::new(LocalEngines {
            whisper: OnceLock::new(),
            smollm: OnceLock::new(),
            loading: Mutex::new(()),
            slots: Mutex::new(vec![false; config.capacity]),
            pools: (0..config.capacity).map(|_| OnceLock::new()).collect(),
            install: Mutex::new(InstallStatus::Idle),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LocalConfig {
        &self.config
    }

    /// Sessions using the engines now.
    pub fn active(&self) -> usize {
        self.slots.lock().map_or(0, |slots| slots.iter().filter(|&&taken| taken).count())
    }

    /// Inference threads of each session.
    pub fn threads(&self) -> usize {
        match self.config.threads {
            0 => default_threads(self.config.capacity),
            threads => threads,
        }
    }

    /// Whether the models this configuration needs are installed.
    ///
    /// # Errors
    ///
    /// [`MissingModels`] naming the install command.
    pub fn installed(&self) -> Result<(), MissingModels> {
        match self.config.brain {
            Brain::Embedded => self.config.models.check(),
            Brain::Endpoint { .. } => self.config.models.check_whisper(),
        }
    }

    /// Takes a slot: the check and the count are one atomic step, so however many starts race,
    /// at most `capacity` permits exist at once.
    ///
    /// # Errors
    ///
    /// [`Unavailable`] when the models are missing or every slot is taken.
    pub fn acquire(self: &Arc<Self>) -> Result<Permit, Unavailable> {
        self.installed()?;
        let capacity = self.config.capacity;
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let index = slots.iter().position(|&taken| !taken).ok_or(Unavailable::AtCapacity(capacity))?;
        slots[index] = true;
        drop(slots);
        Ok(Permit { slot: Arc::new(Slot { engines: self.clone(), index }) })
    }

    /// Whisper, loaded on first use. Blocking (about a second the first time).
    ///
    /// # Errors
    ///
    /// Why it could not be loaded.
    pub fn whisper(&self) -> Result<Arc<WhisperModel>, String> {
        self.load_once(&self.whisper, || {
            WhisperModel::load(&self.config.models.whisper()).map_err(|error| error.to_string())
        })
    }

    /// SmolLM2, loaded on first use. Blocking.
    ///
    /// # Errors
    ///
    /// Why it could not be loaded.
    pub fn smollm(&self) -> Result<Arc<SmolLm>, String> {
        self.load_once(&self.smollm, || SmolLm::load(self.config.models.smollm()).map_err(|error| error.to_string()))
    }

    /// The model in `cell`, loaded by `load` the first time (once, however many ask at once; a
    /// failed load is tried again by the next caller).
    fn load_once<T>(
        &self,
        cell: &OnceLock<Arc<T>>,
        load: impl FnOnce() -> Result<T, String>,
    ) -> Result<Arc<T>, String> {
        if let Some(model) = cell.get() {
            return Ok(model.clone());
        }
        let _loading = self.loading.lock().map_err(|_| "a model load panicked".to_owned())?;
        if let Some(model) = cell.get() {
            return Ok(model.clone());
        }
        let model = Arc::new(load()?);
        Ok(cell.get_or_init(|| model).clone())
    }

    /// Loads what the configuration needs (at server start, so the first session does not wait).
    ///
    /// # Errors
    ///
    /// Why a model could not be loaded.
    pub fn warm(&self) -> Result<(), String> {
        self.whisper()?;
        if self.config.brain == Brain::Embedded {
            self.smollm()?;
        }
        Ok(())
    }

    /// Where the server-started installation stands.
    pub fn install_status(&self) -> InstallStatus {
        self.install.lock().map(|status| status.clone()).unwrap_or_default()
    }

    /// Starts `svc models install` inside the server (from the registry, in the background, then
    /// loads the models), unless the models are installed or an installation runs. Returns
    /// whether one started. Must be called within a Tokio runtime.
    pub fn begin_install(self: &Arc<Self>) -> bool {
        if self.installed().is_ok() {
            return false;
        }
        {
            let Ok(mut status) = self.install.lock() else { return false };
            if matches!(*status, InstallStatus::Running { .. }) {
                return false;
            }
            *status = InstallStatus::Running { step: "starting".to_owned(), done: 0, total: 0 };
        }
        let engines = self.clone();
        tokio::spawn(async move {
            let mut progress = StatusProgress { engines: engines.clone() };
            let source = crate::install::Source::Registry;
            let result = crate::install::install(&engines.config.models, &source, &mut progress).await;
            let outcome = match result {
                Ok(()) => {
                    let loading = engines.clone();
                    match tokio::task::spawn_blocking(move || loading.warm()).await {
                        Ok(Ok(())) => InstallStatus::Done,
                        Ok(Err(error)) => InstallStatus::Failed { error },
                        Err(error) => InstallStatus::Failed { error: error.to_string() },
                    }
                }
                Err(error) => InstallStatus::Failed { error: error.to_string() },
            };
            match &outcome {
                InstallStatus::Failed { error } => {
                    tracing::warn!(%error, "provider_local: installing the models failed")
                }
                _ => tracing::info!("provider_local: models installed and loaded"),
            }
            engines.set_install(outcome);
        });
        true
    }

    fn set_install(&self, status: InstallStatus) {
        if let Ok(mut current) = self.install.lock() {
            *current = status;
        }
    }
}

/// Progress of a server-started installation, kept for [`LocalEngines::install_status`] and logged.
struct StatusProgress {
    engines: Arc<LocalEngines>,
}

impl crate::install::Progress for StatusProgress {
    fn step(&mut self, message: &str) {
        tracing::info!("provider_local: {message}");
        self.engines.set_install(InstallStatus::Running { step: message.to_owned(), done: 0, total: 0 });
    }

    fn bytes(&mut self, file: &str, done: u64, total: u64) {
        self.engines.set_install(InstallStatus::Running { step: format!("downloading {file}"), done, total });
    }
}
