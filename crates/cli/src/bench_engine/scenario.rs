//! The engine bench's scenarios: the tables each sets up and the frames it sends.

use ovr_graph::VECTOR_SIZE;
use ovr_tables::chain::{Chain, ChainId, Function, FunctionMode, Instance};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceAddress, InterfaceKind};
use ovr_tables::nexthop::{Encap, NextHop, Tunnel};
use ovr_tables::policy::{Policy, PolicyAction, PolicyRule, PortRange};
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::TableOp;
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::ethernet::MacAddr;
use ovr_wire::ip_proto;
use ovr_wire::vxlan::VxlanRepr;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The scenarios, by name.
pub const SCENARIOS: &[&str] = &[
    "vxlan-l2-encap",
    "mplsudp-l3-encap",
    "vxlan-decap",
    "l2-local",
    "l3-local",
    "chain-local",
];
/// The size of the vxlan-l2-encap scenario's overlay (1 and 1: the plain scenario).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    pub vteps: usize,
    pub networks: usize,
}

impl Scale {
    const PLAIN: Scale = Scale {
        vteps: 1,
        networks: 1,
    };

    /// Checks the scale against the scenario.
    pub fn check(self, scenario: &str) -> std::result::Result<Self, String> {
        if self == Self::PLAIN {
            return Ok(self);
        }
        if scenario != "vxlan-l2-encap" {
            return Err("--vteps and --networks apply to --scenario vxlan-l2-encap".into());
        }
        if self.networks == 0 || self.vteps < self.networks || self.vteps > 1 << 20 {
            return Err("need 1 <= networks <= vteps <= 1048576".into());
        }
        Ok(self)
    }

    /// The workload interface of network `k`.
    fn workload(k: usize) -> InterfaceId {
        if k == 0 {
            WORKLOAD
        } else {
            InterfaceId(16 + k as u32)
        }
    }

    /// Remote VTEP `j`'s tunnel next hop and its workload's MAC.
    fn tunnel(j: usize) -> (NextHopId, MacAddr) {
        let b = (j as u32).to_be_bytes();
        (
            NextHopId(16 + j as u32),
            MacAddr([2, 1, b[0], b[1], b[2], b[3]]),
        )
    }

    /// The networks, workloads, tunnels, bridge entries and routes beyond the plain
    /// scenario's network 0.
    fn tables(self) -> Vec<TableOp> {
        let mut ops = Vec::new();
        if self == Self::PLAIN {
            return ops;
        }
        let vrf = |k: usize| VrfId(1 + k as u32);
        for k in 1..self.networks {
            ops.push(TableOp::UpsertVrf {
                id: vrf(k),
                name: format!("n{k}"),
                vni: Some(VNI + k as u32),
            });
            ops.push(workload(Self::workload(k), &format!("vm-n{k}"), vrf(k)));
        }
        for j in 0..self.vteps {
            let k = j % self.networks;
            let (nh, mac) = Self::tunnel(j);
            let remote = Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + j as u32);
            let encap = Encap::Vxlan {
                vni: VNI + k as u32,
            };
            ops.push(TableOp::UpsertNextHop(nh, tunnel(encap, remote)));
            ops.push(TableOp::AddBridge {
                vrf: vrf(k),
                mac,
                nh,
            });
            let host = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 0)) + j as u32);
            ops.push(TableOp::AddRoute {
                vrf: vrf(k),
                prefix: IpPrefix::new(host.into(), 32).unwrap_or_else(|_| unreachable!()),
                nh,
            });
        }
        ops
    }

    /// Flow `i`'s workload interface and destination MAC: a vector's worth of flows
    /// per network in turn, each network's flows spread over its VTEPs.
    fn flow(self, i: usize) -> (InterfaceId, MacAddr) {
        let k = (i / VECTOR_SIZE) % self.networks;
        let tunnels = (self.vteps - k).div_ceil(self.networks);
        let j = k + self.networks * (i % tunnels);
        (Self::workload(k), Self::tunnel(j).1)
    }
}

/// A tunnel from this host's VTEP to `remote` over the uplink.
fn tunnel(encap: Encap, remote: Ipv4Addr) -> NextHop {
    NextHop::Tunnel(Tunnel {
        encap,
        underlay: UPLINK,
        src: LOCAL_VTEP.into(),
        dst: remote.into(),
        dst_mac: REMOTE_MAC,
        inner_dst: None,
    })
}

/// A workload interface of network `vrf`.
fn workload(id: InterfaceId, name: &str, vrf: VrfId) -> TableOp {
    TableOp::UpsertInterface(Interface {
        id,
        name: name.into(),
        kind: InterfaceKind::Workload,
        vrf: Some(vrf),
        mac: DEFAULT_ROUTER_MAC,
        addresses: vec![],
        mtu: 1500,
        policy: true,
        admin_up: true,
        memif: None,
        police: None,
    })
}

const WORKLOAD: InterfaceId = InterfaceId(1);
/// A second workload of the network, sending to the first (l2-local).
const WORKLOAD2: InterfaceId = InterfaceId(2);
const UPLINK: InterfaceId = InterfaceId(0);
const UPLINK_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x0a]);
const REMOTE_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x0b]);
const VM_MAC: MacAddr = MacAddr([2, 0, 0, 0, 1, 5]);
const REMOTE_VM_MAC: MacAddr = MacAddr([2, 0, 0, 0, 2, 6]);
const LOCAL_VTEP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const REMOTE_VTEP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const VNI: u32 = 100;

/// A scenario's tables: its network's, its scale's, and for l3-local and chain-local a
/// second network and a network function's ports (`chain`).
pub fn tables(scenario: &str, scale: Scale) -> Vec<TableOp> {
    let mut ops = network();
    ops.extend(scale.tables());
    if matches!(scenario, "l3-local" | "chain-local") {
        ops.extend(chain::tables());
    }
    ops.push(TableOp::SetPolicy {
        vrf: VrfId(1),
        policy: Arc::new(policy(scenario == "chain-local")),
    });
    ops
}

/// The first network's policy: a few rules, which the slow path evaluates; `chained`:
/// its traffic to the second network goes through the chain.
fn policy(chained: bool) -> Policy {
    let rule = |protocol, port: u16, action| PolicyRule {
        protocol: Some(protocol),
        dst_ports: PortRange {
            first: port,
            last: port,
        },
        ..PolicyRule::matching_all(action)
    };
    let through_chain = PolicyRule {
        dst_net: Some(chain::BLUE),
        ..PolicyRule::matching_all(PolicyAction::Chain(chain::CHAIN))
    };
    let rules = chained.then_some(through_chain).into_iter().chain([
        rule(ip_proto::TCP, 23, PolicyAction::Deny),
        rule(ip_proto::UDP, 53, PolicyAction::Deny),
        rule(ip_proto::TCP, 22, PolicyAction::Deny),
        PolicyRule {
            src: "10.0.0.0/8".parse().ok(),
            ..PolicyRule::matching_all(PolicyAction::Allow)
        },
    ]);
    Policy::new(rules.collect()).unwrap_or_default()
}

/// One network with a workload, an uplink, a VXLAN and an MPLS-over-UDP tunnel, routes
/// and bridge entries.
fn network() -> Vec<TableOp> {
    let vrf = VrfId(1);
    let tunnel = |encap| tunnel(encap, REMOTE_VTEP);
    vec![
        TableOp::UpsertVrf {
            id: vrf,
            name: "red".into(),
            vni: Some(VNI),
        },
        TableOp::UpsertInterface(Interface {
            id: UPLINK,
            name: "uplink".into(),
            kind: InterfaceKind::Underlay,
            vrf: None,
            mac: UPLINK_MAC,
            addresses: vec![InterfaceAddress {
                addr: LOCAL_VTEP.into(),
                prefix_len: 24,
            }],
            mtu: 9000,
            policy: false,
            admin_up: true,
            memif: None,
            police: None,
        }),
        workload(WORKLOAD, "vm1", vrf),
        workload(WORKLOAD2, "vm2", vrf),
        TableOp::UpsertNextHop(
            NextHopId(1),
            NextHop::Interface {
                interface: WORKLOAD,
                dst_mac: VM_MAC,
            },
        ),
        TableOp::UpsertNextHop(NextHopId(2), tunnel(Encap::Vxlan { vni: VNI })),
        TableOp::UpsertNextHop(NextHopId(3), tunnel(Encap::MplsOverUdp { label: 1000 })),
        TableOp::AddBridge {
            vrf,
            mac: VM_MAC,
            nh: NextHopId(1),
        },
        TableOp::AddBridge {
            vrf,
            mac: REMOTE_VM_MAC,
            nh: NextHopId(2),
        },
        TableOp::AddRoute {
            vrf,
            prefix: "10.1.0.0/16".parse().unwrap_or_else(|_| unreachable!()),
            nh: NextHopId(1),
        },
        TableOp::AddRoute {
            vrf,
            prefix: "10.2.0.0/16".parse().unwrap_or_else(|_| unreachable!()),
            nh: NextHopId(3),
        },
    ]
}

/// A 64-byte Ethernet/IPv4/UDP frame from the workload.
fn inner_frame(dst_mac: MacAddr, src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
    crate::traffic::udp_frame((VM_MAC, dst_mac), (src, dst), (sport, dport), 64)
}

/// Flow `i`'s addresses and ports: 4096 source ports per address.
pub(super) fn flow(i: usize) -> (Ipv4Addr, u16) {
    let host = (i / 4096) as u32;
    (
        Ipv4Addr::from(0x0a01_0000 + 10 + host),
        1024 + (i % 4096) as u16,
    )
}

/// The frames of a scenario, each with the interface it arrives on: one per flow, or for
/// chain-local two (into the function, and out of it), a vector's worth of each in turn.
pub fn frames(scenario: &str, flows: usize, scale: Scale) -> Option<Vec<(InterfaceId, Vec<u8>)>> {
    let build = |rx: InterfaceId, f: &dyn Fn(usize) -> Vec<u8>| {
        (0..flows).map(|i| (rx, f(i))).collect::<Vec<_>>()
    };
    Some(match scenario {
        "vxlan-l2-encap" if scale != Scale::PLAIN => (0..flows)
            .map(|i| {
                let (src, sport) = flow(i);
                let (rx, mac) = scale.flow(i);
                let dst = Ipv4Addr::new(10, 1, 200, 6);
                (rx, inner_frame(mac, src, dst, sport, 5000))
            })
            .collect(),
        "vxlan-l2-encap" => build(WORKLOAD, &|i| {
            let (src, sport) = flow(i);
            inner_frame(
                REMOTE_VM_MAC,
                src,
                Ipv4Addr::new(10, 1, 200, 6),
                sport,
                5000,
            )
        }),
        "mplsudp-l3-encap" => build(WORKLOAD, &|i| {
            let (src, sport) = flow(i);
            let dst = Ipv4Addr::new(10, 2, (i % 251) as u8, 9);
            inner_frame(DEFAULT_ROUTER_MAC, src, dst, sport, 5000)
        }),
        "vxlan-decap" => build(UPLINK, &|i| {
            let (src, sport) = flow(i);
            let inner = inner_frame(VM_MAC, src, Ipv4Addr::new(10, 1, 0, 5), sport, 5000);
            vxlan_frame(&inner, sport)
        }),
        "l2-local" => build(WORKLOAD2, &|i| {
            let (src, sport) = flow(i);
            let mut f = inner_frame(VM_MAC, src, Ipv4Addr::new(10, 1, 0, 5), sport, 5000);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 6]);
            f
        }),
        "l3-local" => build(WORKLOAD, &|i| chain::to_blue(i, VM_MAC)),
        "chain-local" => (0..flows)
            .step_by(VECTOR_SIZE)
            .flat_map(|first| {
                let sessions = first..(first + VECTOR_SIZE).min(flows);
                let into = sessions
                    .clone()
                    .map(|i| (WORKLOAD, chain::to_blue(i, VM_MAC)));
                into.chain(
                    sessions.map(|i| (chain::FW_RIGHT, chain::to_blue(i, chain::FW_RIGHT_MAC))),
                )
            })
            .collect(),
        _ => return None,
    })
}

/// `inner` in VXLAN from the remote VTEP to us.
fn vxlan_frame(inner: &[u8], sport: u16) -> Vec<u8> {
    let mut f = crate::traffic::udp_frame(
        (REMOTE_MAC, UPLINK_MAC),
        (REMOTE_VTEP, LOCAL_VTEP),
        (0xc000 | sport, ovr_wire::udp_port::VXLAN),
        50 + inner.len(),
    );
    VxlanRepr { vni: VNI }.emit(&mut f[42..]);
    f[50..].copy_from_slice(inner);
    f
}

/// l3-local and chain-local: a second network, blue, with a workload the first network
/// routes to, and a network function (in-network: it routes between its left and
/// right) with one instance whose two ports are on this host.
mod chain {
    use super::*;

    pub const BLUE: VrfId = VrfId(2);
    const SERVICES: VrfId = VrfId(3);
    pub const CHAIN: ChainId = ChainId(0);
    const WORKLOAD_B: InterfaceId = InterfaceId(3);
    const FW_LEFT: InterfaceId = InterfaceId(4);
    pub const FW_RIGHT: InterfaceId = InterfaceId(5);
    const B_MAC: MacAddr = MacAddr([2, 0, 0, 0, 3, 9]);
    const FW_LEFT_MAC: MacAddr = MacAddr([2, 0, 0, 0xf, 1, 1]);
    pub const FW_RIGHT_MAC: MacAddr = MacAddr([2, 0, 0, 0xf, 1, 2]);

    /// Session `i`'s packet towards blue's workload, sent by `from` to the gateway.
    pub fn to_blue(i: usize, from: MacAddr) -> Vec<u8> {
        let (src, sport) = flow(i);
        let dst = Ipv4Addr::new(10, 3, 0, 9);
        crate::traffic::udp_frame((from, DEFAULT_ROUTER_MAC), (src, dst), (sport, 5000), 64)
    }

    pub fn tables() -> Vec<TableOp> {
        let nh = |id, interface, dst_mac| {
            TableOp::UpsertNextHop(NextHopId(id), NextHop::Interface { interface, dst_mac })
        };
        let route = |vrf, prefix: &str, id| TableOp::AddRoute {
            vrf,
            prefix: prefix.parse().unwrap_or_else(|_| unreachable!()),
            nh: NextHopId(id),
        };
        vec![
            TableOp::UpsertVrf {
                id: BLUE,
                name: "blue".into(),
                vni: None,
            },
            TableOp::UpsertVrf {
                id: SERVICES,
                name: "services".into(),
                vni: None,
            },
            workload(WORKLOAD_B, "vm-b", BLUE),
            workload(FW_LEFT, "fw-left", SERVICES),
            workload(FW_RIGHT, "fw-right", SERVICES),
            nh(4, WORKLOAD_B, B_MAC),
            nh(5, FW_LEFT, FW_LEFT_MAC),
            nh(6, FW_RIGHT, FW_RIGHT_MAC),
            route(VrfId(1), "10.3.0.0/16", 4),
            route(BLUE, "10.3.0.0/16", 4),
            route(BLUE, "10.1.0.0/16", 1),
            TableOp::SetChains(Arc::new(vec![Chain {
                id: CHAIN,
                name: "through-fw".into(),
                from: Some(VrfId(1)),
                functions: vec![Function {
                    name: "fw".into(),
                    mode: FunctionMode::InNetwork,
                    probe: Default::default(),
                    instances: vec![Instance {
                        name: "fw-1".into(),
                        left: Some(FW_LEFT),
                        right: Some(FW_RIGHT),
                        left_nh: NextHopId(5),
                        right_nh: NextHopId(6),
                        left_probe: None,
                        right_probe: None,
                    }],
                }],
            }])),
        ]
    }
}
