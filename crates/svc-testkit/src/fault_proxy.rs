//! A TCP proxy that breaks links on demand, for fault tests: put it between svc and any upstream
//! (a provider fake, a real service, Postgres) and it forwards bytes both ways until told
//! otherwise. It works below every protocol, so what it does is what a network or a failing peer
//! does: a **stall** (nothing forwarded either way, the sockets held open: a hung peer, a dead
//! NAT binding), a **sever** (both sockets dropped, no goodbye), a **throttle** (the upstream's
//! bytes paced to a rate), a **connect delay** (the upstream reached late: a slow handshake), and
//! raw bytes **injected** toward the client — with builders for the WebSocket cases that need
//! framing ([`close_frame`], [`oversized_frame_header`], or garbage).
//!
//! Faults apply to the connections open when they are asked for; connections opened afterwards
//! pass (so a client that reconnects gets through) unless [`FaultProxy::stall_new`] or
//! [`FaultProxy::refuse_new`] says otherwise. A sever with new connections refused is a restart
//! of the upstream (Postgres restarting: every connection dropped, none taken until it is back).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a live connection is told to do.
#[derive(Debug, Clone)]
enum Fault {
    Stall,
    Sever,
    /// Raw bytes to the client, then (with `true`) close.
    Inject(Vec<u8>, bool),
}

#[derive(Default)]
struct Shared {
    links: Vec<mpsc::UnboundedSender<Fault>>,
    accepted: usize,
    stall_new: bool,
    refuse_new: bool,
    connect_delay: Duration,
    /// Upstream → client bytes per second; `None`: as fast as they come.
    throttle: Option<u64>,
}

/// The proxy; dropping it stops accepting and ends every connection.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    stop: CancellationToken,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl FaultProxy {
    /// Listens on 127.0.0.1:0 and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fault proxy");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = CancellationToken::new();
        let accepting = (shared.clone(), stop.clone());
        tokio::spawn(async move {
            let (shared, stop) = accepting;
            loop {
                let client = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) => client,
                        Err(_) => continue,
                    },
                };
                if lock(&shared).refuse_new {
                    // The upstream is down: the connection is reset before a byte, as a closed
                    // port answers (a close without the reset reads as a protocol error).
                    // Deprecated because a lingering close blocks the thread; a zero linger
                    // resets at once. Failing that, it closes without the reset: still no upstream.
                    #[allow(deprecated)]
                    let _ = client.set_linger(Some(Duration::ZERO));
                    drop(client);
                    continue;
                }
                let (faults_tx, faults) = mpsc::unbounded_channel();
                let (delay, stalled) = {
                    let mut shared = lock(&shared);
                    shared.links.retain(|link| !link.is_closed());
                    shared.links.push(faults_tx);
                    shared.accepted += 1;
                    (shared.connect_delay, shared.stall_new)
                };
                tokio::spawn(link(client, upstream, faults, shared.clone(), stop.clone(), delay, stalled));
            }
        });
        FaultProxy { addr, shared, stop }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        lock(&self.shared).accepted
    }

    /// The open connections stop forwarding, both ways; their sockets stay open.
    pub fn stall(&self) {
        self.tell(&Fault::Stall);
    }

    /// New connections are stalled from the start (or, with `false`, pass again).
    pub fn stall_new(&self, stall: bool) {
        lock(&self.shared).stall_new = stall;
    }

    /// New connections are closed as soon as they are accepted (or, with `false`, pass again):
    /// an upstream that is down.
    pub fn refuse_new(&self, refuse: bool) {
        lock(&self.shared).refuse_new = refuse;
    }

    /// The open connections are dropped at both ends, without a word.
    pub fn sever(&self) {
        self.tell(&Fault::Sever);
    }

    /// `bytes` go to the clients of the open connections, as if the upstream sent them; with
    /// `then_close`, the connections then end.
    pub fn inject(&self, bytes: &[u8], then_close: bool) {
        self.tell(&Fault::Inject(bytes.to_vec(), then_close));
    }

    /// Upstream → client bytes are paced to `bytes_per_second` (`None`: unthrottled), on every
    /// connection, open or new.
    pub fn throttle(&self, bytes_per_second: Option<u64>) {
        lock(&self.shared).throttle = bytes_per_second;
    }

    /// New connections reach the upstream only after `delay`.
    pub fn delay_connects(&self, delay: Duration) {
        lock(&self.shared).connect_delay = delay;
    }

    fn tell(&self, fault: &Fault) {
        let mut shared = lock(&self.shared);
        shared.links.retain(|link| link.send(fault.clone()).is_ok());
    }
}

/// A WebSocket close frame from a server (unmasked) with `code` and no reason.
pub fn close_frame(code: u16) -> Vec<u8> {
    let [high, low] = code.to_be_bytes();
    vec![0x88, 0x02, high, low]
}

/// The header of a binary WebSocket frame from a server announcing `length` bytes (64-bit
/// length form), followed by a few of them: a message larger than a client accepts.
pub fn oversized_frame_header(length: u64) -> Vec<u8> {
    let mut frame = vec![0x82, 0x7f];
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(&[0u8; 64]);
    frame
}

/// Bytes that are no WebSocket frame (reserved bits set, an unknown opcode).
pub fn garbage() -> Vec<u8> {
    vec![0x73, 0xff, 0x13, 0x37, 0x00, 0x42, 0xde, 0xad, 0xbe, 0xef]
}

async fn link(
    mut client: TcpStream,
    upstream: SocketAddr,
    mut faults: mpsc::UnboundedReceiver<Fault>,
    shared: Arc<Mutex<Shared>>,
    stop: CancellationToken,
    delay: Duration,
    mut stalled: bool,
) {
    tokio::time::sleep(delay).await;
    let Ok(mut server) = TcpStream::connect(upstream).await else { return };
    let (mut from_client, mut from_server) = (vec![0u8; 16 << 10], vec![0u8; 16 << 10]);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            fault = faults.recv() => match fault {
                Some(Fault::Stall) => stalled = true,
                Some(Fault::Sever) | None => return,
                Some(Fault::Inject(bytes, then_close)) => {
                    if client.write_all(&bytes).await.is_err() || then_close {
                        return;
                    }
                }
            },
            read = client.read(&mut from_client), if !stalled => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if server.write_all(&from_client[..n]).await.is_err() {
                        return;
                    }
                }
            },
            read = server.read(&mut from_server), if !stalled => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let rate = lock(&shared).throttle;
                    if let Some(rate) = rate.filter(|rate| *rate > 0) {
                        tokio::time::sleep(Duration::from_secs_f64(n as f64 / rate as f64)).await;
                    }
                    if client.write_all(&from_server[..n]).await.is_err() {
                        return;
                    }
                }
            },
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
