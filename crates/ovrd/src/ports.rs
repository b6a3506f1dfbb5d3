//! The interfaces ovrd forwards between, each with its packet driver, and their life.
//! The set follows the interface table: an interface added through the API is attached,
//! one deleted is let go (both seen at the next loop after the change is published).
//! An interface that disappears from the host (a container's veth deleted, a VM's TAP
//! closed when the VM stops) is let go, and attached again as soon as an interface of
//! that name is back, with a new driver; counters carry over. At start every interface
//! of the configuration must exist except TAPs (the VM may not run yet); one added later
//! may appear after it was configured (a CNI plugin may configure first).
//!
//! Workloads and TAPs are opened as interfaces whose senders may leave checksums and
//! segmentation to the NIC (see `ovr_io::open`); the underlay is not.
//!
//! With several workers, each interface is received from by one worker (its driver, the
//! one that may attach a program); the others open it for sending only.
//!
//! With `--offload xdp|tc`, the receiving worker also attaches the fast path's program
//! (one program for the whole ovrd, see `ovr_offload::bpf`) before its driver: at XDP,
//! its AF_XDP sockets then go into that program's socket map; at TC, its AF_PACKET
//! sockets are ones the kernel serves after TC (`ovr_io::open_behind_tc`), so that they
//! receive only what the program passes on.
//!
//! A policed interface (`Interface::police`) is policed by its driver in the kernel
//! where the driver can (`Driver::police`), before a worker reads a frame; the workers
//! learn which interfaces those are ([`Attached::policed_in_kernel`]) and police the
//! others themselves.

use ovr_io::{Driver, DriverStats, Poller, Preference};
use ovr_offload::bpf::{Attachment, Bpf, Hook};
use ovr_tables::ids::InterfaceId;
use ovr_tables::interface::{Interface, InterfaceKind, MemifMode, MemifRole};
use ovr_tables::state::ForwardingState;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// How often ovrd looks for interfaces that went away or came back.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// One interface of the interface table.
struct Port {
    id: InterfaceId,
    name: String,
    kind: InterfaceKind,
    driver: Option<Box<dyn Driver>>,
    /// The interface index the driver was opened on (an interface recreated under the
    /// same name gets a new one).
    ifindex: u32,
    /// Counters of the drivers this port had before.
    past: DriverStats,
    /// The counters (`Port::stats`) whose drops are already counted as drop reasons.
    reported: DriverStats,
    /// The interface's policer, as the table has it.
    police: Option<ovr_io::Rate>,
    /// Its driver applies `police` in the kernel.
    policed_in_kernel: bool,
    /// An I/O error was logged and the driver has not worked since (logged once).
    failing: bool,
    /// This worker receives from it (else it only sends on it).
    rx: bool,
    /// With `--offload`, on the receiving worker: the shared fast path program on this
    /// interface (declared after the driver: detached once the sockets are closed).
    program: Option<Attachment>,
    /// A memif interface's settings (it has no kernel interface: no ifindex to follow).
    memif: Option<ovr_io::memif::Config>,
    /// A memif interface's receive queues this worker reads (`Share::memif_queues`).
    memif_rx: Option<(usize, usize)>,
    admin_up: bool,
    worker: usize,
}

/// Interface `i`'s policer, as the drivers take it.
fn police_of(i: &Interface) -> Option<ovr_io::Rate> {
    i.police.map(|p| ovr_io::Rate {
        packets_per_second: p.packets_per_second,
        burst: p.burst,
    })
}

/// The memif driver's settings for interface `i`, if it is one.
fn memif_config(i: &Interface) -> Option<ovr_io::memif::Config> {
    use ovr_io::memif::{Config, Mode, Role, SocketAddr};
    let m = i.memif.as_ref()?;
    let socket = match m.socket.strip_prefix('@') {
        Some(name) => SocketAddr::Abstract(name.to_string()),
        None => SocketAddr::Path(m.socket.clone().into()),
    };
    let role = match m.role {
        MemifRole::Server => Role::Server,
        MemifRole::Client => Role::Client,
    };
    let mut c = Config::new(&i.name, role, socket, m.id);
    c.secret = m.secret.clone().unwrap_or_default();
    c.mode = match m.mode {
        MemifMode::Ethernet => Mode::Ethernet,
        MemifMode::Ip => Mode::Ip,
    };
    c.log2_ring_size = m.ring_size;
    c.buffer_size = m.buffer_size;
    c.queues = usize::from(m.queues);
    c.mac = i.mac.0;
    Some(c)
}

impl Port {
    fn new(i: &Interface, share: Share) -> Self {
        let memif = memif_config(i);
        Self {
            id: i.id,
            name: i.name.clone(),
            kind: i.kind,
            driver: None,
            ifindex: 0,
            past: DriverStats::default(),
            reported: DriverStats::default(),
            police: police_of(i),
            policed_in_kernel: false,
            failing: false,
            rx: share.receives(i.id),
            program: None,
            memif_rx: memif
                .as_ref()
                .and_then(|c| share.memif_queues(i.id, c.queues)),
            memif,
            admin_up: i.admin_up,
            worker: share.index,
        }
    }

    /// Whether the port still matches interface `i` as the table has it now.
    fn matches(&self, i: &Interface) -> bool {
        i.name == self.name
            && i.kind == self.kind
            && memif_config(i) == self.memif
            && (self.memif.is_none() || i.admin_up == self.admin_up)
    }

    fn stats(&mut self) -> DriverStats {
        let now = self.driver.as_mut().map(|d| d.stats()).unwrap_or_default();
        DriverStats {
            rx_frames: self.past.rx_frames + now.rx_frames,
            rx_dropped: self.past.rx_dropped + now.rx_dropped,
            tx_frames: self.past.tx_frames + now.tx_frames,
            tx_dropped: self.past.tx_dropped + now.tx_dropped,
            tx_joined: self.past.tx_joined + now.tx_joined,
            rx_policed: self.past.rx_policed + now.rx_policed,
            rx_policed_bytes: self.past.rx_policed_bytes + now.rx_policed_bytes,
        }
    }

    /// Tells the receiving driver the interface's policer; whether it applies it in the
    /// kernel is then `policed_in_kernel` (else the worker polices).
    fn apply_police(&mut self) {
        let was = std::mem::take(&mut self.policed_in_kernel);
        let Some(d) = self.driver.as_mut().filter(|_| self.rx) else {
            return;
        };
        match d.police(self.police) {
            Ok(applied) => self.policed_in_kernel = applied && self.police.is_some(),
            Err(e) => warn!(interface = %self.name, "policing in user space: {e}"),
        }
        match self.police {
            Some(p) if self.policed_in_kernel => info!(
                interface = %self.name,
                packets_per_second = p.packets_per_second,
                burst = p.burst,
                "policed in the kernel"
            ),
            _ if was => info!(interface = %self.name, "no longer policed in the kernel"),
            _ => {}
        }
    }

    fn attach(
        &mut self,
        pref: Preference,
        batch: usize,
        offload: Option<&Bpf>,
    ) -> Result<(), ovr_io::IoError> {
        // Tunnel packets toward one peer go as one large frame (`Driver::join_datagrams`)
        // only on an AF_PACKET underlay without the fast path, from every worker alike.
        // With AF_XDP there, a peer like this ovrd reads with an XDP program, which makes
        // the kernel cut such frames again on the way, and a cut datagram has a UDP
        // checksum, which a peer's fast path must sum (at TC a joined frame it does not
        // take at all).
        let join = self.kind == InterfaceKind::Underlay
            && pref != Preference::Only(ovr_io::DriverKind::AfXdp)
            && offload.is_none();
        if let Some(cfg) = &self.memif {
            // Shared memory with a network function: no kernel interface, no fast path
            // program. Administratively down: no connection at all (the peer is told).
            if !self.admin_up {
                return Ok(());
            }
            let d = ovr_io::memif::Memif::open(cfg, self.memif_rx, self.worker, batch)?;
            if self.rx {
                info!(interface = %self.name, id = self.id.0, role = ?cfg.role, socket = %cfg.socket, "memif attached");
            }
            self.hold(Box::new(d), false);
            return Ok(());
        }
        if !self.rx {
            let d = ovr_io::open_sender(&self.name)?;
            debug!(interface = %self.name, id = self.id.0, "opened for sending");
            self.hold(d, join);
            return Ok(());
        }
        let offloading = self.kind != InterfaceKind::Underlay;
        self.program = None;
        if let Some(x) = offload {
            let af_xdp = match pref {
                Preference::Only(k) => k == ovr_io::DriverKind::AfXdp,
                Preference::Auto => !offloading,
            };
            match x.attach(&self.name, self.id.0, af_xdp) {
                Ok(a) => self.program = Some(a),
                Err(_) if ovr_io::if_index(&self.name).is_none() => {
                    return Err(ovr_io::IoError::NoSuchInterface {
                        name: self.name.clone(),
                    });
                }
                Err(e) => warn!(interface = %self.name, "no fast path here: {e}"),
            }
        }
        let behind_tc = self.program.is_some() && offload.is_some_and(|x| x.hook() == Hook::Tc);
        let shared = self
            .program
            .as_mut()
            .map(|a| a as &mut dyn ovr_io::XskSlots);
        let opened = if behind_tc {
            ovr_io::open_behind_tc(&self.name, batch).map(|d| (d, None))
        } else {
            ovr_io::open_with(&self.name, pref, offloading, batch, shared)
        };
        let (d, fallback) = match opened {
            Ok(d) => d,
            Err(e) => {
                // No driver to read the frames the program passes on: detach it.
                self.program = None;
                return Err(e);
            }
        };
        if let Some(why) = fallback {
            warn!(interface = %self.name, "AF_XDP unavailable, using AF_PACKET: {why}");
        }
        info!(interface = %self.name, id = self.id.0, driver = %d.kind().name(), "attached");
        self.hold(d, join);
        Ok(())
    }

    /// Makes `d` the interface's driver.
    fn hold(&mut self, mut d: Box<dyn Driver>, join: bool) {
        if join {
            d.join_datagrams();
        }
        self.ifindex = d.ifindex();
        self.driver = Some(d);
        self.failing = false;
        self.apply_police();
    }

    fn detach(&mut self, why: &str) {
        if self.driver.is_some() {
            self.past = self.stats();
            // Closes the sockets and detaches the program.
            self.driver = None;
            self.program = None;
            self.policed_in_kernel = false;
            // The receiving worker speaks for the interface.
            if self.rx {
                warn!(interface = %self.name, "{why}: let go; attaching again when it is back");
            }
        }
    }

    /// Attaches, or waits for the interface if it may appear later (logged once).
    fn attach_or_wait(
        &mut self,
        pref: Preference,
        batch: usize,
        offload: Option<&Bpf>,
        may_be_absent: bool,
    ) -> Result<(), ovr_io::IoError> {
        match self.attach(pref, batch, offload) {
            Err(ovr_io::IoError::NoSuchInterface { .. }) if may_be_absent => {
                if self.rx {
                    info!(interface = %self.name, "does not exist yet: waiting for it");
                }
                self.failing = true;
                Ok(())
            }
            r => r,
        }
    }

    /// Logs an I/O error once, until the driver works again.
    fn failed(&mut self, e: &ovr_io::IoError) {
        if !self.failing {
            self.failing = true;
            warn!("{e}");
        }
    }
}

/// Which interfaces a worker receives from: one of `count` workers, interfaces dealt
/// round-robin by id.
#[derive(Debug, Clone, Copy)]
pub struct Share {
    pub index: usize,
    pub count: usize,
}

impl Share {
    fn receives(self, id: InterfaceId) -> bool {
        id.0 as usize % self.count == self.index
    }

    /// The receive queues of memif interface `id` (with `queues` of them) this worker
    /// reads, as `ovr_memif::Port` takes them (index, count): queue 0 on the worker the
    /// interface is dealt to, queue 1 on the next and so on round the workers, so that a
    /// network function spreading its frames over queues spreads them over cores. One
    /// queue, or one worker: the dealt worker reads them all, the others none.
    fn memif_queues(self, id: InterfaceId, queues: usize) -> Option<(usize, usize)> {
        let dealt = id.0 as usize % self.count;
        let index = (self.index + self.count - dealt) % self.count;
        (index < queues.max(1)).then_some((index, self.count))
    }
}

/// The interfaces each worker receives from with a driver open: a port is up (the
/// cluster publishes it as an endpoint, EVPN advertises it) once ovrd really receives
/// from it, not merely once the interface exists; a memif port only while its peer is
/// connected (a memif driver is open from the moment its socket listens). Also which of
/// them their driver polices in the kernel: every worker may receive their frames (handed
/// over by flow), and none must police them again.
#[derive(Clone)]
pub struct Attached(Arc<AttachedSets>);

struct AttachedSets {
    /// Per worker, its interfaces, each with whether it is a memif one.
    names: Mutex<Vec<BTreeMap<String, bool>>>,
    /// Per worker, the ids of its interfaces policed in the kernel.
    policed: Mutex<Vec<BTreeSet<u32>>>,
    /// Changes with `policed`.
    version: AtomicU64,
}

impl Attached {
    pub fn new(workers: usize) -> Self {
        Self(Arc::new(AttachedSets {
            names: Mutex::new(vec![BTreeMap::new(); workers]),
            policed: Mutex::new(vec![BTreeSet::new(); workers]),
            version: AtomicU64::new(0),
        }))
    }

    /// A worker's interfaces, and those of them policed in the kernel.
    fn set(&self, worker: usize, names: BTreeMap<String, bool>, policed: BTreeSet<u32>) {
        let mut all = self.0.names.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = all.get_mut(worker) {
            *slot = names;
        }
        let mut all = self
            .0
            .policed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = all.get_mut(worker)
            && *slot != policed
        {
            *slot = policed;
            self.0.version.fetch_add(1, Ordering::Release);
        }
    }

    /// The interfaces policed in the kernel, if they changed since version `seen`
    /// (which it moves on): one atomic load when they did not.
    pub fn policed_in_kernel(&self, seen: &mut u64) -> Option<Vec<InterfaceId>> {
        let version = self.0.version.load(Ordering::Acquire);
        if version == *seen {
            return None;
        }
        *seen = version;
        let all = self
            .0
            .policed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some(all.iter().flatten().map(|&id| InterfaceId(id)).collect())
    }

    pub fn contains(&self, name: &str) -> bool {
        let memif = {
            let all = self.0.names.lock().unwrap_or_else(PoisonError::into_inner);
            match all.iter().find_map(|w| w.get(name)) {
                Some(memif) => *memif,
                None => return false,
            }
        };
        !memif || ovr_io::memif::connected(name)
    }

    /// Every interface some worker receives from.
    pub fn names(&self) -> BTreeSet<String> {
        let all = self.0.names.lock().unwrap_or_else(PoisonError::into_inner);
        all.iter().flat_map(|w| w.keys()).cloned().collect()
    }
}

/// Every interface of the interface table and its driver.
pub struct Ports {
    share: Share,
    up: Attached,
    /// Descriptors polled beside the drivers' (another worker's wake-up).
    extra_fds: Vec<RawFd>,
    ports: Vec<Port>,
    /// Interface id → index in `ports`, for transmission.
    by_id: Vec<Option<usize>>,
    pref: Preference,
    batch: usize,
    poller: Poller,
    last_check: Instant,
    /// The tables' epoch the set of ports was last compared with.
    epoch: u32,
    /// The fast path's program, attached to the interfaces this worker receives from.
    offload: Option<Bpf>,
}

impl Ports {
    /// Attaches to every interface of the tables; one that does not exist is an error
    /// unless it is a TAP.
    pub fn open(
        st: &ForwardingState,
        pref: Preference,
        batch: usize,
        share: Share,
        extra_fds: Vec<RawFd>,
        offload: Option<Bpf>,
        up: Attached,
    ) -> Result<Self, String> {
        let mut s = Self {
            share,
            up,
            extra_fds,
            ports: Vec::new(),
            by_id: Vec::new(),
            pref,
            batch,
            poller: Poller::new([]),
            last_check: Instant::now(),
            epoch: st.epoch(),
            offload,
        };
        for i in st.interfaces().iter() {
            let may_be_absent = i.kind == InterfaceKind::Tap;
            let mut p = Port::new(i, share);
            if let Err(e) = p.attach_or_wait(pref, batch, s.offload.as_ref(), may_be_absent) {
                // A start that fails leaves the fast path on the interfaces already
                // taken over as it found it, pinned and forwarding: an upgrade that
                // does not start must not cut the sessions the old ovrd left.
                for p in &mut s.ports {
                    if let Some(a) = p.program.take() {
                        a.leave();
                    }
                }
                return Err(e.to_string());
            }
            s.ports.push(p);
        }
        s.reindex();
        Ok(s)
    }

    fn reindex(&mut self) {
        self.by_id.clear();
        for (i, p) in self.ports.iter().enumerate() {
            let slot = p.id.0 as usize;
            if self.by_id.len() <= slot {
                self.by_id.resize(slot + 1, None);
            }
            self.by_id[slot] = Some(i);
        }
        self.rebuild_poller();
    }

    /// Interfaces this worker receives from with a driver attached.
    pub fn attached(&self) -> usize {
        self.ports
            .iter()
            .filter(|p| p.rx && p.driver.is_some())
            .count()
    }

    fn rebuild_poller(&mut self) {
        let receiving = || self.ports.iter().filter(|p| p.rx && p.driver.is_some());
        self.up.set(
            self.share.index,
            receiving()
                .map(|p| (p.name.clone(), p.memif.is_some()))
                .collect(),
            receiving()
                .filter(|p| p.policed_in_kernel)
                .map(|p| p.id.0)
                .collect(),
        );
        self.poller = Poller::new(
            self.ports
                .iter()
                .filter_map(|p| p.driver.as_ref())
                .flat_map(|d| d.fds())
                .chain(self.extra_fds.iter().copied()),
        );
    }

    /// Sleeps until a frame arrives or `timeout_ms` passes.
    pub fn wait(&mut self, timeout_ms: i32) -> Result<(), String> {
        let mut ready = true;
        for d in self.ports.iter_mut().filter_map(|p| p.driver.as_mut()) {
            ready &= d.arm();
        }
        if !ready {
            return Ok(());
        }
        self.poller
            .wait(timeout_ms)
            .map(|_| ())
            .map_err(|e| format!("poll: {e}"))
    }

    /// Receives a batch on every interface, handing each to `deliver` with whether its
    /// frames begin with a virtio-net header; returns how many frames arrived.
    pub fn recv(
        &mut self,
        mut deliver: impl FnMut(InterfaceId, bool, &mut dyn Iterator<Item = &[u8]>),
    ) -> usize {
        let mut total = 0;
        for p in &mut self.ports {
            let Some(d) = p.driver.as_mut() else { continue };
            let (id, vnet) = (p.id, d.vnet_hdr());
            match d.recv(&mut |frames| deliver(id, vnet, frames)) {
                Ok(n) => total += n,
                Err(e) => p.failed(&e),
            }
        }
        total
    }

    /// Sends frames on interface `id` (dropped and counted by the pipeline's caller if it
    /// is not attached).
    pub fn send(&mut self, id: InterfaceId, frames: &[&[u8]]) {
        let Some(Some(i)) = self.by_id.get(id.0 as usize) else {
            return;
        };
        let p = &mut self.ports[*i];
        match p.driver.as_mut() {
            Some(d) => {
                if let Err(e) = d.send(frames) {
                    p.failed(&e);
                }
            }
            None => p.past.tx_dropped += frames.len() as u64,
        }
    }

    /// Frames the drivers lost since the last call, received (the kernel found their
    /// ring or socket queue full: ovrd fell behind) and sent (the kernel did not take
    /// them, or the interface was not attached), so that they are counted under drop
    /// reasons with everything else ovrd does not forward. Frames the kernel policed
    /// go to `policed` by interface (frames, bytes).
    pub fn take_losses(&mut self, mut policed: impl FnMut(InterfaceId, u64, u64)) -> (u64, u64) {
        let (mut rx, mut tx) = (0, 0);
        for p in &mut self.ports {
            let (s, was) = (p.stats(), p.reported);
            rx += s.rx_dropped.saturating_sub(was.rx_dropped);
            tx += s.tx_dropped.saturating_sub(was.tx_dropped);
            let frames = s.rx_policed.saturating_sub(was.rx_policed);
            if frames > 0 {
                policed(
                    p.id,
                    frames,
                    s.rx_policed_bytes.saturating_sub(was.rx_policed_bytes),
                );
            }
            p.reported = s;
        }
        (rx, tx)
    }

    /// See [`Attached::policed_in_kernel`].
    pub fn policed_in_kernel(&self, seen: &mut u64) -> Option<Vec<InterfaceId>> {
        self.up.policed_in_kernel(seen)
    }

    /// Follows the interface table when it changed (cheap otherwise: one comparison),
    /// and every `CHECK_EVERY` lets go of interfaces that disappeared from the host or
    /// were replaced, and attaches to those that are back. `now` is the caller's clock.
    pub fn maintain(&mut self, st: &ForwardingState, now: Instant) {
        if st.epoch() != self.epoch {
            self.epoch = st.epoch();
            self.follow(st);
        }
        if now.saturating_duration_since(self.last_check) < CHECK_EVERY {
            return;
        }
        self.last_check = now;
        let mut changed = false;
        for p in &mut self.ports {
            if p.memif.is_some() {
                // No kernel interface: retried only if opening failed (a socket that
                // could not be created).
                if p.driver.is_none() && p.admin_up && p.failing {
                    match p.attach(self.pref, self.batch, self.offload.as_ref()) {
                        Ok(()) => changed = true,
                        Err(e) => p.failed(&e),
                    }
                }
                continue;
            }
            let index = ovr_io::if_index(&p.name);
            if p.driver.is_some() && index != Some(p.ifindex) {
                p.detach(if index.is_none() {
                    "interface disappeared"
                } else {
                    "interface was replaced"
                });
                changed = true;
            }
            if p.driver.is_none() && index.is_some() {
                match p.attach(self.pref, self.batch, self.offload.as_ref()) {
                    Ok(()) => changed = true,
                    Err(e) => p.failed(&e),
                }
            }
        }
        if changed {
            self.rebuild_poller();
        }
    }

    /// Attaches interfaces the table gained, lets go of those it lost, and re-attaches
    /// one whose kind changed (workloads and the underlay are opened differently).
    fn follow(&mut self, st: &ForwardingState) {
        let table = st.interfaces();
        let (kept, gone): (Vec<Port>, Vec<Port>) = self
            .ports
            .drain(..)
            .partition(|p| table.get(p.id).is_some_and(|i| p.matches(i)));
        self.ports = kept;
        let mut changed = !gone.is_empty();
        for p in &mut self.ports {
            let police = table.get(p.id).and_then(police_of);
            if police != p.police {
                p.police = police;
                p.apply_police();
                changed = true;
            }
        }
        for p in gone {
            let (name, rx) = (p.name.clone(), p.rx);
            // Closes its sockets and detaches its fast path program before saying so.
            drop(p);
            if rx {
                info!(interface = %name, "removed from the configuration: let go");
            }
        }
        for i in table.iter() {
            if self.ports.iter().any(|p| p.id == i.id) {
                continue;
            }
            let mut p = Port::new(i, self.share);
            if let Err(e) = p.attach_or_wait(self.pref, self.batch, self.offload.as_ref(), true) {
                p.failed(&e);
            }
            self.ports.push(p);
            changed = true;
        }
        if changed {
            self.reindex();
        }
    }

    /// Closes every driver, logging each interface's counters, and detaches the fast
    /// path's program, or leaves it forwarding (`keep`: pinned, for the next ovrd).
    pub fn close(mut self, keep: bool) {
        for p in &mut self.ports {
            let s = p.stats();
            if !p.rx {
                info!(
                    interface = %p.name,
                    rx = s.rx_frames,
                    tx = s.tx_frames,
                    tx_dropped = s.tx_dropped,
                    tx_joined = s.tx_joined,
                    "sender let go"
                );
                continue;
            }
            info!(
                interface = %p.name,
                driver = %p.driver.as_ref().map_or("none", |d| d.kind().name()),
                rx = s.rx_frames,
                rx_dropped = s.rx_dropped,
                tx = s.tx_frames,
                tx_dropped = s.tx_dropped,
                tx_joined = s.tx_joined,
                "closed"
            );
            p.driver = None;
            match p.program.take() {
                Some(a) if keep => a.leave(),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memif_queues_go_round_the_workers_from_the_dealt_one() {
        let reads = |count: usize, id: u32, queues: usize| -> Vec<Vec<usize>> {
            (0..count)
                .map(|index| {
                    let share = Share { index, count }.memif_queues(InterfaceId(id), queues);
                    (0..queues)
                        .filter(|q| share.is_some_and(|(i, n)| q % n == i))
                        .collect()
                })
                .collect()
        };
        // One worker reads every queue; one queue is the dealt worker's (id 3 of 2: 1).
        assert_eq!(reads(1, 3, 4), [vec![0, 1, 2, 3]]);
        assert_eq!(reads(2, 3, 1), [vec![], vec![0]]);
        // Queues dealt from the dealt worker on, each read by exactly one worker.
        assert_eq!(reads(2, 3, 4), [vec![1, 3], vec![0, 2]]);
        assert_eq!(reads(3, 4, 2), [vec![], vec![0], vec![1]]);
    }
}
