//! Drop reasons: every packet ovr does not forward is counted under one of these.
//!
//! The index space is the parser's reasons (`WireError`, in their order) followed by the
//! dataplane's own, so that a parse failure is counted without translation.

use ovr_wire::WireError;

macro_rules! drop_reasons {
    ($($variant:ident => $name:literal, $what:literal;)+) => {
        /// Why the dataplane dropped a packet (beyond parse failures).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum Reason {
            $(#[doc = $what] $variant,)+
        }

        impl Reason {
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)+];

            pub const fn name(self) -> &'static str {
                match self {
                    $(Reason::$variant => $name,)+
                }
            }

            pub const fn description(self) -> &'static str {
                match self {
                    $(Reason::$variant => $what,)+
                }
            }
        }
    };
}

drop_reasons! {
    UnsupportedEthertype => "unsupported_ethertype", "EtherType other than IPv4, IPv6 or ARP";
    VlanNotAllowed => "vlan_not_allowed", "VLAN-tagged frame on an interface that takes untagged frames";
    UnknownInterface => "unknown_interface", "packet received on or sent to an interface not in the table";
    InterfaceDown => "interface_down", "interface administratively down";
    NoVrf => "no_vrf", "interface or next hop names a VRF that does not exist";
    NoRoute => "no_route", "no route to the destination in the VRF";
    NoNextHop => "no_nexthop", "route, label or flow names a next hop that does not exist";
    NextHopDrop => "nexthop_drop", "the route's next hop is a discard";
    NextHopUnsupported => "nexthop_unsupported", "next hop kind cannot be used here";
    TtlExpired => "ttl_expired", "IPv4 TTL or IPv6 hop limit would reach 0";
    PolicyDenied => "policy_denied", "network policy denies the flow";
    FlowTableFull => "flow_table_full", "no room for a new flow (table, bucket or quota)";
    FlowSetupLimited => "flow_setup_limited", "the interface exceeded its rate of new flows";
    MtuExceeded => "mtu_exceeded", "packet larger than the outgoing interface's MTU";
    NoHeadroom => "no_headroom", "no room in front of the packet for the encapsulation";
    NoBuffers => "no_buffers", "no free packet buffer (all are in use)";
    FrameTooLarge => "frame_too_large", "received frame larger than a packet buffer holds (2048 bytes)";
    FloodEmpty => "flood_empty", "nowhere to flood to (no other member in the network)";
    NotForVtep => "not_for_vtep", "underlay packet not addressed to a local VTEP address";
    UnderlayUnsupported => "underlay_unsupported", "underlay packet that is not a tunnel ovr terminates";
    OuterFragment => "outer_fragment", "fragmented tunnel packet (ovr does not reassemble)";
    UnknownVni => "unknown_vni", "VXLAN network identifier not mapped to a VRF";
    UnknownLabel => "unknown_label", "MPLS label not in the label table";
    MplsStackUnsupported => "mpls_stack_unsupported", "more than one MPLS label (ovr terminates single-label tunnels)";
    MplsBadPayload => "mpls_bad_payload", "MPLS payload is not the IP version or frame its label promises";
    GreNotMpls => "gre_not_mpls", "GRE payload other than MPLS";
    ArpNotForUs => "arp_not_for_us", "ARP on the underlay for an address that is not ours";
    GatewayUnsupported => "gateway_unsupported", "packet to the virtual gateway that it does not answer";
    NdUnsupported => "nd_unsupported", "neighbour discovery message the gateway does not answer";
    ChainNoInstance => "chain_no_instance", "a function of the service chain has no healthy instance left (the chain fails closed)";
    ChainUnplaced => "chain_unplaced", "packet of a service chain that has no place in it (chain gone, or a frame from a function not sent to the gateway)";
    RxQueueFull => "rx_queue_full", "received frame the kernel dropped before ovr read it: the driver's receive ring or socket queue was full (ovr fell behind)";
    TxQueueFull => "tx_queue_full", "frame the kernel did not take from ovr: the interface's transmit queue was full, or the interface was not attached";
    Policed => "policed", "frame over its interface's packet rate (the interface's 'police')";
}

/// Number of counters: parse errors then dataplane reasons.
pub const DROP_COUNTERS: usize = WireError::ALL.len() + Reason::ALL.len();

/// A drop reason as the counters index it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DropReason(pub u16);

impl From<WireError> for DropReason {
    fn from(e: WireError) -> Self {
        DropReason(e as u16)
    }
}

impl From<Reason> for DropReason {
    fn from(r: Reason) -> Self {
        DropReason((WireError::ALL.len() + r as usize) as u16)
    }
}

impl DropReason {
    /// Every reason, in index order.
    pub fn all() -> impl Iterator<Item = DropReason> {
        (0..DROP_COUNTERS as u16).map(DropReason)
    }

    pub fn name(self) -> &'static str {
        let i = usize::from(self.0);
        match i.checked_sub(WireError::ALL.len()) {
            None => WireError::ALL[i].name(),
            Some(j) => Reason::ALL.get(j).map_or("unknown", |r| r.name()),
        }
    }

    pub fn description(self) -> &'static str {
        let i = usize::from(self.0);
        match i.checked_sub(WireError::ALL.len()) {
            None => WireError::ALL[i].description(),
            Some(j) => Reason::ALL.get(j).map_or("unknown", |r| r.description()),
        }
    }
}

impl core::fmt::Display for DropReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_indices_round_trip() {
        let names: Vec<_> = DropReason::all().map(|r| r.name()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), DROP_COUNTERS);
        assert_eq!(
            DropReason::from(WireError::VxlanBadFlags).name(),
            "vxlan_bad_flags"
        );
        assert_eq!(DropReason::from(Reason::NoRoute).name(), "no_route");
    }
}
