//! Why a packet could not be parsed.
//!
//! Each variant is also a drop reason: the dataplane counts drops per variant, under
//! [`WireError::name`]. The list is declared once; the enum, the names and the
//! descriptions all come from it, so they cannot drift apart.

macro_rules! wire_errors {
    ($($variant:ident => $name:literal, $what:literal;)+) => {
        /// A truncated or inconsistent header, named by layer and by what is wrong.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum WireError {
            $(#[doc = $what] $variant,)+
        }

        impl WireError {
            /// Every reason, in declaration order (`ALL[e as usize] == e`).
            pub const ALL: &'static [WireError] = &[$(WireError::$variant,)+];

            /// The reason's stable snake_case name, as counters and logs show it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(WireError::$variant => $name,)+
                }
            }

            /// A sentence saying what is wrong.
            pub const fn description(self) -> &'static str {
                match self {
                    $(WireError::$variant => $what,)+
                }
            }
        }
    };
}

wire_errors! {
    EthernetTruncated => "eth_truncated", "frame shorter than an Ethernet header";
    VlanTruncated => "vlan_truncated", "802.1Q/802.1ad tag cut short";
    VlanTooManyTags => "vlan_too_many_tags", "more than two stacked VLAN tags";
    ArpTruncated => "arp_truncated", "ARP packet shorter than its header and addresses";
    ArpUnsupported => "arp_unsupported", "ARP for a hardware or protocol type other than Ethernet/IPv4";
    Ipv4Truncated => "ipv4_truncated", "IPv4 header or payload shorter than its length fields say";
    Ipv4BadVersion => "ipv4_bad_version", "IPv4 header whose version is not 4";
    Ipv4BadHeaderLength => "ipv4_bad_header_length", "IPv4 IHL below 5 or beyond the total length";
    Ipv4BadTotalLength => "ipv4_bad_total_length", "IPv4 total length smaller than the header";
    Ipv4BadChecksum => "ipv4_bad_checksum", "IPv4 header checksum does not verify";
    Ipv6Truncated => "ipv6_truncated", "IPv6 header or payload shorter than its length fields say";
    Ipv6BadVersion => "ipv6_bad_version", "IPv6 header whose version is not 6";
    Ipv6ExtHeaderTruncated => "ipv6_ext_header_truncated", "IPv6 extension header runs past the payload";
    Ipv6TooManyExtHeaders => "ipv6_too_many_ext_headers", "IPv6 extension header chain longer than ovr walks";
    Ipv6BadExtHeaderOrder => "ipv6_bad_ext_header_order", "IPv6 hop-by-hop options header not first";
    Icmpv4Truncated => "icmpv4_truncated", "ICMPv4 message shorter than its header";
    Icmpv4BadChecksum => "icmpv4_bad_checksum", "ICMPv4 checksum does not verify";
    Icmpv6Truncated => "icmpv6_truncated", "ICMPv6 message shorter than its header";
    Icmpv6BadChecksum => "icmpv6_bad_checksum", "ICMPv6 checksum does not verify";
    NdpBadOption => "ndp_bad_option", "neighbour discovery option with zero or overlong length";
    UdpTruncated => "udp_truncated", "UDP datagram shorter than its header";
    UdpBadLength => "udp_bad_length", "UDP length field below 8 or beyond the IP payload";
    UdpBadChecksum => "udp_bad_checksum", "UDP checksum does not verify";
    TcpTruncated => "tcp_truncated", "TCP segment shorter than its header";
    TcpBadDataOffset => "tcp_bad_data_offset", "TCP data offset below 5 or beyond the segment";
    TcpBadChecksum => "tcp_bad_checksum", "TCP checksum does not verify";
    VxlanTruncated => "vxlan_truncated", "VXLAN header cut short";
    VxlanBadFlags => "vxlan_bad_flags", "VXLAN header without the I (valid VNI) flag";
    MplsTruncated => "mpls_truncated", "MPLS label stack ends before its bottom-of-stack entry";
    MplsStackTooDeep => "mpls_stack_too_deep", "MPLS label stack deeper than ovr walks";
    GreTruncated => "gre_truncated", "GRE header shorter than its flags require";
    GreBadVersion => "gre_bad_version", "GRE version other than 0";
    GreUnsupportedFlags => "gre_unsupported_flags", "GRE with any of bits 1-5 set (RFC 1701 routing, strict route, recursion)";
    GreBadChecksum => "gre_bad_checksum", "GRE checksum does not verify";
    VnetHdrTruncated => "vnet_hdr_truncated", "frame from an offloading interface shorter than its virtio-net header";
    OffloadBadChecksumOffsets => "offload_bad_checksum_offsets", "checksum to finish lies outside the frame (virtio-net csum_start/csum_offset)";
    OffloadUnsupportedGso => "offload_unsupported_gso", "segmentation offload of a kind ovr does not do (UDP fragmentation) or that does not match the frame";
    OffloadBadSegmentation => "offload_bad_segmentation", "frame to segment whose headers, offsets or segment size are inconsistent";
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.name(), self.description())
    }
}

impl core::error::Error for WireError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_discriminant_order_and_names_are_unique() {
        for (i, e) in WireError::ALL.iter().enumerate() {
            assert_eq!(*e as usize, i);
        }
        let mut names: Vec<_> = WireError::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), WireError::ALL.len());
    }
}
