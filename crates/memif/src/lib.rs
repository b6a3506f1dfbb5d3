//! memif, the shared-memory packet interface of FD.io VPP, libmemif and DPDK's
//! net_memif (protocol version 2.0), for ovr: as server (the side that maps the
//! client's memory) and as client (the side that allocates it), many interfaces (ids)
//! on one control socket, interrupts or polling.
//!
//! - `msg`: the 128-byte control messages (views, decoding, emitting).
//! - `desc`: buffer descriptors and their checks.
//! - `ring`: ring layout and the data path's receive, refill and send.
//! - `control`: the control thread: sockets, handshakes, teardown, reconnection.
//! - `link`: an interface's shared state, status and data path ([`Port`]).
//! - `sys`: the only `unsafe`: system calls, mappings, volatile and atomic access.
//!
//! Nothing the peer sends is trusted: message sizes, region indices and sizes (checked
//! against `fstat` and the shrink seal), ring places and sizes, cookies, head/tail
//! distances and every descriptor are checked before use. A breach tears the link down
//! with a named reason, counted and logged; a bad descriptor drops its frame, counted.
#![deny(unsafe_code)]

pub mod control;
pub mod desc;
pub mod link;
pub mod msg;
pub mod ring;
mod sys;

pub use control::{Handle, Manager};
pub use link::{Link, LinkState, Port, PortStats, RxQueue, Status};
pub use msg::Mode;
pub use sys::{Mapping, SocketAddr};

/// Which side of the protocol an interface plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Listens; maps the memory the client offers.
    #[default]
    Server,
    /// Connects (retrying with backoff); allocates the memory.
    Client,
}

/// The largest ring, as log2 of its slots (what DPDK accepts too).
pub const MAX_LOG2_RING: u8 = 14;
/// The most regions a client may add.
pub const MAX_REGIONS: usize = 16;
/// The most queues per direction.
pub const MAX_QUEUES: usize = 16;

/// One memif interface's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Our interface name (sent in CONNECT / CONNECTED).
    pub name: String,
    pub role: Role,
    pub socket: SocketAddr,
    pub id: u32,
    /// Up to 24 bytes; empty: none.
    pub secret: String,
    pub mode: Mode,
    /// log2 of the ring size (client: what it asks for; server: the largest it takes).
    pub log2_ring_size: u8,
    /// Client: the size of each buffer it allocates.
    pub buffer_size: u32,
    /// Queue pairs (client: what it asks for; server: the most it takes).
    pub queues: usize,
    /// IP mode: the Ethernet addresses put on received packets (dst, src).
    pub mac: [u8; 6],
    pub peer_mac: [u8; 6],
    /// Our application name (HELLO / INIT).
    pub app_name: String,
}

impl Config {
    pub fn new(name: &str, role: Role, socket: SocketAddr, id: u32) -> Self {
        Self {
            name: name.to_string(),
            role,
            socket,
            id,
            secret: String::new(),
            mode: Mode::Ethernet,
            log2_ring_size: 10,
            buffer_size: 2048,
            queues: 1,
            mac: [0x02, 0, 0, 0, 0, 0x01],
            peer_mac: [0x02, 0, 0, 0, 0, 0x02],
            app_name: format!("ovr {}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// Checks the settings; names the field that is wrong.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if msg::secret_bytes(&self.secret).is_none() {
            return Err(("secret", "at most 24 bytes, no NUL".into()));
        }
        if !(1..=MAX_LOG2_RING).contains(&self.log2_ring_size) {
            return Err((
                "ring_size",
                format!("log2 of the ring size: 1 to {MAX_LOG2_RING}"),
            ));
        }
        if !(128..=65535).contains(&self.buffer_size) || !self.buffer_size.is_multiple_of(64) {
            return Err(("buffer_size", "128 to 65472, a multiple of 64".into()));
        }
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return Err(("queues", format!("1 to {MAX_QUEUES}")));
        }
        if self.mode == Mode::PuntInject {
            return Err(("mode", "ethernet or ip".into()));
        }
        let total = (2 * self.queues as u64) << self.log2_ring_size;
        if total * (u64::from(self.buffer_size) + 16) > u64::from(u32::MAX) {
            return Err(("buffer_size", "rings and buffers exceed 4 GiB".into()));
        }
        Ok(())
    }
}

/// Why an interface could not be added.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("memif '{name}': {field}: {message}")]
    Config {
        name: String,
        field: &'static str,
        message: String,
    },
    #[error("memif '{name}': socket {socket}: {source}")]
    Socket {
        name: String,
        socket: String,
        #[source]
        source: std::io::Error,
    },
    #[error("memif '{name}': id {id} is already served on {socket}")]
    DuplicateId {
        name: String,
        id: u32,
        socket: String,
    },
    #[error("memif: {0}")]
    Os(#[from] std::io::Error),
}
