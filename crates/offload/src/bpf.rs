//! The kernel backend: bpf/fast_path.c loaded once, at one of two hooks ([`Hook`]), and
//! attached to every interface ovrd forwards on, so that every interface's program
//! shares the flow map, the egress map and the AF_XDP socket map (each interface has its
//! own slots in it, named in its `ovr_ifaces` entry).
//!
//! Loaded with a pin directory ([`Bpf::load_pinned`], `crate::pin`), the program, its
//! maps and its links outlive ovrd, so that established flows keep forwarding while no
//! ovrd runs; the next one adopts them: same maps (entries, generation), the new program
//! swapped into each link atomically. Without one ([`Bpf::load`]), the kernel detaches
//! everything when ovrd exits.
//!
//! - XDP: earliest and cheapest per frame, and the AF_XDP redirect; a frame is one
//!   buffer without the kernel's metadata, so a large (GSO) packet never reaches it whole
//!   and an unfinished checksum looks wrong (those go to user space).
//! - TC (TCX on ingress): after the kernel built its skb, so large packets cross whole
//!   and unfinished checksums stay unfinished, as the kernel's own overlay forwards them;
//!   what the program passes on goes to an AF_PACKET socket served after TC
//!   (`ovr_io::AfPacket::open_behind_tc`).
//!
//! With several workers, each worker attaches the program to the interfaces it receives
//! from (through its clone of [`Bpf`]) and owns a `FastPath` over another clone: the
//! maps are shared, behind one lock taken only to change or read them (never per
//! packet in user space).

use crate::layout::{
    ACTION_LEN, Action, ActionBytes, COUNTER_NAMES, IFACE_LEN, Iface, IfaceBytes, KEY_LEN, Key,
    KeyBytes, MAX_ADDRS, NO_XSK, TPL_LEN, Usage, template_of,
};
use crate::pin::{MAPS, PinDir};
use crate::{Offload, OffloadError};
use aya::maps::{
    Array, DevMapHash, HashMap as BpfHashMap, IterableMap, Map, MapData, MapInfo, PerCpuArray,
    XskMap,
};
use aya::programs::links::{FdLink, LinkOrder, PinnedLink};
use aya::programs::tc::{SchedClassifierLink, TcAttachOptions, TcAttachType};
use aya::programs::xdp::XdpLink;
use aya::programs::{SchedClassifier, Xdp as XdpProgram, XdpMode};
use aya::{Ebpf, EbpfLoader};
use ovr_io::error_chain;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

mod attach;
mod templates;
pub use attach::Attachment;
use templates::{Headers, Templates};

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fast_path.o"));

/// Where in the kernel's receive path the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Xdp,
    Tc,
}

impl Hook {
    fn program(self) -> &'static str {
        match self {
            Hook::Xdp => "ovr_xdp",
            Hook::Tc => "ovr_tc",
        }
    }
}

/// AF_XDP socket slots per interface (one per receive queue).
const XSK_SLOTS: u32 = 64;
const XSK_MAP_LEN: u32 = 4096;
/// Entries asked for per batch read: short calls (see `scan`). The kernel returns whole
/// hash buckets only (ENOSPC if the first does not fit: the buffer grows then).
const SCAN_CALL: usize = 32;

fn err(op: &'static str, e: impl std::fmt::Display) -> OffloadError {
    OffloadError::Bpf {
        op,
        message: e.to_string(),
    }
}

struct Inner {
    ebpf: Ebpf,
    flows: BpfHashMap<MapData, KeyBytes, ActionBytes>,
    /// Tunnels' outer headers, by the index flows name them with (`templates`).
    tpls: Array<MapData, Headers>,
    templates: Templates,
    ifaces: BpfHashMap<MapData, u32, IfaceBytes>,
    xsks: XskMap<MapData>,
    tx: DevMapHash<MapData>,
    generation: Array<MapData, u32>,
    counters: PerCpuArray<MapData, u64>,
    /// Attached interfaces: ovr's interface id → (ifindex, its entry).
    attached: HashMap<u32, (u32, Iface)>,
    /// Their names (for their statistics in sysfs).
    names: HashMap<u32, String>,
    /// Their AF_XDP sockets (whose receive drops the device counts too).
    xsk_fds: HashMap<u32, Vec<RawFd>>,
    /// Free blocks of AF_XDP slots.
    free_slots: Vec<u32>,
    /// Where the fast path is pinned (None: it goes with this process).
    pins: Option<PinDir>,
    /// Interfaces (ifindex) whose pinned link, an earlier ovrd's, no attachment has
    /// taken over yet.
    unclaimed: HashSet<u32>,
}

/// The loaded program and its maps; clones share them (one per worker).
#[derive(Clone)]
pub struct Bpf {
    hook: Hook,
    inner: Arc<Mutex<Inner>>,
    /// Interfaces were attached or detached since the last `take_changed` (looked at
    /// every loop iteration, without the lock).
    changed: Arc<AtomicBool>,
    /// The generation in force in the maps an earlier ovrd left pinned (adopted).
    adopted: Option<u32>,
}

impl Bpf {
    /// Loads the program for `hook` (not attached anywhere yet), its flow map sized for
    /// `flows` entries; it goes with this process.
    pub fn load(hook: Hook, flows: usize) -> Result<Self, OffloadError> {
        let ebpf = loader(flows)
            .load(OBJECT)
            .map_err(|e| err("load BPF object", error_chain(&e)))?;
        Self::finish(hook, ebpf, None, false)
    }

    /// Loads the program for `hook` with its maps pinned in `dir` (on bpffs, mounted there
    /// if needed). A fast path an earlier ovrd left there is adopted: its maps (entries,
    /// generation) are this one's, and its links are taken over as interfaces are
    /// attached. One whose maps have another layout (another version of the program) is
    /// removed first: so is one whose flow map was sized for another number of flows
    /// (the map's size is fixed when it is made).
    pub fn load_pinned(hook: Hook, dir: &Path, flows: usize) -> Result<Self, OffloadError> {
        let pins = PinDir::prepare(dir)?;
        let adopt = pins.holds_maps()
            && match same_layout(&pins, flows) {
                Ok(()) => true,
                Err(why) => {
                    tracing::warn!(
                        dir = %dir.display(),
                        "the fast path pinned there has another layout ({why}): removed; \
                         its flows go through user space again"
                    );
                    false
                }
            };
        if !adopt {
            pins.clear();
        }
        let mut loader = loader(flows);
        for name in MAPS {
            loader.map_pin_path(name, pins.map(name));
        }
        let ebpf = loader
            .load(OBJECT)
            .map_err(|e| err("load BPF object (pinned maps)", error_chain(&e)))?;
        Self::finish(hook, ebpf, Some(pins), adopt)
    }

    fn finish(
        hook: Hook,
        mut ebpf: Ebpf,
        pins: Option<PinDir>,
        adopt: bool,
    ) -> Result<Self, OffloadError> {
        let name = hook.program();
        let prog = ebpf
            .program_mut(name)
            .ok_or_else(|| err("find program", name))?;
        let loaded = match hook {
            Hook::Xdp => <&mut XdpProgram>::try_from(prog).and_then(|p| p.load()),
            Hook::Tc => <&mut SchedClassifier>::try_from(prog).and_then(|p| p.load()),
        };
        loaded.map_err(|e| err("load program", format!("{name}: {}", error_chain(&e))))?;
        if let Some(p) = &pins {
            // The program pinned is the one in force: this one (the links get it as
            // interfaces are attached).
            for other in [Hook::Xdp, Hook::Tc] {
                let _ = std::fs::remove_file(p.program(other.program()));
            }
            let path = p.program(name);
            let prog = ebpf
                .program_mut(name)
                .ok_or_else(|| err("find program", name))?;
            let pinned = match hook {
                Hook::Xdp => <&mut XdpProgram>::try_from(prog)
                    .map(|x| x.pin(&path))
                    .map_err(|e| e.to_string()),
                Hook::Tc => <&mut SchedClassifier>::try_from(prog)
                    .map(|x| x.pin(&path))
                    .map_err(|e| e.to_string()),
            };
            match pinned {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(err("pin program", error_chain(&e))),
                Err(e) => return Err(err("pin program", e)),
            }
        }
        fn take<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
            ebpf: &mut Ebpf,
            name: &'static str,
        ) -> Result<T, OffloadError> {
            let m = ebpf.take_map(name).ok_or_else(|| err("find map", name))?;
            T::try_from(m).map_err(|e| err("map type", format!("{name}: {}", error_chain(&e))))
        }
        let generation: Array<MapData, u32> = take(&mut ebpf, "ovr_gen")?;
        let adopted = adopt.then(|| generation.get(&0, 0).unwrap_or(0));
        let unclaimed = match (&pins, adopt) {
            (Some(p), true) => p.links().into_iter().collect(),
            _ => HashSet::new(),
        };
        let flows: BpfHashMap<MapData, KeyBytes, ActionBytes> = take(&mut ebpf, FLOWS_MAP)?;
        let tpls: Array<MapData, Headers> = take(&mut ebpf, TEMPLATES_MAP)?;
        let mut templates = Templates::new(tpls.len());
        if adopt {
            let used = templates_in_use(&flows)?;
            templates.adopt(&used, Instant::now(), |i| tpls.get(&i, 0).ok());
        }
        let inner = Inner {
            flows,
            tpls,
            templates,
            ifaces: take(&mut ebpf, "ovr_ifaces")?,
            xsks: take(&mut ebpf, "ovr_xsks")?,
            tx: take(&mut ebpf, "ovr_tx")?,
            generation,
            counters: take(&mut ebpf, "ovr_counters")?,
            ebpf,
            attached: HashMap::new(),
            names: HashMap::new(),
            xsk_fds: HashMap::new(),
            free_slots: (0..XSK_MAP_LEN / XSK_SLOTS)
                .rev()
                .map(|b| b * XSK_SLOTS)
                .collect(),
            pins,
            unclaimed,
        };
        Ok(Self {
            hook,
            inner: Arc::new(Mutex::new(inner)),
            changed: Arc::new(AtomicBool::new(false)),
            adopted,
        })
    }

    /// The generation in force in a fast path adopted from an earlier ovrd (None: none
    /// was adopted).
    pub fn adopted(&self) -> Option<u32> {
        self.adopted
    }

    /// Where the fast path is pinned, and whether it goes with this process all the same
    /// (a bpffs this process mounted in a mount namespace of its own).
    pub fn pinned(&self) -> Option<(PathBuf, bool)> {
        let g = self.lock();
        g.pins
            .as_ref()
            .map(|p| (p.path().to_path_buf(), p.private_mount))
    }

    /// Every entry of the flow map with its counters.
    pub fn entries(&self) -> Result<Vec<(Key, Usage)>, OffloadError> {
        let (mut out, mut cursor) = (Vec::new(), None);
        loop {
            cursor = self.scan(cursor, 4096, &mut out)?;
            if cursor.is_none() {
                return Ok(out);
            }
        }
    }

    /// Lets go of the pinned links no interface took over (interfaces gone or no longer
    /// configured while no ovrd ran): detached, and no longer egresses of the fast path.
    pub fn release_unclaimed(&self) -> Vec<u32> {
        let mut g = self.lock();
        let gone: Vec<u32> = g.unclaimed.drain().collect();
        for &ifindex in &gone {
            if let Some(p) = &g.pins {
                let _ = std::fs::remove_file(p.link(ifindex));
            }
            let _ = g.ifaces.remove(&ifindex);
            let _ = g.tx.remove(ifindex);
        }
        gone
    }

    /// Removes every pin (after every attachment was dropped): the maps and the program
    /// go once nothing holds them (`--detach-fast-path-on-exit`).
    pub fn remove_pins(&self) {
        if let Some(p) = &self.lock().pins {
            p.remove_all();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock would be a bug; the maps are still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hook the program was loaded for.
    pub fn hook(&self) -> Hook {
        self.hook
    }

    /// The program's counters by name (summed over CPUs).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let g = self.lock();
        COUNTER_NAMES
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let v = g
                    .counters
                    .get(&(i as u32), 0)
                    .map(|v| v.iter().sum())
                    .unwrap_or(0);
                (*name, v)
            })
            .collect()
    }
}

impl Offload for Bpf {
    fn ifindex(&self, id: ovr_tables::ids::InterfaceId) -> Option<u32> {
        self.lock().attached.get(&id.0).map(|(i, _)| *i)
    }

    fn take_changed(&mut self) -> bool {
        self.changed.load(Ordering::Relaxed) && self.changed.swap(false, Ordering::AcqRel)
    }

    fn refresh(&mut self, st: &ovr_tables::state::ForwardingState) -> Result<(), OffloadError> {
        use ovr_tables::interface::InterfaceKind;
        let mut g = self.lock();
        let ids: Vec<u32> = g.attached.keys().copied().collect();
        for id in ids {
            let Some((ifindex, mut entry)) = g.attached.get(&id).copied() else {
                continue;
            };
            let iface = st.interface(ovr_tables::ids::InterfaceId(id));
            entry.kind = match iface.map(|i| i.kind) {
                Some(InterfaceKind::Underlay) => crate::layout::KIND_UNDERLAY,
                Some(_) => crate::layout::KIND_WORKLOAD,
                None => 0,
            };
            entry.addrs = [[0; 4]; MAX_ADDRS];
            if let Some(i) = iface {
                entry.mac = i.mac.0;
                let v4 = i.addresses.iter().filter_map(|a| match a.addr {
                    core::net::IpAddr::V4(v) => Some(v.octets()),
                    _ => None,
                });
                for (slot, a) in entry.addrs.iter_mut().zip(v4) {
                    *slot = a;
                }
                if !i.admin_up {
                    entry.kind = 0;
                }
            }
            g.ifaces
                .insert(ifindex, entry.encode(), 0)
                .map_err(|e| err("update interface", error_chain(&e)))?;
            g.attached.insert(id, (ifindex, entry));
        }
        Ok(())
    }

    fn set_generation(&mut self, generation: u32) -> Result<(), OffloadError> {
        self.lock()
            .generation
            .set(0, generation, 0)
            .map_err(|e| err("set generation", error_chain(&e)))
    }

    /// The device's receive drops less its AF_XDP sockets' (a full socket fails the
    /// redirect too): what is left are frames the fast path's redirects lost. TC
    /// redirects to a device's transmit path, which counts its own drops: none here.
    fn rx_dropped(&self) -> Vec<(ovr_tables::ids::InterfaceId, u64)> {
        if self.hook == Hook::Tc {
            return Vec::new();
        }
        let g = self.lock();
        g.names
            .iter()
            .filter_map(|(id, name)| {
                let path = format!("/sys/class/net/{name}/statistics/rx_dropped");
                let dev: u64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
                let xsk: u64 = g
                    .xsk_fds
                    .get(id)
                    .map(|fds| fds.iter().filter_map(|&fd| ovr_io::xsk_rx_drops(fd)).sum())
                    .unwrap_or(0);
                Some((ovr_tables::ids::InterfaceId(*id), dev.saturating_sub(xsk)))
            })
            .collect()
    }

    fn install(&mut self, key: &Key, action: &Action, generation: u32) -> Result<(), OffloadError> {
        let mut g = self.lock();
        let template = match action.push {
            0 => 0,
            _ => g.template(&action.tunnel_headers())?,
        };
        g.flows
            .insert(key.encode(), action.encode(generation, template), 0)
            .map_err(|e| err("install flow", error_chain(&e)))
    }

    fn remove(&mut self, key: &Key) -> Result<(), OffloadError> {
        match self.lock().flows.remove(&key.encode()) {
            Ok(()) => Ok(()),
            Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(err("remove flow", error_chain(&e))),
        }
    }

    fn usage(&self, key: &Key) -> Result<Option<Usage>, OffloadError> {
        match self.lock().flows.get(&key.encode(), 0) {
            Ok(v) => Ok(Some(Usage::decode(&v))),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(err("read flow", error_chain(&e))),
        }
    }

    fn clock_ns(&self) -> u64 {
        // bpf_ktime_get_ns() is CLOCK_MONOTONIC.
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }

    fn scan(
        &self,
        cursor: Option<u32>,
        max: usize,
        out: &mut Vec<(Key, Usage)>,
    ) -> Result<Option<u32>, OffloadError> {
        // One call per SCAN_CALL entries, taking the lock each time: the kernel walks
        // the buckets without letting anything else run on this CPU (a call for 180
        // entries of a 256K-entry table took ~175 µs, which every task sharing the core
        // waited for).
        let mut read = Batches::default();
        let want = out.len() + max;
        let mut next = cursor;
        loop {
            next = read.next(&self.lock().flows, next, |k, v| {
                out.push((Key::decode(k), Usage::decode(v)));
            })?;
            if next.is_none() || out.len() >= want {
                break;
            }
        }
        Ok(next)
    }
}

impl Inner {
    /// The index in `ovr_tpls` of a tunnel's outer headers, written there if new. When
    /// the array is full, the flow map is read for the indexes still named (at most once
    /// a second; an error until one is free again: the flow stays in user space).
    fn template(&mut self, headers: &Headers) -> Result<u32, OffloadError> {
        let now = Instant::now();
        for looked in [false, true] {
            let tpls = &mut self.tpls;
            let placed = self
                .templates
                .place(headers, now, |i, h| tpls.set(i, *h, 0))
                .map_err(|e| err("write outer headers", error_chain(&e)))?;
            if let Some(i) = placed {
                return Ok(i);
            }
            if looked || !self.templates.may_collect(now) {
                break;
            }
            let used = templates_in_use(&self.flows)?;
            let tpls = &self.tpls;
            self.templates.collect(&used, now, |i| tpls.get(&i, 0).ok());
        }
        Err(err(
            "install flow",
            "no room for another tunnel's outer headers (every index in use or just freed)",
        ))
    }
}

/// Reads the flow map in batches (`bpf_map_lookup_batch`), keeping its buffers.
struct Batches {
    keys: Vec<u8>,
    values: Vec<u8>,
}

impl Default for Batches {
    fn default() -> Self {
        Self {
            keys: vec![0u8; SCAN_CALL * KEY_LEN],
            values: vec![0u8; SCAN_CALL * ACTION_LEN],
        }
    }
}

impl Batches {
    /// One call from `cursor` on: each entry to `f`; where to go on (None: the end).
    fn next(
        &mut self,
        flows: &BpfHashMap<MapData, KeyBytes, ActionBytes>,
        cursor: Option<u32>,
        mut f: impl FnMut(&KeyBytes, &ActionBytes),
    ) -> Result<Option<u32>, OffloadError> {
        let fd = flows.map().fd().as_fd();
        loop {
            let r = ovr_io::bpf_map_lookup_batch(
                fd,
                cursor,
                &mut self.keys,
                KEY_LEN,
                &mut self.values,
                ACTION_LEN,
            );
            let (n, after) = match r {
                Ok(r) => r,
                // A bucket longer than the buffer (ENOSPC): room for it, then again.
                Err(e)
                    if e.kind() == std::io::ErrorKind::StorageFull
                        && self.keys.len() < (1 << 16) * KEY_LEN =>
                {
                    self.keys.resize(self.keys.len() * 4, 0);
                    self.values.resize(self.values.len() * 4, 0);
                    continue;
                }
                Err(e) => return Err(err("read flows", e)),
            };
            let entries = self
                .keys
                .chunks_exact(KEY_LEN)
                .zip(self.values.chunks_exact(ACTION_LEN));
            for (k, v) in entries.take(n) {
                if let (Ok(k), Ok(v)) = (k.try_into(), v.try_into()) {
                    f(k, v);
                }
            }
            return Ok(after);
        }
    }
}

/// The indexes of outer headers the flows in the map name.
fn templates_in_use(
    flows: &BpfHashMap<MapData, KeyBytes, ActionBytes>,
) -> Result<HashSet<u32>, OffloadError> {
    let (mut read, mut used, mut next) = (Batches::default(), HashSet::new(), None);
    loop {
        next = read.next(flows, next, |_, v| {
            used.extend(template_of(v));
        })?;
        if next.is_none() {
            return Ok(used);
        }
    }
}

/// A loader whose flow map holds `flows` entries: the fast path carries a subset of the
/// user-space flow table's flows, so the table's capacity bounds it. The map allocates
/// its entries as they come (BPF_F_NO_PREALLOC), so its size is a limit, not memory
/// taken up front.
fn loader<'a>(flows: usize) -> EbpfLoader<'a> {
    let mut l = EbpfLoader::new();
    l.map_max_entries(FLOWS_MAP, flows.clamp(1, u32::MAX as usize) as u32);
    // A tunnel's headers per index: an array, allocated whole (64 bytes an index), so
    // sized for four flows a tunnel at a full table, and at most MAX_TEMPLATES.
    l.map_max_entries(
        TEMPLATES_MAP,
        (flows / 4).clamp(1, MAX_TEMPLATES as usize) as u32,
    );
    l
}

const FLOWS_MAP: &str = "ovr_flows";
const TEMPLATES_MAP: &str = "ovr_tpls";
/// Tunnels (outer headers) the fast path encapsulates into at once, at most: 4 MiB.
const MAX_TEMPLATES: u32 = 65_536;

/// Whether the maps pinned in `p` are the ones this program defines for `flows` flows
/// (type, key and value sizes, entries): an earlier version's with another layout, or
/// one sized for another number of flows, cannot be adopted.
fn same_layout(p: &PinDir, flows: usize) -> Result<(), String> {
    fn data(m: &Map) -> Option<&MapData> {
        match m {
            Map::Array(d)
            | Map::HashMap(d)
            | Map::XskMap(d)
            | Map::DevMapHash(d)
            | Map::PerCpuArray(d) => Some(d),
            _ => None,
        }
    }
    let shape = |i: &MapInfo| {
        (
            format!("{:?}", i.map_type().ok()),
            i.key_size(),
            i.value_size(),
            i.max_entries(),
        )
    };
    // Loading the object creates its maps (empty, unpinned), not its programs.
    let fresh = loader(flows).load(OBJECT).map_err(|e| error_chain(&e))?;
    for name in MAPS {
        let want = fresh
            .map(name)
            .and_then(data)
            .ok_or_else(|| format!("{name}: not in the program"))?
            .info()
            .map_err(|e| format!("{name}: {}", error_chain(&e)))?;
        let have = MapInfo::from_pin(p.map(name)).map_err(|e| format!("{name}: {e}"))?;
        if shape(&want) != shape(&have) {
            return Err(format!(
                "{name}: {:?} pinned, {:?} here",
                shape(&have),
                shape(&want)
            ));
        }
    }
    Ok(())
}

const _: () = assert!(KEY_LEN == 28 && ACTION_LEN == 64 && IFACE_LEN == 32 && TPL_LEN == 64);

/// Workers attach interfaces and own fast paths on their own threads.
const _: () = {
    const fn shared_by_threads<T: Send + Sync>() {}
    shared_by_threads::<Bpf>();
};

#[cfg(test)]
mod tests;
