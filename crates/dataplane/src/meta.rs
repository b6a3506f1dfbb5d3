//! What the pipeline knows about a packet besides its bytes. Lives beside the frame in
//! the packet pool, so moving a packet between nodes moves only its index.

use ovr_tables::flow::FlowKey;

/// Flag bits of [`Meta::flags`].
pub mod flags {
    /// Arrived in a tunnel (decapsulated): no TTL decrement, no flooding back to tunnels.
    pub const FROM_TUNNEL: u16 = 1 << 0;
    /// Addressed to the virtual gateway's MAC: routed rather than bridged.
    pub const ROUTED: u16 = 1 << 1;
    /// The L3 header is IPv6.
    pub const IPV6: u16 = 1 << 2;
    /// The flow node found the flow (trace and counters).
    pub const FLOW_HIT: u16 = 1 << 3;
    /// The flow's cached decision was taken again (the tables changed).
    pub const FLOW_REVALIDATED: u16 = 1 << 4;
    /// The slow path installed the flow.
    pub const FLOW_CREATED: u16 = 1 << 5;
    /// `Meta::pinned` holds the next hop an MPLS label chose.
    pub const PINNED: u16 = 1 << 6;
    /// The packet is a flood replica (trace).
    pub const REPLICA: u16 = 1 << 7;
    /// The tunnel is GRE (underlay-input to mpls-decap).
    pub const OUTER_GRE: u16 = 1 << 8;
    /// ovr wrote the transport checksum itself on receipt (a frame whose sender left it
    /// to the NIC, finished or cut by `receive_offloaded`): there is nothing to verify,
    /// as the kernel trusts a `CHECKSUM_PARTIAL` packet.
    pub const L4_CHECKSUM_MADE: u16 = 1 << 9;
    /// `Meta::sender` holds the outer source address of the VXLAN packet this one was
    /// decapsulated from (the host that sent it on).
    pub const SENDER: u16 = 1 << 10;
    /// The one-pass path looked the flow up in this run and found none (the flow node
    /// clears it): nothing is installed before flow-setup, so the flow node need not
    /// look again.
    pub const FLOW_MISSED: u16 = 1 << 11;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Meta {
    /// The flow key (set by ip-input).
    pub key: FlowKey,
    pub rx_if: u32,
    /// The interface the packet leaves by (set before interface-output).
    pub tx_if: u32,
    /// The VRF the packet is in (from the workload interface or the tunnel).
    pub vrf: u32,
    /// The next hop the packet is forwarded to.
    pub next_hop: u32,
    /// The next hop chosen by an MPLS label, when `flags::PINNED`.
    pub pinned: u32,
    /// The flow's symmetric hash (ECMP, outer source port).
    pub hash: u32,
    /// Trace id (0: not traced).
    pub trace: u32,
    /// Offset of the L3 header from the start of the packet.
    pub l3: u16,
    /// Offset of the L4 header from the start of the packet (ip-input, underlay-input).
    pub l4: u16,
    /// The drop reason index when the packet goes to drop.
    pub drop: u16,
    pub flags: u16,
    /// With `flags::SENDER`: the VTEP that sent it, IPv4-mapped as in flow keys. A flow
    /// that came through a service instance on another host sends its replies back
    /// there (`chain::reply_to_sender`).
    pub sender: [u8; 16],
}

impl Meta {
    #[inline]
    pub fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }

    /// The VTEP that sent this packet on, if it came out of a VXLAN tunnel.
    pub fn sender(&self) -> Option<core::net::IpAddr> {
        self.has(flags::SENDER).then(|| vtep(&self.sender))
    }

    /// Whether this packet of flow `e` was sent on by another host than the flow's latest
    /// (flows set up out of a tunnel remember it, `flow_flags::SENT`): the session moved,
    /// to a service instance there say, and the flow node takes its way back again.
    #[inline]
    pub fn sent_by_another(&self, e: &ovr_tables::flow::FlowEntry) -> bool {
        e.flags & ovr_tables::flow::flags::SENT != 0
            && self.has(flags::SENDER)
            && e.sender != self.sender
    }

    /// [`Self::sent_by_another`] from the flow's first line alone; `None` when that
    /// cannot say (the flow's sender is not an IPv4 VTEP: ask the whole entry).
    #[inline]
    pub fn sent_by_another_head(&self, h: &ovr_tables::flow::FlowHead) -> Option<bool> {
        if h.flags() & ovr_tables::flow::flags::SENT == 0 || !self.has(flags::SENDER) {
            return Some(false);
        }
        h.sender_is(&self.sender).map(|same| !same)
    }
}

/// A VTEP as packet metadata and flow entries hold it (IPv4-mapped).
pub fn vtep(bytes: &[u8; 16]) -> core::net::IpAddr {
    core::net::Ipv6Addr::from(*bytes).to_canonical()
}
