//! ARP for IPv4 over Ethernet (RFC 826).

use crate::WireError;
use crate::ethernet::{MacAddr, ethertype};
use crate::field::{read_u16, write_u16};
use core::net::Ipv4Addr;

mod field {
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: usize = 8;
    pub const SPA: usize = 14;
    pub const THA: usize = 18;
    pub const TPA: usize = 24;
    pub const END: usize = 28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = field::END;
/// Hardware type Ethernet (RFC 826, IANA "Hardware Types").
pub const HTYPE_ETHERNET: u16 = 1;

/// ARP operation codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOp {
    Request,
    Reply,
    Other(u16),
}

impl From<u16> for ArpOp {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOp::Request,
            2 => ArpOp::Reply,
            o => ArpOp::Other(o),
        }
    }
}

impl From<ArpOp> for u16 {
    fn from(op: ArpOp) -> u16 {
        match op {
            ArpOp::Request => 1,
            ArpOp::Reply => 2,
            ArpOp::Other(o) => o,
        }
    }
}

view! {
    /// A view of an Ethernet/IPv4 ARP packet.
    ArpPacket
}

fn mac_at(b: &[u8], at: usize) -> MacAddr {
    MacAddr(b[at..at + 6].try_into().unwrap_or_default())
}

fn ip_at(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buffer`, refusing a short packet or one not for Ethernet and IPv4.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < PACKET_LEN {
            return Err(WireError::ArpTruncated);
        }
        if read_u16(b, field::HTYPE) != HTYPE_ETHERNET
            || read_u16(b, field::PTYPE) != ethertype::IPV4
            || b[field::HLEN] != 6
            || b[field::PLEN] != 4
        {
            return Err(WireError::ArpUnsupported);
        }
        Ok(Self { buffer })
    }

    pub fn operation(&self) -> ArpOp {
        read_u16(self.b(), field::OPER).into()
    }

    pub fn sender_mac(&self) -> MacAddr {
        mac_at(self.b(), field::SHA)
    }

    pub fn sender_ip(&self) -> Ipv4Addr {
        ip_at(self.b(), field::SPA)
    }

    pub fn target_mac(&self) -> MacAddr {
        mac_at(self.b(), field::THA)
    }

    pub fn target_ip(&self) -> Ipv4Addr {
        ip_at(self.b(), field::TPA)
    }
}

/// The plain form of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRepr {
    pub operation: ArpOp,
    pub sender_mac: MacAddr,
    pub sender_ip: Ipv4Addr,
    pub target_mac: MacAddr,
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Self {
        Self {
            operation: p.operation(),
            sender_mac: p.sender_mac(),
            sender_ip: p.sender_ip(),
            target_mac: p.target_mac(),
            target_ip: p.target_ip(),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the packet into the front of `buf` (at least `PACKET_LEN` bytes).
    pub fn emit(&self, buf: &mut [u8]) {
        write_u16(buf, field::HTYPE, HTYPE_ETHERNET);
        write_u16(buf, field::PTYPE, ethertype::IPV4);
        buf[field::HLEN] = 6;
        buf[field::PLEN] = 4;
        write_u16(buf, field::OPER, self.operation.into());
        buf[field::SHA..field::SHA + 6].copy_from_slice(&self.sender_mac.0);
        buf[field::SPA..field::SPA + 4].copy_from_slice(&self.sender_ip.octets());
        buf[field::THA..field::THA + 6].copy_from_slice(&self.target_mac.0);
        buf[field::TPA..field::TPA + 4].copy_from_slice(&self.target_ip.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use proptest::prelude::*;

    #[test]
    fn request_and_reply_from_scapy() {
        let p = ArpPacket::new_checked(&fixtures::ARP_REQUEST[14..]).unwrap();
        assert_eq!(p.operation(), ArpOp::Request);
        assert_eq!(p.sender_mac().to_string(), "02:00:00:00:00:01");
        assert_eq!(p.sender_ip(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.target_ip(), Ipv4Addr::new(10, 0, 0, 254));
        let r = ArpPacket::new_checked(&fixtures::ARP_REPLY[14..]).unwrap();
        let repr = ArpRepr::parse(&r);
        assert_eq!(repr.operation, ArpOp::Reply);
        assert_eq!(repr.sender_mac.to_string(), "02:00:00:00:00:fe");
        assert_eq!(repr.target_mac.to_string(), "02:00:00:00:00:01");
        let mut buf = [0u8; PACKET_LEN];
        repr.emit(&mut buf);
        assert_eq!(&buf[..], &fixtures::ARP_REPLY[14..14 + PACKET_LEN]);
    }

    #[test]
    fn truncated_and_unsupported() {
        let p = &fixtures::ARP_REQUEST[14..];
        for n in 0..PACKET_LEN {
            assert_eq!(
                ArpPacket::new_checked(&p[..n]).unwrap_err(),
                WireError::ArpTruncated
            );
        }
        let mut bad = p.to_vec();
        bad[1] = 6; // IEEE 802 hardware type
        assert_eq!(
            ArpPacket::new_checked(&bad[..]).unwrap_err(),
            WireError::ArpUnsupported
        );
    }

    proptest! {
        #[test]
        fn round_trip(op in 0u16..5, sm in any::<[u8; 6]>(), si in any::<u32>(), tm in any::<[u8; 6]>(), ti in any::<u32>()) {
            let r = ArpRepr { operation: op.into(), sender_mac: MacAddr(sm), sender_ip: si.into(), target_mac: MacAddr(tm), target_ip: ti.into() };
            let mut buf = [0u8; PACKET_LEN];
            r.emit(&mut buf);
            prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = ArpPacket::new_checked(&data[..]) { let _ = ArpRepr::parse(&p); }
        }
    }
}
