//! ovr's packet I/O: drivers that receive and transmit whole batches of frames on the
//! host's interfaces, behind one interface ([`Driver`]).
//!
//! - AF_XDP (`af_xdp`): an XDP program on the interface hands every frame to a socket
//!   whose rings live in memory shared with the kernel; receiving costs no system call,
//!   transmitting one per batch. Native XDP mode, copy mode (what veth supports).
//! - AF_PACKET (`af_packet`): a raw socket, `recvmmsg`/`sendmmsg`; works on any
//!   interface with no kernel feature beyond the socket, and learns from the kernel
//!   which frames still need their checksum finished or their segmentation done.
//!
//! - memif (`memif`): shared-memory rings with a network function (libmemif, VPP,
//!   DPDK), through `ovr_memif`; no kernel interface at all.
//!
//! The two kernel drivers can also police an interface's frames in the kernel, before
//! ovr reads them (`police`, [`Driver::police`]).
//!
//! System calls and shared memory are confined to `sys` and `af_xdp::umem`, the only
//! modules allowed `unsafe`; the rest is ordinary safe code.
#![deny(unsafe_code)]

pub mod af_packet;
pub mod af_xdp;
pub mod memif;
mod police;
mod sys;

pub use af_packet::AfPacket;
pub use af_xdp::AfXdp;
pub use police::Rate;
pub use sys::die_of_sigpipe;

use std::os::fd::RawFd;

/// Why a driver could not be set up or failed.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("interface '{name}' does not exist")]
    NoSuchInterface { name: String },
    #[error("interface '{name}': {op}: {source}")]
    Os {
        name: String,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// Setting up what is not a socket (a BPF program or map, a memif connection).
    #[error("interface '{name}': {op}: {message}")]
    Setup {
        name: String,
        op: &'static str,
        message: String,
    },
}

impl IoError {
    /// What failed setting up interface `name` that is not a socket's system call.
    pub(crate) fn setup(name: &str, op: &'static str, message: impl ToString) -> Self {
        Self::Setup {
            name: name.to_string(),
            op,
            message: message.to_string(),
        }
    }
}

/// Counters of one driver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    pub rx_frames: u64,
    /// Frames the kernel dropped before ovr saw them: the socket's queue was full, no
    /// buffer was free, or the frame was larger than a buffer.
    pub rx_dropped: u64,
    pub tx_frames: u64,
    /// Frames ovr could not hand to the kernel (its queue or ovr's buffers were full,
    /// or the frame was larger than a buffer).
    pub tx_dropped: u64,
    /// Large frames sent in place of runs of TCP segments (counted in `tx_frames` as
    /// the segments they hold).
    pub tx_joined: u64,
    /// Frames, and their bytes, the kernel dropped as over the interface's rate
    /// ([`Driver::police`]); not in `rx_frames`.
    pub rx_policed: u64,
    pub rx_policed_bytes: u64,
}

/// Which driver runs an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverKind {
    AfXdp,
    AfPacket,
    Memif,
}

impl DriverKind {
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::AfXdp => "af_xdp",
            DriverKind::AfPacket => "af_packet",
            DriverKind::Memif => "memif",
        }
    }
}

/// A batch-at-a-time packet driver on one interface. Calls are per batch, never per
/// frame, so dispatching through `dyn Driver` costs nothing measurable.
pub trait Driver {
    /// The index of the interface the driver was opened on.
    fn ifindex(&self) -> u32;
    fn kind(&self) -> DriverKind;
    /// Receives what is waiting (up to a batch) and hands all of it to `deliver` in one
    /// call; the frames are only valid during that call. Returns how many arrived.
    fn recv(
        &mut self,
        deliver: &mut dyn FnMut(&mut dyn Iterator<Item = &[u8]>),
    ) -> Result<usize, IoError>;
    /// Whether received frames begin with a virtio-net header (checksum and segmentation
    /// offload info, `ovr_wire::offload`). Frames to send never carry one.
    fn vnet_hdr(&self) -> bool {
        false
    }
    /// Queues frames for transmission; those that cannot be taken are counted as
    /// dropped.
    fn send(&mut self, frames: &[&[u8]]) -> Result<(), IoError>;
    /// Sends runs of UDP datagrams of one flow (tunnel packets toward one peer) as one
    /// large frame for the kernel or the NIC to cut, where the driver can (AF_PACKET).
    fn join_datagrams(&mut self) {}
    /// Descriptors that become readable when frames arrive (for poll(2)).
    fn fds(&self) -> Vec<RawFd>;
    /// Called before the worker sleeps on `fds`: a driver whose peer signals only on
    /// request (memif's interrupt mask) asks for it here. Returns false if frames
    /// arrived meanwhile (the worker must not sleep).
    fn arm(&mut self) -> bool {
        true
    }
    /// The counters, including those the kernel keeps for the driver's sockets.
    fn stats(&mut self) -> DriverStats;
    /// Polices received frames in the kernel at `rate` from now on (None: not at all),
    /// dropping those over it before ovr reads them. Ok(false): this driver cannot
    /// (the caller polices what it receives itself).
    fn police(&mut self, rate: Option<Rate>) -> Result<bool, IoError> {
        let _ = rate;
        Ok(false)
    }
}

/// The index of interface `name` in this network namespace, if it exists.
pub fn if_index(name: &str) -> Option<u32> {
    sys::if_index(name)
}

/// Frames the AF_XDP socket `fd` could not take on receipt so far (see [`XskSlots`]:
/// the offload tells these apart from the redirects an egress dropped).
pub fn xsk_rx_drops(fd: RawFd) -> Option<u64> {
    sys::xsk_rx_drops(fd).ok()
}

/// Reads entries of the BPF map `fd` in batches (BPF_MAP_LOOKUP_BATCH; aya 0.14 has no
/// batch call, and one bpf(2) call per entry costs a microsecond each).
pub use sys::bpf_map_lookup_batch;

/// Which driver `open` should use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preference {
    /// AF_PACKET, except on an interface that already has ovr's fast-path program and
    /// whose senders send complete frames (the underlay with `--offload xdp`): there
    /// AF_XDP where it can be set up, AF_PACKET where it cannot. See `open`.
    Auto,
    Only(DriverKind),
}

/// Opens interface `name` with the preferred driver.
///
/// `offloading`: the interface's senders may hand over frames whose transport checksum
/// is left to the NIC, or larger than the MTU for the NIC to segment (a container's veth
/// or a VM's TAP with its default settings). Only AF_PACKET learns that from the kernel
/// (its virtio-net header); an XDP program sees such frames as they are, and forwarding
/// them would put broken checksums on the wire. Forcing AF_XDP is for workloads known
/// to send complete frames (`ethtool -K eth0 tx off`).
///
/// `Auto` takes AF_PACKET where no fast-path program is attached (`shared` is None),
/// the underlay included: AF_XDP reads 64-byte frames at a higher rate, but its XDP
/// program takes segmentation offload away from the interface's peer (a veth's), so a
/// bulk TCP stream crosses the underlay as one packet per segment instead of as large
/// frames, at about half the rate (bench/RESULTS.md). With the fast path the program is
/// there anyway, and `Auto` reads the underlay with AF_XDP; an interface where AF_XDP
/// cannot be set up falls back to AF_PACKET, and the AF_XDP error is returned beside the
/// driver so that the caller can say why.
pub fn open(
    name: &str,
    pref: Preference,
    offloading: bool,
    batch: usize,
) -> Result<(Box<dyn Driver>, Option<IoError>), IoError> {
    open_with(name, pref, offloading, batch, None)
}

/// An XDP program shared by all of ovrd's interfaces (the offload's fast path), already
/// attached to the interface: an AF_XDP driver puts its sockets into the program's
/// socket map instead of loading a program of its own.
pub trait XskSlots {
    /// Steers frames arriving on receive queue `queue` to socket `fd`.
    fn insert(&mut self, queue: u32, fd: RawFd) -> Result<(), String>;
}

/// Like [`open`]; with `shared`, an AF_XDP driver uses that program (see [`XskSlots`]).
pub fn open_with(
    name: &str,
    pref: Preference,
    offloading: bool,
    batch: usize,
    shared: Option<&mut dyn XskSlots>,
) -> Result<(Box<dyn Driver>, Option<IoError>), IoError> {
    match pref {
        Preference::Only(DriverKind::AfXdp) => {
            Ok((Box::new(AfXdp::open_with(name, batch, shared)?), None))
        }
        Preference::Only(DriverKind::AfPacket) => {
            Ok((Box::new(AfPacket::open(name, batch)?), None))
        }
        // A memif interface is no kernel interface: opened with `memif::Memif::open`.
        Preference::Only(DriverKind::Memif) => Err(IoError::NoSuchInterface {
            name: name.to_string(),
        }),
        Preference::Auto if offloading || shared.is_none() => {
            Ok((Box::new(AfPacket::open(name, batch)?), None))
        }
        Preference::Auto => match AfXdp::open_with(name, batch, shared) {
            Ok(d) => Ok((Box::new(d), None)),
            Err(e @ IoError::NoSuchInterface { .. }) => Err(e),
            Err(e) => Ok((Box::new(AfPacket::open(name, batch)?), Some(e))),
        },
    }
}

/// Opens interface `name` with AF_PACKET where a TC program on its ingress may take
/// frames away (the fast path at TC): see [`AfPacket::open_behind_tc`].
pub fn open_behind_tc(name: &str, batch: usize) -> Result<Box<dyn Driver>, IoError> {
    Ok(Box::new(AfPacket::open_behind_tc(name, batch)?))
}

/// Opens interface `name` for sending only (a worker that transmits on an interface
/// another worker receives from): an AF_PACKET socket that receives nothing, whichever
/// driver the receiving worker uses.
pub fn open_sender(name: &str) -> Result<Box<dyn Driver>, IoError> {
    Ok(Box::new(af_packet::PacketSender::open(name)?))
}

/// Waits for frames on a fixed set of descriptors (built once, not per wait).
pub struct Poller {
    fds: Vec<libc::pollfd>,
}

impl Poller {
    pub fn new(fds: impl IntoIterator<Item = RawFd>) -> Self {
        let fds: Vec<RawFd> = fds.into_iter().collect();
        Self {
            fds: sys::pollfds(&fds),
        }
    }

    /// Waits until a descriptor is readable, or `timeout_ms` passes; returns whether one
    /// is.
    pub fn wait(&mut self, timeout_ms: i32) -> std::io::Result<bool> {
        sys::poll_readable(&mut self.fds, timeout_ms)
    }
}

/// An error with its sources, so that "attach failed" also says what the kernel said.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}
