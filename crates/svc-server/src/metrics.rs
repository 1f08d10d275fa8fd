//! Prometheus metrics: requests by route and status, a latency histogram, live sessions.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::app::App;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

type HistogramFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

/// The server's metrics and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily,
    live_sessions: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("svc");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("http_requests", "HTTP requests by route template, method and status", requests.clone());
        let latency: HistogramFamily =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_25, 2.0, 16)));
        registry.register("http_request_duration_seconds", "HTTP request latency by route template", latency.clone());
        let live_sessions = Gauge::default();
        registry.register("live_sessions", "Sessions with status active", live_sessions.clone());
        Metrics { registry, requests, latency, live_sessions }
    }

    fn observe(&self, route: &str, method: &str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels { route: route.to_owned(), method: method.to_owned(), status })
            .inc();
        self.latency.get_or_create(&RouteLabels { route: route.to_owned() }).observe(seconds);
    }

    /// Sets the live-session gauge.
    pub fn set_live_sessions(&self, count: i64) {
        self.live_sessions.set(count);
    }

    /// Renders the Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// When the request arrived, for handlers that report their own server-side timings.
#[derive(Debug, Clone, Copy)]
pub struct RequestStarted(pub Instant);

/// Middleware recording every request under its route template (never the raw path, whose ids
/// would make the label set unbounded).
pub async fn track(State(app): State<App>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    request.extensions_mut().insert(RequestStarted(started));
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let response = next.run(request).await;
    app.metrics.observe(&route, &method, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}
