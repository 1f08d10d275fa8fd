//! A bad network for UDP media, on demand: a forwarder between clients and a UDP server (the
//! room) that loses, delays, reorders and duplicates datagrams in either direction, and can
//! change the path (the client's address as the server sees it), as a Wi-Fi to cellular switch
//! or a NAT that rebinds does.
//!
//! It works as a 1:1 NAT does: clients send to the link's front address, each client gets its
//! own socket toward the server, and the server's answers go back the same way. The room
//! advertises the front address (`svc serve --room-node-ip LOCAL=PUBLIC`), so real clients
//! (the LiveKit SDKs) reach the room through it without knowing. Impairments are random with a
//! seed, so a run can be repeated; jitter reorders (datagrams with different delays overtake
//! each other), as on a real path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;

/// What one direction of the path does to datagrams.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Impairment {
    /// Share of datagrams lost, 0 to 1, each independently.
    pub loss: f64,
    /// Delay every datagram takes.
    pub delay: Duration,
    /// Extra delay, uniform from zero to this, drawn per datagram (so datagrams reorder).
    pub jitter: Duration,
    /// Share of datagrams delivered twice.
    pub duplicate: f64,
}

/// What one direction did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionCounts {
    /// Datagrams that came in.
    pub received: u64,
    /// Of those, lost.
    pub lost: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
}

#[derive(Default)]
struct State {
    up: Impairment,
    down: Impairment,
    up_counts: DirectionCounts,
    down_counts: DirectionCounts,
    /// Bumped by [`UdpLink::change_path`]: clients whose socket is older get a new one.
    path: u64,
    clients: HashMap<SocketAddr, (u64, Arc<UdpSocket>)>,
    rng: u64,
}

impl State {
    /// xorshift64*: deterministic from the seed, good enough to draw losses and delays.
    fn next_unit(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The delays of the copies to deliver (none: lost), counted.
    fn fate(&mut self, up: bool) -> Vec<Duration> {
        let impairment = if up { self.up } else { self.down };
        let lost = self.next_unit() < impairment.loss;
        let twice = !lost && self.next_unit() < impairment.duplicate;
        let counts = if up { &mut self.up_counts } else { &mut self.down_counts };
        counts.received += 1;
        if lost {
            counts.lost += 1;
            return Vec::new();
        }
        if twice {
            counts.duplicated += 1;
        }
        let copies = if twice { 2 } else { 1 };
        (0..copies).map(|_| impairment.delay + impairment.jitter.mul_f64(self.next_unit())).collect()
    }
}

/// The link; dropping it stops forwarding.
pub struct UdpLink {
    front: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
}

impl Drop for UdpLink {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl UdpLink {
    /// Binds `front` (where clients send) and forwards to `server`, unimpaired until told.
    pub async fn start(front: SocketAddr, server: SocketAddr, seed: u64) -> std::io::Result<UdpLink> {
        let socket = Arc::new(UdpSocket::bind(front).await?);
        let front = socket.local_addr()?;
        let state = Arc::new(Mutex::new(State { rng: seed.max(1), ..State::default() }));
        let stop = CancellationToken::new();
        tokio::spawn(forward_up(socket, server, state.clone(), stop.clone()));
        Ok(UdpLink { front, state, stop })
    }

    /// Where clients send.
    pub fn front(&self) -> SocketAddr {
        self.front
    }

    /// Client → server datagrams from now on.
    pub fn set_up(&self, impairment: Impairment) {
        lock(&self.state).up = impairment;
    }

    /// Server → client datagrams from now on.
    pub fn set_down(&self, impairment: Impairment) {
        lock(&self.state).down = impairment;
    }

    /// Both directions from now on.
    pub fn set_both(&self, impairment: Impairment) {
        let mut state = lock(&self.state);
        state.up = impairment;
        state.down = impairment;
    }

    /// The path changes: each client's next datagram reaches the server from a new address
    /// (and what the server sends to the old one is lost).
    pub fn change_path(&self) {
        lock(&self.state).path += 1;
    }

    /// Client → server and server → client counts so far.
    pub fn counts(&self) -> (DirectionCounts, DirectionCounts) {
        let state = lock(&self.state);
        (state.up_counts, state.down_counts)
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads the front socket: each client's datagrams go to the server from that client's socket.
async fn forward_up(front: Arc<UdpSocket>, server: SocketAddr, state: Arc<Mutex<State>>, stop: CancellationToken) {
    let mut buffer = vec![0u8; 2048];
    loop {
        let (length, client) = tokio::select! {
            () = stop.cancelled() => return,
            received = front.recv_from(&mut buffer) => match received {
                Ok(received) => received,
                // ICMP errors of earlier sends surface here; keep forwarding.
                Err(_) => continue,
            },
        };
        let (path, current) = {
            let state = lock(&state);
            let current = state.clients.get(&client).filter(|(made, _)| *made == state.path);
            (state.path, current.map(|(_, socket)| socket.clone()))
        };
        let upstream = match current {
            Some(upstream) => upstream,
            None => {
                let Ok(socket) = UdpSocket::bind(SocketAddr::new(server.ip(), 0)).await else { continue };
                let socket = Arc::new(socket);
                lock(&state).clients.insert(client, (path, socket.clone()));
                // The old socket's reader ends when it is replaced (and the server's datagrams
                // to that address are lost, as on a changed path).
                tokio::spawn(forward_down(socket.clone(), front.clone(), client, path, state.clone(), stop.clone()));
                socket
            }
        };
        let fate = lock(&state).fate(true);
        deliver(upstream, server, buffer[..length].to_vec(), fate);
    }
}

/// Reads one client's socket toward the server and sends what the server says to the client.
async fn forward_down(
    upstream: Arc<UdpSocket>,
    front: Arc<UdpSocket>,
    client: SocketAddr,
    path: u64,
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
) {
    let mut buffer = vec![0u8; 2048];
    loop {
        let length = tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                if lock(&state).path != path {
                    return;
                }
                continue;
            }
            received = upstream.recv_from(&mut buffer) => match received {
                Ok((length, _)) => length,
                Err(_) => continue,
            },
        };
        if lock(&state).path != path {
            return;
        }
        let fate = lock(&state).fate(false);
        deliver(front.clone(), client, buffer[..length].to_vec(), fate);
    }
}

/// Sends `datagram` once per delay in `fate` (none: lost), each after its delay.
fn deliver(socket: Arc<UdpSocket>, to: SocketAddr, datagram: Vec<u8>, fate: Vec<Duration>) {
    for delay in fate {
        // Undelayed, at once and in order; but a socket just made is not known writable yet
        // (its `try_send_to` fails until the reactor has seen it), so that one is awaited.
        if delay.is_zero() && socket.try_send_to(&datagram, to).is_ok() {
            continue;
        }
        let (socket, datagram) = (socket.clone(), datagram.clone());
        // A task per delayed copy; their delays differ, so datagrams can overtake each other.
        tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            // A datagram the socket refuses is lost, as on a congested link.
            let _ = socket.send_to(&datagram, to).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_forwards_loses_duplicates_and_changes_the_path() {
        let server = UdpSocket::bind("127.0.0.1:0").await.expect("server");
        let link = UdpLink::start("127.0.0.1:0".parse().expect("addr"), server.local_addr().expect("addr"), 7)
            .await
            .expect("link");
        let client = UdpSocket::bind("127.0.0.1:0").await.expect("client");
        let mut buffer = [0u8; 64];

        client.send_to(b"hello", link.front()).await.expect("send");
        let (n, first_path) = server.recv_from(&mut buffer).await.expect("server hears");
        assert_eq!(&buffer[..n], b"hello");
        server.send_to(b"back", first_path).await.expect("answer");
        let (n, from) = client.recv_from(&mut buffer).await.expect("client hears");
        assert_eq!((&buffer[..n], from), (&b"back"[..], link.front()));

        // Everything lost up, everything doubled down.
        link.set_up(Impairment { loss: 1.0, ..Impairment::default() });
        link.set_down(Impairment { duplicate: 1.0, ..Impairment::default() });
        client.send_to(b"lost", link.front()).await.expect("send");
        server.send_to(b"twice", first_path).await.expect("send");
        for _ in 0..2 {
            let (n, _) = client.recv_from(&mut buffer).await.expect("a copy");
            assert_eq!(&buffer[..n], b"twice");
        }
        let (up, down) = link.counts();
        assert_eq!((up.received, up.lost, down.duplicated), (2, 1, 1));

        // A new path: the server sees the client at another address.
        link.set_both(Impairment::default());
        link.change_path();
        client.send_to(b"moved", link.front()).await.expect("send");
        let (n, second_path) = server.recv_from(&mut buffer).await.expect("server hears");
        assert_eq!(&buffer[..n], b"moved");
        assert_ne!(second_path, first_path);
    }
}
