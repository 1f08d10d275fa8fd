//! The handle of a running provider: what the WebSocket driver (`svc-provider`) and the local
//! pipeline's shell (`svc-local`) both return, so the runtime cannot tell them apart. Only the
//! channels' types live here; whoever spawns the task owns the IO.

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::{ProviderEvent, ProviderInput};

/// Capacity of the runtime → adapter channel (about 1 s of 20 ms audio frames plus commands).
pub const INPUT_CAPACITY: usize = 64;
/// Capacity of the adapter → runtime channel.
pub const EVENT_CAPACITY: usize = 256;

/// The runtime's side of a running adapter.
#[derive(Debug)]
pub struct ProviderSession {
    /// Send inputs here. Audio is best sent with `try_send` (drop a frame rather than stall the room).
    pub input: mpsc::Sender<ProviderInput>,
    /// The one event stream; ends after [`ProviderEvent::Closed`].
    pub events: mpsc::Receiver<ProviderEvent>,
    /// The latest native resumption handle (`has_resumption_handle`).
    pub resumption_handle: watch::Receiver<Option<String>>,
    /// Cancels the adapter task (it closes the socket and emits `Closed`).
    pub shutdown: CancellationToken,
    /// The adapter task.
    pub task: tokio::task::JoinHandle<()>,
}
