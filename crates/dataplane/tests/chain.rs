//! Service chains through the pipeline, with the test playing the network function: what
//! ovr sends into an instance's left comes back out of its right with the function's
//! MACs (an in-network function routes), and replies the other way. Checks that
//! sessions spread over instances, that each reply goes back into the instance its
//! session went through (the two directions' hashes differ), that an instance whose
//! port goes down gives up its sessions and only those, and that with none left the
//! chain drops, counted as chain_no_instance.

mod common;

use ovr_dataplane::{DropReason, Pipeline, Reason, Settings};
use ovr_tables::chain::{
    Chain, ChainId, Function, FunctionMode, Instance, Probe, ProbeKind, ProbeTarget,
};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceAddress, InterfaceKind};
use ovr_tables::nexthop::NextHop;
use ovr_tables::policy::{Policy, PolicyAction, PolicyRule};
use ovr_tables::state::{TableOp, TablesReader, TablesWriter, new_tables};
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::arp::{ArpOp, ArpPacket, ArpRepr};
use ovr_wire::ethernet::{EthernetFrame, MacAddr, ethertype};
use ovr_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use ovr_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use std::net::Ipv4Addr;
use std::sync::Arc;

const RED: VrfId = VrfId(1);
const BLUE: VrfId = VrfId(2);
const SVC: VrfId = VrfId(3);
const WA: InterfaceId = InterfaceId(0);
const WB: InterfaceId = InterfaceId(1);
const A_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0xa, 2]);
const B_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 2]);
const A: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const B: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 9);

/// Instance n (1 or 2): its ports and the function's MACs behind them.
fn left(n: u32) -> InterfaceId {
    InterfaceId(2 * n)
}
fn right(n: u32) -> InterfaceId {
    InterfaceId(2 * n + 1)
}
fn fn_mac(n: u32, side: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0xf, n as u8, side])
}

fn setup() -> (TablesWriter, TablesReader) {
    setup_probed(Probe::default())
}

/// The probe target of instance n's side (1 left, 2 right): from the gateway
/// 10.99.side.1 to the function's 10.99.side.(10 + n).
fn target(n: u32, side: u8) -> ProbeTarget {
    ProbeTarget {
        from: Ipv4Addr::new(10, 99, side, 1),
        to: Ipv4Addr::new(10, 99, side, 10 + n as u8),
    }
}

/// The chain with `probe` on its function (svc's gateways 10.99.1.1/24 and 10.99.2.1/24).
fn setup_probed(probe: Probe) -> (TablesWriter, TablesReader) {
    let probed = probe.kind != ProbeKind::Link;
    let (mut w, r) = new_tables();
    let iface = |id: InterfaceId, vrf| {
        TableOp::UpsertInterface(Interface {
            id,
            name: format!("if{}", id.0),
            kind: InterfaceKind::Workload,
            vrf: Some(vrf),
            mac: DEFAULT_ROUTER_MAC,
            addresses: Vec::new(),
            mtu: 1500,
            policy: true,
            admin_up: true,
            memif: None,
            police: None,
        })
    };
    let nh = |id: u32, interface, dst_mac| {
        TableOp::UpsertNextHop(NextHopId(id), NextHop::Interface { interface, dst_mac })
    };
    let mut ops = vec![];
    for (id, name) in [(RED, "red"), (BLUE, "blue"), (SVC, "svc")] {
        ops.push(TableOp::UpsertVrf {
            id,
            name: name.into(),
            vni: None,
        });
    }
    ops.extend([
        iface(WA, RED),
        iface(WB, BLUE),
        nh(1, WA, A_MAC),
        nh(2, WB, B_MAC),
    ]);
    let mut instances = Vec::new();
    for n in 1..=2 {
        ops.extend([iface(left(n), SVC), iface(right(n), SVC)]);
        ops.extend([
            nh(10 * n, left(n), fn_mac(n, 1)),
            nh(10 * n + 1, right(n), fn_mac(n, 2)),
        ]);
        instances.push(Instance {
            name: format!("fw-{n}"),
            left: Some(left(n)),
            right: Some(right(n)),
            left_nh: NextHopId(10 * n),
            right_nh: NextHopId(10 * n + 1),
            left_probe: probed.then(|| target(n, 1)),
            right_probe: probed.then(|| target(n, 2)),
        });
    }
    for (vrf, prefix, nh) in [
        (RED, "10.2.0.0/24", 2),
        (RED, "10.1.0.0/24", 1),
        (BLUE, "10.1.0.0/24", 1),
        (BLUE, "10.2.0.0/24", 2),
    ] {
        ops.push(TableOp::AddRoute {
            vrf,
            prefix: prefix.parse().unwrap(),
            nh: NextHopId(nh),
        });
    }
    ops.push(TableOp::SetChains(Arc::new(vec![Chain {
        id: ChainId(0),
        name: "through-fw".into(),
        from: Some(RED),
        functions: vec![Function {
            name: "fw".into(),
            mode: FunctionMode::InNetwork,
            probe,
            instances,
        }],
    }])));
    let rule = PolicyRule {
        dst_net: Some(BLUE),
        ..PolicyRule::matching_all(PolicyAction::Chain(ChainId(0)))
    };
    ops.push(TableOp::SetGateway {
        vrf: SVC,
        mac: DEFAULT_ROUTER_MAC,
        addresses: ["10.99.1.1/24", "10.99.2.1/24"]
            .map(|a| {
                let (addr, len) = a.split_once('/').unwrap();
                InterfaceAddress {
                    addr: addr.parse().unwrap(),
                    prefix_len: len.parse().unwrap(),
                }
            })
            .into(),
    });
    ops.push(TableOp::SetPolicy {
        vrf: RED,
        policy: Arc::new(Policy::new(vec![rule]).unwrap()),
    });
    w.commit(ops).unwrap();
    (w, r)
}

/// A UDP packet of session `i`, A → B (`reply`: B → A), between the given MACs.
fn packet(i: u16, reply: bool, src_mac: MacAddr, dst_mac: MacAddr) -> Vec<u8> {
    let (ips, ports) = if reply {
        ((B, A), (7, 1000 + i))
    } else {
        ((A, B), (1000 + i, 7))
    };
    common::udp_frame((src_mac, dst_mac), ips, ports, i)
}

/// Frames received on `rx`; returns (session, interface, destination MAC) of each sent.
fn pass(
    pipe: &mut Pipeline,
    r: &TablesReader,
    rx: InterfaceId,
    frames: &[Vec<u8>],
) -> Vec<(u16, InterfaceId, MacAddr)> {
    let g = r.enter().unwrap();
    pipe.cx.now += 1_000_000;
    pipe.receive(&g, rx, frames.iter().map(|f| f.as_slice()));
    pipe.run(&g);
    let mut out = Vec::new();
    pipe.drain_tx(|iface, bytes| {
        let eth = EthernetFrame::new_checked(bytes).unwrap();
        if eth.ethertype() == ethertype::ARP {
            return; // a health probe
        }
        let ip = Ipv4Packet::new_checked(&bytes[14..]).unwrap();
        out.push((ip.ident(), iface, eth.dst()));
    });
    out.sort_by_key(|o| o.0);
    out
}

/// Sessions `0..n` one way through ovr and the function: returns the instance each
/// crossed (0: dropped before it). Forward: A → function left → right → B; reply:
/// B → function right → left → A.
fn round(pipe: &mut Pipeline, r: &TablesReader, n: u16, reply: bool) -> Vec<u32> {
    let (rx, side_in, side_out, end, end_mac) = if reply {
        (WB, 2u8, 1u8, WA, A_MAC)
    } else {
        (WA, 1, 2, WB, B_MAC)
    };
    let from = if reply { B_MAC } else { A_MAC };
    let frames: Vec<_> = (0..n)
        .map(|i| packet(i, reply, from, DEFAULT_ROUTER_MAC))
        .collect();
    let mut crossed = vec![0; usize::from(n)];
    for (i, iface, mac) in pass(pipe, r, rx, &frames) {
        let k = (1..=2)
            .find(|&k| iface == if side_in == 1 { left(k) } else { right(k) })
            .unwrap_or_else(|| panic!("session {i} sent to {iface:?}"));
        assert_eq!(mac, fn_mac(k, side_in), "to the function's own MAC");
        // The function routes it out of its other side, to the gateway.
        let out = packet(i, reply, fn_mac(k, side_out), DEFAULT_ROUTER_MAC);
        let port = if side_out == 2 { right(k) } else { left(k) };
        let delivered = pass(pipe, r, port, &[out]);
        assert_eq!(
            delivered,
            vec![(i, end, end_mac)],
            "session {i} out of fw-{k}"
        );
        crossed[usize::from(i)] = k;
    }
    crossed
}

fn no_instance_drops(pipe: &Pipeline) -> u64 {
    pipe.cx.drops[usize::from(DropReason::from(Reason::ChainNoInstance).0)]
}

#[test]
fn sessions_spread_replies_come_back_through_their_instance_and_move_only_when_it_goes() {
    let (mut w, r) = setup();
    let mut pipe = Pipeline::new(Settings::default());
    let n = 64;
    let there = round(&mut pipe, &r, n, false);
    assert!(there.iter().all(|k| *k != 0));
    let on_1 = there.iter().filter(|k| **k == 1).count();
    assert!((10..=54).contains(&on_1), "{on_1} of {n} on fw-1");
    // Replies: into the very instance, whatever their own hash.
    assert_eq!(round(&mut pipe, &r, n, true), there);
    // Pinned: again the same.
    assert_eq!(round(&mut pipe, &r, n, false), there);

    // fw-1's right port goes down: its sessions move to fw-2, fw-2's stay.
    w.commit(vec![TableOp::SetPortHealth {
        interface: right(1),
        up: false,
    }])
    .unwrap();
    assert!(round(&mut pipe, &r, n, false).iter().all(|k| *k == 2));
    assert!(round(&mut pipe, &r, n, true).iter().all(|k| *k == 2));

    // It comes back: moved sessions stay on fw-2 (pinned), new ones spread again.
    w.commit(vec![TableOp::SetPortHealth {
        interface: right(1),
        up: true,
    }])
    .unwrap();
    assert!(round(&mut pipe, &r, n, false).iter().all(|k| *k == 2));

    // None left: the chain fails closed, each packet counted.
    w.commit(vec![
        TableOp::SetPortHealth {
            interface: left(1),
            up: false,
        },
        TableOp::SetPortHealth {
            interface: left(2),
            up: false,
        },
    ])
    .unwrap();
    let before = no_instance_drops(&pipe);
    assert!(round(&mut pipe, &r, n, false).iter().all(|k| *k == 0));
    assert_eq!(no_instance_drops(&pipe), before + u64::from(n));
}

#[test]
fn a_frame_from_a_function_not_sent_to_the_gateway_has_no_place_in_the_chain() {
    let (_w, r) = setup();
    let mut pipe = Pipeline::new(Settings::default());
    round(&mut pipe, &r, 1, false);
    // Bridged (to B's MAC rather than the gateway's): refused, counted.
    let f = packet(5, false, fn_mac(1, 2), B_MAC);
    assert!(pass(&mut pipe, &r, right(1), &[f]).is_empty());
    assert_eq!(
        pipe.cx.drops[usize::from(DropReason::from(Reason::ChainUnplaced).0)],
        1
    );
}

/// Runs the pipeline at `at` ns with `frames` received on their ports; returns what it
/// sent (interface, frame).
fn run_at(
    pipe: &mut Pipeline,
    r: &TablesReader,
    at: u64,
    frames: &[(InterfaceId, Vec<u8>)],
) -> Vec<(InterfaceId, Vec<u8>)> {
    let g = r.enter().unwrap();
    pipe.cx.now = at;
    for (rx, f) in frames {
        pipe.receive(&g, *rx, [f.as_slice()]);
    }
    pipe.run(&g);
    let mut out = Vec::new();
    pipe.drain_tx(|iface, bytes| out.push((iface, bytes.to_vec())));
    out.sort();
    out
}

/// Every side of both instances: (port, instance, side).
fn sides() -> [(InterfaceId, u32, u8); 4] {
    [
        (left(1), 1, 1),
        (right(1), 1, 2),
        (left(2), 2, 1),
        (right(2), 2, 2),
    ]
}

/// The function's ARP reply to a probe of instance n's side.
fn arp_answer(n: u32, side: u8) -> Vec<u8> {
    let t = target(n, side);
    let mut f = vec![0u8; 42];
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    eth.set_dst(DEFAULT_ROUTER_MAC);
    eth.set_src(fn_mac(n, side));
    eth.set_ethertype(ethertype::ARP);
    ArpRepr {
        operation: ArpOp::Reply,
        sender_mac: fn_mac(n, side),
        sender_ip: t.to,
        target_mac: DEFAULT_ROUTER_MAC,
        target_ip: t.from,
    }
    .emit(&mut f[14..]);
    f
}

/// What ovrd's health thread does: each port's probe into the tables.
fn follow_probes(w: &mut TablesWriter, pipe: &Pipeline) {
    let ops = sides()
        .iter()
        .map(|&(port, _, _)| TableOp::SetPortHealth {
            interface: port,
            up: pipe.cx.probes.book.ok(port),
        })
        .collect();
    w.commit(ops).unwrap();
}

fn total_drops(pipe: &Pipeline) -> u64 {
    pipe.cx.drops.iter().sum()
}

const MS: u64 = 1_000_000;

#[test]
fn arp_probes_go_out_of_every_side_and_an_instance_that_stops_answering_leaves() {
    let probe = Probe {
        kind: ProbeKind::Arp,
        interval_ms: 100,
        failures: 3,
    };
    let (mut w, r) = setup_probed(probe);
    let mut pipe = Pipeline::new(Settings::default());
    // One probe out of each side: from the gateway to the function's MAC, asking for
    // its address.
    let sent = run_at(&mut pipe, &r, MS, &[]);
    assert_eq!(sent.len(), 4);
    for ((port, bytes), (side_port, n, side)) in sent.iter().zip(sides()) {
        assert_eq!(*port, side_port);
        let eth = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            (eth.dst(), eth.src(), eth.ethertype()),
            (fn_mac(n, side), DEFAULT_ROUTER_MAC, ethertype::ARP)
        );
        let a = ArpRepr::parse(&ArpPacket::new_checked(&bytes[14..]).unwrap());
        assert_eq!(a.operation, ArpOp::Request);
        assert_eq!(
            (a.sender_mac, a.sender_ip, a.target_ip),
            (DEFAULT_ROUTER_MAC, target(n, side).from, target(n, side).to)
        );
    }
    // Answered: taken as the answers (nothing sent, nothing dropped), none due yet.
    let answers: Vec<_> = sides()
        .iter()
        .map(|&(p, n, s)| (p, arp_answer(n, s)))
        .collect();
    let drops = total_drops(&pipe);
    assert!(run_at(&mut pipe, &r, 2 * MS, &answers).is_empty());
    assert_eq!(total_drops(&pipe), drops);
    for (p, _, _) in sides() {
        let b = pipe.cx.probes.book.get(p).unwrap();
        assert_eq!((b.kind, b.sent, b.answered), ("arp", 1, 1));
        assert_eq!(b.last_answer_ns, Some(2 * MS));
    }
    // Every 100 ms a probe; fw-2's left stops answering: after 3 missed it is down.
    for k in 1..=4u64 {
        let at = MS + k * 100 * MS;
        assert_eq!(run_at(&mut pipe, &r, at, &[]).len(), 4, "probes at {k}");
        let answered: Vec<_> = answers
            .iter()
            .filter(|(p, _)| *p != left(2))
            .cloned()
            .collect();
        run_at(&mut pipe, &r, at + MS, &answered);
        let b = pipe.cx.probes.book.get(left(2)).unwrap();
        assert_eq!(b.missed(), k as u32 - 1);
        assert_eq!(pipe.cx.probes.book.ok(left(2)), k < 4, "after {k} probes");
        assert!(pipe.cx.probes.book.ok(right(2)));
    }
    // Down like a link: fw-2 leaves, every session goes through fw-1.
    follow_probes(&mut w, &pipe);
    assert!(!r.enter().unwrap().chains().healthy(ChainId(0), 0, 1));
    assert!(round(&mut pipe, &r, 32, false).iter().all(|k| *k == 1));
    // One answer brings it back.
    let at = pipe.cx.now + MS;
    run_at(&mut pipe, &r, at, &[(left(2), arp_answer(2, 1))]);
    assert!(pipe.cx.probes.book.ok(left(2)));
    follow_probes(&mut w, &pipe);
    assert!(r.enter().unwrap().chains().healthy(ChainId(0), 0, 1));
}

/// The function's echo reply to an ICMP probe of instance n's side, with identifier
/// `ident`.
fn echo_answer(n: u32, side: u8, ident: u16, seq: u16) -> Vec<u8> {
    let t = target(n, side);
    let icmp = Icmpv4Repr::EchoReply {
        ident,
        seq,
        data: b"ovrprobe",
    };
    let ip = Ipv4Repr {
        src: t.to,
        dst: t.from,
        protocol: 1,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 1,
        dont_frag: false,
        payload_len: icmp.buffer_len() as u16,
    };
    let mut f = vec![0u8; 14 + 20 + icmp.buffer_len()];
    let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
    eth.set_dst(DEFAULT_ROUTER_MAC);
    eth.set_src(fn_mac(n, side));
    eth.set_ethertype(ethertype::IPV4);
    ip.emit(&mut f[14..]);
    icmp.emit(&mut f[34..]);
    f
}

#[test]
fn icmp_probes_are_echo_requests_and_only_ovrs_echo_replies_answer_them() {
    let probe = Probe {
        kind: ProbeKind::Icmp,
        interval_ms: 100,
        failures: 3,
    };
    let (_w, r) = setup_probed(probe);
    let mut pipe = Pipeline::new(Settings::default());
    let sent = run_at(&mut pipe, &r, MS, &[]);
    assert_eq!(sent.len(), 4);
    let (port, bytes) = &sent[0];
    assert_eq!(*port, left(1));
    let ip = Ipv4Packet::new_checked(&bytes[14..]).unwrap();
    assert_eq!((ip.src(), ip.dst()), (target(1, 1).from, target(1, 1).to));
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    let Icmpv4Repr::EchoRequest { ident, seq, .. } = Icmpv4Repr::parse(&icmp).unwrap() else {
        panic!("not an echo request");
    };
    // Another program's echo reply to the gateway is no answer (the gateway refuses it).
    let drops = total_drops(&pipe);
    run_at(
        &mut pipe,
        &r,
        2 * MS,
        &[(left(1), echo_answer(1, 1, 77, seq))],
    );
    assert_eq!(total_drops(&pipe), drops + 1);
    assert_eq!(pipe.cx.probes.book.get(left(1)).unwrap().answered, 0);
    // The function's answer is taken: nothing sent back, nothing dropped.
    let out = run_at(
        &mut pipe,
        &r,
        3 * MS,
        &[(left(1), echo_answer(1, 1, ident, seq))],
    );
    assert!(out.is_empty());
    assert_eq!(total_drops(&pipe), drops + 1);
    assert_eq!(pipe.cx.probes.book.get(left(1)).unwrap().answered, 1);
    // From the wrong side's address: not an answer there.
    run_at(
        &mut pipe,
        &r,
        4 * MS,
        &[(right(1), echo_answer(1, 1, ident, seq))],
    );
    assert_eq!(pipe.cx.probes.book.get(right(1)).unwrap().answered, 0);
}
