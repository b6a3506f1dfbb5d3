//! The control thread: listening sockets (one per path, shared by every server
//! interface on it), control channels and their handshakes, teardown and the client's
//! reconnection with backoff.
//!
//! Each channel is a state machine in which each state takes a fixed set of message
//! types (DPDK's strictness, applied to both roles); anything else, and any check that
//! fails, sends a DISCONNECT with a named reason and tears the channel down: the
//! connection is unpublished, regions unmapped once no port holds them, every passed
//! descriptor closed. Messages go one at a time, each answered (ACK, or CONNECTED),
//! as libmemif and DPDK expect.

use crate::desc::DESC_LEN;
use crate::link::{Conn, Link, LinkState};
use crate::msg::{self, AddRing, Hello, Init, Msg, VERSION};
use crate::ring::{self, Ring, RingRef};
use crate::sys::{self, Mapping, SocketAddr};
use crate::{Config, Error, MAX_LOG2_RING, MAX_QUEUES, MAX_REGIONS, Role};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tracing::{info, warn};

mod handshake;
use handshake::{
    check_region, check_ring, client_connect, client_setup, server_connect, server_init,
};

/// A client's first retry comes after this, doubling up to `BACKOFF_MAX`.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The longest a handshake may take before it is given up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest region a peer may add.
const MAX_REGION_SIZE: u64 = 1 << 34;

/// A named reason for tearing a channel down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// Short, for counters ("bad_region_index").
    pub key: &'static str,
    /// Sent in DISCONNECT and logged.
    pub text: String,
}

fn reason(key: &'static str, text: impl Into<String>) -> Reason {
    Reason {
        key,
        text: text.into(),
    }
}

enum Server {
    AwaitInit,
    Setup,
    Connected,
}

enum Client {
    AwaitHello,
    /// Waiting for the ACK of what was sent last; `outbox` holds the rest.
    Setup,
    AwaitConnected,
    Connected,
}

enum Side {
    Server(Server),
    Client(Client),
}

/// A region or ring received but not yet connected (server), or made (client).
#[derive(Default)]
struct Pending {
    regions: Vec<Mapping>,
    region_fds: Vec<OwnedFd>,
    c2s: Vec<Option<(RingRef, OwnedFd)>>,
    s2c: Vec<Option<(RingRef, OwnedFd)>>,
    /// Client: where buffers start, and the sizes agreed.
    buffers: u32,
    log2: u8,
    outbox: VecDeque<(Msg, Option<RawFd>)>,
}

struct Channel {
    id: u64,
    fd: OwnedFd,
    link: Option<Arc<Link>>,
    side: Side,
    pending: Pending,
    conn: Option<Arc<Conn>>,
    started: Instant,
    /// Server: the socket it was accepted on.
    socket: Option<SocketAddr>,
}

struct ClientSlot {
    link: Arc<Link>,
    channel: Option<u64>,
    next_try: Instant,
    backoff: Duration,
}

#[derive(Default)]
struct State {
    listeners: BTreeMap<SocketAddr, OwnedFd>,
    servers: Vec<Arc<Link>>,
    clients: Vec<ClientSlot>,
    channels: Vec<Channel>,
    next_id: u64,
}

struct Shared {
    state: Mutex<State>,
    wake: OwnedFd,
    stop: AtomicBool,
}

/// The memif control plane of a process: add interfaces, get their [`Handle`]s.
pub struct Manager {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// An interface added to a [`Manager`]; dropping it removes the interface (its peer
/// gets a DISCONNECT).
pub struct Handle {
    link: Arc<Link>,
}

impl Handle {
    pub fn link(&self) -> &Arc<Link> {
        &self.link
    }

    /// A data path port of worker `index` of `count`: receives from its share of the
    /// queues, transmits on queue `index`; `batch` frames a call.
    pub fn port(&self, index: usize, count: usize, batch: usize) -> io::Result<crate::Port> {
        crate::Port::new(self.link.clone(), Some((index, count)), index, batch)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.link.removed.store(true, Ordering::Release);
        sys::eventfd_signal(self.link.control_wake);
    }
}

impl Manager {
    /// Starts the control thread.
    pub fn start() -> io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: sys::eventfd()?,
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("memif-control".into())
            .spawn(move || run(&s))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Adds an interface: a server starts listening (the socket is created now, so
    /// that a bad path is an error here), a client starts connecting.
    pub fn add(&self, cfg: Config) -> Result<Handle, Error> {
        if let Err((field, message)) = cfg.validate() {
            return Err(Error::Config {
                name: cfg.name.clone(),
                field,
                message,
            });
        }
        let link = Arc::new(Link::new(cfg, self.shared.wake.as_raw_fd())?);
        let cfg = &link.cfg;
        let mut st = self
            .shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match cfg.role {
            Role::Server => {
                if st.servers.iter().any(|l| {
                    l.cfg.socket == cfg.socket
                        && l.cfg.id == cfg.id
                        && !l.removed.load(Ordering::Acquire)
                }) {
                    return Err(Error::DuplicateId {
                        name: cfg.name.clone(),
                        id: cfg.id,
                        socket: cfg.socket.to_string(),
                    });
                }
                if !st.listeners.contains_key(&cfg.socket) {
                    let fd = sys::listen(&cfg.socket).map_err(|source| Error::Socket {
                        name: cfg.name.clone(),
                        socket: cfg.socket.to_string(),
                        source,
                    })?;
                    info!(socket = %cfg.socket, "memif: listening");
                    st.listeners.insert(cfg.socket.clone(), fd);
                }
                st.servers.push(link.clone());
            }
            Role::Client => st.clients.push(ClientSlot {
                link: link.clone(),
                channel: None,
                next_try: Instant::now(),
                backoff: BACKOFF_MIN,
            }),
        }
        drop(st);
        sys::eventfd_signal(self.shared.wake.as_raw_fd());
        Ok(Handle { link })
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        sys::eventfd_signal(self.shared.wake.as_raw_fd());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Clone, Copy)]
enum Tag {
    Wake,
    Listener(usize),
    Channel(u64),
}

fn run(sh: &Shared) {
    let mut pfds: Vec<libc::pollfd> = Vec::new();
    let mut tags: Vec<Tag> = Vec::new();
    let mut addrs: Vec<SocketAddr> = Vec::new();
    loop {
        let timeout = {
            let mut st = sh.state.lock().unwrap_or_else(PoisonError::into_inner);
            if sh.stop.load(Ordering::Acquire) {
                let ids: Vec<u64> = st.channels.iter().map(|c| c.id).collect();
                for id in ids {
                    teardown(&mut st, id, Some(reason("shutdown", "ovr shutting down")));
                }
                for (a, _) in std::mem::take(&mut st.listeners) {
                    unlink(&a);
                }
                return;
            }
            housekeeping(&mut st);
            pfds.clear();
            tags.clear();
            addrs.clear();
            let mut push = |fd: RawFd, t: Tag| {
                pfds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
                tags.push(t);
            };
            push(sh.wake.as_raw_fd(), Tag::Wake);
            for (i, (a, fd)) in st.listeners.iter().enumerate() {
                push(fd.as_raw_fd(), Tag::Listener(i));
                addrs.push(a.clone());
            }
            for c in &st.channels {
                push(c.fd.as_raw_fd(), Tag::Channel(c.id));
            }
            let now = Instant::now();
            st.clients
                .iter()
                .filter(|c| c.channel.is_none())
                .map(|c| c.next_try.saturating_duration_since(now))
                .min()
                .unwrap_or(Duration::from_millis(500))
                .min(Duration::from_millis(500))
        };
        if sys::poll(&mut pfds, timeout.as_millis() as i32 + 1).is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut st = sh.state.lock().unwrap_or_else(PoisonError::into_inner);
        for (p, t) in pfds.iter().zip(&tags) {
            if p.revents == 0 {
                continue;
            }
            match *t {
                Tag::Wake => {
                    sys::eventfd_drain(sh.wake.as_raw_fd());
                }
                Tag::Listener(i) => {
                    if let Some(a) = addrs.get(i) {
                        accept_all(&mut st, a);
                    }
                }
                Tag::Channel(id) => receive_all(&mut st, id),
            }
        }
    }
}

fn unlink(a: &SocketAddr) {
    if let SocketAddr::Path(p) = a {
        let _ = std::fs::remove_file(p);
    }
}

/// Removed interfaces, breaches reported by ports, handshakes that take too long,
/// clients due for a retry.
fn housekeeping(st: &mut State) {
    let now = Instant::now();
    // Breaches and removals.
    let mut doomed: Vec<(u64, Reason)> = Vec::new();
    for c in &st.channels {
        let Some(l) = &c.link else {
            if now - c.started > HANDSHAKE_TIMEOUT {
                doomed.push((c.id, reason("timeout", "handshake timed out")));
            }
            continue;
        };
        if l.removed.load(Ordering::Acquire) {
            doomed.push((c.id, reason("removed", "interface deleted")));
        } else if let Some(b) = l
            .breach
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            doomed.push((c.id, reason("ring_breach", b)));
        } else if c.conn.is_none() && now - c.started > HANDSHAKE_TIMEOUT {
            doomed.push((c.id, reason("timeout", "handshake timed out")));
        }
    }
    for (id, r) in doomed {
        teardown(st, id, Some(r));
    }
    let before: Vec<SocketAddr> = st.servers.iter().map(|l| l.cfg.socket.clone()).collect();
    st.servers.retain(|l| !l.removed.load(Ordering::Acquire));
    st.clients
        .retain(|c| !c.link.removed.load(Ordering::Acquire));
    for a in before {
        if !st.servers.iter().any(|l| l.cfg.socket == a) && st.listeners.remove(&a).is_some() {
            unlink(&a);
            info!(socket = %a, "memif: no interface left on the socket: closed");
        }
    }
    // Clients due.
    for i in 0..st.clients.len() {
        let c = &st.clients[i];
        if c.channel.is_some() || c.next_try > now {
            continue;
        }
        let link = c.link.clone();
        match sys::connect(&link.cfg.socket) {
            Ok(fd) => {
                let id = st.next_id;
                st.next_id += 1;
                link.set_status(|s| s.state = LinkState::Connecting);
                st.channels.push(Channel {
                    id,
                    fd,
                    link: Some(link),
                    side: Side::Client(Client::AwaitHello),
                    pending: Pending::default(),
                    conn: None,
                    started: now,
                    socket: None,
                });
                st.clients[i].channel = Some(id);
            }
            Err(e) => {
                let c = &mut st.clients[i];
                c.next_try = now + c.backoff;
                c.backoff = (c.backoff * 2).min(BACKOFF_MAX);
                link.set_status(|s| {
                    s.state = LinkState::Down;
                    s.last_reason = format!("connect {}: {e}", link.cfg.socket);
                });
            }
        }
    }
}

fn accept_all(st: &mut State, a: &SocketAddr) {
    loop {
        let Some(l) = st.listeners.get(a) else { return };
        match sys::accept(l) {
            Ok(Some(fd)) => {
                let id = st.next_id;
                st.next_id += 1;
                let hello = Msg::Hello(Hello {
                    name: "ovr".into(),
                    min_version: VERSION,
                    max_version: VERSION,
                    max_region: (MAX_REGIONS - 1) as u16,
                    max_s2c_ring: (MAX_QUEUES - 1) as u16,
                    max_c2s_ring: (MAX_QUEUES - 1) as u16,
                    max_log2_ring_size: MAX_LOG2_RING,
                });
                if sys::send(&fd, &hello.emit(), None).is_err() {
                    continue;
                }
                st.channels.push(Channel {
                    id,
                    fd,
                    link: None,
                    side: Side::Server(Server::AwaitInit),
                    pending: Pending::default(),
                    conn: None,
                    started: Instant::now(),
                    socket: Some(a.clone()),
                });
            }
            Ok(None) => return,
            Err(e) => {
                warn!(socket = %a, "memif: accept: {e}");
                return;
            }
        }
    }
}

fn receive_all(st: &mut State, id: u64) {
    let mut buf = [0u8; msg::MSG_LEN];
    loop {
        let Some(c) = st.channels.iter().find(|c| c.id == id) else {
            return;
        };
        let r = match sys::recv(&c.fd, &mut buf) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                teardown(st, id, None);
                let _ = e;
                return;
            }
        };
        if r.len == 0 {
            let why = reason("peer_closed", "peer closed the control socket");
            peer_gone(st, id, why);
            return;
        }
        let result = if r.truncated || r.len != msg::MSG_LEN {
            Err(reason("bad_message_size", "invalid message size"))
        } else if r.ctrunc {
            Err(reason("control_truncated", "control data truncated"))
        } else {
            match Msg::parse(&buf) {
                Ok(m) => handle(st, id, m, r.fds),
                Err(e) => Err(reason("bad_message", e.to_string())),
            }
        };
        match result {
            Ok(()) => {}
            Err(why) if why.key == "peer_disconnect" => {
                peer_gone(st, id, why);
                return;
            }
            Err(why) => {
                teardown(st, id, Some(why));
                return;
            }
        }
    }
}

/// The peer went away or said DISCONNECT: tear down without answering.
fn peer_gone(st: &mut State, id: u64, why: Reason) {
    if let Some(c) = st.channels.iter().find(|c| c.id == id)
        && let Some(l) = &c.link
    {
        let text = why.text.clone();
        l.set_status(|s| s.last_reason = text);
    }
    teardown_inner(st, id, None, Some(why));
}

/// Sends DISCONNECT (if `send`), unpublishes the connection and closes the channel.
fn teardown(st: &mut State, id: u64, send: Option<Reason>) {
    teardown_inner(st, id, send.clone(), send);
}

fn teardown_inner(st: &mut State, id: u64, send: Option<Reason>, why: Option<Reason>) {
    let Some(i) = st.channels.iter().position(|c| c.id == id) else {
        return;
    };
    let c = st.channels.swap_remove(i);
    if let Some(r) = &send {
        let m = Msg::Disconnect {
            code: 0,
            reason: r.text.clone(),
        };
        let _ = sys::send(&c.fd, &m.emit(), None);
    }
    let why = why.unwrap_or_else(|| reason("socket_error", "control socket error"));
    if let Some(l) = &c.link {
        let was_up = c.conn.is_some();
        l.publish(None);
        let key = why.key.to_string();
        let text = why.text.clone();
        l.set_status(|s| {
            s.state = LinkState::Down;
            if send.is_some() || s.last_reason.is_empty() || was_up {
                s.last_reason = text;
            }
            *s.disconnects.entry(key).or_default() += 1;
            s.queues = (0, 0);
        });
        if l.removed.load(Ordering::Acquire) {
            info!(interface = %l.cfg.name, "memif: disconnected: {}", why.text);
        } else {
            warn!(interface = %l.cfg.name, reason = why.key, "memif: disconnected: {}", why.text);
        }
        if l.cfg.role == Role::Client
            && let Some(slot) = st.clients.iter_mut().find(|s| s.channel == Some(id))
        {
            slot.channel = None;
            slot.next_try = Instant::now() + slot.backoff;
            slot.backoff = if was_up {
                BACKOFF_MIN
            } else {
                (slot.backoff * 2).min(BACKOFF_MAX)
            };
        }
    } else if send.is_some() {
        warn!(socket = ?c.socket.as_ref().map(|s| s.to_string()), reason = why.key, "memif: refused a connection: {}", why.text);
    }
    // `c` drops here: the fd closes, pending regions unmap, passed fds close.
}

fn one_fd(mut fds: Vec<OwnedFd>, what: &'static str) -> Result<OwnedFd, Reason> {
    if fds.is_empty() {
        return Err(reason("missing_fd", format!("missing {what} fd")));
    }
    // Extra descriptors close as `fds` drops.
    Ok(fds.swap_remove(0))
}

fn handle(st: &mut State, id: u64, m: Msg, fds: Vec<OwnedFd>) -> Result<(), Reason> {
    if let Msg::Disconnect { reason: r, .. } = &m {
        return Err(reason("peer_disconnect", format!("peer: {r}")));
    }
    let servers = st.servers.clone();
    let busy: Vec<*const Link> = st
        .channels
        .iter()
        .filter(|c| c.id != id)
        .filter_map(|c| c.link.as_ref().map(Arc::as_ptr))
        .collect();
    let c = st
        .channels
        .iter_mut()
        .find(|c| c.id == id)
        .ok_or_else(|| reason("internal", "no channel"))?;
    match &mut c.side {
        Side::Server(s) => match (s, m) {
            (s @ Server::AwaitInit, Msg::Init(i)) => {
                let link = server_init(&servers, &busy, c.socket.as_ref(), &i)?;
                let name = i.name.clone();
                link.set_status(|s| {
                    s.state = LinkState::Connecting;
                    s.peer_name = name;
                    s.version = "2.0".into();
                });
                c.link = Some(link);
                *s = Server::Setup;
                reply(&c.fd, Msg::Ack)
            }
            (Server::Setup, Msg::AddRegion(r)) => {
                let fd = one_fd(fds, "region")?;
                let map = check_region(&c.pending, r.index, r.size, &fd)?;
                c.pending.regions.push(map);
                c.pending.region_fds.push(fd);
                reply(&c.fd, Msg::Ack)
            }
            (Server::Setup, Msg::AddRing(r)) => {
                let fd = one_fd(fds, "interrupt")?;
                let link = c
                    .link
                    .as_ref()
                    .ok_or_else(|| reason("internal", "no link"))?;
                let rr = check_ring(&c.pending, &r, link.cfg.log2_ring_size, link.cfg.queues)?;
                let list = if r.c2s() {
                    &mut c.pending.c2s
                } else {
                    &mut c.pending.s2c
                };
                let i = r.index as usize;
                if list.len() <= i {
                    list.resize_with(i + 1, || None);
                }
                list[i] = Some((rr, fd));
                reply(&c.fd, Msg::Ack)
            }
            (s @ Server::Setup, Msg::Connect(peer_if)) => {
                let conn = server_connect(&mut c.pending)?;
                let link = c
                    .link
                    .clone()
                    .ok_or_else(|| reason("internal", "no link"))?;
                reply(&c.fd, Msg::Connected(link.cfg.name.clone()))?;
                up(&link, &conn, peer_if);
                c.conn = Some(conn);
                *s = Server::Connected;
                Ok(())
            }
            (_, m) => Err(unexpected(&m)),
        },
        Side::Client(s) => match (s, m) {
            (s @ Client::AwaitHello, Msg::Hello(h)) => {
                let link = c
                    .link
                    .clone()
                    .ok_or_else(|| reason("internal", "no link"))?;
                client_setup(&mut c.pending, &link.cfg, &h)?;
                let name = h.name.clone();
                link.set_status(|s| {
                    s.peer_name = name;
                    s.version = "2.0".into();
                });
                *s = Client::Setup;
                send_next(c)
            }
            (Client::Setup, Msg::Ack) => send_next(c),
            (s @ Client::AwaitConnected, Msg::Connected(peer_if)) => {
                let link = c
                    .link
                    .clone()
                    .ok_or_else(|| reason("internal", "no link"))?;
                let conn = client_connect(&mut c.pending, &link.cfg)?;
                up(&link, &conn, peer_if);
                c.conn = Some(conn);
                *s = Client::Connected;
                Ok(())
            }
            (_, m) => Err(unexpected(&m)),
        },
    }
}

fn unexpected(m: &Msg) -> Reason {
    reason(
        "unexpected_message",
        format!("unexpected message {:?}", m.msg_type()),
    )
}

fn reply(fd: &OwnedFd, m: Msg) -> Result<(), Reason> {
    sys::send(fd, &m.emit(), None).map_err(|e| reason("send_failed", format!("send: {e}")))
}

/// Client: sends the next queued message; after CONNECT, waits for CONNECTED.
fn send_next(c: &mut Channel) -> Result<(), Reason> {
    let Some((m, fd)) = c.pending.outbox.pop_front() else {
        return Err(reason("unexpected_message", "unexpected ACK"));
    };
    sys::send(&c.fd, &m.emit(), fd).map_err(|e| reason("send_failed", format!("send: {e}")))?;
    if matches!(m, Msg::Connect(_)) {
        c.side = Side::Client(Client::AwaitConnected);
    }
    Ok(())
}

fn up(link: &Arc<Link>, conn: &Arc<Conn>, peer_if: String) {
    link.publish(Some(conn.clone()));
    let (rx, tx) = (conn.rx.len(), conn.tx.len());
    link.set_status(|s| {
        s.state = LinkState::Up;
        s.peer_interface = peer_if;
        s.connects += 1;
        s.queues = (rx, tx);
    });
    let s = link.status();
    info!(
        interface = %link.cfg.name,
        peer = %s.peer_name,
        peer_interface = %s.peer_interface,
        rx_queues = rx,
        tx_queues = tx,
        "memif: connected"
    );
}

#[cfg(test)]
mod tests;
