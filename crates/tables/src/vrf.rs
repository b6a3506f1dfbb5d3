//! A VRF: one virtual network's forwarding instance (its VNI, IPv4 and IPv6 FIBs, bridge
//! table and policy).

use crate::bridge::BridgeTable;
use crate::ids::VrfId;
use crate::lpm4::Lpm4;
use crate::lpm6::Lpm6;
use crate::policy::Policy;
use std::sync::Arc;

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
        }
    }

    /// Routes and bridge entries held (a VRF must be empty to be removed).
    pub fn entries(&self) -> usize {
        self.fib4.len() + self.fib6.len() + self.bridge.len()
    }
}
