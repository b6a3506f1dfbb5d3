//! The one-pass path for established flows (`nodes::established`) forwards exactly as
//! the whole graph does: the same frames out of the same interfaces, the same drops,
//! interface and flow counters, and the same view for the kernel fast path's learning,
//! for any mix of frames (established or not, well-formed or not) and across table
//! changes. Each case runs two pipelines on the same tables, one with the path and one
//! without, and compares everything after every round.

use ovr_dataplane::{Pipeline, Settings};
use ovr_graph::VECTOR_SIZE;
use ovr_tables::chain::{Chain, ChainId, Function, FunctionMode, Instance};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceAddress, InterfaceKind};
use ovr_tables::nexthop::{Encap, NextHop, Tunnel};
use ovr_tables::policy::{Policy, PolicyAction, PolicyRule, PortRange};
use ovr_tables::state::{TableOp, TablesReader, TablesWriter, new_tables};
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::ethernet::MacAddr;
use ovr_wire::ip_proto;
use ovr_wire::ipv4::Ipv4Packet;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

const UPLINK: InterfaceId = InterfaceId(0);
const VM1: InterfaceId = InterfaceId(1);
const VM2: InterfaceId = InterfaceId(2);
const DOWN: InterfaceId = InterfaceId(3);
const SMALL_MTU: InterfaceId = InterfaceId(4);
const RED: VrfId = VrfId(1);
/// A network function's two ports (in the services network), in a chain from red.
const SERVICES: VrfId = VrfId(2);
const FW_LEFT: InterfaceId = InterfaceId(5);
const FW_RIGHT: InterfaceId = InterfaceId(6);
const FW_LEFT_MAC: MacAddr = MacAddr([2, 0, 0, 0xf, 0, 1]);
const FW_RIGHT_MAC: MacAddr = MacAddr([2, 0, 0, 0xf, 0, 2]);

/// Destination MACs of the bridge table, by what their next hop is.
const LOCAL: MacAddr = MacAddr([2, 0, 0, 0, 2, 1]);
const VXLAN4: MacAddr = MacAddr([2, 0, 0, 0, 9, 2]);
const MPLS: MacAddr = MacAddr([2, 0, 0, 0, 9, 3]);
const VXLAN6: MacAddr = MacAddr([2, 0, 0, 0, 9, 4]);
const TO_DOWN: MacAddr = MacAddr([2, 0, 0, 0, 3, 1]);
const TO_SMALL_MTU: MacAddr = MacAddr([2, 0, 0, 0, 4, 1]);
const TO_DROP: MacAddr = MacAddr([2, 0, 0, 0, 9, 9]);
const UNKNOWN: MacAddr = MacAddr([2, 0, 0, 0, 7, 7]);
/// Where a frame may be sent: the bridge entries, the gateway, unknown and broadcast.
const DESTS: [MacAddr; 10] = [
    LOCAL,
    VXLAN4,
    MPLS,
    VXLAN6,
    TO_DOWN,
    TO_SMALL_MTU,
    TO_DROP,
    UNKNOWN,
    DEFAULT_ROUTER_MAC,
    MacAddr::BROADCAST,
];

fn iface(id: InterfaceId, kind: InterfaceKind, mtu: u16, up: bool) -> TableOp {
    TableOp::UpsertInterface(Interface {
        id,
        name: format!("if{}", id.0),
        kind,
        vrf: match (kind, id) {
            (InterfaceKind::Underlay, _) => None,
            (_, FW_LEFT | FW_RIGHT) => Some(SERVICES),
            _ => Some(RED),
        },
        mac: MacAddr([2, 0, 0, 0, 0, id.0 as u8 + 0x10]),
        addresses: (kind == InterfaceKind::Underlay)
            .then(|| InterfaceAddress {
                addr: Ipv4Addr::new(192, 0, 2, 1).into(),
                prefix_len: 24,
            })
            .into_iter()
            .collect(),
        mtu,
        policy: true,
        admin_up: up,
        memif: None,
        police: None,
    })
}

fn tunnel(encap: Encap, src: IpAddr, dst: IpAddr) -> NextHop {
    NextHop::Tunnel(Tunnel {
        encap,
        underlay: UPLINK,
        src,
        dst,
        dst_mac: MacAddr([2, 0, 0, 0, 0, 0x0b]),
        inner_dst: None,
    })
}

fn setup() -> (TablesWriter, TablesReader) {
    let (mut w, r) = new_tables();
    let v4 = |d| IpAddr::V4(Ipv4Addr::new(192, 0, 2, d));
    let v6 = |d| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, d));
    let nh = |i, n| TableOp::UpsertNextHop(NextHopId(i), n);
    let bridge = |mac, i| TableOp::AddBridge {
        vrf: RED,
        mac,
        nh: NextHopId(i),
    };
    let route = |prefix: &str, i| TableOp::AddRoute {
        vrf: RED,
        prefix: prefix.parse().unwrap(),
        nh: NextHopId(i),
    };
    let deny_telnet = PolicyRule {
        protocol: Some(ip_proto::TCP),
        dst_ports: PortRange {
            first: 23,
            last: 23,
        },
        ..PolicyRule::matching_all(PolicyAction::Deny)
    };
    // ICMP to 10.1.0.9 goes through the function (its other traffic there does not).
    let through_chain = PolicyRule {
        dst: "10.1.0.9/32".parse().ok(),
        protocol: Some(ip_proto::ICMP),
        ..PolicyRule::matching_all(PolicyAction::Chain(ChainId(0)))
    };
    let port = |interface, dst_mac| NextHop::Interface { interface, dst_mac };
    w.commit(vec![
        TableOp::UpsertVrf {
            id: RED,
            name: "red".into(),
            vni: Some(100),
        },
        TableOp::UpsertVrf {
            id: SERVICES,
            name: "services".into(),
            vni: None,
        },
        iface(FW_LEFT, InterfaceKind::Workload, 1500, true),
        iface(FW_RIGHT, InterfaceKind::Workload, 1500, true),
        nh(19, port(FW_LEFT, FW_LEFT_MAC)),
        nh(20, port(FW_RIGHT, FW_RIGHT_MAC)),
        TableOp::SetChains(Arc::new(vec![Chain {
            id: ChainId(0),
            name: "through-fw".into(),
            from: Some(RED),
            functions: vec![Function {
                name: "fw".into(),
                mode: FunctionMode::InNetwork,
                probe: Default::default(),
                instances: vec![Instance {
                    name: "fw-1".into(),
                    left: Some(FW_LEFT),
                    right: Some(FW_RIGHT),
                    left_nh: NextHopId(19),
                    right_nh: NextHopId(20),
                    left_probe: None,
                    right_probe: None,
                }],
            }],
        }])),
        iface(UPLINK, InterfaceKind::Underlay, 1500, true),
        iface(VM1, InterfaceKind::Workload, 1500, true),
        iface(VM2, InterfaceKind::Workload, 1500, true),
        iface(DOWN, InterfaceKind::Workload, 1500, false),
        iface(SMALL_MTU, InterfaceKind::Workload, 100, true),
        nh(
            10,
            NextHop::Interface {
                interface: VM2,
                dst_mac: LOCAL,
            },
        ),
        nh(11, tunnel(Encap::Vxlan { vni: 100 }, v4(1), v4(2))),
        nh(12, tunnel(Encap::MplsOverUdp { label: 30 }, v4(1), v4(3))),
        nh(13, tunnel(Encap::Vxlan { vni: 100 }, v6(1), v6(4))),
        nh(
            14,
            NextHop::Interface {
                interface: DOWN,
                dst_mac: TO_DOWN,
            },
        ),
        nh(
            15,
            NextHop::Interface {
                interface: SMALL_MTU,
                dst_mac: TO_SMALL_MTU,
            },
        ),
        nh(16, NextHop::Drop),
        nh(
            17,
            NextHop::Tunnel(Tunnel {
                inner_dst: Some(MacAddr([2, 0, 0, 0, 9, 0x17])),
                ..match tunnel(Encap::Vxlan { vni: 100 }, v4(1), v4(7)) {
                    NextHop::Tunnel(t) => t,
                    _ => unreachable!(),
                }
            }),
        ),
        nh(18, tunnel(Encap::MplsOverGre { label: 31 }, v4(1), v4(8))),
        bridge(LOCAL, 10),
        bridge(VXLAN4, 11),
        bridge(MPLS, 12),
        bridge(VXLAN6, 13),
        bridge(TO_DOWN, 14),
        bridge(TO_SMALL_MTU, 15),
        bridge(TO_DROP, 16),
        // Routed: each destination address to another kind of next hop.
        route("10.1.0.9/32", 10),
        route("10.1.0.10/32", 12),
        route("10.1.0.11/32", 11),
        route("10.1.0.12/32", 17),
        route("10.1.0.13/32", 18),
        route("10.1.0.14/32", 13),
        TableOp::SetGateway {
            vrf: RED,
            mac: DEFAULT_ROUTER_MAC,
            addresses: vec![InterfaceAddress {
                addr: Ipv4Addr::new(10, 1, 0, 1).into(),
                prefix_len: 24,
            }],
        },
        TableOp::SetFlood {
            vrf: RED,
            members: vec![NextHopId(10), NextHopId(11)],
        },
        TableOp::SetPolicy {
            vrf: RED,
            policy: Arc::new(Policy::new(vec![through_chain, deny_telnet]).unwrap()),
        },
    ])
    .unwrap();
    (w, r)
}

/// A frame from VM1, described by what varies.
#[derive(Debug, Clone)]
struct Frame {
    dst: usize,
    /// 0 TCP, 1 UDP, 2 ICMP echo, 3 GRE (no ports).
    proto: u8,
    flow: u16,
    payload: usize,
    /// IPv4 options (in 4-byte words).
    options: u8,
    padding: usize,
    fragment: bool,
    ttl_expiring: bool,
    vlan: bool,
    ipv6: bool,
    /// Arrives from the underlay in VXLAN (with an unknown VNI if `vni_unknown`).
    tunnel: bool,
    vni_unknown: bool,
    /// Arrives out of the network function's right port, sent by it (unless `tunnel`).
    from_function: bool,
    /// A byte overwritten (offset, value) after the frame is built: bad checksums,
    /// lengths, versions, ethertypes.
    corrupt: Option<(usize, u8)>,
    truncate: Option<usize>,
}

impl Frame {
    /// The interface it arrives on and its bytes.
    fn bytes(&self) -> (InterfaceId, Vec<u8>) {
        let mut f = self.inner();
        let rx = if self.tunnel {
            let vni: u32 = if self.vni_unknown { 999 } else { 100 };
            let mut o = vec![2, 0, 0, 0, 0, 0x10, 2, 0, 0, 0, 0, 0x0b, 0x08, 0x00];
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((20 + 8 + 8 + f.len()) as u16).to_be_bytes());
            ip[6] = 0x40;
            ip[8] = 64;
            ip[9] = ip_proto::UDP;
            ip[12..16].copy_from_slice(&[192, 0, 2, 2]);
            ip[16..20].copy_from_slice(&[192, 0, 2, 1]);
            Ipv4Packet::new_unchecked(&mut ip[..]).fill_checksum();
            o.extend_from_slice(&ip);
            o.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb5]);
            o.extend_from_slice(&((8 + 8 + f.len()) as u16).to_be_bytes());
            o.extend_from_slice(&[0, 0, 0x08, 0, 0, 0]);
            o.extend_from_slice(&(vni << 8).to_be_bytes());
            o.extend_from_slice(&f);
            f = o;
            UPLINK
        } else if self.from_function {
            f[6..12].copy_from_slice(&FW_RIGHT_MAC.0);
            FW_RIGHT
        } else {
            VM1
        };
        if let Some((at, b)) = self.corrupt {
            let at = at % f.len();
            f[at] = b;
        }
        if let Some(n) = self.truncate {
            f.truncate(n.max(1));
        }
        (rx, f)
    }

    /// The frame a workload sends.
    fn inner(&self) -> Vec<u8> {
        let mut f = DESTS[self.dst % DESTS.len()].0.to_vec();
        f.extend_from_slice(&[2, 0, 0, 0, 1, 5]);
        if self.vlan {
            f.extend_from_slice(&[0x81, 0, 0, 7]);
        }
        let (protocol, l4) = match self.proto % 4 {
            0 => {
                let mut t = vec![0u8; 20];
                t[0..2].copy_from_slice(&(1000 + self.flow).to_be_bytes());
                // Port 23 is denied by policy.
                let dport: u16 = if self.flow.is_multiple_of(7) { 23 } else { 80 };
                t[2..4].copy_from_slice(&dport.to_be_bytes());
                t[12] = 5 << 4;
                (ip_proto::TCP, t)
            }
            1 => {
                let mut u = vec![0u8; 8];
                u[0..2].copy_from_slice(&(2000 + self.flow).to_be_bytes());
                u[2..4].copy_from_slice(&53u16.to_be_bytes());
                u[4..6].copy_from_slice(&((8 + self.payload) as u16).to_be_bytes());
                (ip_proto::UDP, u)
            }
            2 => {
                let mut i = vec![8u8, 0, 0, 0, 0, 0, 0, 1];
                i[4..6].copy_from_slice(&self.flow.to_be_bytes());
                (ip_proto::ICMP, i)
            }
            _ => (ip_proto::GRE, vec![0u8; 4]),
        };
        let body: Vec<u8> = l4
            .into_iter()
            .chain((0..self.payload).map(|i| i as u8))
            .collect();
        if self.ipv6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(body.len() as u16).to_be_bytes());
            f.extend_from_slice(&[protocol, 64]);
            f.extend_from_slice(&Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 5).octets());
            f.extend_from_slice(&Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 9).octets());
        } else {
            f.extend_from_slice(&[0x08, 0x00]);
            let ihl = 5 + usize::from(self.options % 3);
            let mut ip = vec![0u8; ihl * 4];
            ip[0] = 0x40 | ihl as u8;
            ip[2..4].copy_from_slice(&((ihl * 4 + body.len()) as u16).to_be_bytes());
            if self.fragment {
                ip[6] = 0x20; // more fragments
            }
            ip[8] = if self.ttl_expiring { 1 } else { 64 };
            ip[9] = protocol;
            ip[12..16].copy_from_slice(&[10, 1, 0, 5]);
            // 10.1.0.9-14 (routed: six kinds of next hop) or the gateway's 10.1.0.1.
            let dst = match self.flow % 7 {
                6 => 1,
                d => 9 + d as u8,
            };
            ip[16..20].copy_from_slice(&[10, 1, 0, dst]);
            Ipv4Packet::new_unchecked(&mut ip[..]).fill_checksum();
            f.extend_from_slice(&ip);
        }
        f.extend_from_slice(&body);
        f.extend(std::iter::repeat_n(0xee, self.padding));
        f
    }
}

fn frame() -> impl Strategy<Value = Frame> {
    (
        (0..DESTS.len(), 0u8..4, 0u16..300, 0usize..120, 0u8..6),
        (
            prop_oneof![8 => Just(0usize), 1 => 1usize..40],
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.05),
            prop::option::weighted(0.1, (0usize..60, any::<u8>())),
            prop::option::weighted(0.05, 0usize..80),
        ),
        (
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.2),
        ),
    )
        .prop_map(
            |(
                (dst, proto, flow, payload, options),
                (padding, fragment, vlan, ipv6, corrupt, truncate),
                (tunnel, vni_unknown, ttl_expiring, from_function),
            )| {
                Frame {
                    dst,
                    proto,
                    flow,
                    payload,
                    options: if options < 4 { 0 } else { options - 3 },
                    padding,
                    fragment,
                    ttl_expiring,
                    vlan,
                    ipv6,
                    tunnel,
                    vni_unknown,
                    from_function,
                    corrupt,
                    truncate,
                }
            },
        )
}

/// Everything observable of a pipeline after a round, for comparison.
#[derive(Debug, PartialEq)]
struct Seen {
    /// Frames sent, per interface (sorted unless `ordered`).
    tx: Vec<(u32, Vec<u8>)>,
    /// What the kernel fast path would learn from: metadata and bytes of flow packets.
    learnt: Vec<String>,
    drops: Vec<u64>,
    interfaces: Vec<String>,
    flows: Vec<String>,
}

/// The first difference between what two pipelines did, readably.
fn differ(a: &Seen, b: &Seen) -> Option<String> {
    fn first<T: PartialEq + std::fmt::Debug>(what: &str, a: &[T], b: &[T]) -> Option<String> {
        if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
            return Some(format!(
                "{what}[{i}]:\n  one pass {:?}\n  graph    {:?}",
                a[i], b[i]
            ));
        }
        (a.len() != b.len()).then(|| format!("{what}: {} against {} items", a.len(), b.len()))
    }
    first("tx", &a.tx, &b.tx)
        .or_else(|| first("learnt", &a.learnt, &b.learnt))
        .or_else(|| first("drops", &a.drops, &b.drops))
        .or_else(|| first("interfaces", &a.interfaces, &b.interfaces))
        .or_else(|| first("flows", &a.flows, &b.flows))
}

fn round(
    pipe: &mut Pipeline,
    r: &TablesReader,
    frames: &[(InterfaceId, Vec<u8>)],
    vector: usize,
) -> Seen {
    let g = r.enter().unwrap();
    let mut tx = Vec::new();
    let mut learnt = Vec::new();
    for chunk in frames.chunks(vector) {
        pipe.cx.now += 1_000_000;
        for rx in [VM1, UPLINK, FW_RIGHT] {
            let of = chunk.iter().filter(|(i, _)| *i == rx);
            pipe.receive(&g, rx, of.map(|(_, f)| f.as_slice()));
        }
        pipe.run(&g);
        pipe.for_each_flow_tx(|_, m, head| learnt.push(format!("{m:?} {head:?}")));
        pipe.drain_tx(|i, b| tx.push((i.0, b.to_vec())));
    }
    if vector > 1 {
        // Across flows, the graph's own order depends on the path each packet took.
        tx.sort();
        learnt.sort();
    }
    let mut flows: Vec<String> = pipe
        .cx
        .flows
        .iter()
        .map(|(id, e)| format!("{} {e:?}", id.0))
        .collect();
    flows.sort();
    Seen {
        tx,
        learnt,
        drops: pipe.cx.drops.to_vec(),
        interfaces: pipe
            .cx
            .interfaces
            .iter()
            .map(|c| format!("{c:?}"))
            .collect(),
        flows,
    }
}

/// The pipeline with the one-pass path (`tx_observed`: whether it must record in the
/// metadata what only a reader of transmitted packets reads) and the one without.
fn pipelines(tx_observed: bool) -> (Pipeline, Pipeline) {
    let settings = |established_path, tx_observed| Settings {
        flow_capacity: 4096,
        established_path,
        tx_observed,
        ..Settings::default()
    };
    (
        Pipeline::new(settings(true, tx_observed)),
        Pipeline::new(settings(false, true)),
    )
}

/// A well-formed frame from VM1 of protocol `proto` (see `Frame`).
fn simple(dst: usize, proto: u8, flow: u16) -> Frame {
    Frame {
        dst,
        proto,
        flow,
        payload: 18,
        options: 0,
        padding: 0,
        fragment: false,
        ttl_expiring: false,
        vlan: false,
        ipv6: false,
        tunnel: false,
        vni_unknown: false,
        from_function: false,
        corrupt: None,
        truncate: None,
    }
}

fn packets_at(pipe: &Pipeline, node: &str) -> u64 {
    pipe.graph()
        .stats()
        .find(|(n, _)| *n == node)
        .map_or(0, |(_, s)| s.packets)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_one_pass_path_forwards_as_the_graph_does(
        frames in prop::collection::vec(frame(), 1..300),
        vector in prop_oneof![Just(1usize), Just(VECTOR_SIZE), 2usize..40],
        rounds in 2usize..4,
        change in 0usize..7,
        observed in any::<bool>(),
    ) {
        let (mut w, r) = setup();
        let (mut one_pass, mut graph) = pipelines(observed);
        let bytes: Vec<(InterfaceId, Vec<u8>)> = frames.iter().map(Frame::bytes).collect();
        for i in 0..rounds {
            // A table change between rounds: established flows take their decision
            // again (in the graph) before the one-pass path carries them on.
            if i == 1 {
                let op = match change {
                    0 => TableOp::AddBridge { vrf: RED, mac: LOCAL, nh: NextHopId(11) },
                    1 => TableOp::RemoveBridge { vrf: RED, mac: VXLAN4 },
                    2 => TableOp::SetPolicy {
                        vrf: RED,
                        policy: Arc::new(Policy::new(vec![PolicyRule {
                            protocol: Some(ip_proto::UDP),
                            ..PolicyRule::matching_all(PolicyAction::Deny)
                        }]).unwrap()),
                    },
                    3 => iface(VM2, InterfaceKind::Workload, 80, true),
                    // The tunnels' underlay: what the one-pass path keeps of it with a
                    // tunnel's headers must follow (a smaller MTU, down).
                    4 => iface(UPLINK, InterfaceKind::Underlay, 120, true),
                    5 => iface(UPLINK, InterfaceKind::Underlay, 1500, false),
                    _ => TableOp::SetPortHealth { interface: FW_LEFT, up: false },
                };
                w.commit(vec![op]).unwrap();
            }
            let mut a = round(&mut one_pass, &r, &bytes, vector);
            let mut b = round(&mut graph, &r, &bytes, vector);
            if !observed {
                // Nothing reads the metadata of transmitted packets: the same frames,
                // drops and counters are all there is to compare.
                (a.learnt, b.learnt) = (Vec::new(), Vec::new());
            }
            if let Some(d) = differ(&a, &b) {
                prop_assert!(false, "round {}: {}", i, d);
            }
        }
    }
}

#[test]
fn established_flows_skip_the_graph_and_the_rest_take_it() {
    let (_w, r) = setup();
    let (mut one_pass, mut graph) = pipelines(true);
    let frame = |dst: usize, flow: u16, tunnel: bool| {
        Frame {
            tunnel,
            ..simple(dst, 1, flow)
        }
        .bytes()
    };
    // Bridged to a local workload, into IPv4 VXLAN and out of it to the local workload;
    // routed to the local workload (10.1.0.9) and into MPLS over GRE (10.1.0.13): 40
    // flows each.
    let frames: Vec<(InterfaceId, Vec<u8>)> = (0..40)
        .flat_map(|f| {
            [
                frame(0, f, false),
                frame(1, 100 + f, false),
                frame(0, 300 + f, true),
                frame(8, 490 + 7 * f, false),
                frame(8, 494 + 7 * f, false),
            ]
        })
        .collect();
    let first = round(&mut one_pass, &r, &frames, VECTOR_SIZE);
    assert_eq!(first, round(&mut graph, &r, &frames, VECTOR_SIZE));
    // The first round set the flows up through the graph.
    assert_eq!(packets_at(&one_pass, "ethernet-input"), 200);
    let second = round(&mut one_pass, &r, &frames, VECTOR_SIZE);
    assert_eq!(second, round(&mut graph, &r, &frames, VECTOR_SIZE));
    assert_eq!(second.tx.len(), 200);
    // The second round took none of them through the graph.
    assert_eq!(packets_at(&one_pass, "ethernet-input"), 200);
    assert_eq!(packets_at(&one_pass, "established"), 400);
    assert_eq!(packets_at(&graph, "ethernet-input"), 400);
    // VXLAN over IPv6 is the graph's: its packets pass through the node and on.
    let v6: Vec<(InterfaceId, Vec<u8>)> = (200..210).map(|f| frame(3, f, false)).collect();
    round(&mut one_pass, &r, &v6, VECTOR_SIZE);
    let again = round(&mut one_pass, &r, &v6, VECTOR_SIZE);
    assert_eq!(again.tx.len(), 10);
    assert_eq!(packets_at(&one_pass, "ethernet-input"), 220);
}

#[test]
fn both_passes_through_a_network_function_skip_the_graph_once_established() {
    let (_w, r) = setup();
    let (mut one_pass, mut graph) = pipelines(true);
    // 50 ICMP sessions to 10.1.0.9: into the function's left, and out of its right on
    // to VM2.
    let frames: Vec<(InterfaceId, Vec<u8>)> = (0..50)
        .flat_map(|f| {
            let icmp = simple(8, 2, 7 * f);
            let out = Frame {
                from_function: true,
                ..icmp.clone()
            };
            [icmp.bytes(), out.bytes()]
        })
        .collect();
    let first = round(&mut one_pass, &r, &frames, VECTOR_SIZE);
    assert_eq!(first, round(&mut graph, &r, &frames, VECTOR_SIZE));
    assert_eq!(packets_at(&one_pass, "ethernet-input"), 100);
    let second = round(&mut one_pass, &r, &frames, VECTOR_SIZE);
    assert_eq!(second, round(&mut graph, &r, &frames, VECTOR_SIZE));
    let to = |i: InterfaceId| second.tx.iter().filter(|(o, _)| *o == i.0).count();
    assert_eq!((to(FW_LEFT), to(VM2)), (50, 50));
    assert_eq!(packets_at(&one_pass, "ethernet-input"), 100);
}
