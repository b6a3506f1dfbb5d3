//! Service chains through the pipeline, with the test playing the network function: what
//! ovr sends into an instance's left comes back out of its right with the function's
//! MACs (an in-network function routes), and replies the other way. Checks that
//! sessions spread over instances, that each reply goes back into the instance its
//! session went through (the two directions' hashes differ), that an instance whose
//! port goes down gives up its sessions and only those, and that with none left the
//! chain drops, counted as chain_no_instance.

mod common;

use ovr_dataplane::{DropReason, Pipeline, Reason, Settings};
use ovr_tables::chain::{Chain, ChainId, Function, FunctionMode, Instance};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceKind};
use ovr_tables::nexthop::NextHop;
use ovr_tables::policy::{Policy, PolicyAction, PolicyRule};
use ovr_tables::state::{TableOp, TablesReader, TablesWriter, new_tables};
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::ethernet::{EthernetFrame, MacAddr};
use ovr_wire::ipv4::Ipv4Packet;
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
            instances,
        }],
    }])));
    let rule = PolicyRule {
        dst_net: Some(BLUE),
        ..PolicyRule::matching_all(PolicyAction::Chain(ChainId(0)))
    };
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
