//! The checks every IP header gets, inner or outer: version, lengths, the IPv4 header
//! checksum, the IPv6 extension-header chain. Shared by ip-input (tenant packets) and
//! underlay-input (tunnel packets).

use core::net::IpAddr;
use ovr_wire::WireError;
use ovr_wire::ipv4::Ipv4Packet;
use ovr_wire::ipv6::{HEADER_LEN as IPV6_HEADER_LEN, Ipv6Packet};

/// What a checked IPv4 or IPv6 header says.
#[derive(Debug, Clone, Copy)]
pub struct IpHeader {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// TTL or hop limit.
    pub ttl: u8,
    /// The upper-layer protocol (after IPv6 extension headers).
    pub protocol: u8,
    /// Offset of the upper-layer header from the IP header.
    pub transport: usize,
    /// Length of the IP packet (what follows is Ethernet padding).
    pub len: usize,
    pub fragment: bool,
    /// Whether the transport header is in this packet (not a non-first fragment).
    pub has_transport: bool,
}

impl IpHeader {
    /// The transport header's offset, if this packet carries it.
    pub fn l4(&self) -> Option<usize> {
        self.has_transport.then_some(self.transport)
    }
}

/// Checks the IP header at the start of `b` (IPv6 if `v6`).
pub fn check(b: &[u8], v6: bool) -> Result<IpHeader, WireError> {
    if v6 {
        let ip = Ipv6Packet::new_checked(b)?;
        let upper = ip.upper_layer()?;
        Ok(IpHeader {
            src: ip.src().into(),
            dst: ip.dst().into(),
            ttl: ip.hop_limit(),
            protocol: upper.protocol,
            transport: IPV6_HEADER_LEN + upper.offset,
            len: IPV6_HEADER_LEN + usize::from(ip.payload_len()),
            fragment: upper.fragment.is_some(),
            has_transport: upper.has_transport_header(),
        })
    } else {
        let ip = Ipv4Packet::new_checked(b)?;
        if !ip.verify_checksum() {
            return Err(WireError::Ipv4BadChecksum);
        }
        Ok(IpHeader {
            src: ip.src().into(),
            dst: ip.dst().into(),
            ttl: ip.ttl(),
            protocol: ip.protocol(),
            transport: ip.header_len(),
            len: usize::from(ip.total_len()),
            fragment: ip.is_fragment(),
            has_transport: !ip.is_fragment() || ip.is_first_fragment(),
        })
    }
}
