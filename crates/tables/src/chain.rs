//! Service chains: policies between networks that steer traffic through network
//! functions (firewalls, IDSes, NATs) on its way.
//!
//! A chain is an ordered list of functions; a function has instances, each with a left
//! port (towards the chain's source network) and a right port (towards its destination).
//! Each port is an interface of this host with a next hop to the function's MAC behind
//! it. The healthy instances of a function are the members of an ECMP group (the
//! next-hop table's [`Ecmp`], over their left next hops), so that new sessions spread
//! and a member that goes moves only its own sessions; the flow table pins a session to
//! its instance in both directions.
//!
//! Packets that come back out of a function's port are told apart from those of the
//! networks by their flow key: their VRF field is the port's [`key_vrf`], a value no
//! network has, so each pass through a function is a flow (and a reverse flow) of its
//! own.

use crate::ids::{InterfaceId, NextHopId, VrfId};
use crate::nexthop::Ecmp;

/// Index of a chain in the chain table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChainId(pub u32);

impl core::fmt::Display for ChainId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Flow keys of packets from a service port carry this bit in their VRF field (network
/// ids stay below `MAX_VRFS`, far under it).
pub const SERVICE_KEY_VRF: u32 = 0x8000_0000;

/// The flow-key VRF of packets received from service port `port`.
#[inline]
pub fn key_vrf(port: InterfaceId) -> u32 {
    SERVICE_KEY_VRF | port.0
}

/// Whether a flow key's VRF field is a service port's rather than a network's.
#[inline]
pub fn is_service_key(vrf: u32) -> bool {
    vrf & SERVICE_KEY_VRF != 0
}

/// Flow keys of frames another host sends into a service port here (bridged in the
/// ports' network to the function's MAC: one pass of a chain from an instance there)
/// carry this bit besides [`SERVICE_KEY_VRF`]: each port a session is sent into has
/// keys of its own, however often the session comes back to this host.
pub const INTO_KEY_VRF: u32 = 0x4000_0000;

/// The flow-key VRF of frames sent from another host into service port `port`.
#[inline]
pub fn into_key_vrf(port: InterfaceId) -> u32 {
    SERVICE_KEY_VRF | INTO_KEY_VRF | port.0
}

/// The service port a flow key's VRF field names as the port its packets come out of
/// (the inverse of [`key_vrf`]; `None`: it names a network, or a port packets are sent
/// into).
#[inline]
pub fn key_port(vrf: u32) -> Option<InterfaceId> {
    (vrf & (SERVICE_KEY_VRF | INTO_KEY_VRF) == SERVICE_KEY_VRF)
        .then_some(InterfaceId(vrf & !SERVICE_KEY_VRF))
}

/// The service port a flow key's VRF field names as the port another host's frames are
/// sent into (the inverse of [`into_key_vrf`]).
#[inline]
pub fn into_key_port(vrf: u32) -> Option<InterfaceId> {
    let both = SERVICE_KEY_VRF | INTO_KEY_VRF;
    (vrf & both == both).then_some(InterfaceId(vrf & !both))
}

/// A side of a function: left faces the chain's source network, right its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Left,
    Right,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Left => "left",
            Side::Right => "right",
        }
    }
}

/// How a function treats the frames it forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FunctionMode {
    /// It routes between its left and right (ovr sends to its MAC on each side).
    InNetwork,
    /// A bump in the wire: frames leave it unchanged.
    Transparent,
}

/// How an instance's health is checked besides its ports' links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProbeKind {
    /// The links only.
    #[default]
    Link,
    /// An ARP request for the function's address on each side.
    Arp,
    /// An ICMP echo request to the function's address on each side.
    Icmp,
}

impl ProbeKind {
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Link => "link",
            ProbeKind::Arp => "arp",
            ProbeKind::Icmp => "icmp",
        }
    }
}

/// A function's probe: sent every `interval_ms` to each side of its instances here; a
/// side that leaves `failures` probes in a row unanswered is down until one is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Probe {
    pub kind: ProbeKind,
    pub interval_ms: u32,
    pub failures: u32,
}

impl Default for Probe {
    /// Links only; with a probe, 100 ms × 3: a dead instance leaves well within 1 s.
    fn default() -> Self {
        Self {
            kind: ProbeKind::Link,
            interval_ms: 100,
            failures: 3,
        }
    }
}

/// The addresses of a probe on one side: the gateway's address in the port's network
/// (the source) and the function's address there (the target).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProbeTarget {
    pub from: core::net::Ipv4Addr,
    pub to: core::net::Ipv4Addr,
}

/// One instance of a function: its two ports and the next hops to it through them.
/// An instance on another host has no port here (`None`): its next hops are tunnels to
/// its host, and it is healthy while it is configured (its host says its ports are up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    pub left: Option<InterfaceId>,
    pub right: Option<InterfaceId>,
    pub left_nh: NextHopId,
    pub right_nh: NextHopId,
    /// What a probe of each side is addressed from and to (`None`: the side is not
    /// probed: its function's probe is `link`, or the instance is on another host).
    pub left_probe: Option<ProbeTarget>,
    pub right_probe: Option<ProbeTarget>,
}

impl Instance {
    pub fn probe(&self, side: Side) -> Option<ProbeTarget> {
        match side {
            Side::Left => self.left_probe,
            Side::Right => self.right_probe,
        }
    }

    pub fn port(&self, side: Side) -> Option<InterfaceId> {
        match side {
            Side::Left => self.left,
            Side::Right => self.right,
        }
    }

    pub fn nexthop(&self, side: Side) -> NextHopId {
        match side {
            Side::Left => self.left_nh,
            Side::Right => self.right_nh,
        }
    }
}

/// A function at one position of a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub mode: FunctionMode,
    pub probe: Probe,
    pub instances: Vec<Instance>,
}

/// A chain as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub id: ChainId,
    pub name: String,
    /// The network whose policy steers into the chain: where traffic leaving the chain
    /// is looked up (`None`: no policy uses it).
    pub from: Option<VrfId>,
    pub functions: Vec<Function>,
}

/// Where a service port sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServicePort {
    pub chain: ChainId,
    /// Position of the function in the chain.
    pub hop: u16,
    pub instance: u16,
    pub side: Side,
}

/// The chains with their run-time state: which instances are healthy, the ECMP group of
/// each function, and the index from ports and next hops to their place in a chain.
#[derive(Debug, Clone, Default)]
pub struct ChainTable {
    chains: Vec<Chain>,
    /// Per chain, per function: the group over healthy instances' left next hops
    /// (`None`: no instance is healthy).
    groups: Vec<Vec<Option<Ecmp>>>,
    /// Per chain, per function, per instance.
    healthy: Vec<Vec<Vec<bool>>>,
    /// By interface id.
    ports: Vec<Option<ServicePort>>,
    /// By next hop id: the port it sends through.
    nexthops: Vec<Option<ServicePort>>,
}

impl ChainTable {
    pub fn chains(&self) -> &[Chain] {
        &self.chains
    }

    pub fn chain(&self, id: ChainId) -> Option<&Chain> {
        self.chains.get(id.0 as usize).filter(|c| c.id == id)
    }

    pub fn by_name(&self, name: &str) -> Option<&Chain> {
        self.chains.iter().find(|c| c.name == name)
    }

    /// Every service port's interface.
    pub fn port_ids(&self) -> impl Iterator<Item = InterfaceId> + '_ {
        (0u32..)
            .zip(&self.ports)
            .filter_map(|(i, p)| p.map(|_| InterfaceId(i)))
    }

    /// The place of a service port (`None`: the interface is not one).
    #[inline]
    pub fn port(&self, interface: InterfaceId) -> Option<ServicePort> {
        *self.ports.get(interface.0 as usize)?
    }

    /// The place of the port a next hop sends through, if it is a service port's.
    #[inline]
    pub fn nexthop(&self, nh: NextHopId) -> Option<ServicePort> {
        *self.nexthops.get(nh.0 as usize)?
    }

    pub fn function(&self, chain: ChainId, hop: usize) -> Option<&Function> {
        self.chain(chain)?.functions.get(hop)
    }

    pub fn instance(&self, p: &ServicePort) -> Option<&Instance> {
        self.function(p.chain, p.hop.into())?
            .instances
            .get(usize::from(p.instance))
    }

    pub fn healthy(&self, chain: ChainId, hop: usize, instance: usize) -> bool {
        self.healthy
            .get(chain.0 as usize)
            .and_then(|c| c.get(hop))
            .and_then(|f| f.get(instance))
            .copied()
            .unwrap_or(false)
    }

    /// The next hop on `side` of the instance of function `hop` that a session takes:
    /// `previous` while its instance stays healthy, else the ECMP member for `hash`.
    /// `None`: no instance is healthy (the chain fails closed).
    pub fn pick(
        &self,
        chain: ChainId,
        hop: usize,
        side: Side,
        hash: u32,
        previous: Option<NextHopId>,
    ) -> Option<NextHopId> {
        let f = self.function(chain, hop)?;
        if let Some(p) = previous
            && let Some(i) = f.instances.iter().position(|i| i.nexthop(side) == p)
            && self.healthy(chain, hop, i)
        {
            return Some(p);
        }
        let group = self.groups.get(chain.0 as usize)?.get(hop)?.as_ref()?;
        let left = group.select(hash);
        f.instances
            .iter()
            .find(|i| i.left_nh == left)
            .map(|i| i.nexthop(side))
    }

    /// Replaces the chains, keeping each function's bucket layout where the function
    /// stays at its place (so that unrelated changes move no session).
    pub(crate) fn set(&mut self, chains: Vec<Chain>, up: impl Fn(InterfaceId) -> bool) {
        let old_groups = core::mem::take(&mut self.groups);
        let old = core::mem::take(&mut self.chains);
        self.groups = chains
            .iter()
            .map(|c| {
                let before = old.iter().position(|o| o.name == c.name);
                (0..c.functions.len())
                    .map(|k| {
                        before
                            .filter(|&b| {
                                old[b].functions.get(k).map(|f| &f.name)
                                    == Some(&c.functions[k].name)
                            })
                            .and_then(|b| old_groups.get(b)?.get(k)?.clone())
                    })
                    .collect()
            })
            .collect();
        self.chains = chains;
        self.ports.clear();
        self.nexthops.clear();
        for c in &self.chains {
            for (k, f) in c.functions.iter().enumerate() {
                for (n, i) in f.instances.iter().enumerate() {
                    for side in [Side::Left, Side::Right] {
                        let p = ServicePort {
                            chain: c.id,
                            hop: k as u16,
                            instance: n as u16,
                            side,
                        };
                        if let Some(port) = i.port(side) {
                            put(&mut self.ports, port.0, p);
                        }
                        put(&mut self.nexthops, i.nexthop(side).0, p);
                    }
                }
            }
        }
        self.follow_health(up);
    }

    /// Takes each instance's health again (both ports up) and moves the groups'
    /// members accordingly: only the buckets of an instance that goes move.
    pub(crate) fn follow_health(&mut self, up: impl Fn(InterfaceId) -> bool) {
        self.healthy = self
            .chains
            .iter()
            .map(|c| {
                c.functions
                    .iter()
                    .map(|f| {
                        f.instances
                            .iter()
                            .map(|i| [i.left, i.right].into_iter().flatten().all(&up))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        for (ci, c) in self.chains.iter().enumerate() {
            for (k, f) in c.functions.iter().enumerate() {
                let members: Vec<NextHopId> = f
                    .instances
                    .iter()
                    .zip(&self.healthy[ci][k])
                    .filter(|(_, h)| **h)
                    .map(|(i, _)| i.left_nh)
                    .collect();
                let slot = &mut self.groups[ci][k];
                *slot = match (slot.take(), members.is_empty()) {
                    (_, true) => None,
                    (Some(mut e), false) => {
                        e.set_members(&members);
                        Some(e)
                    }
                    (None, false) => Some(Ecmp::new(&members)),
                };
            }
        }
    }
}

/// Sets entry `at` of an index by id, growing it as needed.
fn put(index: &mut Vec<Option<ServicePort>>, at: u32, p: ServicePort) {
    let at = at as usize;
    if index.len() <= at {
        index.resize(at + 1, None);
    }
    index[at] = Some(p);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_out_of_a_port_and_into_it_name_the_port_apart() {
        for port in [InterfaceId(0), InterfaceId(7), InterfaceId(0xffff)] {
            let (out, into) = (key_vrf(port), into_key_vrf(port));
            assert_ne!(out, into);
            assert!(is_service_key(out) && is_service_key(into));
            assert_eq!((key_port(out), into_key_port(out)), (Some(port), None));
            assert_eq!((key_port(into), into_key_port(into)), (None, Some(port)));
        }
        // A network's VRF is neither.
        assert_eq!((key_port(5), into_key_port(5)), (None, None));
        assert!(!is_service_key(5));
    }

    fn chain(instances: u32) -> Chain {
        Chain {
            id: ChainId(0),
            name: "c".into(),
            from: Some(VrfId(1)),
            functions: vec![Function {
                name: "fw".into(),
                mode: FunctionMode::InNetwork,
                probe: Probe::default(),
                instances: (0..instances)
                    .map(|n| Instance {
                        name: format!("fw-{n}"),
                        left: Some(InterfaceId(10 + 2 * n)),
                        right: Some(InterfaceId(11 + 2 * n)),
                        left_nh: NextHopId(100 + 2 * n),
                        right_nh: NextHopId(101 + 2 * n),
                        left_probe: None,
                        right_probe: None,
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn ports_and_nexthops_are_indexed() {
        let mut t = ChainTable::default();
        t.set(vec![chain(2)], |_| true);
        let p = t.port(InterfaceId(13)).unwrap();
        assert_eq!((p.hop, p.instance, p.side), (0, 1, Side::Right));
        assert_eq!(t.nexthop(NextHopId(102)).unwrap().side, Side::Left);
        assert!(t.port(InterfaceId(1)).is_none());
    }

    #[test]
    fn a_down_instance_leaves_and_others_keep_their_sessions() {
        let mut t = ChainTable::default();
        t.set(vec![chain(3)], |_| true);
        let c = ChainId(0);
        let before: Vec<_> = (0..256)
            .map(|h| t.pick(c, 0, Side::Left, h, None).unwrap())
            .collect();
        assert!((0..3).all(|n| before.contains(&NextHopId(100 + 2 * n))));
        // Instance 1's right port goes down.
        t.follow_health(|i| i != InterfaceId(13));
        for (h, b) in before.iter().enumerate() {
            let now = t.pick(c, 0, Side::Left, h as u32, None).unwrap();
            if *b == NextHopId(102) {
                assert_ne!(now, NextHopId(102));
            } else {
                assert_eq!(now, *b, "hash {h} moved");
            }
            // A pinned session on a healthy instance stays.
            assert_eq!(
                t.pick(c, 0, Side::Left, 7, Some(NextHopId(104))),
                Some(NextHopId(104))
            );
        }
        // The right side of the instance chosen is the same instance.
        let left = t.pick(c, 0, Side::Left, 5, None).unwrap();
        let right = t.pick(c, 0, Side::Right, 5, None).unwrap();
        assert_eq!(right.0, left.0 + 1);
        // None left: fails closed.
        t.follow_health(|_| false);
        assert_eq!(t.pick(c, 0, Side::Left, 5, Some(NextHopId(100))), None);
    }
}
