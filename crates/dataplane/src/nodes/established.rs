//! established: packets of established IPv4 flows forwarded in one pass.
//!
//! The graph spends about 1,400 instructions on a packet of an established flow:
//! ethernet-input, ip-input, flow, ip-rewrite, an encapsulation and interface-output
//! each take the vector, read every packet's metadata again and hand it on. This node
//! does the commonest case (an IPv4 packet of an established flow, bridged or routed,
//! from a workload or out of a VXLAN tunnel, to a local interface or into a tunnel over
//! IPv4) in one pass over the vector, as VPP's feature arcs skip the nodes a packet does
//! not need: parse, batch flow lookup, the cached action, the TTL and MAC rewrite, the
//! tunnel's header template, the transmit queue.
//!
//! It only ever takes a packet it forwards exactly as the graph would (the same bytes
//! out of the same interface, the same metadata, flow and interface counters); anything
//! else — a miss, a table change since the flow's decision, ARP, IPv6, VLAN tags,
//! broadcast, the gateway's own addresses, a check that fails — goes on to ethernet-input
//! untouched, and the graph does what it always did (drops included, under their
//! reasons). `tests/established.rs` holds the two paths to that, packet for packet.
//! Traced packets never come here (the pipeline queues them at ethernet-input), so a
//! trace shows every node.

use super::encap_mpls::mpls;
use super::encap_vxlan::vxlan;
use super::ip_input::ports;
use super::outer::{Head4, Rewrites};
use crate::context::Cx;
use crate::drop::Reason;
use crate::meta::flags;
use ovr_graph::{CONSUMED, Node, VECTOR_SIZE, Vector, next_nodes};
use ovr_tables::chain::{into_key_vrf, key_port, key_vrf};
use ovr_tables::flow::{FlowAction, FlowId, FlowKey};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::nexthop::{Encap, NextHop, Tunnel};
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::{EthernetFrame, HEADER_LEN, MacAddr, ethertype};
use ovr_wire::ip_proto;
use ovr_wire::ipv4::Ipv4Packet;
use ovr_wire::udp::UdpPacket;

next_nodes! { pub enum Next { Ethernet = "ethernet-input", Drop = "drop" } }

/// What the first pass learnt of a packet that may be of an established flow.
#[derive(Clone, Copy, Default)]
struct Parsed {
    /// Its place in the vector.
    at: u16,
    /// Offset of the transport header.
    l4: u16,
    /// Length without Ethernet padding.
    len: u16,
}

pub struct Established {
    keys: Box<[FlowKey; VECTOR_SIZE]>,
    found: Box<[Option<FlowId>; VECTOR_SIZE]>,
    parsed: Box<[Parsed; VECTOR_SIZE]>,
    /// Flows of this vector one of whose packets went on to the graph after a hit.
    passed_on: Vec<FlowId>,
    rewrites: Rewrites,
}

/// Beyond this many flows passed on in one vector (frames alternating between MACs of
/// one flow, say), the rest of the vector goes to the graph: the search stays short.
const MAX_PASSED_ON: usize = 16;

impl Default for Established {
    fn default() -> Self {
        Self {
            keys: Box::new([FlowKey::default(); VECTOR_SIZE]),
            found: Box::new([None; VECTOR_SIZE]),
            parsed: Box::new([Parsed::default(); VECTOR_SIZE]),
            passed_on: Vec::with_capacity(MAX_PASSED_ON),
            rewrites: Rewrites::default(),
        }
    }
}

impl Node<Cx, ForwardingState> for Established {
    fn name(&self) -> &'static str {
        "established"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        self.rewrites.follow(st);
        // Pass 1: which packets could be of an established flow, and their keys.
        let mut n = 0;
        let mut rx = Receiver::default();
        for (i, &p) in v.pkts.iter().enumerate() {
            if let Some(&ahead) = v.pkts.get(i + 4) {
                cx.pool.prefetch(ahead);
            }
            v.next[i] = Next::Ethernet.into();
            // The key is written in place: copying its 44 bytes in cost ~17 instructions.
            if let Some((l4, len)) = candidate(st, &mut rx, cx, p, &mut self.keys[n]) {
                self.parsed[n] = Parsed {
                    at: i as u16,
                    l4,
                    len,
                };
                n += 1;
            }
        }
        if n == 0 {
            return;
        }
        // Pass 2: the flows, their misses overlapped.
        cx.flows.lookup_batch(&self.keys[..n], &mut self.found[..n]);
        // Pass 3: the cached action, where it is one this node carries out. Once a
        // packet of a flow goes on to the graph, so do the flow's later packets in the
        // vector: the graph may take the flow's decision again for it (another
        // destination MAC, changed tables), and later packets must see that decision.
        let epoch = st.epoch();
        let observed = cx.settings.tx_observed;
        self.passed_on.clear();
        let mut via = Via::default();
        for j in 0..n {
            let Parsed { at, l4, len } = self.parsed[j];
            let p = v.pkts[usize::from(at)];
            let Some(id) = self.found[j] else {
                cx.pool.meta_mut(p).flags |= flags::FLOW_MISSED;
                continue;
            };
            if !self.passed_on.is_empty()
                && (self.passed_on.len() >= MAX_PASSED_ON || self.passed_on.contains(&id))
            {
                continue;
            }
            let Some(out) = action(cx, st, &mut self.rewrites, &mut via, p, id, len, epoch) else {
                self.passed_on.push(id);
                continue;
            };
            // The key by reference: copying its 44 bytes out cost ~15 instructions.
            let key = &self.keys[j];
            // The headers `resolve` built, looked up per packet: holding a copy per run
            // (of the 88-byte headers then) cost more with flows spread over thousands of
            // tunnels.
            let head = if out.tunnel {
                self.rewrites.cached(out.next_hop)
            } else {
                None
            };
            v.next[usize::from(at)] = forward(head, cx, p, id, key, l4, len, out, observed);
        }
    }
}

/// The receiving interface of the packets of a vector, checked once while it stays the
/// same (a vector mostly comes from one interface).
#[derive(Default)]
struct Receiver {
    id: Option<u32>,
    /// A network function's port: its packets are flows of their own (`crate::chain`).
    service: bool,
}

impl Receiver {
    fn is_service_port(&mut self, st: &ForwardingState, rx: u32) -> bool {
        if self.id != Some(rx) {
            self.id = Some(rx);
            self.service = st.service_port(InterfaceId(rx)).is_some();
        }
        self.service
    }
}

/// For an untagged, unicast IPv4 frame whose headers pass ip-input's checks and that
/// ip-input would send to the flow node: its flow key (into `key`), its transport
/// offset and its length without padding; `None` for anything else.
#[inline]
fn candidate(
    st: &ForwardingState,
    rx: &mut Receiver,
    cx: &Cx,
    p: u32,
    key: &mut FlowKey,
) -> Option<(u16, u16)> {
    let (meta, data) = cx.pool.view(p);
    // The Ethernet header as an array: its fields are read without a bounds check each.
    let (eth, l3) = data.split_first_chunk::<HEADER_LEN>()?;
    // A multicast or broadcast destination is flooded; a tag is refused by ethernet-input.
    if meta.trace != 0 || eth[0] & 1 != 0 || eth[12..14] != ethertype::IPV4.to_be_bytes() {
        return None;
    }
    let vrf = st.vrf(VrfId(meta.vrf))?;
    let routed = eth[..6] == vrf.router_mac.0;
    // Options (a header longer than 20 bytes) are rare, but taking their packets to the
    // graph would let a flow's later packets overtake them.
    let ip = Ipv4Packet::new_checked(l3).ok()?;
    let (ihl, total) = (ip.header_len(), usize::from(ip.total_len()));
    if !ip.verify_checksum() {
        return None;
    }
    let protocol = ip.protocol();
    let l4 = &l3[ihl..total];
    // A non-first fragment has no transport header: ports 0, as ip-input keys it.
    let (sport, dport) = match ip.frag_offset() {
        // UDP (the tunnels' and most tenants' traffic) read here as `ports` reads it:
        // the call and its other protocols cost ~30 instructions a packet.
        0 if protocol == ip_proto::UDP => {
            let u = UdpPacket::new_checked(l4).ok()?;
            (u.src_port(), u.dst_port())
        }
        0 => ports(protocol, l4).ok()?,
        _ => (0, 0),
    };
    let from_tunnel = meta.has(flags::FROM_TUNNEL);
    // For the gateway itself, or expiring here: ip-input's to sort out.
    let (src, dst) = (ip.src(), ip.dst());
    if routed && (vrf.is_gateway(dst.into()) || (!from_tunnel && ip.ttl() <= 1)) {
        return None;
    }
    *key = FlowKey::v4(vrf.id, src.octets(), dst.octets(), protocol, sport, dport);
    // Out of a network function: keyed by its port, as ip-input keys it.
    if !from_tunnel && rx.is_service_port(st, meta.rx_if) {
        key.vrf = key_vrf(InterfaceId(meta.rx_if));
    }
    // Into a network function from another host: keyed by its port, as ip-input keys it.
    if from_tunnel
        && !routed
        && let Some(to) = crate::chain::into_port(st, vrf, data.first_chunk().unwrap_or(&[0; 6]))
    {
        key.vrf = into_key_vrf(to);
    }
    key.bridged = !routed;
    Some(((HEADER_LEN + ihl) as u16, (HEADER_LEN + total) as u16))
}

/// Where a packet of an established flow leaves, and what routing writes over its
/// Ethernet header there.
#[derive(Clone, Copy)]
struct Out {
    next_hop: NextHopId,
    tx_if: InterfaceId,
    /// Into a tunnel over IPv4 (else out of a local interface as it is).
    tunnel: bool,
    /// Routed out of a local interface (from its MAC to the next hop's) or into VXLAN
    /// (between gateway MACs): the new source and destination MACs.
    macs: Option<(MacAddr, MacAddr)>,
}

/// Where a packet of flow `id` leaves, if the flow's decision is current and is one
/// this node carries out (out of a local interface, or into a tunnel over IPv4), and
/// only if ip-rewrite and interface-output would let it through. What its next hop
/// means comes from `via`, resolved once for a run of flows with the same next hop.
#[allow(clippy::too_many_arguments)]
#[inline]
fn action(
    cx: &Cx,
    st: &ForwardingState,
    rewrites: &mut Rewrites,
    via: &mut Via,
    p: u32,
    id: FlowId,
    len: u16,
    epoch: u32,
) -> Option<Out> {
    // The entry's first line: all a hit of an IPv4 flow reads.
    let e = cx.flows.head(id)?;
    // A bridged flow was decided by its destination MAC (see the flow node).
    let routed = !e.bridged();
    let (meta, data) = cx.pool.view(p);
    if e.epoch() != epoch || (!routed && data.first_chunk::<6>() != Some(e.dst_mac())) {
        return None;
    }
    // Sent on by another host than the flow's latest (or one the first line cannot
    // tell): the flow node's to handle.
    if meta.sent_by_another_head(e) != Some(false) {
        return None;
    }
    let Some(FlowAction::Forward { next_hop }) = e.action() else {
        return None;
    };
    let at = (next_hop, routed, e.vrf());
    if via.at != Some(at) {
        *via = Via {
            at: Some(at),
            to: resolve(st, rewrites, next_hop, routed, e.vrf()),
        };
    }
    let to = via.to?;
    // interface-output's MTU check (it counts the L3 packet, not the Ethernet header).
    if usize::from(len) - to.strip + to.head > to.limit {
        return None;
    }
    let macs = match to.macs {
        // From a function to one on that host: from its own MAC (ip-rewrite).
        Some((_, dst)) if to.own_src => Some((MacAddr(*data.get(6..12)?.first_chunk::<6>()?), dst)),
        m => m,
    };
    Some(Out {
        next_hop,
        tx_if: to.tx_if,
        tunnel: to.tunnel,
        macs,
    })
}

/// A next hop resolved for the flows of one vector: the tables do not change while a
/// vector is processed, and the flows of a vector mostly share a next hop.
#[derive(Clone, Copy, Default)]
struct Via {
    /// (next hop, routed, the key's VRF): all the resolution depends on.
    at: Option<(NextHopId, bool, u32)>,
    /// `None`: not one this node carries out (a tunnel's outer headers are then in
    /// `Rewrites`, built for it).
    to: Option<To>,
}

/// Tunnel next hop `next_hop`'s outer headers (over IPv4, with its VXLAN or MPLS shim),
/// built in `rewrites` once per table epoch; `None` if they cannot be (the graph's to
/// drop).
fn head4<'r>(
    rewrites: &'r mut Rewrites,
    st: &ForwardingState,
    next_hop: NextHopId,
    t: &Tunnel,
) -> Option<&'r Head4> {
    let shim = match t.encap {
        Encap::Vxlan { .. } => vxlan(t.encap),
        _ => mpls(t.encap),
    }?;
    rewrites
        .head4(st, (next_hop, t), shim.transport, &shim.bytes[..shim.len])
        .ok()
}

#[derive(Clone, Copy)]
struct To {
    tx_if: InterfaceId,
    tunnel: bool,
    macs: Option<(MacAddr, MacAddr)>,
    /// The source MAC is the packet's own (the first of `macs` stands for it).
    own_src: bool,
    /// Bytes the packet loses (an Ethernet header under MPLS) and gains (the tunnel's
    /// headers) on the way out.
    strip: usize,
    head: usize,
    /// The longest frame the transmitting interface takes.
    limit: usize,
}

impl To {
    /// Into the tunnel whose headers are `h`: they hold what the node needs of the
    /// tunnel (its underlay, up or not, and the longest frame it takes; VXLAN or MPLS).
    fn tunnel(
        h: &Head4,
        routed: bool,
        macs: Option<(MacAddr, MacAddr)>,
        own_src: bool,
    ) -> Option<To> {
        Some(To {
            tx_if: InterfaceId(h.underlay()),
            tunnel: true,
            macs,
            own_src,
            // MPLS carries a routed packet without its Ethernet header.
            strip: if routed && h.is_mpls() { HEADER_LEN } else { 0 },
            head: h.len(),
            limit: usize::from(h.underlay_limit()?),
        })
    }
}

/// What next hop `next_hop` means for a flow (routed or bridged, keyed in `key_vrf`),
/// if this node can carry it out: the interface it leaves by (up), the tunnel (its
/// headers built), the MACs.
fn resolve(
    st: &ForwardingState,
    rewrites: &mut Rewrites,
    next_hop: NextHopId,
    routed: bool,
    key_vrf: u32,
) -> Option<To> {
    // A tunnel whose headers are built: they say all, unless the flow is routed into
    // VXLAN (its MACs come from the VRF). One line, where the next hop's entry, its
    // interface and the headers are three or four.
    if let Some(h) = rewrites.cached(next_hop)
        && (!routed || h.is_mpls())
    {
        return To::tunnel(h, routed, None, false);
    }
    match st.nexthop(next_hop)? {
        NextHop::Interface { interface, dst_mac } => {
            let iface = st.interface(*interface)?;
            if !iface.admin_up {
                return None;
            }
            Some(To {
                tx_if: *interface,
                tunnel: false,
                macs: routed.then_some((iface.mac, *dst_mac)),
                own_src: false,
                strip: 0,
                head: 0,
                limit: usize::from(iface.mtu) + HEADER_LEN,
            })
        }
        NextHop::Tunnel(t) if t.src.is_ipv4() && t.dst.is_ipv4() => {
            let (macs, own_src) = match t.encap {
                Encap::Vxlan { vni } if routed => {
                    // Inside VXLAN, between the gateway MACs (ip-rewrite's choice).
                    let vrf = st.vrf_by_vni(vni).or_else(|| st.vrf(VrfId(key_vrf)))?;
                    let dst = t.inner_dst.unwrap_or(vrf.router_mac);
                    // From a function to one on that host: from its own MAC.
                    let own = matches!((t.inner_dst, key_port(key_vrf)), (Some(_), Some(_)));
                    (Some((vrf.router_mac, dst)), own)
                }
                _ => (None, false),
            };
            To::tunnel(head4(rewrites, st, next_hop, t)?, routed, macs, own_src)
        }
        _ => None,
    }
}

/// Forwards packet `p` of flow `id` as the graph would: what ip-input, the flow node,
/// ip-rewrite, the encapsulation and interface-output do, and what they record in its
/// metadata if anything reads it after (`observed`).
#[allow(clippy::too_many_arguments)]
#[inline]
fn forward(
    head: Option<&Head4>,
    cx: &mut Cx,
    p: u32,
    id: FlowId,
    key: &FlowKey,
    l4: u16,
    len: u16,
    out: Out,
    observed: bool,
) -> u16 {
    cx.flows.touch(id, u64::from(len), cx.now);
    let routed = !key.bridged;
    // (`action` leaves no tunnel without its headers; `head` is None out of a local
    // interface.)
    if out.tunnel && head.is_none() {
        return super::drop(cx.pool.meta_mut(p), Reason::NextHopUnsupported, Next::Drop).into();
    }
    // The tunnel's headers go in front; MPLS carries a routed packet without its
    // Ethernet header, which they then cover (they hold an Ethernet and an IPv4 header:
    // never shorter than the one they cover).
    let grow = head.map_or(0, |h| {
        h.len() - if routed && h.is_mpls() { HEADER_LEN } else { 0 }
    });
    // Ethernet padding after the IP packet goes: nothing forwards it.
    let Some((meta, data)) = cx.pool.reframe(p, grow, usize::from(len)) else {
        return super::drop(cx.pool.meta_mut(p), Reason::NoHeadroom, Next::Drop).into();
    };
    // The hash picks the tunnel's UDP source port; the rest is for whatever reads the
    // metadata of transmitted packets (`Settings::tx_observed`).
    meta.hash = key.symmetric_hash();
    if observed {
        meta.key = *key;
        meta.l3 = HEADER_LEN as u16;
        meta.l4 = l4;
        meta.flags |= flags::FLOW_HIT;
        meta.next_hop = out.next_hop.0;
        meta.tx_if = out.tx_if.0;
        if routed {
            meta.flags |= flags::ROUTED;
        }
    }
    let frame = &mut data[grow..];
    if routed {
        // The TTL goes down once, where the packet enters the overlay (`candidate`
        // left only TTLs above 1).
        if !meta.has(flags::FROM_TUNNEL) {
            Ipv4Packet::new_unchecked(&mut frame[HEADER_LEN..]).decrement_ttl();
        }
    }
    if let Some((src, dst)) = out.macs {
        let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
        eth.set_src(src);
        eth.set_dst(dst);
    }
    if let Some(head) = head
        && let Err(e) = head.write(meta, data)
    {
        return super::drop(meta, e, Next::Drop).into();
    }
    let sent = data.len();
    cx.transmit_len(p, out.tx_if.0, sent);
    CONSUMED
}
