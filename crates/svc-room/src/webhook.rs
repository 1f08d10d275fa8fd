//! Webhooks: the room's events (built by the core, `core::notify`) POSTed to the configured URLs
//! as livekit-server sends them, so LiveKit's `WebhookReceiver`s take them unchanged: a
//! `WebhookEvent` in protobuf's JSON, `Content-Type: application/webhook+json`, and an
//! `Authorization` header holding a token signed with the room's key whose `sha256` claim is the
//! body's hash ([`RoomCredentials::sign_webhook`]).
//!
//! A receiver never stalls a room: each URL has a bounded queue and one task that sends in order.
//! A room hands an event over without waiting ([`Webhooks::notify`]); when a URL's queue is full
//! the event is dropped and counted, and the count goes out in the next event's `numDropped`, as
//! LiveKit reports it. A failed send (no connection, a timeout, a 5xx or 429) is retried a
//! bounded number of times with doubling waits; one that still fails, or that the receiver
//! refuses (another 4xx), is dropped and counted the same way. At shutdown, after the rooms have
//! closed (and queued their `room_finished`), what is queued gets one attempt each within
//! [`WebhookConfig::drain_for`].

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use livekit_protocol as proto;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::token::RoomCredentials;
use crate::wall_clock::unix_seconds;

/// Where the room's webhooks go, and how hard it tries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// Receivers (`http://` or `https://`); none: no webhooks.
    pub urls: Vec<String>,
    /// Events waiting for one URL; more are dropped and counted.
    pub queue: usize,
    /// Sends after the first that one event may get.
    pub retries: u32,
    /// The wait before the first retry (doubling after each).
    pub first_retry: Duration,
    /// One send's limit, connection to response.
    pub timeout: Duration,
    /// At shutdown, how long what is queued may still take.
    pub drain_for: Duration,
}

impl Default for WebhookConfig {
    /// LiveKit's URL notifier queues 100 events per URL and retries failed sends (its HTTP client
    /// retries four times, waiting 1 s, doubling); the same here.
    fn default() -> WebhookConfig {
        WebhookConfig {
            urls: Vec::new(),
            queue: 100,
            retries: 4,
            first_retry: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
            drain_for: Duration::from_secs(5),
        }
    }
}

/// The receivers' queues, shared by every room.
pub(crate) struct Webhooks {
    targets: Vec<Target>,
}

struct Target {
    queue: mpsc::Sender<proto::WebhookEvent>,
    /// Events lost since the last one sent (full queue, failed sends): the next one reports them.
    dropped: Arc<AtomicI32>,
}

impl Webhooks {
    /// Starts one sender per URL on `tasks`; `None` when there are no URLs. The senders stop
    /// when `drain` is cancelled, once what is queued had its one attempt.
    pub(crate) fn start(
        config: &WebhookConfig,
        credentials: RoomCredentials,
        tasks: &TaskTracker,
        drain: CancellationToken,
    ) -> Option<Arc<Webhooks>> {
        if config.urls.is_empty() {
            return None;
        }
        let tls = svc_http::tls_config();
        let targets = config
            .urls
            .iter()
            .map(|url| {
                let (queue, events) = mpsc::channel(config.queue.max(1));
                let dropped = Arc::new(AtomicI32::new(0));
                let sender = Sender {
                    url: url.clone(),
                    events,
                    dropped: dropped.clone(),
                    credentials: credentials.clone(),
                    config: config.clone(),
                    tls: tls.clone(),
                    drain: drain.clone(),
                };
                tasks.spawn(sender.run());
                Target { queue, dropped }
            })
            .collect();
        Some(Arc::new(Webhooks { targets }))
    }

    /// Stamps `event` (its id and time, as LiveKit's notifier does) and queues it for every URL
    /// without waiting.
    pub(crate) fn notify(&self, mut event: proto::WebhookEvent) {
        event.id = format!("EV_{}", uuid::Uuid::new_v4().simple());
        event.created_at = unix_seconds();
        for target in &self.targets {
            if target.queue.try_send(event.clone()).is_err() {
                target.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(event = %event.event, "webhook queue full; event dropped");
            }
        }
    }
}

/// One URL's sender task.
struct Sender {
    url: String,
    events: mpsc::Receiver<proto::WebhookEvent>,
    dropped: Arc<AtomicI32>,
    credentials: RoomCredentials,
    config: WebhookConfig,
    tls: Arc<svc_http::TlsClientConfig>,
    drain: CancellationToken,
}

impl Sender {
    async fn run(mut self) {
        loop {
            let event = tokio::select! {
                biased;
                event = self.events.recv() => event,
                () = self.drain.cancelled() => None,
            };
            let Some(event) = event else { break };
            self.deliver(event, self.config.retries).await;
        }
        // Shutting down: the rooms have closed; what they queued gets one attempt each, in time.
        let deadline = tokio::time::Instant::now() + self.config.drain_for;
        while let Ok(event) = self.events.try_recv() {
            if tokio::time::timeout_at(deadline, self.deliver(event, 0)).await.is_err() {
                tracing::warn!(url = %self.url, "webhooks still queued at shutdown were dropped");
                break;
            }
        }
    }

    /// Sends one event, retrying up to `retries` times; counts it as dropped if it never lands.
    async fn deliver(&self, mut event: proto::WebhookEvent, retries: u32) {
        #[allow(deprecated)]
        {
            event.num_dropped = self.dropped.swap(0, Ordering::Relaxed);
        }
        let body = match serde_json::to_vec(&event) {
            Ok(body) => Bytes::from(body),
            Err(error) => {
                tracing::warn!(%error, "webhook event does not encode");
                return;
            }
        };
        let mut wait = self.config.first_retry;
        for attempt in 0..=retries {
            if attempt > 0 {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = self.drain.cancelled() => break,
                }
                wait = wait.saturating_mul(2);
            }
            let token = match self.credentials.sign_webhook(&body, unix_seconds()) {
                Ok(token) => token,
                Err(error) => {
                    tracing::warn!(%error, "webhook cannot be signed");
                    break;
                }
            };
            let headers = [("authorization".to_owned(), token)];
            let sent = svc_http::post_once(
                &self.url,
                "application/webhook+json",
                &headers,
                body.clone(),
                self.tls.clone(),
                self.config.timeout,
            )
            .await;
            match sent {
                Ok(status) if (200..300).contains(&status) => return,
                // The receiver refused this event; sending it again would not change its mind.
                Ok(status) if (400..500).contains(&status) && status != 429 => {
                    tracing::warn!(url = %self.url, event = %event.event, status, "webhook refused");
                    break;
                }
                Ok(status) => tracing::info!(url = %self.url, event = %event.event, status, attempt, "webhook failed"),
                Err(error) => tracing::info!(url = %self.url, event = %event.event, %error, attempt, "webhook failed"),
            }
        }
        #[allow(deprecated)]
        let lost = 1 + event.num_dropped;
        self.dropped.fetch_add(lost, Ordering::Relaxed);
    }
}
