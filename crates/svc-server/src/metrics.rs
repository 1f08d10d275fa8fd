//! Prometheus metrics: requests by route and status, a latency histogram, live sessions, open
//! rooms and tokio tasks (what a leak would grow), the audio frames ended sessions' media paths
//! dropped or sent late, the recordings that failed, and (in the svc-counting binary) the heap.

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

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: &'static str,
}

type HistogramFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

/// The server's metrics and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily,
    live_sessions: Gauge,
    open_rooms: Gauge,
    tokio_tasks: Gauge,
    input_frames_dropped: Family<QueueLabels, Counter>,
    output_frames_dropped: Counter,
    output_frames_late: Counter,
    input_packets_dropped_late: Counter,
    input_concealed_ms: Counter,
    recordings_failed: Counter,
    /// The counting allocator's figures, registered only in the binary that counts (`crate::heap`).
    heap: Option<(Counter, Gauge)>,
    /// Held while the media and heap counters catch up, so that two scrapes at once add the
    /// difference once.
    catch_up: std::sync::Mutex<()>,
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
        let open_rooms = Gauge::default();
        registry.register("rooms_open", "Media rooms open in this process's embedded room", open_rooms.clone());
        let tokio_tasks = Gauge::default();
        registry.register("tokio_alive_tasks", "Tasks alive in svc's tokio runtime", tokio_tasks.clone());
        let input_frames_dropped = Family::<QueueLabels, Counter>::default();
        registry.register(
            "session_input_frames_dropped",
            "User audio frames ended sessions lost on the way to the provider, by the queue that refused them",
            input_frames_dropped.clone(),
        );
        let output_frames_dropped = Counter::default();
        registry.register(
            "session_output_frames_dropped",
            "Agent audio frames ended sessions lost (playback overflow, refused by the room)",
            output_frames_dropped.clone(),
        );
        let output_frames_late = Counter::default();
        registry.register(
            "session_output_frames_late",
            "Agent audio frames ended sessions sent more than 20 ms after their due time",
            output_frames_late.clone(),
        );
        let input_packets_dropped_late = Counter::default();
        registry.register(
            "session_input_packets_dropped_late",
            "User audio packets ended sessions dropped as duplicates or later than the room's reorder wait",
            input_packets_dropped_late.clone(),
        );
        let input_concealed_ms = Counter::default();
        registry.register(
            "session_input_concealed_ms",
            "User audio ended sessions filled in (FEC or concealment) for packets the network lost, in ms",
            input_concealed_ms.clone(),
        );
        let recordings_failed = Counter::default();
        registry.register(
            "session_recordings_failed",
            "Ended sessions whose recording could not be made, written or finished (a full or unwritable disk)",
            recordings_failed.clone(),
        );
        let heap = crate::heap::counts().map(|_| {
            let allocations = Counter::default();
            registry.register(
                "heap_allocations",
                "Heap allocations and reallocations made (the svc-counting binary only)",
                allocations.clone(),
            );
            let live_bytes = Gauge::default();
            registry.register(
                "heap_live_bytes",
                "Heap bytes allocated and not freed (the svc-counting binary only)",
                live_bytes.clone(),
            );
            (allocations, live_bytes)
        });
        Metrics {
            registry,
            requests,
            latency,
            live_sessions,
            open_rooms,
            tokio_tasks,
            input_frames_dropped,
            output_frames_dropped,
            output_frames_late,
            input_packets_dropped_late,
            input_concealed_ms,
            recordings_failed,
            heap,
            catch_up: std::sync::Mutex::new(()),
        }
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

    /// Sets the gauges of what this process holds: open rooms (when it has a room server),
    /// tokio's alive tasks, and the heap (in builds that count it).
    pub fn set_process_gauges(&self, open_rooms: Option<usize>, tokio_tasks: usize) {
        if let Some(rooms) = open_rooms {
            self.open_rooms.set(i64::try_from(rooms).unwrap_or(i64::MAX));
        }
        self.tokio_tasks.set(i64::try_from(tokio_tasks).unwrap_or(i64::MAX));
        if let (Some((allocations, live_bytes)), Some(counts)) = (&self.heap, crate::heap::counts()) {
            let _catching_up = self.catch_up.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            catch_up(allocations, counts.allocations);
            live_bytes.set(i64::try_from(counts.live_bytes).unwrap_or(i64::MAX));
        }
    }

    /// Brings the media counters up to the runtime's sums (which only grow).
    pub fn set_media_totals(&self, totals: &svc_session::media::MediaCounts) {
        let _catching_up = self.catch_up.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (queue, total) in [
            ("room_queue", totals.input_dropped_room_queue),
            ("agent_queue", totals.input_dropped_agent_queue),
            ("provider_queue", totals.input_dropped_provider_queue),
        ] {
            catch_up(&self.input_frames_dropped.get_or_create(&QueueLabels { queue }), total);
        }
        catch_up(&self.output_frames_dropped, totals.output_dropped);
        catch_up(&self.output_frames_late, totals.output_late);
        catch_up(&self.input_packets_dropped_late, totals.input_dropped_late);
        catch_up(&self.input_concealed_ms, totals.input_concealed_ms);
        catch_up(&self.recordings_failed, totals.recordings_failed);
    }

    /// Renders the Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Brings `counter` up to `total`, a sum kept elsewhere that only grows (call it holding
/// `Metrics::catch_up`, so that two scrapes at once add the difference once).
fn catch_up(counter: &Counter, total: u64) {
    counter.inc_by(total.saturating_sub(counter.get()));
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
