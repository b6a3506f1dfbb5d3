//! Chains of two functions or more whose instances run on several hosts, each host its
//! own pipeline, the test carrying VXLAN packets between them and playing the functions
//! (an in-network function routes: what goes into its left comes out of its right with
//! its MACs, and back). a (network A) is on h1, b (network B) on h2; every session's
//! request crosses one instance of each function, picked by hash on the host it passes,
//! and its reply must cross the same instances, in reverse order, whatever the reply's
//! own hashes say, however often the session leaves a host and comes back to it.

mod common;

use ovr_dataplane::{Pipeline, Settings};
use ovr_tables::chain::{Chain, ChainId, Function, FunctionMode, Instance};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::InterfaceKind;
use ovr_tables::nexthop::{Encap, NextHop, Tunnel};
use ovr_tables::policy::{Policy, PolicyAction, PolicyRule};
use ovr_tables::state::{TableOp, TablesReader, TablesWriter, new_tables};
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::ethernet::{EthernetFrame, MacAddr};
use ovr_wire::ipv4::Ipv4Packet;
use std::collections::{BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

const NET_A: VrfId = VrfId(1);
const NET_B: VrfId = VrfId(2);
const SVC: VrfId = VrfId(3);
const VNI_A: u32 = 100;
const VNI_B: u32 = 200;
const VNI_SVC: u32 = 300;
const UPLINK: InterfaceId = InterfaceId(0);
/// a's port on h1, b's on h2.
const WORKLOAD: InterfaceId = InterfaceId(1);
const A_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0xa, 2]);
const B_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 2]);
const A: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const B: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 9);
const A_HOST: u8 = 1;
const B_HOST: u8 = 2;

fn vtep(h: u8) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, h)
}
fn uplink_mac(h: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, 0, h])
}
/// Function `f`'s (1-based) port on side `s` (0 left, 1 right), on the host that runs
/// an instance of it.
fn port(f: u8, s: u8) -> InterfaceId {
    InterfaceId(u32::from(2 * f + s))
}
/// The MAC of instance (function `f`, host `h`) on side `s`.
fn fn_mac(f: u8, h: u8, s: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0xf, 16 * f + h, s])
}
/// Next hops: the routed tunnel to host `h` in A or B, and an instance's side.
fn routed_nh(vni: u32, h: u8) -> NextHopId {
    NextHopId(vni / 10 + u32::from(h))
}
fn instance_nh(f: u8, h: u8, s: u8) -> NextHopId {
    NextHopId(1000 + 100 * u32::from(f) + 2 * u32::from(h) + u32::from(s))
}

struct Host {
    w: TablesWriter,
    r: TablesReader,
    pipe: Pipeline,
    /// Every frame the host sent, in order: (interface, bytes).
    sent: Vec<(InterfaceId, Vec<u8>)>,
}

/// Where the instances run: function f (1-based) has one on each host of
/// `placement[f - 1]`.
type Placement<'a> = &'a [&'a [u8]];

/// Host `me`'s tables, in a cluster of `hosts` hosts.
fn host_tables(me: u8, hosts: u8, placement: Placement) -> Vec<TableOp> {
    let mut ops = vec![];
    for (id, name, vni) in [
        (NET_A, "a", VNI_A),
        (NET_B, "b", VNI_B),
        (SVC, "svc", VNI_SVC),
    ] {
        ops.push(TableOp::UpsertVrf {
            id,
            name: name.into(),
            vni: Some(vni),
        });
    }
    let iface = |id: InterfaceId, kind, vrf, mac, addr| {
        common::interface(id, &format!("if{}", id.0), kind, vrf, mac, addr)
    };
    ops.push(iface(
        UPLINK,
        InterfaceKind::Underlay,
        None,
        uplink_mac(me),
        Some(vtep(me)),
    ));
    let tunnel = |vni, h: u8, inner_dst| {
        NextHop::Tunnel(Tunnel {
            encap: Encap::Vxlan { vni },
            underlay: UPLINK,
            src: IpAddr::V4(vtep(me)),
            dst: IpAddr::V4(vtep(h)),
            dst_mac: uplink_mac(h),
            inner_dst,
        })
    };
    for h in (1..=hosts).filter(|&h| h != me) {
        for vni in [VNI_A, VNI_B] {
            ops.push(TableOp::UpsertNextHop(
                routed_nh(vni, h),
                tunnel(vni, h, None),
            ));
        }
    }
    // The workloads, their networks' routes, and the chain's leaked host routes (other
    // hosts' endpoints by the routed next hop in B's VNI, as the cluster installs them).
    let workload = match me {
        A_HOST => Some((NET_A, A_MAC)),
        B_HOST => Some((NET_B, B_MAC)),
        _ => None,
    };
    if let Some((vrf, mac)) = workload {
        ops.push(iface(
            WORKLOAD,
            InterfaceKind::Workload,
            Some(vrf),
            DEFAULT_ROUTER_MAC,
            None,
        ));
        ops.push(TableOp::UpsertNextHop(
            NextHopId(2),
            NextHop::Interface {
                interface: WORKLOAD,
                dst_mac: mac,
            },
        ));
    }
    for (addr, net, at) in [(A, NET_A, A_HOST), (B, NET_B, B_HOST)] {
        for (vrf, vni) in [(NET_A, VNI_A), (NET_B, VNI_B)] {
            let nh = match (at == me, vrf == net) {
                (true, _) => NextHopId(2),
                (false, true) => routed_nh(vni, at),
                (false, false) => routed_nh(VNI_B, at),
            };
            ops.push(TableOp::AddRoute {
                vrf,
                prefix: format!("{addr}/32").parse().unwrap(),
                nh,
            });
        }
    }
    // The instances: local ports bridged in svc, or a tunnel to their host.
    for (f, on) in (1..).zip(placement) {
        for &h in *on {
            for s in 0..2 {
                let nh = if h == me {
                    ops.push(iface(
                        port(f, s),
                        InterfaceKind::Workload,
                        Some(SVC),
                        MacAddr([2, 0, 0, 0xe, f, s]),
                        None,
                    ));
                    ops.push(TableOp::AddBridge {
                        vrf: SVC,
                        mac: fn_mac(f, h, s),
                        nh: instance_nh(f, h, s),
                    });
                    NextHop::Interface {
                        interface: port(f, s),
                        dst_mac: fn_mac(f, h, s),
                    }
                } else {
                    tunnel(VNI_SVC, h, Some(fn_mac(f, h, s)))
                };
                // (The next hop before the bridge entry that uses it.)
                let at = ops.len() - usize::from(h == me);
                ops.insert(at, TableOp::UpsertNextHop(instance_nh(f, h, s), nh));
            }
        }
    }
    ops.push(chain_on(me, placement));
    let rule = PolicyRule {
        dst_net: Some(NET_B),
        ..PolicyRule::matching_all(PolicyAction::Chain(ChainId(0)))
    };
    ops.push(TableOp::SetPolicy {
        vrf: NET_A,
        policy: Arc::new(Policy::new(vec![rule]).unwrap()),
    });
    ops
}

/// The chain as host `me` sees it.
fn chain_on(me: u8, placement: Placement) -> TableOp {
    let functions = (1..)
        .zip(placement)
        .map(|(f, on)| Function {
            name: format!("f{f}"),
            mode: FunctionMode::InNetwork,
            probe: Default::default(),
            instances: on
                .iter()
                .map(|&h| Instance {
                    name: format!("f{f}-h{h}"),
                    left: (h == me).then_some(port(f, 0)),
                    right: (h == me).then_some(port(f, 1)),
                    left_nh: instance_nh(f, h, 0),
                    right_nh: instance_nh(f, h, 1),
                    left_probe: None,
                    right_probe: None,
                })
                .collect(),
        })
        .collect();
    TableOp::SetChains(Arc::new(vec![Chain {
        id: ChainId(0),
        name: "through-functions".into(),
        from: Some(NET_A),
        functions,
    }]))
}

fn cluster(hosts: u8, placement: Placement) -> Vec<Host> {
    cluster_with(hosts, placement, Settings::default())
}

fn cluster_with(hosts: u8, placement: Placement, settings: Settings) -> Vec<Host> {
    (1..=hosts)
        .map(|me| {
            let (mut w, r) = new_tables();
            w.commit(host_tables(me, hosts, placement)).unwrap();
            Host {
                w,
                r,
                pipe: Pipeline::new(settings),
                sent: vec![],
            }
        })
        .collect()
}

/// One pass of an instance: (function, host).
type Pass = (u8, u8);

/// The addresses and ports a frame must keep all the way: (src, dst, src port, dst port).
type Tuple = (Ipv4Addr, Ipv4Addr, u16, u16);

/// Carries `frame`, received on host `h`'s `rx`, through the cluster until it reaches a
/// workload: returns the workload's host and the instances it passed. Every frame handed
/// to a function or a workload is checked field by field: addressed to its MAC, from
/// ovr's, with the session's addresses and ports, its TTL down by one per pass through
/// ovr (once per host it is routed on, not per tunnel).
fn carry(cluster: &mut [Host], h: u8, rx: InterfaceId, frame: Vec<u8>) -> (u8, Vec<Pass>) {
    let tuple = tuple_of(&frame);
    let mut queue = VecDeque::from([(h, rx, frame)]);
    let mut passes = vec![];
    let mut delivered = vec![];
    let mut steps = 0;
    while let Some((h, rx, frame)) = queue.pop_front() {
        steps += 1;
        assert!(steps < 64, "looping: {passes:?}");
        let host = &mut cluster[usize::from(h - 1)];
        let g = host.r.enter().unwrap();
        host.pipe.cx.now += 1_000_000;
        host.pipe.receive(&g, rx, [&frame[..]]);
        host.pipe.run(&g);
        let mut out = vec![];
        host.pipe
            .drain_tx(|iface, bytes| out.push((iface, bytes.to_vec())));
        assert!(!out.is_empty(), "dropped on h{h} after {passes:?}");
        host.sent.extend(out.iter().cloned());
        for (iface, mut bytes) in out {
            if iface == UPLINK {
                let to = Ipv4Packet::new_checked(&bytes[14..])
                    .unwrap()
                    .dst()
                    .octets()[3];
                queue.push_back((to, UPLINK, bytes));
                continue;
            }
            assert_eq!(tuple_of(&bytes), tuple, "h{h}: the session's frame");
            // a's TTL 64: one less per pass through ovr (into the first function, out
            // of each function).
            let ttl = Ipv4Packet::new_checked(&bytes[14..]).unwrap().ttl();
            assert_eq!(
                usize::from(64 - ttl),
                passes.len() + 1,
                "h{h}: TTL after {passes:?}"
            );
            let eth = EthernetFrame::new_checked(&bytes[..]).unwrap();
            if iface == WORKLOAD {
                let mac = if h == A_HOST { A_MAC } else { B_MAC };
                assert_eq!(eth.dst(), mac, "h{h}: to the workload's MAC");
                assert_eq!(eth.src(), DEFAULT_ROUTER_MAC, "h{h}: from the gateway");
                delivered.push(h);
                continue;
            }
            // Into a function's side: it routes the packet out of its other side.
            let (f, s) = ((iface.0 / 2) as u8, (iface.0 % 2) as u8);
            assert_eq!(eth.dst(), fn_mac(f, h, s), "h{h}: to f{f}'s MAC, side {s}");
            passes.push((f, h));
            let mut eth = EthernetFrame::new_unchecked(&mut bytes[..]);
            eth.set_src(fn_mac(f, h, 1 - s));
            eth.set_dst(DEFAULT_ROUTER_MAC);
            queue.push_back((h, port(f, 1 - s), bytes));
        }
    }
    assert_eq!(delivered.len(), 1, "delivered once: {passes:?}");
    (delivered[0], passes)
}

fn tuple_of(frame: &[u8]) -> Tuple {
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    let port = |o: usize| u16::from_be_bytes([frame[34 + o], frame[35 + o]]);
    (ip.src(), ip.dst(), port(0), port(2))
}

/// Sessions between a and b through the chain: each request crosses every function in
/// order, each reply the instances its request passed, in reverse order. Returns the
/// instances the requests used.
fn sessions(cluster: &mut [Host], n: u16) -> BTreeSet<Pass> {
    let functions = {
        let g = cluster[0].r.enter().unwrap();
        g.chains().chain(ChainId(0)).unwrap().functions.len() as u8
    };
    let mut used = BTreeSet::new();
    for i in 0..n {
        // Ports spread over their range, so that the hashes of the passes vary.
        let port = 1024 + (u32::from(i).wrapping_mul(40_503) % 60_000) as u16;
        let req = common::udp_frame((A_MAC, DEFAULT_ROUTER_MAC), (A, B), (port, 7), i);
        let (to, there) = carry(cluster, A_HOST, WORKLOAD, req);
        assert_eq!(to, B_HOST, "session {i}: request reaches b");
        assert_eq!(
            there.iter().map(|p| p.0).collect::<Vec<_>>(),
            (1..=functions).collect::<Vec<_>>(),
            "session {i}: the request crosses the functions in order"
        );
        for k in 0..2 {
            let reply = common::udp_frame((B_MAC, DEFAULT_ROUTER_MAC), (B, A), (7, port), i);
            let (to, back) = carry(cluster, B_HOST, WORKLOAD, reply);
            assert_eq!(to, A_HOST, "session {i}: reply {k} reaches a");
            let expected: Vec<Pass> = there.iter().rev().copied().collect();
            assert_eq!(
                back, expected,
                "session {i}: reply {k} passes the request's instances {there:?}"
            );
        }
        // And the session goes on: a request again, the same way.
        let req = common::udp_frame((A_MAC, DEFAULT_ROUTER_MAC), (A, B), (port, 7), i);
        assert_eq!(
            carry(cluster, A_HOST, WORKLOAD, req),
            (B_HOST, there.clone()),
            "session {i}: its next request"
        );
        used.extend(there);
    }
    used
}

#[test]
fn replies_cross_the_instances_of_their_requests_on_two_hosts() {
    let mut c = cluster(2, &[&[1, 2], &[1, 2]]);
    let used = sessions(&mut c, 200);
    // Sessions spread over every instance of both functions.
    assert_eq!(used.len(), 4, "{used:?}");
}

#[test]
fn replies_cross_the_instances_of_their_requests_on_three_hosts() {
    // Instances on the source's host, the destination's, and a third.
    let mut c = cluster(3, &[&[1, 2, 3], &[1, 2, 3]]);
    let used = sessions(&mut c, 300);
    assert_eq!(used.len(), 6, "{used:?}");
}

#[test]
fn replies_keep_their_instances_when_the_tables_change() {
    let mut c = cluster(2, &[&[1, 2], &[1, 2]]);
    sessions(&mut c, 50);
    // An unrelated change on every host: cached decisions are taken again.
    for (i, h) in c.iter_mut().enumerate() {
        let other = if i == 0 { 2 } else { 1 };
        h.w.commit(vec![TableOp::AddRoute {
            vrf: NET_B,
            prefix: "10.2.7.0/24".parse().unwrap(),
            nh: routed_nh(VNI_B, other),
        }])
        .unwrap();
    }
    sessions(&mut c, 50);
}

/// A chain of three functions with one instance each, f1 on a's host, f2 on b's, f3 on
/// a's again: the session leaves h1 twice.
#[test]
fn three_functions_back_and_forth_between_two_hosts() {
    let mut c = cluster(2, &[&[1], &[2], &[1]]);
    assert_eq!(sessions(&mut c, 20).len(), 3);
}

/// The entry host's first function runs elsewhere, a later one on it, followed by one
/// elsewhere: the entry's reverse and the later pass's share the key (A, b -> a).
#[test]
fn three_functions_entering_elsewhere_and_coming_back_to_the_entry_host() {
    let mut c = cluster(2, &[&[2], &[1], &[2]]);
    assert_eq!(sessions(&mut c, 20).len(), 3);
    // b's host a third one.
    let mut c = cluster(3, &[&[3], &[1], &[3]]);
    assert_eq!(sessions(&mut c, 20).len(), 3);
}

/// Four functions alternating between the two hosts: each host sends the session to
/// the other twice, and bridges it into a function twice.
#[test]
fn four_functions_alternating_between_two_hosts() {
    let mut c = cluster(2, &[&[1], &[2], &[1], &[2]]);
    assert_eq!(sessions(&mut c, 20).len(), 4);
    let mut c = cluster(2, &[&[2], &[1], &[2], &[1]]);
    assert_eq!(sessions(&mut c, 20).len(), 4);
}

/// Three and four functions with an instance on each of three hosts: sessions spread
/// over every layout, among them every way of leaving a host twice.
#[test]
fn three_and_four_functions_spread_over_three_hosts() {
    let every: &[u8] = &[1, 2, 3];
    let mut c = cluster(3, &[every, every, every]);
    assert_eq!(sessions(&mut c, 300).len(), 9);
    let mut c = cluster(3, &[every, every, every, every]);
    assert_eq!(sessions(&mut c, 300).len(), 12);
}

/// Every host's chain without the instances `gone` ((function, host)): they failed.
fn without(c: &mut [Host], placement: Placement, gone: &[Pass]) {
    let left: Vec<Vec<u8>> = (1..)
        .zip(placement)
        .map(|(f, on)| {
            on.iter()
                .copied()
                .filter(|h| !gone.contains(&(f, *h)))
                .collect()
        })
        .collect();
    let left: Vec<&[u8]> = left.iter().map(Vec::as_slice).collect();
    for (me, h) in (1..).zip(c.iter_mut()) {
        h.w.commit(vec![chain_on(me, &left)]).unwrap();
    }
}

/// Sessions whose first function's instance was on the entry host move to the one on
/// another host, and back: the entry host keeps no reverse of the old pass that the new
/// instance's host's replies would hit (they would be steered into the first function
/// again).
#[test]
fn sessions_moved_off_the_entry_host_s_first_function_are_answered_through_the_new_one() {
    let placement: Placement = &[&[1, 3], &[2]];
    let mut c = cluster(3, placement);
    assert!(sessions(&mut c, 60).contains(&(1, 1)));
    without(&mut c, placement, &[(1, 1)]);
    assert_eq!(sessions(&mut c, 60), BTreeSet::from([(1, 3), (2, 2)]));
    // Back to h1: the destination's host hears each session from another host.
    without(&mut c, placement, &[(1, 3)]);
    assert_eq!(sessions(&mut c, 60), BTreeSet::from([(1, 1), (2, 2)]));
}

/// A middle function's sessions move from one host to another and back: the hosts on
/// either side follow, among them a host the session leaves twice.
#[test]
fn sessions_moved_between_hosts_in_the_middle_of_a_chain_keep_symmetric_replies() {
    let placement: Placement = &[&[1], &[2, 3], &[1], &[2]];
    let mut c = cluster(3, placement);
    assert_eq!(sessions(&mut c, 60).len(), 5);
    without(&mut c, placement, &[(2, 2)]);
    assert_eq!(
        sessions(&mut c, 60),
        BTreeSet::from([(1, 1), (2, 3), (3, 1), (4, 2)])
    );
    without(&mut c, placement, &[(2, 3)]);
    assert_eq!(
        sessions(&mut c, 60),
        BTreeSet::from([(1, 1), (2, 2), (3, 1), (4, 2)])
    );
}

/// The one-pass path sends what the graph sends, byte for byte, for every pass of
/// chains that leave hosts several times (the keys of frames into a function from
/// another host, the function's own MAC on a pass between hosts).
#[test]
fn the_one_pass_path_forwards_chain_passes_between_hosts_as_the_graph_does() {
    let every: &[u8] = &[1, 2, 3];
    for placement in [&[every, every, every, every][..], &[&[2], &[1], &[2]]] {
        let mut fast = cluster(3, placement);
        let graph = Settings {
            established_path: false,
            ..Settings::default()
        };
        let mut slow = cluster_with(3, placement, graph);
        assert_eq!(sessions(&mut fast, 100), sessions(&mut slow, 100));
        for (f, s) in fast.iter().zip(&slow) {
            assert_eq!(f.sent.len(), s.sent.len());
            assert!(f.sent == s.sent, "the same frames out of each host");
        }
        // (The one-pass path did take packets: fewer reached the graph.)
        let graph_packets = |c: &[Host]| -> u64 {
            c.iter()
                .flat_map(|h| h.pipe.graph().stats())
                .filter(|(n, _)| *n == "ethernet-input")
                .map(|(_, s)| s.packets)
                .sum()
        };
        assert!(graph_packets(&fast) < graph_packets(&slow));
    }
}
