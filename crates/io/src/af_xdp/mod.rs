//! The AF_XDP driver. An XDP program attached to the interface in native mode redirects
//! each frame to the AF_XDP socket bound to the queue it arrived on; the kernel copies it
//! into a chunk of memory shared with ovr (copy mode: what veth offers) and posts a
//! descriptor on the socket's receive ring, which ovr reads without a system call. To
//! send, ovr writes frames into free chunks, posts them on the transmit ring and kicks
//! the kernel with one `sendto` per 32 frames (the kernel's copy-mode batch); sent
//! chunks come back on the completion ring.
//!
//! One socket (with its own UMEM) per receive queue of the interface; frames are sent
//! on the first. The sockets come from xdpilone (pure Rust rings, no libxdp); the program
//! is loaded with aya.

mod program;
mod umem;

use crate::{Driver, DriverKind, DriverStats, IoError, Rate, XskSlots, sys};
use std::num::NonZeroU32;
use std::os::fd::RawFd;
use umem::Area;
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, UmemConfig};

/// Size of one chunk. A received frame may use it all but the kernel's XDP headroom
/// (256 bytes): 1792 bytes, more than a 1500-byte MTU frame in VXLAN over IPv6.
const CHUNK: u32 = 2048;
/// Chunks that wait on the fill ring for received frames: deep enough to absorb a
/// burst while the worker is busy with a vector (the AF_PACKET driver's 8 MiB socket
/// buffer holds about as many).
const RX_CHUNKS: u32 = 8192;
/// Chunks that carry frames to send. In copy mode the kernel returns a chunk only when
/// the socket buffer it was copied into is freed, which for TCP toward a local workload
/// is when the application has read it: chunks must cover a receiver's whole window.
const TX_CHUNKS: u32 = 8192;
/// Entries of the transmit ring (frames posted but not yet taken by the kernel).
const TX_RING: u32 = 2048;

/// One interface opened with AF_XDP.
pub struct AfXdp {
    name: String,
    ifindex: u32,
    batch: u32,
    queues: Vec<Queue>,
    /// Declared after the sockets: the program is detached once they are closed. None
    /// when the program is shared (the offload's, owned by its caller). It also polices
    /// the interface (`Driver::police`).
    program: Option<program::Attached>,
    stats: DriverStats,
}

/// One receive queue's socket, rings and memory. Fields drop in order: the rings and
/// the socket before the UMEM, the UMEM before the memory it names.
struct Queue {
    rx: RingRx,
    tx: RingTx,
    /// The fill and completion rings.
    device: DeviceQueue,
    fd: RawFd,
    /// Chunks owned by ovr and free to carry a frame to send.
    free: Vec<u64>,
    /// Descriptors read from the receive ring, handed to the pipeline, then refilled.
    received: Vec<XdpDesc>,
    /// Frames waiting to be posted on the transmit ring.
    outgoing: Vec<XdpDesc>,
    _umem: xdpilone::Umem,
    area: Area,
}

impl AfXdp {
    /// Attaches the XDP program to interface `name` and binds a socket to each of its
    /// receive queues, for batches of up to `batch` frames.
    pub fn open(name: &str, batch: usize) -> Result<Self, IoError> {
        Self::open_with(name, batch, None)
    }

    /// Like [`Self::open`]; with `shared`, the sockets go into that program (already
    /// attached to the interface) rather than into a copy of the driver's own.
    pub fn open_with(
        name: &str,
        batch: usize,
        shared: Option<&mut dyn XskSlots>,
    ) -> Result<Self, IoError> {
        let ifindex = sys::if_index(name).ok_or_else(|| IoError::NoSuchInterface {
            name: name.to_string(),
        })?;
        let mut shared = shared;
        let mut program = match shared {
            Some(_) => None,
            None => Some(
                program::Attached::attach(name).map_err(|(op, m)| IoError::setup(name, op, m))?,
            ),
        };
        let mut queues = Vec::new();
        for q in 0..sys::rx_queues(name) {
            let queue = Queue::bind(name, ifindex, q)?;
            match (&mut program, shared.as_deref_mut()) {
                (Some(p), _) => p
                    .insert(q, queue.fd)
                    .map_err(|(op, m)| IoError::setup(name, op, m))?,
                (None, Some(s)) => s.insert(q, queue.fd).map_err(|m| {
                    IoError::setup(name, "insert socket into the shared XSK map", m)
                })?,
                (None, None) => {}
            }
            queues.push(queue);
        }
        Ok(Self {
            name: name.to_string(),
            ifindex,
            batch: batch.clamp(1, RX_CHUNKS as usize) as u32,
            queues,
            program,
            stats: DriverStats::default(),
        })
    }
}

impl Queue {
    fn bind(name: &str, ifindex: u32, queue: u32) -> Result<Self, IoError> {
        let err = |op, e: xdpilone::Errno| IoError::setup(name, op, e);
        let area = Area::new((CHUNK * (RX_CHUNKS + TX_CHUNKS)) as usize).map_err(|source| {
            IoError::Os {
                name: name.to_string(),
                op: "map UMEM",
                source,
            }
        })?;
        let umem = area
            .register(UmemConfig {
                fill_size: RX_CHUNKS,
                complete_size: TX_CHUNKS,
                frame_size: CHUNK,
                headroom: 0,
                flags: 0,
            })
            .map_err(|e| err("register UMEM", e))?;
        let mut info = IfInfo::invalid();
        info.from_ifindex(ifindex)
            .map_err(|e| err("interface info", e))?;
        info.set_queue(queue);
        let sock = Socket::with_shared(&info, &umem).map_err(|e| err("AF_XDP socket", e))?;
        let mut device = umem
            .fq_cq(&sock)
            .map_err(|e| err("fill/completion rings", e))?;
        let user = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(RX_CHUNKS),
                    tx_size: NonZeroU32::new(TX_RING),
                    bind_flags: SocketConfig::XDP_BIND_NEED_WAKEUP,
                },
            )
            .map_err(|e| err("rx/tx rings", e))?;
        let rx = user.map_rx().map_err(|e| err("map rx ring", e))?;
        let tx = user.map_tx().map_err(|e| err("map tx ring", e))?;
        umem.bind(&user).map_err(|e| err("bind", e))?;
        // The first chunks wait for received frames, the others carry frames to send.
        let mut fill = device.fill(RX_CHUNKS);
        let filled = fill.insert((0..RX_CHUNKS).map(|i| u64::from(i * CHUNK)));
        fill.commit();
        drop(fill);
        if filled != RX_CHUNKS {
            return Err(IoError::setup(
                name,
                "fill ring",
                "took fewer chunks than it has entries",
            ));
        }
        Ok(Self {
            rx,
            tx,
            fd: device.as_raw_fd(),
            device,
            free: (RX_CHUNKS..RX_CHUNKS + TX_CHUNKS)
                .map(|i| u64::from(i * CHUNK))
                .collect(),
            received: Vec::new(),
            outgoing: Vec::new(),
            _umem: umem,
            area,
        })
    }

    /// Reads up to `max` descriptors from the receive ring into `received`.
    fn take_received(&mut self, max: u32) {
        self.received.clear();
        let mut r = self.rx.receive(max);
        while let Some(d) = r.read() {
            self.received.push(d);
        }
        r.release();
    }

    /// Gives the chunks of `received` back to the kernel for new frames. The fill ring
    /// has an entry for every receive chunk, so they always fit.
    fn refill(&mut self) {
        let mask = !u64::from(CHUNK - 1);
        let mut chunks = self.received.iter().map(|d| d.addr & mask);
        // xdpilone reserves from its cached view of the ring and refreshes it only when
        // that view is full: ask again until everything is in or the ring is truly full.
        loop {
            let mut fill = self.device.fill(RX_CHUNKS);
            if fill.capacity() == 0 {
                break;
            }
            let n = fill.insert(chunks.by_ref().take(fill.capacity() as usize));
            fill.commit();
            if n == 0 {
                break;
            }
        }
        if self.device.needs_wakeup() {
            self.device.wake();
        }
    }

    /// Takes back the chunks the kernel has finished sending.
    fn reap_completions(&mut self) {
        let mask = !u64::from(CHUNK - 1);
        let mut c = self.device.complete(TX_CHUNKS);
        while let Some(addr) = c.read() {
            self.free.push(addr & mask);
        }
        c.release();
    }

    /// Posts `outgoing` on the transmit ring and has the kernel send it; returns how many
    /// frames the ring took (the rest go back to `free`).
    fn post(&mut self) -> usize {
        let mut posted = 0;
        // As in `refill`: the first reservation may see a stale, smaller ring.
        while posted < self.outgoing.len() {
            let mut w = self.tx.transmit((self.outgoing.len() - posted) as u32);
            let room = w.capacity() as usize;
            if room == 0 {
                break;
            }
            posted += w.insert(self.outgoing[posted..posted + room].iter().copied()) as usize;
            w.commit();
        }
        for d in &self.outgoing[posted..] {
            self.free.push(d.addr);
        }
        self.outgoing.clear();
        self.kick();
        posted
    }

    /// In copy mode the kernel sends only inside `sendto`, at most 32 frames per call:
    /// call it until the ring is drained or the kernel stops taking frames (its device
    /// queue is full; the rest goes with the next batch).
    fn kick(&mut self) {
        let mut pending = self.tx.pending();
        while pending > 0 {
            self.tx.wake();
            let now = self.tx.pending();
            if now >= pending {
                break;
            }
            pending = now;
        }
    }
}

impl Driver for AfXdp {
    fn ifindex(&self) -> u32 {
        self.ifindex
    }

    fn kind(&self) -> DriverKind {
        DriverKind::AfXdp
    }

    fn recv(
        &mut self,
        deliver: &mut dyn FnMut(&mut dyn Iterator<Item = &[u8]>),
    ) -> Result<usize, IoError> {
        let mut total = 0;
        for q in &mut self.queues {
            q.take_received(self.batch);
            if q.received.is_empty() {
                continue;
            }
            total += q.received.len();
            let area = &q.area;
            // A descriptor outside the UMEM would be a kernel bug; it is skipped, not
            // trusted.
            let mut frames = q
                .received
                .iter()
                .filter_map(|d| area.frame(d.addr, d.len as usize));
            deliver(&mut frames);
            q.refill();
        }
        self.stats.rx_frames += total as u64;
        Ok(total)
    }

    fn send(&mut self, frames: &[&[u8]]) -> Result<(), IoError> {
        let Some(q) = self.queues.first_mut() else {
            self.stats.tx_dropped += frames.len() as u64;
            return Ok(());
        };
        q.reap_completions();
        let mut dropped = 0;
        for f in frames {
            let addr = match q.free.pop() {
                Some(a) if f.len() <= CHUNK as usize => a,
                Some(a) => {
                    q.free.push(a);
                    dropped += 1;
                    continue;
                }
                None => {
                    dropped += 1;
                    continue;
                }
            };
            match q.area.frame_mut(addr, f.len()) {
                Some(chunk) => chunk.copy_from_slice(f),
                None => {
                    dropped += 1;
                    continue;
                }
            }
            q.outgoing.push(XdpDesc {
                addr,
                len: f.len() as u32,
                options: 0,
            });
        }
        let queued = q.outgoing.len();
        let posted = q.post();
        dropped += queued - posted;
        self.stats.tx_frames += posted as u64;
        self.stats.tx_dropped += dropped as u64;
        Ok(())
    }

    fn fds(&self) -> Vec<RawFd> {
        self.queues.iter().map(|q| q.fd).collect()
    }

    fn stats(&mut self) -> DriverStats {
        let mut s = self.stats;
        for q in &self.queues {
            // The kernel's counts since the socket was bound (not reset on read).
            if let Ok(k) = q.device.statistics_v2() {
                s.rx_dropped += k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs;
                s.tx_dropped += k.tx_invalid_descs;
            }
        }
        if let Some(p) = &self.program {
            (s.rx_policed, s.rx_policed_bytes) = p.policed();
        }
        s
    }

    /// By the driver's own XDP program; the fast path's shared one does not police.
    fn police(&mut self, rate: Option<Rate>) -> Result<bool, IoError> {
        match &mut self.program {
            Some(p) => p
                .police(rate)
                .map(|()| true)
                .map_err(|(op, m)| IoError::setup(&self.name, op, m)),
            None => Ok(false),
        }
    }
}
