//! A service chain whose instance runs on a third host, seen from the destination's host
//! (Hb, VTEP 192.0.2.2): a's request (network A on Ha, 192.0.2.1) went through the
//! instance on Hi (192.0.2.3), which sent it on to Hb in B's VNI. b's reply must go back
//! to Hi (where the pair out of the instance sends it into the instance), not to Ha as
//! the route in B says, or it bypasses the function. Checks that the reverse flow goes
//! back to the sender when the sender runs an instance, keeps doing so when its decision
//! is taken again, and that everything else (a sender with no instance, a sender the
//! route leads to anyway, the instance gone) is routed as before.

mod common;

use ovr_dataplane::{Pipeline, Settings};
use ovr_tables::chain::{Chain, ChainId, Function, FunctionMode, Instance};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::InterfaceKind;
use ovr_tables::nexthop::{Encap, NextHop, Tunnel};
use ovr_tables::policy::{Policy, PolicyAction, PolicyRule};
use ovr_tables::state::{TableOp, TablesReader, TablesWriter, new_tables};
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::ethernet::{EthernetRepr, MacAddr, ethertype};
use ovr_wire::ip_proto;
use ovr_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use ovr_wire::udp::UdpRepr;
use ovr_wire::vxlan::{VxlanPacket, VxlanRepr};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

const NET_A: VrfId = VrfId(1);
const NET_B: VrfId = VrfId(2);
const SVC: VrfId = VrfId(3);
const VNI_B: u32 = 200;
const UPLINK: InterfaceId = InterfaceId(0);
const UPLINK_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x0b]);
const WB: InterfaceId = InterfaceId(1);
const B_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 2]);
const A: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const B: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 9);
const HB: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// The source's host, the instance's host, a host with no instance, and the host of a
/// second instance (in the chain in `setup_two`).
const HA: u8 = 1;
const HI: u8 = 3;
const HX: u8 = 4;
const HJ: u8 = 5;

fn vtep(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, last)
}

fn tunnel(id: u32, vni: u32, last: u8, inner_dst: Option<MacAddr>) -> TableOp {
    TableOp::UpsertNextHop(
        NextHopId(id),
        NextHop::Tunnel(Tunnel {
            encap: Encap::Vxlan { vni },
            underlay: UPLINK,
            src: IpAddr::V4(HB),
            dst: IpAddr::V4(vtep(last)),
            dst_mac: MacAddr([2, 0, 0, 0, 0, last]),
            inner_dst,
        }),
    )
}

/// The chain with the instance on Hi (or none).
fn chains(instance: bool) -> TableOp {
    chain_on(if instance { &[HI] } else { &[] })
}

/// The chain with an instance on each of `hosts` (Hi, Hj), whose sides' next hops are
/// 30/31 on Hi and 32/33 on Hj.
fn chain_on(hosts: &[u8]) -> TableOp {
    let instances = hosts
        .iter()
        .map(|&h| {
            let nh = if h == HI { 30 } else { 32 };
            Instance {
                name: format!("fw-h{h}"),
                left: None,
                right: None,
                left_nh: NextHopId(nh),
                right_nh: NextHopId(nh + 1),
                left_probe: None,
                right_probe: None,
            }
        })
        .collect();
    TableOp::SetChains(Arc::new(vec![Chain {
        id: ChainId(0),
        name: "through-fw".into(),
        from: Some(NET_A),
        functions: vec![Function {
            name: "fw".into(),
            mode: FunctionMode::InNetwork,
            probe: Default::default(),
            instances,
        }],
    }]))
}

fn setup() -> (TablesWriter, TablesReader) {
    let (mut w, r) = new_tables();
    let mut ops = vec![];
    for (id, name, vni) in [(NET_A, "a", 100), (NET_B, "b", VNI_B), (SVC, "svc", 300)] {
        ops.push(TableOp::UpsertVrf {
            id,
            name: name.into(),
            vni: Some(vni),
        });
    }
    let iface = |id: InterfaceId, kind, vrf, mac, addr| {
        common::interface(id, &format!("if{}", id.0), kind, vrf, mac, addr)
    };
    ops.extend([
        iface(UPLINK, InterfaceKind::Underlay, None, UPLINK_MAC, Some(HB)),
        iface(
            WB,
            InterfaceKind::Workload,
            Some(NET_B),
            DEFAULT_ROUTER_MAC,
            None,
        ),
        TableOp::UpsertNextHop(
            NextHopId(2),
            NextHop::Interface {
                interface: WB,
                dst_mac: B_MAC,
            },
        ),
        // The routed next hops to each host in B, and the instance's sides on Hi.
        tunnel(20, VNI_B, HA, None),
        tunnel(21, VNI_B, HI, None),
        tunnel(22, VNI_B, HX, None),
        tunnel(23, VNI_B, HJ, None),
        tunnel(30, 300, HI, Some(MacAddr([2, 0, 0, 0xf, 1, 1]))),
        tunnel(31, 300, HI, Some(MacAddr([2, 0, 0, 0xf, 1, 2]))),
        tunnel(32, 300, HJ, Some(MacAddr([2, 0, 0, 0xf, 2, 1]))),
        tunnel(33, 300, HJ, Some(MacAddr([2, 0, 0, 0xf, 2, 2]))),
        chains(true),
    ]);
    // b here; in B, a leaked host route to a's host (the chain's routes).
    for (vrf, prefix, nh) in [
        (NET_B, "10.2.0.9/32", 2),
        (NET_B, "10.1.0.5/32", 20),
        (NET_A, "10.2.0.9/32", 2),
    ] {
        ops.push(TableOp::AddRoute {
            vrf,
            prefix: prefix.parse().unwrap(),
            nh: NextHopId(nh),
        });
    }
    let rule = PolicyRule {
        dst_net: Some(NET_B),
        ..PolicyRule::matching_all(PolicyAction::Chain(ChainId(0)))
    };
    ops.push(TableOp::SetPolicy {
        vrf: NET_A,
        policy: Arc::new(Policy::new(vec![rule]).unwrap()),
    });
    w.commit(ops).unwrap();
    (w, r)
}

/// An inner UDP packet of session `i` (a → b, or b → a for `reply`).
fn inner(i: u16, reply: bool, src_mac: MacAddr) -> Vec<u8> {
    let (ips, ports) = if reply {
        ((B, A), (7, 1000 + i))
    } else {
        ((A, B), (1000 + i, 7))
    };
    common::udp_frame((src_mac, DEFAULT_ROUTER_MAC), ips, ports, i)
}

/// `frame` in VXLAN (VNI of B) from host `last` to Hb.
fn from_host(last: u8, frame: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 8];
    EthernetRepr {
        dst: UPLINK_MAC,
        src: MacAddr([2, 0, 0, 0, 0, last]),
        tags: [None, None],
        ethertype: ethertype::IPV4,
    }
    .emit(&mut f);
    Ipv4Repr {
        src: vtep(last),
        dst: HB,
        protocol: ip_proto::UDP,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: false,
        payload_len: (8 + 8 + frame.len()) as u16,
    }
    .emit(&mut f[14..]);
    UdpRepr {
        src_port: 50000,
        dst_port: 4789,
        payload_len: (8 + frame.len()) as u16,
    }
    .emit(&mut f[34..]);
    VxlanRepr { vni: VNI_B }.emit(&mut f[42..]);
    f.extend_from_slice(frame);
    f
}

/// Where a frame received on `rx` went: `Ok(interface)` for a local delivery,
/// `Err((VTEP's last byte, VNI))` for a tunnel.
fn pass(
    pipe: &mut Pipeline,
    r: &TablesReader,
    rx: InterfaceId,
    frame: &[u8],
) -> Vec<Result<InterfaceId, (u8, u32)>> {
    let g = r.enter().unwrap();
    pipe.cx.now += 1_000_000;
    pipe.receive(&g, rx, [frame]);
    pipe.run(&g);
    let mut out = Vec::new();
    pipe.drain_tx(|iface, bytes| {
        if iface == UPLINK {
            let outer = Ipv4Packet::new_checked(&bytes[14..]).unwrap();
            let vni = VxlanPacket::new_checked(&bytes[42..]).unwrap().vni();
            out.push(Err((outer.dst().octets()[3], vni)));
        } else {
            out.push(Ok(iface));
        }
    });
    out
}

/// Session `i`'s request from host `sender`, then b's reply: where the reply goes.
fn session(
    pipe: &mut Pipeline,
    r: &TablesReader,
    i: u16,
    sender: u8,
) -> Vec<Result<InterfaceId, (u8, u32)>> {
    assert_eq!(
        request(pipe, r, i, sender),
        vec![Ok(WB)],
        "request {i} reaches b"
    );
    reply(pipe, r, i)
}

#[test]
fn a_reply_goes_back_to_the_host_of_the_instance_its_request_came_through() {
    let (_w, r) = setup();
    let mut pipe = Pipeline::new(Settings::default());
    pipe.graph_mut().trace_mut().add(1);
    assert_eq!(session(&mut pipe, &r, 1, HI), vec![Err((HI, VNI_B))]);
    // The request's trace says where the replies go.
    let t = pipe.graph().trace();
    let setup = t
        .steps_of(1)
        .find(|s| s.node == "flow-setup")
        .and_then(|s| s.detail.clone())
        .unwrap();
    assert!(
        setup.contains("with its reverse (back to the instance's host it came from)"),
        "{setup}"
    );
    // Later replies hit the reverse flow: the same way.
    assert_eq!(
        pass(&mut pipe, &r, WB, &inner(1, true, B_MAC)),
        vec![Err((HI, VNI_B))]
    );
}

#[test]
fn other_senders_are_routed_as_before() {
    let (_w, r) = setup();
    let mut pipe = Pipeline::new(Settings::default());
    // From the source's own host (the instance was there or on this host).
    assert_eq!(session(&mut pipe, &r, 2, HA), vec![Err((HA, VNI_B))]);
    // From a host that runs no instance.
    assert_eq!(session(&mut pipe, &r, 3, HX), vec![Err((HA, VNI_B))]);
}

#[test]
fn the_reply_keeps_its_way_back_while_the_instance_is_there_and_is_routed_once_it_is_gone() {
    let (mut w, r) = setup();
    let mut pipe = Pipeline::new(Settings::default());
    assert_eq!(session(&mut pipe, &r, 4, HI), vec![Err((HI, VNI_B))]);
    // An unrelated change: the cached decision is taken again, and stays.
    w.commit(vec![TableOp::AddRoute {
        vrf: NET_B,
        prefix: "10.2.7.0/24".parse().unwrap(),
        nh: NextHopId(2),
    }])
    .unwrap();
    assert_eq!(
        pass(&mut pipe, &r, WB, &inner(4, true, B_MAC)),
        vec![Err((HI, VNI_B))]
    );
    // The instance leaves: the reply goes where the route says.
    w.commit(vec![chains(false)]).unwrap();
    assert_eq!(
        pass(&mut pipe, &r, WB, &inner(4, true, B_MAC)),
        vec![Err((HA, VNI_B))]
    );
}

/// `frame` from host `sender`: where it went (one packet of a session going on).
fn request(
    pipe: &mut Pipeline,
    r: &TablesReader,
    i: u16,
    sender: u8,
) -> Vec<Result<InterfaceId, (u8, u32)>> {
    let req = from_host(sender, &inner(i, false, MacAddr([2, 0, 0, 0, 9, sender])));
    pass(pipe, r, UPLINK, &req)
}

fn reply(pipe: &mut Pipeline, r: &TablesReader, i: u16) -> Vec<Result<InterfaceId, (u8, u32)>> {
    pass(pipe, r, WB, &inner(i, true, B_MAC))
}

/// The instance a session went through fails over to one on another host: the
/// session's next requests come from that host, and its replies must follow them there
/// (that host now holds the pair out of the instance), whether this host has heard of
/// the failure yet or not, and whether the first instance ran on a third host or on the
/// source's own.
#[test]
fn a_moved_session_s_replies_follow_it_to_the_host_of_its_new_instance() {
    for one_pass in [true, false] {
        for heard in [false, true] {
            let (mut w, r) = setup();
            w.commit(vec![chain_on(&[HI, HJ])]).unwrap();
            let mut pipe = Pipeline::new(Settings {
                established_path: one_pass,
                ..Settings::default()
            });
            let case = format!("one pass {one_pass}, failure heard here {heard}");
            // Through Hi, then Hi's instance goes and the session moves to Hj.
            assert_eq!(
                session(&mut pipe, &r, 5, HI),
                vec![Err((HI, VNI_B))],
                "{case}"
            );
            assert_eq!(reply(&mut pipe, &r, 5), vec![Err((HI, VNI_B))], "{case}");
            if heard {
                w.commit(vec![chain_on(&[HJ])]).unwrap();
            }
            assert_eq!(request(&mut pipe, &r, 5, HJ), vec![Ok(WB)], "{case}");
            for n in 0..3 {
                assert_eq!(
                    reply(&mut pipe, &r, 5),
                    vec![Err((HJ, VNI_B))],
                    "{case}: reply {n} after the move"
                );
            }
            // Through the source's own host (its instance was there), then to Hj.
            assert_eq!(
                session(&mut pipe, &r, 6, HA),
                vec![Err((HA, VNI_B))],
                "{case}"
            );
            assert_eq!(request(&mut pipe, &r, 6, HJ), vec![Ok(WB)], "{case}");
            assert_eq!(reply(&mut pipe, &r, 6), vec![Err((HJ, VNI_B))], "{case}");
            // And back to the source's host: the route's way back again.
            assert_eq!(request(&mut pipe, &r, 6, HA), vec![Ok(WB)], "{case}");
            assert_eq!(reply(&mut pipe, &r, 6), vec![Err((HA, VNI_B))], "{case}");
            // A host that runs no instance sending a session's packets on does not
            // draw its replies.
            assert_eq!(request(&mut pipe, &r, 6, HX), vec![Ok(WB)], "{case}");
            assert_eq!(reply(&mut pipe, &r, 6), vec![Err((HA, VNI_B))], "{case}");
        }
    }
}
