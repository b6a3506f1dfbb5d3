//! A VRF: one virtual network's forwarding instance (its VNI, IPv4 and IPv6 FIBs, bridge
//! table and policy).

use crate::bridge::BridgeTable;
use crate::ids::{NextHopId, VrfId};
use crate::interface::InterfaceAddress;
use crate::lpm4::Lpm4;
use crate::lpm6::Lpm6;
use crate::policy::Policy;
use ovr_wire::ethernet::MacAddr;
use std::sync::Arc;

/// The virtual gateway's default MAC: the one the Contrail vRouter answers with
/// (the VRRP range of RFC 5798 section 7.3, router 0), so workloads moved between the two
/// see the same neighbour.
pub const DEFAULT_ROUTER_MAC: MacAddr = MacAddr([0x00, 0x00, 0x5e, 0x00, 0x01, 0x00]);

/// VNIs are 24 bits (RFC 7348 section 5).
pub const MAX_VNI: u32 = (1 << 24) - 1;

#[derive(Debug, Clone)]
pub struct Vrf {
    pub id: VrfId,
    pub name: String,
    /// The VXLAN network identifier of this network, if it is reachable over VXLAN.
    pub vni: Option<u32>,
    pub fib4: Lpm4,
    pub fib6: Lpm6,
    pub bridge: BridgeTable,
    /// Shared between the two copies of the tables: a policy is replaced whole.
    pub policy: Arc<Policy>,
    /// The virtual gateway's MAC: frames to it are routed, not bridged.
    pub router_mac: MacAddr,
    /// The virtual gateway's addresses, one per subnet (answered for ARP and ND).
    pub gateways: Vec<InterfaceAddress>,
    /// Where broadcast, multicast and unknown unicast frames are replicated: local
    /// interfaces and remote VTEPs of the network (ingress replication).
    pub flood: Vec<NextHopId>,
    /// The most flows this network may hold on this host, all workers together (`None`:
    /// the host's default, `flows.network_quota`).
    pub flow_quota: Option<u32>,
}

impl Vrf {
    pub(crate) fn new(id: VrfId, name: String, vni: Option<u32>) -> Self {
        Self {
            id,
            name,
            vni,
            fib4: Lpm4::new(),
            fib6: Lpm6::new(),
            bridge: BridgeTable::default(),
            policy: Arc::new(Policy::default()),
            router_mac: DEFAULT_ROUTER_MAC,
            gateways: Vec::new(),
            flood: Vec::new(),
            flow_quota: None,
        }
    }

    /// Routes, bridge entries and flood members held (a VRF must be empty to be removed).
    pub fn entries(&self) -> usize {
        self.fib4.len() + self.fib6.len() + self.bridge.len() + self.flood.len()
    }

    /// Whether `addr` is one of the virtual gateway's addresses.
    pub fn is_gateway(&self, addr: core::net::IpAddr) -> bool {
        self.gateways.iter().any(|g| g.addr == addr)
    }
}
