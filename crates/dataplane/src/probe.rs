//! Health probes of service functions' instances, sent and answered in the pipeline.
//!
//! ovr owns the ports' interfaces (a raw socket of the host would not see their
//! frames), so a worker sends the probes itself: an ARP request for the function's
//! address, or an ICMP echo request to it, from the gateway's address and MAC of the
//! port's network, out of each side of every instance of this host whose function has
//! a probe. The function's answer comes back through the pipeline like any frame from
//! the port: the `arp` node takes an ARP reply, the `gateway` node an echo reply, to
//! the gateway from the function's address, as the answer and frees it.
//!
//! What was sent and answered is kept in a [`Book`] shared by the workers (any may read
//! an answer; one sends), which ovrd's health thread reads: a side that leaves
//! `failures` probes in a row unanswered is down there exactly as a side whose link is
//! down (`SetPortHealth`), and up again once a probe is answered.

use crate::context::Cx;
use ovr_tables::chain::{ProbeKind, ProbeTarget, Side};
use ovr_tables::ids::InterfaceId;
use ovr_tables::nexthop::NextHop;
use ovr_tables::state::ForwardingState;
use ovr_wire::arp::{ArpOp, ArpPacket, ArpRepr};
use ovr_wire::ethernet::{EthernetFrame, HEADER_LEN, MacAddr, ethertype};
use ovr_wire::icmpv4::{self, Icmpv4Packet, Icmpv4Repr};
use ovr_wire::ip_proto;
use ovr_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The identifier of ovr's echo requests ("ov"): an echo reply to the gateway with
/// another one is not an answer to a probe.
pub const ICMP_IDENT: u16 = 0x6f76;
/// What an echo request carries.
pub const ICMP_DATA: &[u8; 8] = b"ovrprobe";
/// Due probes are looked for at most this often (ns).
const TICK_NS: u64 = 10_000_000;

/// Where the probes of one port stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PortProbe {
    pub kind: &'static str,
    pub sent: u64,
    pub answered: u64,
    /// Probes sent since the last answer (the latest still within its interval).
    pub outstanding: u32,
    /// How many missed in a row make the port down.
    pub failures: u32,
    /// On the workers' clock (ns since ovrd started).
    pub last_sent_ns: Option<u64>,
    pub last_answer_ns: Option<u64>,
    /// The sequence number of the next echo request.
    #[serde(skip)]
    seq: u16,
}

impl PortProbe {
    fn new(kind: ProbeKind, failures: u32) -> Self {
        Self {
            kind: kind.name(),
            sent: 0,
            answered: 0,
            outstanding: 0,
            failures,
            last_sent_ns: None,
            last_answer_ns: None,
            seq: 0,
        }
    }

    /// Probes left unanswered for a whole interval, in a row.
    pub fn missed(&self) -> u32 {
        self.outstanding.saturating_sub(1)
    }

    /// Down: `failures` probes in a row missed.
    pub fn failed(&self) -> bool {
        self.missed() >= self.failures
    }
}

/// The probes of every probed port, shared by the workers and the health thread.
#[derive(Debug, Default)]
pub struct Book {
    ports: Mutex<BTreeMap<u32, PortProbe>>,
    /// The sending worker's clock at its last look (to tell how long ago an answer came).
    now: AtomicU64,
}

impl Book {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u32, PortProbe>> {
        self.ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The probes of `port` (`None`: it is not probed).
    pub fn get(&self, port: InterfaceId) -> Option<PortProbe> {
        self.lock().get(&port.0).copied()
    }

    /// Whether `port`'s probe leaves it up (a port not probed is).
    pub fn ok(&self, port: InterfaceId) -> bool {
        self.get(port).is_none_or(|p| !p.failed())
    }

    /// The workers' clock as the sender last saw it (ns).
    pub fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// An answer came from `port`.
    fn answered(&self, port: InterfaceId, now: u64) {
        if let Some(p) = self.lock().get_mut(&port.0) {
            p.answered += 1;
            p.outstanding = 0;
            p.last_answer_ns = Some(now);
        }
    }
}

/// A worker's part in probing: the book it shares and whether it sends.
#[derive(Debug)]
pub struct Prober {
    pub book: Arc<Book>,
    /// One worker sends (each probe once); every worker takes answers.
    pub sends: bool,
    next_ns: u64,
    /// Some port was probed at the last look.
    active: bool,
}

impl Default for Prober {
    fn default() -> Self {
        Self {
            book: Arc::default(),
            sends: true,
            next_ns: 0,
            active: false,
        }
    }
}

impl Prober {
    pub fn new(book: Arc<Book>, sends: bool) -> Self {
        Self {
            book,
            sends,
            next_ns: 0,
            active: false,
        }
    }

    /// How soon an idle worker must wake to send probes on time (`None`: it need not).
    pub fn wake_within_ms(&self) -> Option<i32> {
        (self.sends && self.active).then_some((TICK_NS / 1_000_000) as i32)
    }
}

/// One side to probe.
struct Due {
    port: InterfaceId,
    kind: ProbeKind,
    target: ProbeTarget,
    src: MacAddr,
    dst: MacAddr,
}

/// Sends the probes that are due (on the sending worker), and forgets ports no longer
/// probed. Called once per run; looks at the tables every `TICK_NS` only.
pub fn tick(cx: &mut Cx, st: &ForwardingState) {
    let now = cx.now;
    if !cx.probes.sends || now < cx.probes.next_ns {
        return;
    }
    cx.probes.next_ns = now + TICK_NS;
    let book = cx.probes.book.clone();
    book.now.store(now, Ordering::Relaxed);
    let mut due = Vec::new();
    {
        let mut ports = book.lock();
        let mut probed = std::collections::BTreeSet::new();
        for f in st.chains().chains().iter().flat_map(|c| &c.functions) {
            if f.probe.kind == ProbeKind::Link {
                continue;
            }
            let interval = u64::from(f.probe.interval_ms) * 1_000_000;
            for i in &f.instances {
                for side in [Side::Left, Side::Right] {
                    let (Some(port), Some(target)) = (i.port(side), i.probe(side)) else {
                        continue;
                    };
                    probed.insert(port.0);
                    let e = ports
                        .entry(port.0)
                        .or_insert_with(|| PortProbe::new(f.probe.kind, f.probe.failures));
                    (e.kind, e.failures) = (f.probe.kind.name(), f.probe.failures);
                    if e.last_sent_ns.is_some_and(|t| now < t + interval) {
                        continue;
                    }
                    let Some(d) = addressed(st, port, i.nexthop(side), f.probe.kind, target) else {
                        continue;
                    };
                    e.sent += 1;
                    e.outstanding += 1;
                    e.last_sent_ns = Some(now);
                    e.seq = e.seq.wrapping_add(1);
                    due.push((d, e.seq));
                }
            }
        }
        ports.retain(|p, _| probed.contains(p));
        cx.probes.active = !probed.is_empty();
    }
    for (d, seq) in due {
        let mut buf = [0u8; FRAME_LEN];
        let n = match d.kind {
            ProbeKind::Arp => arp_request(&mut buf, d.src, d.dst, d.target),
            _ => echo_request(&mut buf, d.src, d.dst, d.target, seq),
        };
        if let Some(p) = cx.pool.alloc_with(&buf[..n]) {
            cx.transmit(p, d.port.0);
        }
    }
}

/// The MACs of a probe out of `port`: the gateway's of the port's network, and the
/// function's (its next hop's); `None` when the port cannot send now.
fn addressed(
    st: &ForwardingState,
    port: InterfaceId,
    nh: ovr_tables::ids::NextHopId,
    kind: ProbeKind,
    target: ProbeTarget,
) -> Option<Due> {
    let iface = st.interface(port).filter(|i| i.admin_up)?;
    let src = st.vrf(iface.vrf?)?.router_mac;
    let Some(NextHop::Interface { dst_mac, .. }) = st.nexthop(nh) else {
        return None;
    };
    Some(Due {
        port,
        kind,
        target,
        src,
        dst: *dst_mac,
    })
}

/// The longest probe frame: Ethernet, IPv4, ICMP header and data.
pub const FRAME_LEN: usize = HEADER_LEN + 20 + 8 + ICMP_DATA.len();

/// Writes an ARP request for `t.to` from the gateway (`src`, `t.from`), sent to the
/// function's MAC (unicast: only that instance is asked); returns its length.
pub fn arp_request(buf: &mut [u8], src: MacAddr, dst: MacAddr, t: ProbeTarget) -> usize {
    let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.set_dst(dst);
    eth.set_src(src);
    eth.set_ethertype(ethertype::ARP);
    let arp = ArpRepr {
        operation: ArpOp::Request,
        sender_mac: src,
        sender_ip: t.from,
        target_mac: MacAddr([0; 6]),
        target_ip: t.to,
    };
    arp.emit(&mut buf[HEADER_LEN..]);
    HEADER_LEN + arp.buffer_len()
}

/// Writes an ICMP echo request (identifier [`ICMP_IDENT`], sequence `seq`) from the
/// gateway to the function; returns its length.
pub fn echo_request(buf: &mut [u8], src: MacAddr, dst: MacAddr, t: ProbeTarget, seq: u16) -> usize {
    let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.set_dst(dst);
    eth.set_src(src);
    eth.set_ethertype(ethertype::IPV4);
    let icmp = Icmpv4Repr::EchoRequest {
        ident: ICMP_IDENT,
        seq,
        data: ICMP_DATA,
    };
    let ip = Ipv4Repr {
        src: t.from,
        dst: t.to,
        protocol: ip_proto::ICMP,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: seq,
        dont_frag: true,
        payload_len: icmp.buffer_len() as u16,
    };
    ip.emit(&mut buf[HEADER_LEN..]);
    let l4 = HEADER_LEN + ip.buffer_len();
    icmp.emit(&mut buf[l4..]);
    l4 + icmp.buffer_len()
}

/// The probe target of the side a frame came in on, if its function probes with `kind`.
fn target_of(st: &ForwardingState, rx: u32, kind: ProbeKind) -> Option<ProbeTarget> {
    let sp = st.service_port(InterfaceId(rx))?;
    let f = st.chains().function(sp.chain, usize::from(sp.hop))?;
    if f.probe.kind != kind {
        return None;
    }
    st.chains().instance(&sp)?.probe(sp.side)
}

/// Takes an ARP reply to a probe (from the function's address to the gateway's, on a
/// probed port) as its answer: records it and frees the frame. `false`: not one.
pub fn take_arp_reply(cx: &mut Cx, st: &ForwardingState, p: u32) -> bool {
    let m = cx.pool.meta(p);
    let (rx, l3) = (m.rx_if, usize::from(m.l3));
    let Some(t) = target_of(st, rx, ProbeKind::Arp) else {
        return false;
    };
    let Some(arp) = cx
        .pool
        .data(p)
        .get(l3..)
        .and_then(|b| ArpPacket::new_checked(b).ok())
        .map(|a| ArpRepr::parse(&a))
    else {
        return false;
    };
    if arp.operation != ArpOp::Reply || arp.sender_ip != t.to || arp.target_ip != t.from {
        return false;
    }
    cx.probes.book.answered(InterfaceId(rx), cx.now);
    cx.pool.free(&[p]);
    true
}

/// Takes an echo reply to a probe (ovr's identifier, from the function's address to
/// the gateway's, on a probed port) as its answer: records it and frees the packet.
/// `false`: not one.
pub fn take_echo_reply(cx: &mut Cx, st: &ForwardingState, p: u32) -> bool {
    let m = cx.pool.meta(p);
    let (rx, l3) = (m.rx_if, usize::from(m.l3));
    let Some(t) = target_of(st, rx, ProbeKind::Icmp) else {
        return false;
    };
    let data = cx.pool.data(p);
    let Some(ip) = data.get(l3..).and_then(|b| Ipv4Packet::new_checked(b).ok()) else {
        return false;
    };
    if ip.protocol() != ip_proto::ICMP || ip.src() != t.to || ip.dst() != t.from {
        return false;
    }
    let answer = Icmpv4Packet::new_checked(ip.payload())
        .ok()
        .is_some_and(|i| {
            i.msg_type() == icmpv4::msg_type::ECHO_REPLY && i.echo_ident() == ICMP_IDENT
        });
    if !answer {
        return false;
    }
    cx.probes.book.answered(InterfaceId(rx), cx.now);
    cx.pool.free(&[p]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> ProbeTarget {
        ProbeTarget {
            from: "10.99.1.1".parse().unwrap(),
            to: "10.99.1.11".parse().unwrap(),
        }
    }

    const GW: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const FN: MacAddr = MacAddr([2, 0, 0, 0xf, 1, 1]);

    #[test]
    fn an_arp_probe_asks_the_function_for_its_address_from_the_gateway() {
        let mut buf = [0u8; FRAME_LEN];
        let n = arp_request(&mut buf, GW, FN, target());
        assert_eq!(n, 42);
        let eth = EthernetFrame::new_checked(&buf[..n]).unwrap();
        assert_eq!(
            (eth.dst(), eth.src(), eth.ethertype()),
            (FN, GW, ethertype::ARP)
        );
        let a = ArpRepr::parse(&ArpPacket::new_checked(&buf[HEADER_LEN..n]).unwrap());
        assert_eq!(a.operation, ArpOp::Request);
        assert_eq!(
            (a.sender_mac, a.sender_ip, a.target_ip),
            (GW, target().from, target().to)
        );
    }

    #[test]
    fn an_icmp_probe_is_an_echo_request_with_good_checksums() {
        let mut buf = [0u8; FRAME_LEN];
        let n = echo_request(&mut buf, GW, FN, target(), 7);
        assert_eq!(n, FRAME_LEN);
        let ip = Ipv4Packet::new_checked(&buf[HEADER_LEN..n]).unwrap();
        let r = Ipv4Repr::parse(&ip).unwrap();
        assert_eq!(
            (r.src, r.dst, r.protocol, r.ttl),
            (target().from, target().to, 1, 64)
        );
        let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(
            Icmpv4Repr::parse(&icmp).unwrap(),
            Icmpv4Repr::EchoRequest {
                ident: ICMP_IDENT,
                seq: 7,
                data: ICMP_DATA
            }
        );
    }

    #[test]
    fn a_port_fails_after_its_failures_missed_in_a_row_and_recovers_on_an_answer() {
        let mut p = PortProbe::new(ProbeKind::Arp, 3);
        for _ in 0..3 {
            p.outstanding += 1;
            assert!(!p.failed());
        }
        p.outstanding += 1;
        assert!(p.failed());
        let b = Book::default();
        b.lock().insert(4, p);
        assert!(!b.ok(InterfaceId(4)));
        assert!(b.ok(InterfaceId(5)), "a port not probed is up");
        b.answered(InterfaceId(4), 9);
        assert!(b.ok(InterfaceId(4)));
        assert_eq!(b.get(InterfaceId(4)).unwrap().last_answer_ns, Some(9));
    }
}
