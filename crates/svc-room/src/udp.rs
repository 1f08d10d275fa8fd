//! The room server's UDP sockets and the demultiplexer that hands each datagram to the room that
//! owns its peer connection.
//!
//! Every peer connection gets a process-unique ICE username fragment. A STUN binding request
//! names it in its USERNAME attribute (`<our ufrag>:<their ufrag>`), which routes the request and
//! teaches the demultiplexer the client's address; DTLS, SRTP and SCTP that follow from that
//! address take the learned route. One socket is bound per advertised host address, so the
//! destination of every datagram is known exactly (str0m matches it against its candidates).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::BytesMut;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::actor::RoomCommand;
use crate::core::{Key, PcRole};
use crate::stun::stun_local_ufrag;

/// Identifies one room actor (names can be reused after a room closes).
pub(crate) type RoomId = u64;

/// Where a datagram goes.
#[derive(Clone)]
struct Route {
    room: RoomId,
    key: Key,
    role: PcRole,
    sender: mpsc::Sender<RoomCommand>,
    /// The room's count of datagrams its queue refused.
    dropped: Arc<AtomicU64>,
}

/// A (client, local socket) address pair.
type AddressPair = (SocketAddr, SocketAddr);
/// The ufrags and learned address pairs of one participant.
type OwnedRoutes = (Vec<String>, Vec<AddressPair>);

#[derive(Default)]
struct Routes {
    by_ufrag: HashMap<String, Route>,
    by_address: HashMap<(SocketAddr, SocketAddr), Route>,
    /// What to forget when a participant leaves.
    owned: HashMap<(RoomId, Key), OwnedRoutes>,
}

/// The sockets plus the routing table.
pub(crate) struct UdpMux {
    /// Each socket with the address it is advertised at: its bound address (looked up once:
    /// `local_addr` is a syscall), or the public one a 1:1 NAT maps to it. Datagrams it receives
    /// are addressed to that (str0m matches their destination against its host candidates), and
    /// datagrams from that address leave through it.
    sockets: Vec<(SocketAddr, Arc<UdpSocket>)>,
    routes: Mutex<Routes>,
}

/// Largest datagram read; WebRTC keeps packets under the path MTU.
const MAX_DATAGRAM: usize = 2048;
/// The block datagrams are received into (see `receive_loop`): 32 of the largest.
const RECEIVE_BLOCK: usize = 64 * 1024;

impl UdpMux {
    /// Binds one socket per address (port 0 picks a free port per socket); a socket whose
    /// address is mapped in `public` (bound → public) is advertised at the public address.
    pub(crate) async fn bind(ips: &[IpAddr], port: u16, public: &[(IpAddr, IpAddr)]) -> std::io::Result<Arc<UdpMux>> {
        let mut sockets = Vec::new();
        for ip in ips {
            let socket = UdpSocket::bind(SocketAddr::new(*ip, port)).await?;
            let mut advertised = socket.local_addr()?;
            if let Some((_, public)) = public.iter().find(|(bound, _)| bound == ip) {
                advertised.set_ip(*public);
            }
            sockets.push((advertised, Arc::new(socket)));
        }
        Ok(Arc::new(UdpMux { sockets, routes: Mutex::new(Routes::default()) }))
    }

    /// The advertised addresses (host candidates).
    pub(crate) fn local_addrs(&self) -> Vec<SocketAddr> {
        self.sockets.iter().map(|(address, _)| *address).collect()
    }

    /// Starts one receive loop per socket; they end with `shutdown`.
    pub(crate) fn spawn_receivers(
        self: &Arc<Self>,
        tasks: &tokio_util::task::TaskTracker,
        shutdown: CancellationToken,
    ) {
        for (address, socket) in &self.sockets {
            let mux = self.clone();
            let socket = socket.clone();
            let address = *address;
            let shutdown = shutdown.clone();
            tasks.spawn(async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = mux.receive_loop(socket, address) => {}
                }
            });
        }
    }

    async fn receive_loop(&self, socket: Arc<UdpSocket>, destination: SocketAddr) {
        // Datagrams are read into one block and split off it, so that a datagram costs no
        // allocation of its own: a new block is allocated only when the rooms still hold
        // datagrams of the old one (it is reused in place once they are all handled).
        // (`bytes` sizes each new block as the first one.)
        let mut block = BytesMut::with_capacity(RECEIVE_BLOCK);
        loop {
            block.reserve(MAX_DATAGRAM);
            let (length, source) = match socket.recv_buf_from(&mut block).await {
                Ok(received) => received,
                // ICMP port unreachable and friends surface here on Linux; keep serving.
                Err(error) => {
                    tracing::debug!(%error, "udp receive error");
                    continue;
                }
            };
            let datagram = block.split_to(length).freeze();
            let Some(route) = self.route(source, destination, &datagram) else { continue };
            let command = RoomCommand::Datagram {
                key: route.key,
                role: route.role,
                source,
                destination,
                contents: datagram,
                received_at: Instant::now(),
            };
            // A room that cannot keep up loses datagrams, exactly as a congested network would;
            // the room counts them (a session's end reports them). A closed room loses nothing.
            if let Err(mpsc::error::TrySendError::Full(_)) = route.sender.try_send(command) {
                route.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn route(&self, source: SocketAddr, destination: SocketAddr, datagram: &[u8]) -> Option<Route> {
        let mut routes = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(ufrag) = stun_local_ufrag(datagram) {
            let route = routes.by_ufrag.get(ufrag)?.clone();
            let pair = (source, destination);
            if routes.by_address.insert(pair, route.clone()).is_none() {
                routes.owned.entry((route.room, route.key)).or_default().1.push(pair);
            }
            return Some(route);
        }
        routes.by_address.get(&(source, destination)).cloned()
    }

    /// Registers the ufrag of a new peer connection.
    pub(crate) fn add_route(
        &self,
        ufrag: String,
        room: RoomId,
        key: Key,
        role: PcRole,
        sender: mpsc::Sender<RoomCommand>,
        dropped: Arc<AtomicU64>,
    ) {
        let mut routes = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        routes.owned.entry((room, key)).or_default().0.push(ufrag.clone());
        routes.by_ufrag.insert(ufrag, Route { room, key, role, sender, dropped });
    }

    /// Forgets every route of a participant.
    pub(crate) fn remove_routes(&self, room: RoomId, key: Key) {
        let mut routes = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((ufrags, addresses)) = routes.owned.remove(&(room, key)) {
            for ufrag in ufrags {
                routes.by_ufrag.remove(&ufrag);
            }
            for address in addresses {
                routes.by_address.remove(&address);
            }
        }
    }

    /// Forgets every route of a room.
    pub(crate) fn remove_room(&self, room: RoomId) {
        let keys: Vec<Key> = {
            let routes = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            routes.owned.keys().filter(|(owner, _)| *owner == room).map(|(_, key)| *key).collect()
        };
        for key in keys {
            self.remove_routes(room, key);
        }
    }

    /// Sends a datagram from the socket bound to `source`. Never waits: a full socket buffer
    /// drops the datagram, which WebRTC tolerates.
    pub(crate) fn send(&self, source: SocketAddr, destination: SocketAddr, contents: &[u8]) {
        let socket = self
            .sockets
            .iter()
            .find(|(address, _)| *address == source)
            .or_else(|| self.sockets.first())
            .map(|(_, socket)| socket);
        if let Some(socket) = socket
            && let Err(error) = socket.try_send_to(contents, destination)
        {
            tracing::trace!(%error, "udp send dropped");
        }
    }

    /// Routes currently known (for tests and metrics).
    pub(crate) fn route_count(&self) -> (usize, usize) {
        let routes = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (routes.by_ufrag.len(), routes.by_address.len())
    }
}
