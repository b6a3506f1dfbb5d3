//! The outer headers of a tunnel packet: Ethernet, IPv4 or IPv6, then UDP or GRE, then
//! the tunnel's own header (the "shim": VXLAN, or an MPLS label), all written into the
//! headroom in front of the packet without moving it.
//!
//! As VPP does with its adjacency "rewrite strings", the headers of an IPv4 tunnel are
//! built once per next hop into a template; a packet then costs a copy and three patched
//! fields (lengths, checksum, source port). IPv6 tunnels are written whole, because their
//! UDP checksum covers the packet anyway.

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use crate::meta::Meta;
use core::net::IpAddr;
use ovr_graph::{Vector, next_nodes};
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::{Encap, NextHop, Tunnel};
use ovr_tables::state::ForwardingState;
use ovr_wire::checksum;
use ovr_wire::ethernet::{EthernetRepr, HEADER_LEN, MacAddr, ethertype};
use ovr_wire::gre::GreRepr;
use ovr_wire::ip_proto;
use ovr_wire::ipv4::Ipv4Repr;
use ovr_wire::ipv6::Ipv6Repr;
use ovr_wire::udp::{UdpPacket, UdpRepr};
use ovr_wire::vxlan::source_port_from_hash;

/// What carries the shim across the underlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp { dst_port: u16 },
    Gre,
}

next_nodes! { pub enum Next { Output = "interface-output", Drop = "drop" } }

/// The header a tunnel puts right after its transport (VXLAN, or an MPLS label).
pub struct Shim {
    pub transport: Transport,
    pub bytes: [u8; 8],
    pub len: usize,
}

/// TTL of the outer header: the underlay is a network of its own.
const OUTER_TTL: u8 = 64;
/// The longest headers: Ethernet, IPv6, UDP and an 8-byte shim.
const MAX_HEAD: usize = HEADER_LEN + 40 + 8 + 8;

/// Writes the outer headers for an inner packet of `inner_len` bytes into `buf`
/// (`head` bytes: everything up to and including the shim).
fn write_outer(
    buf: &mut [u8],
    src_mac: MacAddr,
    t: &Tunnel,
    transport: Transport,
    shim: &[u8],
    inner_len: usize,
    hash: u32,
) -> Result<(), Reason> {
    let ip_len = if t.dst.is_ipv6() { 40 } else { 20 };
    let (l4_len, protocol) = match transport {
        Transport::Udp { .. } => (8, ip_proto::UDP),
        Transport::Gre => (4, ip_proto::GRE),
    };
    let ip_payload = l4_len + shim.len() + inner_len;
    if ip_len + ip_payload > usize::from(u16::MAX) {
        return Err(Reason::MtuExceeded);
    }
    let (ip, rest) = buf[HEADER_LEN..].split_at_mut(ip_len);
    match (t.src, t.dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => Ipv4Repr {
            src,
            dst,
            protocol,
            ttl: OUTER_TTL,
            dscp: 0,
            ecn: 0,
            // Atomic datagrams (DF set) may carry identification 0 (RFC 6864).
            ident: 0,
            dont_frag: true,
            payload_len: ip_payload as u16,
        }
        .emit(ip),
        (IpAddr::V6(src), IpAddr::V6(dst)) => Ipv6Repr {
            src,
            dst,
            next_header: protocol,
            hop_limit: OUTER_TTL,
            traffic_class: 0,
            // The inner flow's hash as flow label, for the underlay's ECMP (RFC 6438).
            flow_label: hash & 0x000f_ffff,
            payload_len: ip_payload as u16,
        }
        .emit(ip),
        _ => return Err(Reason::NextHopUnsupported),
    }
    rest[l4_len..l4_len + shim.len()].copy_from_slice(shim);
    match transport {
        Transport::Udp { dst_port } => {
            UdpRepr {
                src_port: source_port_from_hash(hash),
                dst_port,
                payload_len: (shim.len() + inner_len) as u16,
            }
            .emit(rest);
            // IPv4 tunnels send no UDP checksum (RFC 7348 section 5, RFC 7510 section
            // 3); IPv6 requires one (RFC 8200 section 8.1).
            if let (IpAddr::V6(src), IpAddr::V6(dst)) = (t.src, t.dst)
                && let Some(dgram) = rest.get_mut(..l4_len + shim.len() + inner_len)
            {
                UdpPacket::new_unchecked(dgram).fill_checksum_v6(src, dst);
            }
        }
        Transport::Gre => GreRepr {
            protocol_type: ethertype::MPLS,
            checksum: false,
            key: None,
            sequence: None,
        }
        .emit(rest),
    }
    EthernetRepr {
        dst: t.dst_mac,
        src: src_mac,
        tags: [None, None],
        ethertype: if t.dst.is_ipv6() {
            ethertype::IPV6
        } else {
            ethertype::IPV4
        },
    }
    .emit(buf);
    Ok(())
}

/// VXLAN's outer headers over IPv4: Ethernet, IPv4, UDP, VXLAN.
const VXLAN4_HEAD: usize = HEADER_LEN + 20 + 8 + 8;

#[inline(always)]
fn copy_head<const N: usize>(data: &mut [u8], tpl: &[u8; HEAD4_MAX]) {
    if let (Some(to), Some(from)) = (data.first_chunk_mut::<N>(), tpl.first_chunk::<N>()) {
        *to = *from;
    }
}

/// The longest headers over IPv4: Ethernet, IPv4, UDP and an 8-byte shim (VXLAN's).
const HEAD4_MAX: usize = VXLAN4_HEAD;

/// The outer headers of one tunnel next hop over IPv4, built for an empty payload:
/// encapsulating a packet is then a copy and three patched lengths. One cache line
/// each, with what else the one-pass path needs of the tunnel (its underlay's state and
/// MTU): with flows spread over thousands of tunnels, a packet's headers are read from
/// further than L1, and an 88-byte template took two lines (three, unaligned).
#[derive(Clone, Copy)]
#[repr(align(64))]
pub struct Head4 {
    bytes: [u8; HEAD4_MAX],
    len: u8,
    udp: bool,
    underlay: u32,
    /// The underlay interface is up, and the longest frame it takes (its MTU and the
    /// Ethernet header), as the tables said when these headers were built (for one
    /// table epoch).
    underlay_up: bool,
    limit: u16,
    mpls: bool,
}

const _: () = assert!(size_of::<Option<Head4>>() == 64);

impl Head4 {
    /// Bytes these headers put in front of a packet.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// The underlay interface these headers lead out of.
    pub fn underlay(&self) -> u32 {
        self.underlay
    }

    /// The longest frame the underlay interface takes, if it is up.
    pub fn underlay_limit(&self) -> Option<u16> {
        self.underlay_up.then_some(self.limit)
    }

    /// The headers carry MPLS (over UDP or GRE) rather than VXLAN.
    pub fn is_mpls(&self) -> bool {
        self.mpls
    }

    /// Prepends these headers to packet `p` and patches its lengths, the outer IPv4
    /// checksum (incrementally) and the UDP source port (from the flow's hash).
    #[inline(always)]
    pub fn apply(&self, cx: &mut Cx, p: u32) -> Result<(), Reason> {
        let inner_len = cx.pool.len(p);
        let (meta, data) = cx
            .pool
            .reframe(p, self.len(), inner_len)
            .ok_or(Reason::NoHeadroom)?;
        self.write(meta, data)
    }

    /// [`Self::apply`] on a packet already grown at the front by [`Self::len`] bytes
    /// (`data`, whose `meta` says the flow's hash).
    #[inline(always)]
    pub fn write(&self, meta: &mut Meta, data: &mut [u8]) -> Result<(), Reason> {
        let len = self.len();
        let inner_len = data.len() - len;
        meta.tx_if = self.underlay;
        meta.l3 = HEADER_LEN as u16;
        if inner_len + len - HEADER_LEN > usize::from(u16::MAX) {
            return Err(Reason::MtuExceeded);
        }
        // VXLAN's head (the commonest) as a copy of known length, which the compiler
        // turns into a few moves instead of a call to memcpy (~25 instructions).
        if len == VXLAN4_HEAD {
            copy_head::<VXLAN4_HEAD>(data, &self.bytes);
        } else {
            data[..len].copy_from_slice(&self.bytes[..len]);
        }
        let ip = HEADER_LEN;
        let old_total = u16::from_be_bytes([data[ip + 2], data[ip + 3]]);
        let total = old_total + inner_len as u16;
        let csum = u16::from_be_bytes([data[ip + 10], data[ip + 11]]);
        data[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
        let csum = checksum::update16(csum, old_total, total);
        data[ip + 10..ip + 12].copy_from_slice(&csum.to_be_bytes());
        if self.udp {
            let udp = ip + 20;
            let len = u16::from_be_bytes([data[udp + 4], data[udp + 5]]) + inner_len as u16;
            data[udp..udp + 2].copy_from_slice(&source_port_from_hash(meta.hash).to_be_bytes());
            data[udp + 4..udp + 6].copy_from_slice(&len.to_be_bytes());
        }
        Ok(())
    }
}

/// Per-node cache of templates by next hop, valid for one table epoch.
#[derive(Default)]
pub struct Rewrites {
    epoch: Option<u32>,
    by_nexthop: Vec<Option<Head4>>,
}

impl Rewrites {
    /// What an encapsulation node says of a traced packet: the tunnel and the result.
    pub fn trace(cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        Some(format!(
            "{}, {} bytes",
            crate::describe::nexthop(st, m.next_hop),
            cx.pool.len(pkt)
        ))
    }

    /// An encapsulation node's loop: every packet's next hop must be a tunnel for which
    /// `shim` gives the header (others are this node's mistake: `nexthop_unsupported`).
    pub fn process(
        &mut self,
        cx: &mut Cx,
        st: &ForwardingState,
        v: &mut Vector<'_>,
        shim: impl Fn(Encap) -> Option<Shim>,
    ) {
        self.follow(st);
        let pkts = v.pkts;
        v.map(|i, p| {
            if let Some(&n) = pkts.get(i + 4) {
                cx.pool.prefetch(n);
            }
            let nh = NextHopId(cx.pool.meta(p).next_hop);
            let r = match st.nexthop(nh) {
                Some(NextHop::Tunnel(t)) => match shim(t.encap) {
                    Some(s) => self.encapsulate(cx, st, p, (nh, t), s.transport, &s.bytes[..s.len]),
                    None => Err(Reason::NextHopUnsupported),
                },
                _ => Err(Reason::NextHopUnsupported),
            };
            match r {
                Ok(()) => Next::Output,
                Err(e) => drop(cx.pool.meta_mut(p), e, Next::Drop),
            }
        });
    }

    /// Forgets the templates of an older table epoch: they are valid for one, which is
    /// checked once per vector, not per packet.
    pub fn follow(&mut self, st: &ForwardingState) {
        if self.epoch != Some(st.epoch()) {
            self.by_nexthop.clear();
            self.epoch = Some(st.epoch());
        }
    }

    /// Prepends the outer headers and `shim` to packet `p` for tunnel next hop `nh`.
    pub fn encapsulate(
        &mut self,
        cx: &mut Cx,
        st: &ForwardingState,
        p: u32,
        (nh, t): (NextHopId, &Tunnel),
        transport: Transport,
        shim: &[u8],
    ) -> Result<(), Reason> {
        if t.dst.is_ipv4() {
            return self.head4(st, (nh, t), transport, shim)?.apply(cx, p);
        }
        let underlay_mac = st
            .interface(t.underlay)
            .map(|i| i.mac)
            .ok_or(Reason::UnknownInterface);
        let inner_len = cx.pool.len(p);
        let l4_len = if transport == Transport::Gre { 4 } else { 8 };
        let head = HEADER_LEN + 40 + l4_len + shim.len();
        if !cx.pool.push_front(p, head) {
            return Err(Reason::NoHeadroom);
        }
        let (meta, data) = cx.pool.split_mut(p);
        meta.tx_if = t.underlay.0;
        meta.l3 = HEADER_LEN as u16;
        write_outer(
            data,
            underlay_mac?,
            t,
            transport,
            shim,
            inner_len,
            meta.hash,
        )
    }

    /// The outer headers of next hop `nh` if [`Self::head4`] built them in this epoch.
    #[inline]
    pub fn cached(&self, nh: NextHopId) -> Option<&Head4> {
        self.by_nexthop.get(nh.0 as usize)?.as_ref()
    }

    /// The outer headers of IPv4 tunnel next hop `nh`, built at its first packet in a
    /// table epoch (the underlay's MAC is looked up then, not per packet).
    pub fn head4(
        &mut self,
        st: &ForwardingState,
        (nh, t): (NextHopId, &Tunnel),
        transport: Transport,
        shim: &[u8],
    ) -> Result<&Head4, Reason> {
        let i = nh.0 as usize;
        if self.by_nexthop.len() <= i {
            self.by_nexthop.resize(i + 1, None);
        }
        if self.by_nexthop[i].is_none() {
            let underlay = st.interface(t.underlay).ok_or(Reason::UnknownInterface)?;
            let mac = underlay.mac;
            let mut buf = [0u8; MAX_HEAD];
            write_outer(&mut buf, mac, t, transport, shim, 0, 0)?;
            let l4_len = if transport == Transport::Gre { 4 } else { 8 };
            let len = HEADER_LEN + 20 + l4_len + shim.len();
            let bytes = buf.first_chunk::<HEAD4_MAX>();
            let (Some(bytes), true) = (bytes, len <= HEAD4_MAX) else {
                return Err(Reason::NextHopUnsupported);
            };
            self.by_nexthop[i] = Some(Head4 {
                bytes: *bytes,
                len: len as u8,
                udp: matches!(transport, Transport::Udp { .. }),
                underlay: t.underlay.0,
                underlay_up: underlay.admin_up,
                limit: underlay.mtu.saturating_add(HEADER_LEN as u16),
                mpls: !matches!(t.encap, Encap::Vxlan { .. }),
            });
        }
        // (Always there now; a match returning the cached one does not borrow-check.)
        self.by_nexthop[i]
            .as_ref()
            .ok_or(Reason::NextHopUnsupported)
    }
}
