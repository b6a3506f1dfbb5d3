//! Changes to the forwarding state. A batch of them is validated as a whole, then applied
//! to both copies of the tables; an op that passed validation cannot fail to apply.

use crate::chain::Chain;
use crate::ids::{InterfaceId, NextHopId, VrfId};
use crate::interface::{Interface, InterfaceAddress};
use crate::nexthop::NextHop;
use crate::policy::Policy;
use crate::prefix::IpPrefix;
use ovr_wire::ethernet::MacAddr;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub enum TableOp {
    UpsertInterface(Interface),
    RemoveInterface(InterfaceId),
    UpsertVrf {
        id: VrfId,
        name: String,
        vni: Option<u32>,
    },
    /// Only an empty VRF (no routes, bridge entries or interfaces) can be removed.
    RemoveVrf(VrfId),
    /// Replacing a composite keeps its members' buckets where it can (see `Ecmp`).
    UpsertNextHop(NextHopId, NextHop),
    RemoveNextHop(NextHopId),
    /// Adds or replaces the route for exactly this prefix.
    AddRoute {
        vrf: VrfId,
        prefix: IpPrefix,
        nh: NextHopId,
    },
    RemoveRoute {
        vrf: VrfId,
        prefix: IpPrefix,
    },
    AddLabel {
        label: u32,
        nh: NextHopId,
    },
    RemoveLabel(u32),
    AddBridge {
        vrf: VrfId,
        mac: MacAddr,
        nh: NextHopId,
    },
    RemoveBridge {
        vrf: VrfId,
        mac: MacAddr,
    },
    SetPolicy {
        vrf: VrfId,
        policy: Arc<Policy>,
    },
    /// The virtual gateway of a VRF: its MAC and its addresses.
    SetGateway {
        vrf: VrfId,
        mac: MacAddr,
        addresses: Vec<InterfaceAddress>,
    },
    /// The most flows a VRF may hold on this host (`None`: the host's default quota).
    SetFlowQuota {
        vrf: VrfId,
        max: Option<u32>,
    },
    /// The replication list of a VRF (local interfaces and tunnels, no composites).
    SetFlood {
        vrf: VrfId,
        members: Vec<NextHopId>,
    },
    /// The service chains, replaced whole (ids are their index). The health of their
    /// ports is kept apart (`SetPortHealth`), so that a configuration change does not
    /// bring a port that is down back.
    SetChains(Arc<Vec<Chain>>),
    /// A service port went down or came back: its link as the host sees it, and its
    /// probe where its function has one (ovrd combines the two).
    SetPortHealth {
        interface: InterfaceId,
        up: bool,
    },
}
