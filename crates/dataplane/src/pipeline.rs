//! The pipeline: ovr's nodes joined into one graph, with the entry points a driver uses
//! (receive frames, run, drain what is to be transmitted).

use crate::capture::Taps;
use crate::context::{Cx, Settings};
use crate::drop::Reason;
use crate::meta::{Meta, flags};
use crate::nodes::*;
use crate::rate::PerInterface;
use ovr_graph::pool::MAX_PACKET;
use ovr_graph::{Graph, Node, NodeId};
use ovr_tables::ids::InterfaceId;
use ovr_tables::interface::InterfaceKind;
use ovr_tables::state::ForwardingState;
use ovr_wire::offload::{self, VNET_HDR_LEN, VnetHdr};

type BoxedNode = Box<dyn Node<Cx, ForwardingState> + Send>;

/// The nodes in processing order: every edge points forward (the graph checks it).
fn nodes() -> Vec<BoxedNode> {
    vec![
        Box::new(underlay_input::UnderlayInput),
        Box::new(vxlan_decap::VxlanDecap),
        Box::new(mpls_decap::MplsDecap),
        Box::new(established::Established::default()),
        Box::new(ethernet_input::EthernetInput),
        Box::new(arp::Arp),
        Box::new(ip_input::IpInput),
        Box::new(nd::Nd),
        Box::new(flow::Flow::default()),
        Box::new(flow_setup::FlowSetup::default()),
        Box::new(gateway::Gateway),
        Box::new(flood::Flood),
        Box::new(ip_rewrite::IpRewrite),
        Box::new(encap_vxlan::EncapVxlan::default()),
        Box::new(encap_mpls::EncapMpls::default()),
        Box::new(interface_output::InterfaceOutput),
        Box::new(drop::Drop),
    ]
}

/// The flow table is swept for idle flows once per this long, whatever the packet
/// rate: aging is paid by elapsed time, not per vector (at low rates vectors are small,
/// and a fixed slice per vector made aging cost more than forwarding).
const SWEEP_NS: u128 = 10_000_000_000;
/// The most entries one run ages, so that forwarding never waits on it.
const AGE_MAX_PER_RUN: usize = 256;

/// One worker's pipeline.
pub struct Pipeline {
    graph: Graph<Cx, ForwardingState>,
    pub cx: Cx,
    /// Where frames from workloads enter: the one-pass path for established flows, or
    /// ethernet-input.
    workload_entry: NodeId,
    /// ethernet-input: where traced frames from workloads enter, so that their trace
    /// shows every node.
    ethernet_input: NodeId,
    underlay_entry: NodeId,
    /// Headers of the segment being cut from a large frame (kept to save allocating).
    scratch: Vec<u8>,
    /// The clock when aging was last paid up to.
    aged_at: Option<u64>,
    /// Packet captures: frames received and frames handed to transmit, per interface.
    pub taps: Taps,
    /// Per receiving interface, what its policer (`Interface::police`) lets in.
    policers: PerInterface,
    /// By interface id: the interface's driver polices it in the kernel, before its
    /// frames get here (`police_in_kernel`).
    kernel_policed: Vec<bool>,
}

/// Where a received frame enters the graph: node, VRF, receiving interface.
type Entry = (NodeId, u32, u32);

/// Frames and bytes received by one call, counted on the interface after it.
#[derive(Default, Clone, Copy)]
struct Received {
    packets: u64,
    bytes: u64,
}

impl Received {
    #[inline]
    fn add(&mut self, len: usize) {
        self.packets += 1;
        self.bytes += len as u64;
    }
}

impl Pipeline {
    pub fn new(settings: Settings) -> Self {
        let graph = match Graph::new(nodes()) {
            Ok(g) => g,
            // The node list is fixed: a bad edge is a bug caught by every test.
            Err(e) => panic!("ovr's pipeline is miswired: {e}"),
        };
        let id = |name| graph.node_id(name).unwrap_or(NodeId(0));
        let workload = if settings.established_path {
            "established"
        } else {
            "ethernet-input"
        };
        Self {
            workload_entry: id(workload),
            ethernet_input: id("ethernet-input"),
            underlay_entry: id("underlay-input"),
            graph,
            cx: Cx::new(settings),
            scratch: Vec::new(),
            aged_at: None,
            taps: Taps::default(),
            policers: PerInterface::default(),
            kernel_policed: Vec::new(),
        }
    }

    /// The interfaces whose policer the kernel applies from now on (all others' policers
    /// are this pipeline's own): their frames arrive within the rate.
    pub fn police_in_kernel(&mut self, ids: impl IntoIterator<Item = InterfaceId>) {
        self.kernel_policed.clear();
        for id in ids {
            let i = id.0 as usize;
            if self.kernel_policed.len() <= i {
                self.kernel_policed.resize(i + 1, false);
            }
            self.kernel_policed[i] = true;
        }
    }

    /// Counts frames the kernel policed on interface `rx` as the pipeline's own policer
    /// counts those it drops: received, and dropped as `policed`.
    pub fn count_policed_in_kernel(&mut self, rx: InterfaceId, frames: u64, bytes: u64) {
        let c = self.cx.interface_counters(rx.0);
        c.rx_packets += frames;
        c.rx_bytes += bytes;
        self.cx.count_drops(Reason::Policed, frames);
    }

    /// Takes frames received on interface `rx` into buffers and queues them. Frames on
    /// an unknown or down interface, or beyond the free buffers, are counted as drops.
    pub fn receive<'a>(
        &mut self,
        st: &ForwardingState,
        rx: InterfaceId,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) {
        let at = self.entry(st, rx);
        let police = self.police_of(st, rx);
        let mut received = Received::default();
        // The common case, without a check per frame for what does not change within
        // a call: the interface up, no capture, no policer, no packet to trace.
        if let Ok((node, vrf, rx_if)) = at
            && police.is_none()
            && self.taps.is_empty()
            && self.graph.trace().pending() == 0
        {
            for f in frames {
                received.add(f.len());
                let Some(p) = self.cx.pool.alloc_with(f) else {
                    self.count_alloc_failure(f.len());
                    continue;
                };
                let m = self.cx.pool.meta_mut(p);
                m.rx_if = rx_if;
                m.vrf = vrf;
                self.graph.enqueue_one(node, p);
            }
            self.count_rx(rx, received);
            return;
        }
        for f in frames {
            if !self.taps.is_empty() {
                self.taps.offer(rx.0, false, [f]);
            }
            received.add(f.len());
            if let Some(at) = self.admitted(rx, at, police) {
                self.admit(at, &[f]);
            }
        }
        self.count_rx(rx, received);
    }

    /// Like [`Self::receive`], for frames that each begin with a virtio-net header (an
    /// interface whose senders use checksum and segmentation offload): checksums left
    /// to the NIC are finished and large frames cut into segments first. A header that
    /// does not match its frame is a drop under its named reason.
    pub fn receive_offloaded<'a>(
        &mut self,
        st: &ForwardingState,
        rx: InterfaceId,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) {
        let at = self.entry(st, rx);
        let police = self.police_of(st, rx);
        // Datagrams cut from a frame on the underlay are tunnel packets that underlay-input
        // decapsulates or drops: their UDP checksum would be summed for nobody to read.
        let udp_sums = at.is_ok_and(|e| e.0 != self.underlay_entry);
        let mut scratch = core::mem::take(&mut self.scratch);
        let mut received = Received::default();
        for f in frames {
            let frame = f.get(VNET_HDR_LEN..).unwrap_or_default();
            if !self.taps.is_empty() {
                self.taps.offer(rx.0, false, [frame]);
            }
            received.add(frame.len());
            let Some(at) = self.admitted(rx, at, police) else {
                continue;
            };
            let r = VnetHdr::parse(f).and_then(|h| {
                if h.is_gso() {
                    let n = offload::segment_with(
                        frame,
                        &h,
                        udp_sums,
                        &mut scratch,
                        |hdr, payload| {
                            if let Some(p) = self.alloc(at, &[hdr, payload]) {
                                self.enqueue_checksum_made(at, p);
                            }
                        },
                    )?;
                    self.cx.offload_counters.large_frames += 1;
                    self.cx.offload_counters.segments += n as u64;
                    Ok(())
                } else if h.flags & offload::F_NEEDS_CSUM != 0 {
                    let Some(p) = self.alloc(at, &[frame]) else {
                        return Ok(());
                    };
                    let (start, offset) = (usize::from(h.csum_start), usize::from(h.csum_offset));
                    match offload::finish_checksum(self.cx.pool.data_mut(p), start, offset) {
                        Ok(()) => {
                            self.cx.offload_counters.checksums += 1;
                            self.enqueue_checksum_made(at, p);
                        }
                        Err(e) => {
                            self.cx.pool.free(&[p]);
                            return Err(e);
                        }
                    }
                    Ok(())
                } else {
                    self.admit(at, &[frame]);
                    Ok(())
                }
            });
            if let Err(e) = r {
                self.cx.count_drop(e);
            }
        }
        self.scratch = scratch;
        self.count_rx(rx, received);
    }

    /// Where frames from `rx` enter the graph (node, VRF, interface), or why they cannot.
    fn entry(&self, st: &ForwardingState, rx: InterfaceId) -> Result<Entry, Reason> {
        match st.interface(rx) {
            None => Err(Reason::UnknownInterface),
            Some(i) if !i.admin_up => Err(Reason::InterfaceDown),
            Some(i) if i.kind == InterfaceKind::Underlay => {
                Ok((self.underlay_entry, u32::MAX, rx.0))
            }
            Some(i) => Ok((self.workload_entry, i.vrf.map_or(u32::MAX, |v| v.0), rx.0)),
        }
    }

    /// The rate and burst of the interface's policer in this worker: the interface's
    /// flows, and so its frames, are split between the workers (`Settings::shards`).
    fn police_of(&self, st: &ForwardingState, rx: InterfaceId) -> Option<(u32, u32)> {
        if self.kernel_policed.get(rx.0 as usize) == Some(&true) {
            return None;
        }
        let p = st.interface(rx)?.police?;
        let n = self.cx.settings.shards.max(1);
        Some((p.packets_per_second.div_ceil(n), p.burst.div_ceil(n)))
    }

    /// Adds what one call received to the interface's counters (once per call, not per
    /// frame: nothing reads them in between).
    fn count_rx(&mut self, rx: InterfaceId, r: Received) {
        let c = self.cx.interface_counters(rx.0);
        c.rx_packets += r.packets;
        c.rx_bytes += r.bytes;
    }

    /// The entry node of a frame received on the interface, unless it is refused (or
    /// over the interface's rate): then it is counted as a drop.
    fn admitted(
        &mut self,
        rx: InterfaceId,
        at: Result<Entry, Reason>,
        police: Option<(u32, u32)>,
    ) -> Option<Entry> {
        let at = at.map_err(|r| self.cx.count_drop(r)).ok()?;
        if let Some((rate, burst)) = police
            && !self.policers.take(rx.0, self.cx.now, rate, burst)
        {
            self.cx.count_drop(Reason::Policed);
            return None;
        }
        Some(at)
    }

    /// Counts a packet of `len` bytes that got no buffer, under why.
    #[cold]
    fn count_alloc_failure(&mut self, len: usize) {
        self.cx.count_drop(if len > MAX_PACKET {
            Reason::FrameTooLarge
        } else {
            Reason::NoBuffers
        });
    }

    /// Copies one packet (given in pieces) into a buffer, with its metadata.
    fn alloc(&mut self, (_, vrf, rx): Entry, parts: &[&[u8]]) -> Option<u32> {
        let Some(p) = self.cx.pool.alloc_with_parts(parts) else {
            self.count_alloc_failure(parts.iter().map(|p| p.len()).sum());
            return None;
        };
        let trace = self.graph.trace_mut().pick(rx);
        let m = self.cx.pool.meta_mut(p);
        m.rx_if = rx;
        m.vrf = vrf;
        m.trace = trace;
        Some(p)
    }

    /// Copies one packet into a buffer and queues it at its entry node.
    fn admit(&mut self, at: Entry, parts: &[&[u8]]) {
        if let Some(p) = self.alloc(at, parts) {
            self.enqueue(at, p);
        }
    }

    /// Queues a packet whose transport checksum ovr has just written (nothing to verify).
    fn enqueue_checksum_made(&mut self, at: Entry, p: u32) {
        self.cx.pool.meta_mut(p).flags |= flags::L4_CHECKSUM_MADE;
        self.enqueue(at, p);
    }

    /// Queues a packet at its entry node (a traced one from a workload at
    /// ethernet-input).
    fn enqueue(&mut self, (node, _, _): Entry, p: u32) {
        let node = if node == self.workload_entry && self.cx.pool.meta(p).trace != 0 {
            self.ethernet_input
        } else {
            node
        };
        self.graph.enqueue(node, &[p]);
    }

    /// Runs everything received through the graph, then ages the slice of the flows that
    /// the time since the last run has earned.
    pub fn run(&mut self, st: &ForwardingState) {
        crate::probe::tick(&mut self.cx, st);
        self.graph.run(&mut self.cx, st);
        let now = self.cx.now;
        let last = *self.aged_at.get_or_insert(now);
        let s = self.cx.settings;
        // Entries owed: the table's share of one sweep for the time that passed.
        let owed = u128::from(now.saturating_sub(last)) * s.flow_capacity as u128 / SWEEP_NS;
        if owed == 0 {
            return;
        }
        let budget = (owed as usize).min(AGE_MAX_PER_RUN);
        // Time not yet paid for in entries is kept for the next run.
        let paid = (budget as u128 * SWEEP_NS / s.flow_capacity.max(1) as u128) as u64;
        self.aged_at = Some(if budget == AGE_MAX_PER_RUN {
            now
        } else {
            last + paid
        });
        let aged = self
            .cx
            .flows
            .age(now, s.idle_timeout_ns, s.denied_idle_timeout_ns, budget);
        self.cx.flow_counters.aged += aged.aged as u64;
    }

    /// Hands every packet waiting for transmission to `send` (interface, bytes), then
    /// frees it.
    pub fn drain_tx(&mut self, mut send: impl FnMut(InterfaceId, &[u8])) {
        self.drain_tx_batches(|iface, frames| {
            for f in frames {
                send(iface, f);
            }
        });
    }

    /// Like [`Self::drain_tx`], with one call per interface and all its frames (for
    /// drivers that send a batch per system call).
    pub fn drain_tx_batches(&mut self, mut send: impl FnMut(InterfaceId, &[&[u8]])) {
        for i in 0..self.cx.tx.len() {
            if self.cx.tx[i].is_empty() {
                continue;
            }
            let mut queue = core::mem::take(&mut self.cx.tx[i]);
            {
                let frames: Vec<&[u8]> = queue.iter().map(|&p| self.cx.pool.data(p)).collect();
                if !self.taps.is_empty() {
                    self.taps.offer(i as u32, true, frames.iter().copied());
                }
                send(InterfaceId(i as u32), &frames);
            }
            self.cx.pool.free(&queue);
            queue.clear();
            self.cx.tx[i] = queue;
        }
    }

    /// Shows `f` every packet waiting for transmission that followed a flow (found or
    /// just created), with its metadata and its first bytes (up to 128, enough for outer
    /// and inner headers): how the offload learns what the pipeline did to a flow.
    pub fn for_each_flow_tx(&mut self, mut f: impl FnMut(&mut Cx, &Meta, &[u8])) {
        let mut head = [0u8; 128];
        for i in 0..self.cx.tx.len() {
            for j in 0..self.cx.tx[i].len() {
                let p = self.cx.tx[i][j];
                let meta = *self.cx.pool.meta(p);
                if meta.flags & (flags::FLOW_HIT | flags::FLOW_CREATED) == 0 {
                    continue;
                }
                let data = self.cx.pool.data(p);
                let n = data.len().min(head.len());
                head[..n].copy_from_slice(&data[..n]);
                f(&mut self.cx, &meta, &head[..n]);
            }
        }
    }

    /// Shares the workers' book of probes; `sends`: this worker sends them (one does).
    pub fn share_probes(&mut self, book: std::sync::Arc<crate::probe::Book>, sends: bool) {
        self.cx.probes = crate::probe::Prober::new(book, sends);
    }

    pub fn graph(&self) -> &Graph<Cx, ForwardingState> {
        &self.graph
    }

    pub fn graph_mut(&mut self) -> &mut Graph<Cx, ForwardingState> {
        &mut self.graph
    }
}
