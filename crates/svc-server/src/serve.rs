//! `svc serve`: the server assembled from its parts (store, media room, phone dial-out, session
//! runtime, HTTP), run until SIGINT/SIGTERM, then taken down in order: the drain (live sessions
//! run on, new ones are refused), the sessions' ends stored, the calls hung up, the rooms closed,
//! the HTTP side drained.

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::config::Config;

/// Runs `svc serve` until it is stopped.
pub(crate) async fn serve(config: Config) -> anyhow::Result<()> {
    // Signal handlers are installed before "svc is serving" can be seen: a SIGTERM right after it
    // must drain, not kill (the default action).
    let mut signals = StopSignals::install();
    let grace = config.shutdown_grace;
    let drain = config.drain;
    let listen = config.listen;
    let store = AppState::connect_store(&config).await?;
    // Sessions a previous run of this node left live (it was killed) end as `error` now: a SQLite
    // database has exactly one serving node, so all of its live sessions are orphans.
    let orphans_of = match store.backend() {
        svc_store::Backend::Sqlite => None,
        svc_store::Backend::Postgres => Some(config.node_id.as_str()),
    };
    let orphans =
        store.end_orphaned_sessions(orphans_of, crate::app::now_us()).await.context("ending orphaned sessions")?;
    if !orphans.is_empty() {
        tracing::warn!(count = orphans.len(), sessions = ?orphans, "ended the sessions a previous run left live");
    }
    // With --livekit-url the sessions' rooms are on that server and the embedded room is off.
    let (room, rooms) = match &config.livekit {
        Some(livekit) => {
            tracing::info!(livekit_url = %livekit.url, "sessions' rooms are on this LiveKit server (the agents join it as clients); the embedded room is off");
            (None, svc_session::SessionRooms::External(crate::app::external_rooms(livekit)?))
        }
        None => {
            let room = start_room(&config, &store).await?;
            (Some(room.clone()), svc_session::SessionRooms::Embedded(room))
        }
    };
    let provider_env = svc_provider::endpoint::ProviderEnv::from_env().context("reading provider settings")?;
    // Phone dial-out: the SIP user agent and its calls stop after the sessions have ended (their
    // rooms closing hangs each call up first).
    let phone_shutdown = CancellationToken::new();
    let phone = match (&config.phone, &room) {
        (Some(phone_config), Some(room)) => {
            let phone = svc_phone::PhoneService::start(phone_config.clone(), room.clone(), phone_shutdown.clone())
                .await
                .context("starting phone dial-out (--sip-trunk)")?;
            tracing::info!(trunk = %phone_config.trunk_uri, sip = %phone.sip_addr(), "phone dial-out is ready");
            // LiveKit's SIP API on the room (`CreateSIPParticipant`) dials through it too.
            room.set_sip_dialer(std::sync::Arc::new(phone.clone()));
            Some(phone)
        }
        _ => {
            match config.livekit.as_ref().and_then(|livekit| livekit.sip.as_ref()) {
                Some(sip) => tracing::info!(trunk_id = %sip.trunk_id,
                    "phone dial-out: through the LiveKit server's SIP service (CreateSIPParticipant)"),
                None => tracing::info!("phone dial-out: off (no --sip-trunk or --livekit-sip-trunk-id)"),
            }
            None
        }
    };
    let runtime = svc_session::Runtime::new(svc_session::RuntimeConfig {
        store: store.clone(),
        rooms,
        provider_env,
        local: Some(config.local.clone()),
        recordings_dir: config.recordings_dir(),
        node_id: config.node_id.clone(),
        timing: svc_session::core::Timing::default(),
        phone: phone.clone(),
        tool_backends: config.tool_backends.clone(),
    });
    // Worker mode: the sessions come from the LiveKit server's dispatch, to whichever node it
    // picks; the worker stops after the sessions have ended (their jobs' ends reported).
    let worker = match config.livekit.as_ref().and_then(|livekit| livekit.worker.as_ref()) {
        Some(worker) => {
            let settings = svc_session::worker::WorkerSettings {
                agent_name: worker.agent_name.clone(),
                capacity: worker.capacity,
                version: env!("CARGO_PKG_VERSION").to_owned(),
            };
            Some(svc_session::worker::JobWorker::start(&runtime, settings).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    let dispatcher = std::sync::Arc::new(crate::dispatch::RuntimeDispatcher(runtime.clone()));
    let app = AppState::with_dispatcher(config, store, dispatcher).await?;
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    let local = listener.local_addr()?;
    if app.config.dev_workspace {
        let credential = crate::playground::provision_dev_credential(&app.store, &app.config)
            .await
            .context("provisioning the dev workspace")?;
        tracing::info!(workspace = %credential.workspace, key_id = %credential.key_id,
            "dev workspace: the playground signs in with this run's key (loopback only; --dev-workspace off disables)");
        // Set once, at start, before anyone reads it.
        let _ = app.dev_credential.set(credential);
    } else if app.config.listen.ip().is_loopback() {
        tracing::info!("dev workspace: off (--dev-workspace off); the playground asks for a credential");
    } else {
        tracing::info!("dev workspace: off (not a loopback listen address); the playground asks for a credential");
    }
    let voice: Vec<&str> =
        crate::config::provider_aliases().into_iter().filter(|alias| app.config.voice_available(alias)).collect();
    if voice.is_empty() {
        tracing::warn!(
            "no provider key is set and the local models are not installed: sessions will be refused; set \
             GEMINI_API_KEY, OPENAI_API_KEY or XAI_API_KEY, or run `svc models install` for provider_local"
        );
    }
    match app.config.local.installed() {
        Ok(()) => {
            if !svc_local::tts::available() {
                tracing::warn!(
                    "provider_local: espeak-ng is not installed, so local agents cannot speak \
                    (apt-get install espeak-ng); they still listen and answer in the transcript"
                );
            }
            // Load the shared models now, so the first local session does not wait for them.
            let local = app.config.local.clone();
            tokio::task::spawn_blocking(move || match local.warm() {
                Ok(()) => tracing::info!("provider_local: models loaded"),
                Err(error) => tracing::warn!(%error, "provider_local: the models could not be loaded"),
            });
        }
        Err(missing) => tracing::info!("provider_local: off ({missing})"),
    }
    tracing::info!(listen = %local, public_url = %app.config.public_url, backend = ?app.store.backend(),
        node = %app.config.node_id, providers = %voice.join(","), "svc is serving");
    tracing::info!("playground: {}", app.config.public_url);
    let shutdown = CancellationToken::new();
    let reaper = tokio::spawn(crate::dispatch::run_reaper(app.store.clone(), shutdown.clone()));
    let server =
        tokio::spawn(crate::run_with_room(listener, app.clone(), room.clone(), shutdown.clone().cancelled_owned()));
    signals.next().await;
    // The drain: new sessions are refused (503, `/healthz` says `draining`) while the live ones
    // run on until they end by themselves or the drain is over (`session-ending-soon`, then
    // `session-ended` with `server_shutdown`); a second signal cuts it short.
    runtime.drain(drain);
    let live = runtime.live_sessions();
    if live > 0 {
        tracing::info!(
            live_sessions = live,
            drain_seconds = drain.as_secs(),
            "shutting down: new sessions are refused; the live ones may run on until the drain is over (a second signal ends them now)"
        );
    } else {
        tracing::info!(grace_seconds = grace.as_secs(), "shutting down: draining in-flight requests");
    }
    tokio::select! {
        () = runtime.idle() => {}
        () = signals.next() => tracing::warn!("a second signal: ending the live sessions now"),
        () = tokio::time::sleep(drain + grace) => tracing::warn!("sessions still running after the drain; ending them"),
    }
    // Sessions end first (each says `session-ended` and stores its end while its room is still
    // up), then the rooms close (every participant gets a leave with `SERVER_SHUTDOWN`), then the
    // HTTP side drains.
    if tokio::time::timeout(grace, runtime.shutdown()).await.is_err() {
        tracing::warn!("grace period over while ending sessions");
    }
    if let Some(worker) = &worker
        && tokio::time::timeout(grace, worker.stop()).await.is_err()
    {
        tracing::warn!("grace period over while stopping the agent worker");
    }
    if let Some(phone) = &phone {
        phone_shutdown.cancel();
        if tokio::time::timeout(grace, phone.closed()).await.is_err() {
            tracing::warn!("grace period over while hanging up phone calls");
        }
    }
    if let Some(room) = &room
        && tokio::time::timeout(grace, room.shutdown()).await.is_err()
    {
        tracing::warn!("grace period over while closing media rooms");
    }
    shutdown.cancel();
    match tokio::time::timeout(grace, server).await {
        Ok(joined) => joined.context("server task")?.context("server")?,
        Err(_) => tracing::warn!("grace period over; dropping remaining connections"),
    }
    // The reaper logs its own failures; only its end matters here.
    let _ = reaper.await;
    app.store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Starts the embedded room (its key configured, or the one kept in the database).
async fn start_room(config: &Config, store: &svc_store::Store) -> anyhow::Result<svc_room::RoomServer> {
    let room_credentials = AppState::room_credentials(config, store).await?;
    let room_config = svc_room::RoomServerConfig {
        udp_port: config.room.udp_port,
        node_ips: config.room.node_ips.clone(),
        public_ips: config.room.public_ips.clone(),
        webhooks: svc_room::WebhookConfig {
            urls: config.room.webhook_urls.iter().map(ToString::to_string).collect(),
            ..Default::default()
        },
        ..Default::default()
    };
    let room = svc_room::RoomServer::start(room_config, room_credentials).await.context("starting the media room")?;
    let room_udp: Vec<String> = room.udp_addrs().iter().map(ToString::to_string).collect();
    tracing::info!(room_udp = %room_udp.join(","), room_url = %config.room.url, "media room is serving");
    Ok(room)
}

/// SIGINT and SIGTERM: each [`StopSignals::next`] resolves on the next one (the first starts the
/// drain, a second cuts it short). The handlers are registered when this is made, so a signal
/// that comes before anyone waits is not lost (nor does it kill, the default action).
struct StopSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn install() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            StopSignals {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        {
            // A handler that could not be installed waits forever, so the other still works.
            async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) {
                let delivered = match signal {
                    Some(signal) => signal.recv().await.is_some(),
                    None => false,
                };
                if !delivered {
                    std::future::pending::<()>().await;
                }
            }
            tokio::select! {
                () = recv(&mut self.interrupt) => {}
                () = recv(&mut self.terminate) => {}
            }
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
