//! memif interfaces as drivers (`ovr_memif` does the protocol): one control thread for
//! the whole process, one [`ovr_memif::Handle`] per interface shared by the workers
//! (each holds a port; the interface goes when the last port does), and the status of
//! every memif link for the API.

use crate::{Driver, DriverKind, DriverStats, IoError};
use ovr_memif::{Handle, Manager, Port};
use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

pub use ovr_memif::{Config, LinkState, Mode, Role, RxQueue, SocketAddr, Status};

struct Registry {
    manager: Manager,
    handles: Mutex<HashMap<String, Weak<Handle>>>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// The registry, its control thread started on first use.
fn registry() -> Result<&'static Registry, IoError> {
    if let Some(r) = REGISTRY.get() {
        return Ok(r);
    }
    let manager = Manager::start().map_err(|source| IoError::Os {
        name: "memif".into(),
        op: "start the memif control thread",
        source,
    })?;
    Ok(REGISTRY.get_or_init(|| Registry {
        manager,
        handles: Mutex::new(HashMap::new()),
    }))
}

/// The interface's handle, added to the control thread if no worker holds it yet.
fn handle(cfg: &Config) -> Result<Arc<Handle>, IoError> {
    let r = registry()?;
    let mut hs = r.handles.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(h) = hs.get(&cfg.name).and_then(Weak::upgrade)
        && h.link().config() == cfg
    {
        return Ok(h);
    }
    let h = Arc::new(
        r.manager
            .add(cfg.clone())
            .map_err(|e| IoError::setup(&cfg.name, "memif", crate::error_chain(&e)))?,
    );
    hs.insert(cfg.name.clone(), Arc::downgrade(&h));
    Ok(h)
}

/// One memif link as the API shows it.
#[derive(Debug, Clone)]
pub struct LinkReport {
    pub name: String,
    pub role: Role,
    pub socket: String,
    pub id: u32,
    pub status: Status,
    /// Frames refused for a bad descriptor, by reason.
    pub bad_descriptors: Vec<(&'static str, u64)>,
    /// Each receive queue's frames and reader (the worker) while up.
    pub rx_queues: Vec<RxQueue>,
}

/// Every memif interface some worker holds, by name.
pub fn links() -> Vec<LinkReport> {
    let Ok(r) = registry() else {
        return Vec::new();
    };
    let hs = r.handles.lock().unwrap_or_else(PoisonError::into_inner);
    let mut v: Vec<LinkReport> = hs
        .values()
        .filter_map(Weak::upgrade)
        .map(|h| {
            let l = h.link();
            let c = l.config();
            LinkReport {
                name: c.name.clone(),
                role: c.role,
                socket: c.socket.to_string(),
                id: c.id,
                status: l.status(),
                bad_descriptors: l.bad_descriptors(),
                rx_queues: l.rx_queues(),
            }
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// Whether memif interface `name` is connected to its peer: false while it waits for
/// one, during a handshake, and when no worker holds it (admin down, not opened).
pub fn connected(name: &str) -> bool {
    let Some(r) = REGISTRY.get() else {
        return false;
    };
    let hs = r.handles.lock().unwrap_or_else(PoisonError::into_inner);
    hs.get(name)
        .and_then(Weak::upgrade)
        .is_some_and(|h| h.link().state() == LinkState::Up)
}

/// A memif interface driven as a [`Driver`].
pub struct Memif {
    port: Port,
    /// Keeps the interface registered while this driver lives.
    _handle: Arc<Handle>,
    rx: bool,
}

impl Memif {
    /// Opens interface `cfg.name` for worker `worker`: receiving from its share of the
    /// receive queues (`rx`: index and count, as [`Port::new`] takes it; `None`: it
    /// only sends), transmitting on queue `worker` (modulo the queues).
    pub fn open(
        cfg: &Config,
        rx: Option<(usize, usize)>,
        worker: usize,
        batch: usize,
    ) -> Result<Self, IoError> {
        let h = handle(cfg)?;
        let port = ovr_memif::Port::new(h.link().clone(), rx, worker, batch).map_err(|source| {
            IoError::Os {
                name: cfg.name.clone(),
                op: "memif port",
                source,
            }
        })?;
        Ok(Self {
            port,
            _handle: h,
            rx: rx.is_some(),
        })
    }

    pub fn status(&self) -> Status {
        self.port.link().status()
    }
}

impl Driver for Memif {
    fn ifindex(&self) -> u32 {
        0
    }

    fn kind(&self) -> DriverKind {
        DriverKind::Memif
    }

    fn recv(
        &mut self,
        deliver: &mut dyn FnMut(&mut dyn Iterator<Item = &[u8]>),
    ) -> Result<usize, IoError> {
        if !self.rx {
            return Ok(0);
        }
        Ok(self.port.recv(deliver))
    }

    fn send(&mut self, frames: &[&[u8]]) -> Result<(), IoError> {
        self.port.send(frames);
        Ok(())
    }

    fn fds(&self) -> Vec<RawFd> {
        if self.rx {
            vec![self.port.fd()]
        } else {
            Vec::new()
        }
    }

    fn arm(&mut self) -> bool {
        !self.rx || self.port.arm()
    }

    fn stats(&mut self) -> DriverStats {
        let s = self.port.stats();
        DriverStats {
            rx_frames: s.rx.frames,
            rx_dropped: s.rx.dropped + s.rx.bad.iter().sum::<u64>(),
            tx_frames: s.tx.frames,
            tx_dropped: s.tx.dropped + s.tx.bad.iter().sum::<u64>(),
            ..DriverStats::default()
        }
    }
}
