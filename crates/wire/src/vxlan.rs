//! VXLAN (RFC 7348 section 5): an 8-byte header after UDP port 4789 carrying a 24-bit
//! VNI, then the tenant's Ethernet frame.

use crate::WireError;
use crate::field::{read_u32, write_u32};

pub const HEADER_LEN: usize = 8;
/// The I flag: the VNI is valid. The other flag bits are reserved.
pub const FLAG_I: u8 = 0x08;

view! {
    /// A view of a VXLAN header and the inner frame after it.
    VxlanPacket
}

impl<T: AsRef<[u8]>> VxlanPacket<T> {
    /// Wraps `buffer` (the UDP payload). Refuses a header without the I flag; the
    /// reserved bits are ignored on receipt, as RFC 7348 says.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::VxlanTruncated);
        }
        if b[0] & FLAG_I == 0 {
            return Err(WireError::VxlanBadFlags);
        }
        Ok(Self { buffer })
    }

    #[inline]
    pub fn flags(&self) -> u8 {
        self.b()[0]
    }

    #[inline]
    pub fn vni(&self) -> u32 {
        read_u32(self.b(), 4) >> 8
    }

    /// The inner Ethernet frame.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
}

/// The plain form of a VXLAN header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanRepr {
    /// 24 bits.
    pub vni: u32,
}

impl VxlanRepr {
    pub fn parse<T: AsRef<[u8]>>(p: &VxlanPacket<T>) -> Self {
        Self { vni: p.vni() }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header: I flag set, reserved bits zero.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        write_u32(buf, 0, u32::from(FLAG_I) << 24);
        write_u32(buf, 4, (self.vni & 0x00ff_ffff) << 8);
    }
}

/// The outer UDP source port for an inner flow's hash: in the dynamic range
/// 49152-65535, so that the underlay's ECMP spreads tunnels by inner flow (RFC 7348
/// section 5 "Source Port"; RFC 7510 section 3 asks the same of MPLS-in-UDP).
#[inline]
pub fn source_port_from_hash(hash: u32) -> u16 {
    // Fold the high half in so that hashes differing only in high bits still spread.
    0xc000 | (((hash >> 16) ^ hash) as u16 & 0x3fff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use proptest::prelude::*;

    const VXLAN_AT: usize = 14 + 20 + 8;

    #[test]
    fn header_from_scapy() {
        let b = &fixtures::VXLAN[VXLAN_AT..];
        let p = VxlanPacket::new_checked(b).unwrap();
        assert_eq!((p.flags(), p.vni()), (FLAG_I, 0x123456));
        assert_eq!(
            &p.payload()[..6],
            &[2, 0, 0x0a, 0, 0, 2],
            "inner destination MAC"
        );
        let mut h = [0u8; 8];
        VxlanRepr::parse(&p).emit(&mut h);
        assert_eq!(&h[..], &b[..8]);
        assert_eq!(
            crate::field::read_u16(fixtures::VXLAN, 36),
            crate::udp_port::VXLAN
        );
    }

    #[test]
    fn malformed_headers_are_named() {
        let b = &fixtures::VXLAN[VXLAN_AT..];
        for n in 0..8 {
            assert_eq!(
                VxlanPacket::new_checked(&b[..n]).unwrap_err(),
                WireError::VxlanTruncated
            );
        }
        let mut x = b.to_vec();
        x[0] = 0;
        assert_eq!(
            VxlanPacket::new_checked(&x[..]).unwrap_err(),
            WireError::VxlanBadFlags
        );
        x[0] = 0xff; // reserved bits set beside I: accepted
        assert!(VxlanPacket::new_checked(&x[..]).is_ok());
    }

    #[test]
    fn source_ports_stay_in_the_dynamic_range_and_spread() {
        let mut seen = std::collections::HashSet::new();
        for h in 0..10_000u32 {
            let p = source_port_from_hash(h.wrapping_mul(0x9e37_79b9));
            assert!(p >= 49152);
            seen.insert(p);
        }
        assert!(seen.len() > 5000);
    }

    proptest! {
        #[test]
        fn round_trip(vni in 0u32..(1 << 24)) {
            let mut b = [0u8; 8];
            VxlanRepr { vni }.emit(&mut b);
            prop_assert_eq!(VxlanRepr::parse(&VxlanPacket::new_checked(&b[..]).unwrap()).vni, vni);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Ok(p) = VxlanPacket::new_checked(&data[..]) {
                prop_assert!(p.vni() < 1 << 24);
                prop_assert_eq!(p.payload().len(), data.len() - HEADER_LEN);
            }
        }
    }
}
