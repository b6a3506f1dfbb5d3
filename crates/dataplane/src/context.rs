//! A worker's mutable state: packet buffers, its flow table, counters and transmit queues.

use crate::drop::{DROP_COUNTERS, DropReason};
use crate::meta::Meta;
use ovr_graph::{PacketPool, TraceId};
use ovr_tables::flow::FlowTable;

/// Tunables of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Flows (each direction is one).
    pub flow_capacity: usize,
    /// Idle time after which an allowed flow pair is removed.
    pub idle_timeout_ns: u64,
    /// Idle time for denied flows: short, so that scans do not fill the table.
    pub denied_idle_timeout_ns: u64,
    /// Most flows one network (VRF) may hold in this worker.
    pub network_quota: Option<u32>,
    /// Most new flows per second set up for packets from one interface (bursts of a
    /// tenth of a second allowed): a storm of new flows from one workload is dropped
    /// before it can take the core from established flows.
    pub setup_rate: Option<u32>,
    /// Packet buffers.
    pub frames: usize,
    /// How many workers share the daemon's flows: a network's own flow quota (in the
    /// tables, for the whole host) is split evenly between them.
    pub shards: u32,
    /// Packets of established flows take the one-pass path (`nodes::established`)
    /// where it applies; off, every packet goes through the whole graph (to compare
    /// the two: they forward alike).
    pub established_path: bool,
    /// The flow table on 2 MiB pages where the system has them (`ovr_tables::hugemem`);
    /// off, on 4 KiB pages (to compare).
    pub huge_pages: bool,
    /// Something reads the metadata of transmitted packets (the kernel fast path learns
    /// flows from it: `Pipeline::for_each_flow_tx`). Off, the one-pass path does not
    /// write what only that reader would read (3-4% of its time).
    pub tx_observed: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            flow_capacity: 1 << 20,
            idle_timeout_ns: 60_000_000_000,
            denied_idle_timeout_ns: 5_000_000_000,
            network_quota: None,
            setup_rate: Some(DEFAULT_SETUP_RATE),
            frames: 4096,
            shards: 1,
            established_path: true,
            huge_pages: true,
            tx_observed: true,
        }
    }
}

/// New flows per second per interface unless configured otherwise: about a tenth of
/// what one core sets up, so that one interface's storm leaves most of the core to the
/// fast path.
pub const DEFAULT_SETUP_RATE: u32 = 200_000;

/// Packet and byte counts of one interface (this worker's share).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterfaceCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

/// What the slow path did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// Flow pairs (or single denied flows) installed.
    pub created: u64,
    /// Cached decisions taken again after a table change.
    pub revalidated: u64,
    /// Flows removed by aging.
    pub aged: u64,
}

/// What was finished on receipt for senders that left work to the NIC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OffloadCounters {
    /// Frames larger than the MTU, cut into segments.
    pub large_frames: u64,
    /// The segments cut from them.
    pub segments: u64,
    /// Transport checksums finished (of frames not cut).
    pub checksums: u64,
}

/// What a fast path below the pipeline (`ovr_offload`, `ovrd --offload xdp`) did; all
/// zero without one. Its owner keeps them here so that they are read with the rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FastPathCounters {
    /// Flows offloaded now.
    pub flows: u64,
    /// Entries installed (again after each table change).
    pub installed: u64,
    /// Flows whose packets the fast path cannot reproduce (they stay in user space).
    pub refused: u64,
    /// Entries removed because their flow went.
    pub removed: u64,
    /// Backend errors (logged once).
    pub errors: u64,
    /// Generations started (interfaces coming and going; table changes the re-check
    /// does not cover).
    pub invalidations: u64,
    /// Table changes after which the offloaded flows' decisions were taken again
    /// instead (`ovr_offload`'s re-check), entries kept (their flow's treatment was
    /// the same) and entries removed (it changed; user space offers them again).
    pub rechecks: u64,
    pub rechecked_kept: u64,
    pub rechecked_removed: u64,
    /// Entries a re-check left without a look: the changes touched nothing their
    /// flow's decision reads.
    pub recheck_skipped: u64,
    /// Frames the fast path redirected to an egress that dropped them (counted by the
    /// receiving interface; the egress is then left to user space for a while).
    pub redirect_failed: u64,
    /// Packets and bytes (as received) the fast path carried, merged into the flows.
    pub packets: u64,
    pub bytes: u64,
}

impl FastPathCounters {
    /// Adds another owner's counters (one per worker).
    pub fn merge(&mut self, o: &Self) {
        self.flows += o.flows;
        self.installed += o.installed;
        self.refused += o.refused;
        self.removed += o.removed;
        self.errors += o.errors;
        self.invalidations += o.invalidations;
        self.rechecks += o.rechecks;
        self.rechecked_kept += o.rechecked_kept;
        self.rechecked_removed += o.rechecked_removed;
        self.recheck_skipped += o.recheck_skipped;
        self.redirect_failed += o.redirect_failed;
        self.packets += o.packets;
        self.bytes += o.bytes;
    }
}

impl std::fmt::Display for FastPathCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "flows {} (installed {}, refused {}, removed {}, invalidations {}, rechecks {} \
             (kept {}, removed {}), errors {}, redirect_failed {}), carried {} packets {} bytes",
            self.flows,
            self.installed,
            self.refused,
            self.removed,
            self.invalidations,
            self.rechecks,
            self.rechecked_kept,
            self.rechecked_removed,
            self.errors,
            self.redirect_failed,
            self.packets,
            self.bytes
        )
    }
}

pub struct Cx {
    pub pool: PacketPool<Meta>,
    pub flows: FlowTable,
    pub settings: Settings,
    /// Drops by [`DropReason`] index.
    pub drops: Box<[u64; DROP_COUNTERS]>,
    /// By interface id.
    pub interfaces: Vec<InterfaceCounters>,
    /// Packets to transmit, by interface id; the driver drains them.
    pub tx: Vec<Vec<u32>>,
    pub flow_counters: FlowCounters,
    pub offload_counters: OffloadCounters,
    pub fast_path: FastPathCounters,
    /// Now, in nanoseconds of the driver's clock (replay: the capture's timestamps).
    pub now: u64,
    /// Health probes of service instances: what this worker sends and records.
    pub probes: crate::probe::Prober,
    /// The tables' epoch whose networks' flow quotas the flow table has (see
    /// `follow_quotas`).
    quota_epoch: Option<u32>,
}

impl Cx {
    pub fn new(settings: Settings) -> Self {
        let mut flows = FlowTable::with_pages(settings.flow_capacity, settings.huge_pages);
        flows.set_default_quota(settings.network_quota);
        Self {
            pool: PacketPool::new(settings.frames),
            flows,
            settings,
            drops: Box::new([0; DROP_COUNTERS]),
            interfaces: Vec::new(),
            tx: Vec::new(),
            flow_counters: FlowCounters::default(),
            offload_counters: OffloadCounters::default(),
            fast_path: FastPathCounters::default(),
            now: 0,
            probes: crate::probe::Prober::default(),
            quota_epoch: None,
        }
    }

    /// Gives the flow table each network's quota as the tables say (this worker's share
    /// of it, or the default where a network has none), once per change of the tables:
    /// called before flows are set up.
    pub fn follow_quotas(&mut self, st: &ovr_tables::state::ForwardingState) {
        if self.quota_epoch == Some(st.epoch()) {
            return;
        }
        self.quota_epoch = Some(st.epoch());
        let shards = self.settings.shards.max(1);
        for v in st.vrfs() {
            let max = v
                .flow_quota
                .map(|q| q.div_ceil(shards))
                .or(self.settings.network_quota);
            self.flows.set_vrf_quota(v.id.0, max);
        }
    }

    /// Counts a drop of a packet that never reached the drop node (one that could not
    /// be created, or was refused on arrival).
    pub fn count_drop(&mut self, reason: impl Into<DropReason>) {
        self.drops[usize::from(reason.into().0)] += 1;
    }

    /// Counts `n` drops at once (frames a driver or the kernel lost, reported later).
    pub fn count_drops(&mut self, reason: impl Into<DropReason>, n: u64) {
        self.drops[usize::from(reason.into().0)] += n;
    }

    #[inline]
    pub fn interface_counters(&mut self, id: u32) -> &mut InterfaceCounters {
        let i = id as usize;
        if self.interfaces.len() <= i {
            self.grow_interfaces(i);
        }
        &mut self.interfaces[i]
    }

    /// Room for interface `i`'s counters and transmit queue (each interface's first
    /// packets only: kept out of the per-packet code).
    #[cold]
    fn grow_interfaces(&mut self, i: usize) {
        if self.interfaces.len() <= i {
            self.interfaces.resize(i + 1, InterfaceCounters::default());
        }
        if self.tx.len() <= i {
            self.tx.resize_with(i + 1, Vec::new);
        }
    }

    #[inline]
    pub(crate) fn transmit(&mut self, pkt: u32, iface: u32) {
        self.transmit_len(pkt, iface, self.pool.len(pkt));
    }

    /// [`Self::transmit`] of a packet whose length the caller has at hand.
    #[inline]
    pub(crate) fn transmit_len(&mut self, pkt: u32, iface: u32, len: usize) {
        let len = len as u64;
        let i = iface as usize;
        if self.interfaces.len() <= i || self.tx.len() <= i {
            self.grow_interfaces(i);
        }
        let c = &mut self.interfaces[i];
        c.tx_packets += 1;
        c.tx_bytes += len;
        self.tx[i].push(pkt);
    }
}

impl TraceId for Cx {
    fn trace_id(&self, pkt: u32) -> u32 {
        self.pool.meta(pkt).trace
    }
}
