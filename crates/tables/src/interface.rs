//! The interface table (the Contrail vRouter's "vif" list): what each port of ovr is.

use crate::ids::{InterfaceId, VrfId};
use ovr_wire::ethernet::MacAddr;
use std::collections::HashMap;

/// What an interface connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InterfaceKind {
    /// The physical network: tunnels arrive and leave here.
    Underlay,
    /// A workload (container veth, VM port): belongs to one VRF.
    Workload,
    /// A TAP device of a virtual machine.
    Tap,
    /// A memif shared-memory interface of a network function.
    Memif,
}

/// One interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub id: InterfaceId,
    /// The OS name (veth, tap) or a logical name; unique.
    pub name: String,
    pub kind: InterfaceKind,
    /// The VRF a workload's packets are looked up in; `None` for the underlay.
    pub vrf: Option<VrfId>,
    pub mac: MacAddr,
    /// Addresses of this interface (for the underlay: the local VTEP addresses).
    pub addresses: Vec<InterfaceAddress>,
    pub mtu: u16,
    /// Whether traffic from this interface is checked against its network's policy.
    pub policy: bool,
    pub admin_up: bool,
    /// A memif interface's connection settings (`None` for every other kind).
    pub memif: Option<MemifSpec>,
    /// The most packets per second taken in from this interface (`None`: no limit).
    pub police: Option<Police>,
}

/// A packet-rate policer at an interface's ingress: a token bucket of `burst` packets
/// filled at `packets_per_second`. Frames over the rate are dropped as they are read,
/// before they cost the forwarding worker or the underlay anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Police {
    pub packets_per_second: u32,
    pub burst: u32,
}

/// Which side of memif's handshake an interface takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemifRole {
    /// Listens on the socket; maps the memory the client offers.
    Server,
    /// Connects to the socket (retrying); allocates the memory.
    Client,
}

/// What a memif interface carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemifMode {
    Ethernet,
    /// IP packets with no Ethernet header.
    Ip,
}

/// How a memif interface connects (validated by the configuration).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemifSpec {
    pub role: MemifRole,
    /// A file path, or "@name" for the abstract namespace.
    pub socket: String,
    pub id: u32,
    pub secret: Option<String>,
    pub mode: MemifMode,
    /// log2 of the ring size.
    pub ring_size: u8,
    pub buffer_size: u32,
    pub queues: u16,
}

/// An interface address with the length of its subnet ("10.0.0.1/24").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InterfaceAddress {
    pub addr: core::net::IpAddr,
    pub prefix_len: u8,
}

/// Interfaces by index and by name.
#[derive(Debug, Clone, Default)]
pub struct InterfaceTable {
    by_id: Vec<Option<Interface>>,
    by_name: HashMap<String, InterfaceId>,
}

impl InterfaceTable {
    pub fn get(&self, id: InterfaceId) -> Option<&Interface> {
        self.by_id.get(id.0 as usize)?.as_ref()
    }

    pub fn by_name(&self, name: &str) -> Option<&Interface> {
        self.get(*self.by_name.get(name)?)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Interface> {
        self.by_id.iter().flatten()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Adds or replaces the interface with `iface.id`.
    pub(crate) fn upsert(&mut self, iface: Interface) {
        let i = iface.id.0 as usize;
        if self.by_id.len() <= i {
            self.by_id.resize(i + 1, None);
        }
        if let Some(old) = self.by_id[i].take() {
            self.by_name.remove(&old.name);
        }
        self.by_name.insert(iface.name.clone(), iface.id);
        self.by_id[i] = Some(iface);
    }

    pub(crate) fn remove(&mut self, id: InterfaceId) -> Option<Interface> {
        let old = self.by_id.get_mut(id.0 as usize)?.take()?;
        self.by_name.remove(&old.name);
        Some(old)
    }
}
