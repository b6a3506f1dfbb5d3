//! One memif interface as the rest of ovr sees it: its settings, its status (link state,
//! the peer's name and version, why it last went down), the connection the control
//! thread publishes, and the data path ([`Port`]) that moves frames through it.
//!
//! The control thread builds a [`Conn`] (mapped regions, checked rings, interrupt
//! eventfds) once a handshake completes and publishes it by bumping a generation
//! counter; a port picks it up at its next receive (one relaxed load per batch when
//! nothing changed). Tearing down publishes `None`; the regions are unmapped when the
//! last holder (the control thread or a port mid-batch) lets go, so no access ever
//! reaches unmapped memory.

use crate::Config;
use crate::desc::DescError;
use crate::msg::Mode;
use crate::ring::{self, Arena, DataStats, Ring, RingRef, TxBuffers, Violation};
use crate::sys::{self, Epoll, Mapping};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What a link is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LinkState {
    /// Server: listening, no client yet. Client: waiting to retry.
    #[default]
    Down,
    /// A handshake is under way.
    Connecting,
    Up,
}

impl LinkState {
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Down => "down",
            LinkState::Connecting => "connecting",
            LinkState::Up => "up",
        }
    }
}

/// What the API shows of a link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub state: LinkState,
    /// The peer application's name (HELLO's or INIT's), e.g. "DPDK 22.11.4".
    pub peer_name: String,
    /// The peer's interface name (CONNECT's or CONNECTED's).
    pub peer_interface: String,
    /// The protocol version agreed ("2.0").
    pub version: String,
    /// Why the link last went down (ours or the peer's).
    pub last_reason: String,
    /// Times the link came up.
    pub connects: u64,
    /// Disconnects by named reason.
    pub disconnects: std::collections::BTreeMap<String, u64>,
    /// Queues in use (rx, tx) while up.
    pub queues: (usize, usize),
}

/// One queue's position (ours) in its ring.
#[derive(Debug, Default)]
pub(crate) struct QueuePos {
    /// Receive: the next slot to read. Transmit: our head (client) or tail (server).
    pos: u16,
    /// Client receive: the head we offered buffers up to.
    head: u16,
    /// Receive: frames taken from the queue on this connection, and the number of the
    /// port that took the last of them (ovrd numbers ports by worker).
    frames: u64,
    reader: Option<usize>,
}

/// One receive queue as [`Link::rx_queues`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxQueue {
    /// Frames taken from it since the link came up.
    pub frames: u64,
    /// The number ([`Port::new`]'s `tx_queue`) of the port that reads it, once one has.
    pub reader: Option<usize>,
}

/// A connected link's shared memory, rings and interrupts.
pub struct Conn {
    pub(crate) regions: Vec<Mapping>,
    pub(crate) sizes: Vec<usize>,
    pub(crate) client: bool,
    pub(crate) rx: Vec<RingRef>,
    pub(crate) tx: Vec<RingRef>,
    /// Interrupt eventfds of the receive rings (the peer signals them).
    pub(crate) rx_irq: Vec<OwnedFd>,
    /// Of the transmit rings (we signal them unless the peer masked them).
    pub(crate) tx_irq: Vec<OwnedFd>,
    rx_pos: Vec<Mutex<QueuePos>>,
    tx_pos: Vec<Mutex<QueuePos>>,
    /// Client: where its buffers start and how large they are; buffer of ring slot `s`
    /// of ring `g` (C2S rings first) is at `buffers + (g << log2 + s) * buffer_size`.
    pub(crate) buffers: u32,
    pub(crate) buffer_size: u32,
    pub(crate) log2: u8,
    /// The largest descriptor length accepted on receive.
    pub(crate) max_len: u32,
}

impl Conn {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        regions: Vec<Mapping>,
        client: bool,
        rx: Vec<RingRef>,
        tx: Vec<RingRef>,
        rx_irq: Vec<OwnedFd>,
        tx_irq: Vec<OwnedFd>,
        buffers: u32,
        buffer_size: u32,
        log2: u8,
        max_len: u32,
    ) -> Self {
        let sizes = regions.iter().map(|m| m.len()).collect();
        let rx_pos = rx.iter().map(|_| Mutex::new(QueuePos::default())).collect();
        let tx_pos = tx.iter().map(|_| Mutex::new(QueuePos::default())).collect();
        Self {
            regions,
            sizes,
            client,
            rx,
            tx,
            rx_irq,
            tx_irq,
            rx_pos,
            tx_pos,
            buffers,
            buffer_size,
            log2,
            max_len,
        }
    }

    /// Client: the buffer of slot `s` of ring `g` (C2S rings numbered first).
    fn buffer(&self, g: usize, s: u16) -> (u16, u32) {
        let i = ((g as u32) << self.log2) + u32::from(s);
        (0, self.buffers + i * self.buffer_size)
    }
}

/// The shared state of one memif interface (between its ports, the control thread and
/// whoever shows its status).
pub struct Link {
    pub(crate) cfg: Config,
    pub(crate) status: Mutex<Status>,
    conn: Mutex<Option<Arc<Conn>>>,
    generation: AtomicU64,
    /// Readable when the connection changed (in every port's epoll set).
    pub(crate) notify: OwnedFd,
    /// A port found the peer in breach of the protocol: the control thread tears the
    /// link down with this reason.
    pub(crate) breach: Mutex<Option<String>>,
    pub(crate) removed: AtomicBool,
    /// Wakes the control thread.
    pub(crate) control_wake: RawFd,
    /// Bad descriptors by `DescError` index, summed over ports.
    bad: [AtomicU64; 5],
}

impl Link {
    pub(crate) fn new(cfg: Config, control_wake: RawFd) -> std::io::Result<Self> {
        Ok(Self {
            cfg,
            status: Mutex::new(Status::default()),
            conn: Mutex::new(None),
            generation: AtomicU64::new(0),
            notify: sys::eventfd()?,
            breach: Mutex::new(None),
            removed: AtomicBool::new(false),
            control_wake,
            bad: Default::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether the link is up, connecting or down (without copying the whole status).
    pub fn state(&self) -> LinkState {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .state
    }

    pub(crate) fn set_status(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Bad descriptors seen so far, by reason name.
    pub fn bad_descriptors(&self) -> Vec<(&'static str, u64)> {
        DescError::ALL
            .iter()
            .map(|e| (e.name(), self.bad[e.index()].load(Ordering::Relaxed)))
            .collect()
    }

    pub(crate) fn publish(&self, c: Option<Arc<Conn>>) {
        *self.conn.lock().unwrap_or_else(PoisonError::into_inner) = c;
        self.generation.fetch_add(1, Ordering::Release);
        sys::eventfd_signal(self.notify.as_raw_fd());
    }

    /// The receive queues of the connection in use (none while down).
    pub fn rx_queues(&self) -> Vec<RxQueue> {
        let Some(c) = self.current() else {
            return Vec::new();
        };
        c.rx_pos
            .iter()
            .map(|p| {
                let p = p.lock().unwrap_or_else(PoisonError::into_inner);
                RxQueue {
                    frames: p.frames,
                    reader: p.reader,
                }
            })
            .collect()
    }

    fn current(&self) -> Option<Arc<Conn>> {
        self.conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn report_breach(&self, v: Violation) {
        let mut b = self.breach.lock().unwrap_or_else(PoisonError::into_inner);
        if b.is_none() {
            *b = Some(v.to_string());
        }
        drop(b);
        sys::eventfd_signal(self.control_wake);
    }
}

/// Counters of a port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx: DataStats,
    pub tx: DataStats,
}

/// The data path of a memif interface for one worker: receives from its share of the
/// receive queues, transmits on one transmit queue.
pub struct Port {
    link: Arc<Link>,
    generation: u64,
    conn: Option<Arc<Conn>>,
    epoll: Epoll,
    arena: Arena,
    /// This port's share of the receive queues: queue q is ours if q % count ==
    /// index; `None`: it only transmits.
    rx_share: Option<(usize, usize)>,
    /// Which transmit queue it uses (modulo their number).
    tx_queue: usize,
    /// Interrupts are on (the peer signals our receive rings): set before sleeping.
    armed: bool,
    mode: Mode,
    /// IP mode: the Ethernet header put in front of each received packet (its type set
    /// per packet).
    eth: [u8; 14],
    stats: PortStats,
    bad_reported: [u64; 5],
}

impl Port {
    /// A port of `link` that receives from its share of the receive queues (`rx`:
    /// index and count, queue `q` is its own if `q % count == index`; `None`: it only
    /// transmits), transmits on `tx_queue` (modulo the queues; also the port's number
    /// in [`Link::rx_queues`]), and takes at most `batch` frames a call.
    pub fn new(
        link: Arc<Link>,
        rx: Option<(usize, usize)>,
        tx_queue: usize,
        batch: usize,
    ) -> std::io::Result<Self> {
        let epoll = Epoll::new()?;
        epoll.add(link.notify.as_raw_fd())?;
        let mode = link.cfg.mode;
        let mut eth = [0u8; 14];
        eth[0..6].copy_from_slice(&link.cfg.mac);
        eth[6..12].copy_from_slice(&link.cfg.peer_mac);
        let bytes = batch.max(1) * link.cfg.buffer_size.max(2048) as usize;
        Ok(Self {
            link,
            generation: u64::MAX,
            conn: None,
            epoll,
            arena: Arena::new(batch.max(1), bytes),
            rx_share: rx.map(|(i, n)| (i, n.max(1))),
            tx_queue,
            armed: false,
            mode,
            eth,
            stats: PortStats::default(),
            bad_reported: [0; 5],
        })
    }

    pub fn link(&self) -> &Arc<Link> {
        &self.link
    }

    /// Whether a connection is in use.
    pub fn is_up(&self) -> bool {
        self.conn.is_some()
    }

    /// A descriptor readable when frames may have arrived (while armed) or the
    /// connection changed.
    pub fn fd(&self) -> RawFd {
        self.epoll.fd()
    }

    pub fn stats(&self) -> PortStats {
        self.stats
    }

    /// Whether receive queue `q` is this port's.
    fn mine(&self, q: usize) -> bool {
        self.rx_share.is_some_and(|(i, n)| q % n == i)
    }

    /// Takes up a new connection (or its end) when the control thread published one.
    fn refresh(&mut self) {
        let g = self.link.generation.load(Ordering::Acquire);
        if g == self.generation {
            return;
        }
        self.generation = g;
        sys::eventfd_drain(self.link.notify.as_raw_fd());
        if let Some(old) = self.conn.take() {
            for fd in &old.rx_irq {
                self.epoll.del(fd.as_raw_fd());
            }
        }
        self.armed = false;
        self.conn = self.link.current();
        if let Some(c) = &self.conn {
            for (q, fd) in c.rx_irq.iter().enumerate() {
                if self.mine(q) {
                    let _ = self.epoll.add(fd.as_raw_fd());
                }
            }
        }
    }

    fn breach(&mut self, v: Violation) {
        self.link.report_breach(v);
        // Stop using the rings at once; the control thread tears down.
        if let Some(old) = self.conn.take() {
            for fd in &old.rx_irq {
                self.epoll.del(fd.as_raw_fd());
            }
        }
    }

    /// Receives what is waiting on this port's queues and hands it all to `deliver` in
    /// one call; returns how many frames.
    pub fn recv(&mut self, deliver: &mut dyn FnMut(&mut dyn Iterator<Item = &[u8]>)) -> usize {
        self.refresh();
        let Some(c) = self.conn.clone() else {
            return 0;
        };
        self.arena.clear();
        let prefix = if self.mode == Mode::Ip { 14 } else { 0 };
        let eth = self.eth;
        let ip = self.mode == Mode::Ip;
        let mut fixup = |f: &mut [u8]| {
            if !ip {
                return true;
            }
            let t: u16 = match f.get(14).map(|b| b >> 4) {
                Some(4) => 0x0800,
                Some(6) => 0x86dd,
                _ => return false,
            };
            f[..12].copy_from_slice(&eth[..12]);
            f[12..14].copy_from_slice(&t.to_be_bytes());
            true
        };
        let mut breach = None;
        for (q, r) in c.rx.iter().enumerate() {
            if !self.mine(q) {
                continue;
            }
            if self.armed {
                // Woken by (or armed for) an interrupt: consume it and poll again.
                sys::eventfd_drain(c.rx_irq[q].as_raw_fd());
            }
            let Ok(ring) = Ring::new(&c.regions, *r) else {
                breach = Some(Violation::Ring);
                break;
            };
            if self.armed {
                ring.set_flags(ring::RING_FLAG_MASK_INT);
            }
            let mut p = c.rx_pos[q].lock().unwrap_or_else(PoisonError::into_inner);
            let p = &mut *p;
            let before = self.stats.rx.frames;
            let r = ring::receive(
                &ring,
                &c.regions,
                &c.sizes,
                c.max_len,
                &mut p.pos,
                !c.client,
                &mut self.arena,
                prefix,
                &mut fixup,
                &mut self.stats.rx,
            );
            if self.stats.rx.frames != before {
                p.frames += self.stats.rx.frames - before;
                p.reader = Some(self.tx_queue);
            }
            if let Err(v) = r {
                breach = Some(v);
                break;
            }
            if c.client {
                let g = c.tx.len() + q;
                ring::refill(
                    &ring,
                    &mut p.head,
                    p.pos,
                    &|s| c.buffer(g, s),
                    c.buffer_size,
                );
            }
        }
        self.armed = false;
        self.report_bad();
        if let Some(v) = breach {
            self.breach(v);
        }
        let n = self.arena.len();
        if n > 0 {
            deliver(&mut self.arena.frames());
        }
        n
    }

    /// Sends `frames` on this port's transmit queue; those that do not fit are counted
    /// as dropped. Returns how many were sent.
    pub fn send(&mut self, frames: &[&[u8]]) -> usize {
        self.refresh();
        let Some(c) = self.conn.clone() else {
            self.stats.tx.dropped += frames.len() as u64;
            return 0;
        };
        if c.tx.is_empty() {
            self.stats.tx.dropped += frames.len() as u64;
            return 0;
        }
        let q = self.tx_queue % c.tx.len();
        let Ok(ring) = Ring::new(&c.regions, c.tx[q]) else {
            self.breach(Violation::Ring);
            return 0;
        };
        let strip = if self.mode == Mode::Ip { 14 } else { 0 };
        let buffer = |s: u16| c.buffer(q, s);
        let bufs = if c.client {
            TxBuffers::Own {
                buffer: &buffer,
                len: c.buffer_size,
            }
        } else {
            TxBuffers::Offered
        };
        let r = {
            let mut p = c.tx_pos[q].lock().unwrap_or_else(PoisonError::into_inner);
            ring::send(
                &ring,
                &c.regions,
                &c.sizes,
                &mut p.pos,
                &bufs,
                &mut frames.iter().copied(),
                strip,
                &mut self.stats.tx,
            )
        };
        self.report_bad();
        match r {
            Ok(n) => {
                if n > 0 && ring.flags() & ring::RING_FLAG_MASK_INT == 0 {
                    sys::eventfd_signal(c.tx_irq[q].as_raw_fd());
                }
                n
            }
            Err(v) => {
                self.breach(v);
                0
            }
        }
    }

    /// Before the worker sleeps: turns interrupts on (the peer signals our receive
    /// rings) and returns false if frames arrived meanwhile (do not sleep).
    pub fn arm(&mut self) -> bool {
        // The notification is reset here, once per sleep, not per batch; a change that
        // came meanwhile is taken up instead of sleeping.
        sys::eventfd_drain(self.link.notify.as_raw_fd());
        if self.link.generation.load(Ordering::Acquire) != self.generation {
            return false;
        }
        let Some(c) = self.conn.clone() else {
            return true;
        };
        self.armed = true;
        for (q, r) in c.rx.iter().enumerate() {
            if !self.mine(q) {
                continue;
            }
            let Ok(ring) = Ring::new(&c.regions, *r) else {
                continue;
            };
            ring.set_flags(0);
            std::sync::atomic::fence(Ordering::SeqCst);
            let pos = c.rx_pos[q]
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pos;
            let published = if c.client { ring.tail() } else { ring.head() };
            if published != pos {
                return false;
            }
        }
        true
    }

    fn report_bad(&mut self) {
        for i in 0..5 {
            let now = self.stats.rx.bad[i] + self.stats.tx.bad[i];
            if now != self.bad_reported[i] {
                self.link.bad[i].fetch_add(now - self.bad_reported[i], Ordering::Relaxed);
                self.bad_reported[i] = now;
            }
        }
    }
}
