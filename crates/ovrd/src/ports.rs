//! The interfaces ovrd forwards between, each with its packet driver, and their life:
//! an interface that disappears (a container's veth deleted, a VM's TAP closed when the
//! VM stops) is let go, and attached again as soon as an interface of that name is back,
//! with a new driver; counters carry over. A TAP may be absent when ovrd starts (the VM
//! has not started yet); every other interface must exist.
//!
//! Workloads and TAPs are opened as interfaces whose senders may leave checksums and
//! segmentation to the NIC (see `ovr_io::open`); the underlay is not.

use ovr_io::{Driver, DriverStats, Poller, Preference};
use ovr_tables::ids::InterfaceId;
use ovr_tables::interface::InterfaceKind;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How often ovrd looks for interfaces that went away or came back.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// One interface named by the configuration.
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
    /// An I/O error was logged and the driver has not worked since (logged once).
    failing: bool,
    /// With `--offload xdp`: the shared XDP program on this interface (dropped after
    /// the driver).
    xdp: Option<ovr_offload::xdp::Attachment>,
}

impl Port {
    fn stats(&mut self) -> DriverStats {
        let now = self.driver.as_mut().map(|d| d.stats()).unwrap_or_default();
        DriverStats {
            rx_frames: self.past.rx_frames + now.rx_frames,
            rx_dropped: self.past.rx_dropped + now.rx_dropped,
            tx_frames: self.past.tx_frames + now.tx_frames,
            tx_dropped: self.past.tx_dropped + now.tx_dropped,
            tx_joined: self.past.tx_joined + now.tx_joined,
        }
    }

    fn attach(
        &mut self,
        pref: Preference,
        batch: usize,
        offload: Option<&ovr_offload::xdp::Xdp>,
    ) -> Result<(), ovr_io::IoError> {
        let offloading = self.kind != InterfaceKind::Underlay;
        self.xdp = None;
        if let Some(x) = offload {
            let af_xdp = match pref {
                Preference::Only(k) => k == ovr_io::DriverKind::AfXdp,
                Preference::Auto => !offloading,
            };
            match x.attach(&self.name, self.id.0, af_xdp) {
                Ok(a) => self.xdp = Some(a),
                Err(_) if ovr_io::if_index(&self.name).is_none() => {
                    return Err(ovr_io::IoError::NoSuchInterface {
                        name: self.name.clone(),
                    });
                }
                Err(e) => warn!(interface = %self.name, "no fast path here: {e}"),
            }
        }
        let shared = self.xdp.as_mut().map(|a| a as &mut dyn ovr_io::XskSlots);
        let (d, fallback) = ovr_io::open_with(&self.name, pref, offloading, batch, shared)?;
        if let Some(why) = fallback {
            warn!(interface = %self.name, "AF_XDP unavailable, using AF_PACKET: {why}");
        }
        info!(interface = %self.name, id = self.id.0, driver = %d.kind().name(), "attached");
        self.ifindex = d.ifindex();
        self.driver = Some(d);
        self.failing = false;
        Ok(())
    }

    fn detach(&mut self, why: &str) {
        if self.driver.is_some() {
            self.past = self.stats();
            // Closes the sockets and detaches the XDP program.
            self.driver = None;
            self.xdp = None;
            warn!(interface = %self.name, "{why}: let go; attaching again when it is back");
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

/// Every interface of the configuration and its driver.
pub struct Ports {
    ports: Vec<Port>,
    /// Interface id → index in `ports`, for transmission.
    by_id: Vec<Option<usize>>,
    pref: Preference,
    batch: usize,
    poller: Poller,
    last_check: Instant,
    offload: Option<ovr_offload::xdp::Xdp>,
}

impl Ports {
    /// Attaches to every interface; one that does not exist is an error unless it is a
    /// TAP (a VM's TAP exists only while the VM runs).
    pub fn open(
        interfaces: impl IntoIterator<Item = (String, InterfaceId, InterfaceKind)>,
        pref: Preference,
        batch: usize,
        offload: Option<ovr_offload::xdp::Xdp>,
    ) -> Result<Self, String> {
        let mut ports = Vec::new();
        for (name, id, kind) in interfaces {
            let may_be_absent = kind == InterfaceKind::Tap;
            let mut p = Port {
                id,
                name,
                kind,
                driver: None,
                ifindex: 0,
                past: DriverStats::default(),
                failing: false,
                xdp: None,
            };
            match p.attach(pref, batch, offload.as_ref()) {
                Ok(()) => {}
                Err(ovr_io::IoError::NoSuchInterface { .. }) if may_be_absent => {
                    info!(interface = %p.name, "does not exist yet: waiting for it");
                }
                Err(e) => return Err(e.to_string()),
            }
            ports.push(p);
        }
        let mut by_id = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let slot = p.id.0 as usize;
            if by_id.len() <= slot {
                by_id.resize(slot + 1, None);
            }
            by_id[slot] = Some(i);
        }
        let mut s = Self {
            ports,
            by_id,
            pref,
            batch,
            poller: Poller::new([]),
            last_check: Instant::now(),
            offload,
        };
        s.rebuild_poller();
        Ok(s)
    }

    pub fn attached(&self) -> usize {
        self.ports.iter().filter(|p| p.driver.is_some()).count()
    }

    fn rebuild_poller(&mut self) {
        self.poller = Poller::new(
            self.ports
                .iter()
                .filter_map(|p| p.driver.as_ref())
                .flat_map(|d| d.fds()),
        );
    }

    /// Sleeps until a frame arrives or `timeout_ms` passes.
    pub fn wait(&mut self, timeout_ms: i32) -> Result<(), String> {
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

    /// Every `CHECK_EVERY`: lets go of interfaces that disappeared or were replaced, and
    /// attaches to those that are back.
    pub fn maintain(&mut self) {
        if self.last_check.elapsed() < CHECK_EVERY {
            return;
        }
        self.last_check = Instant::now();
        let mut changed = false;
        for p in &mut self.ports {
            let now = ovr_io::if_index(&p.name);
            if p.driver.is_some() && now != Some(p.ifindex) {
                p.detach(if now.is_none() {
                    "interface disappeared"
                } else {
                    "interface was replaced"
                });
                changed = true;
            }
            if p.driver.is_none() && now.is_some() {
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

    /// Closes every driver (detaching XDP programs), logging each interface's counters.
    pub fn close(mut self) {
        for p in &mut self.ports {
            let s = p.stats();
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
            p.xdp = None;
        }
    }
}
