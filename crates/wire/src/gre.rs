//! GRE (RFC 2784) with the key and sequence number extensions (RFC 2890), as used by
//! MPLS-in-GRE (RFC 4023: protocol type 0x8847 followed by a label stack).

use crate::field::{read_u16, read_u32, write_u16, write_u32};
use crate::{WireError, checksum};

const FLAG_C: u16 = 0x8000;
/// RFC 1701's routing-present bit: RFC 2784 receivers must discard packets that set it.
const FLAG_R: u16 = 0x4000;
const FLAG_K: u16 = 0x2000;
const FLAG_S: u16 = 0x1000;
/// RFC 1701's strict-source-route bit and the first bit of its recursion control (bits 4
/// and 5): RFC 2784 section 2.3 has a receiver discard packets with any of bits 1-5 set
/// (bits 2 and 3 are RFC 2890's key and sequence flags, which ovr implements).
const DISCARD_BITS: u16 = 0x0c00;
const VERSION: u16 = 0x0007;

pub const BASE_LEN: usize = 4;

view! {
    /// A view of a GRE header and its payload.
    GrePacket
}

impl<T: AsRef<[u8]>> GrePacket<T> {
    /// Wraps `buffer` (the IP payload), checking the version, the flags ovr supports and
    /// that the optional fields the flags announce are present.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < BASE_LEN {
            return Err(WireError::GreTruncated);
        }
        let f = read_u16(b, 0);
        if f & VERSION != 0 {
            return Err(WireError::GreBadVersion);
        }
        if f & (FLAG_R | DISCARD_BITS) != 0 {
            return Err(WireError::GreUnsupportedFlags);
        }
        let p = Self { buffer };
        if p.buffer.as_ref().len() < p.header_len() {
            return Err(WireError::GreTruncated);
        }
        Ok(p)
    }

    fn flags(&self) -> u16 {
        read_u16(self.b(), 0)
    }

    #[inline]
    pub fn has_checksum(&self) -> bool {
        self.flags() & FLAG_C != 0
    }

    #[inline]
    pub fn has_key(&self) -> bool {
        self.flags() & FLAG_K != 0
    }

    #[inline]
    pub fn has_sequence(&self) -> bool {
        self.flags() & FLAG_S != 0
    }

    #[inline]
    pub fn protocol_type(&self) -> u16 {
        read_u16(self.b(), 2)
    }

    /// The header length: 4, plus 4 for each of checksum, key and sequence present.
    #[inline]
    pub fn header_len(&self) -> usize {
        BASE_LEN
            + 4 * (usize::from(self.has_checksum())
                + usize::from(self.has_key())
                + usize::from(self.has_sequence()))
    }

    fn key_at(&self) -> usize {
        BASE_LEN + 4 * usize::from(self.has_checksum())
    }

    pub fn checksum(&self) -> Option<u16> {
        self.has_checksum().then(|| read_u16(self.b(), BASE_LEN))
    }

    pub fn key(&self) -> Option<u32> {
        self.has_key().then(|| read_u32(self.b(), self.key_at()))
    }

    pub fn sequence(&self) -> Option<u32> {
        let at = self.key_at() + 4 * usize::from(self.has_key());
        self.has_sequence().then(|| read_u32(self.b(), at))
    }

    /// True when there is no checksum or it verifies (it covers header and payload).
    pub fn verify_checksum(&self) -> bool {
        !self.has_checksum() || checksum::verify(self.b())
    }

    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GrePacket<T> {
    /// Computes the checksum over header and payload (when the C flag is set).
    pub fn fill_checksum(&mut self) {
        if !self.has_checksum() {
            return;
        }
        let b = self.buffer.as_mut();
        write_u16(b, BASE_LEN, 0);
        let c = checksum::checksum(b);
        write_u16(b, BASE_LEN, c);
    }
}

/// The plain form of a GRE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GreRepr {
    pub protocol_type: u16,
    pub checksum: bool,
    pub key: Option<u32>,
    pub sequence: Option<u32>,
}

impl GreRepr {
    /// Reads a checked header, verifying the checksum when there is one.
    pub fn parse<T: AsRef<[u8]>>(p: &GrePacket<T>) -> Result<Self, WireError> {
        if !p.verify_checksum() {
            return Err(WireError::GreBadChecksum);
        }
        Ok(Self {
            protocol_type: p.protocol_type(),
            checksum: p.has_checksum(),
            key: p.key(),
            sequence: p.sequence(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        BASE_LEN
            + 4 * (usize::from(self.checksum)
                + usize::from(self.key.is_some())
                + usize::from(self.sequence.is_some()))
    }

    /// Writes the header into the front of `buf`. With a checksum, call
    /// [`GrePacket::fill_checksum`] once the payload is in place.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut f = 0;
        let mut at = BASE_LEN;
        if self.checksum {
            f |= FLAG_C;
            write_u32(buf, at, 0);
            at += 4;
        }
        if let Some(k) = self.key {
            f |= FLAG_K;
            write_u32(buf, at, k);
            at += 4;
        }
        if let Some(s) = self.sequence {
            f |= FLAG_S;
            write_u32(buf, at, s);
        }
        write_u16(buf, 0, f);
        write_u16(buf, 2, self.protocol_type);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::ethertype;
    use crate::fixtures;
    use crate::mpls::LabelStack;
    use proptest::prelude::*;

    const GRE_AT: usize = 34;

    #[test]
    fn plain_mpls_in_gre_from_scapy() {
        let b = &fixtures::MPLS_IN_GRE[GRE_AT..];
        let p = GrePacket::new_checked(b).unwrap();
        let r = GreRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            GreRepr {
                protocol_type: ethertype::MPLS,
                checksum: false,
                key: None,
                sequence: None
            }
        );
        let s = LabelStack::parse(p.payload()).unwrap();
        assert_eq!(
            (s.top().label, s.top().bottom, s.top().ttl),
            (500, true, 64)
        );
        let mut h = [0u8; 4];
        r.emit(&mut h);
        assert_eq!(&h[..], &b[..4]);
    }

    #[test]
    fn checksum_key_sequence_from_scapy() {
        let b = &fixtures::MPLS_IN_GRE_CSUM_KEY_SEQ[GRE_AT..];
        let p = GrePacket::new_checked(b).unwrap();
        assert_eq!(p.header_len(), 16);
        let r = GreRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            GreRepr {
                protocol_type: ethertype::MPLS,
                checksum: true,
                key: Some(0xdeadbeef),
                sequence: Some(7)
            }
        );
        assert_eq!(LabelStack::parse(p.payload()).unwrap().top().label, 600);
        let mut x = b.to_vec();
        r.emit(&mut x);
        GrePacket::new_unchecked(&mut x[..]).fill_checksum();
        assert_eq!(x, b, "header and checksum as scapy made them");
        x[20] ^= 0xff;
        assert_eq!(
            GreRepr::parse(&GrePacket::new_checked(&x[..]).unwrap()),
            Err(WireError::GreBadChecksum)
        );
    }

    #[test]
    fn malformed_headers_are_named() {
        let b = &fixtures::MPLS_IN_GRE_CSUM_KEY_SEQ[GRE_AT..];
        for n in 0..16 {
            assert_eq!(
                GrePacket::new_checked(&b[..n]).unwrap_err(),
                WireError::GreTruncated,
                "cut at {n}"
            );
        }
        let with_flags =
            |hi: u8, lo: u8| GrePacket::new_checked(vec![hi, lo, 0x88, 0x47, 0, 0, 0, 0]).err();
        assert_eq!(with_flags(0x00, 0x01), Some(WireError::GreBadVersion));
        assert_eq!(with_flags(0x40, 0x00), Some(WireError::GreUnsupportedFlags));
        assert_eq!(with_flags(0x08, 0x00), Some(WireError::GreUnsupportedFlags));
        assert_eq!(with_flags(0x04, 0x00), Some(WireError::GreUnsupportedFlags));
        // Bits 6-12 are reserved and "MUST be ignored on receipt" (RFC 2784 section 2.3):
        // the packet is accepted as if they were zero.
        let p = GrePacket::new_checked(vec![0x03, 0xf8, 0x88, 0x47]).unwrap();
        assert_eq!(p.flags() & 0x03f8, 0x03f8);
        assert_eq!((p.header_len(), p.protocol_type()), (4, ethertype::MPLS));
    }

    proptest! {
        #[test]
        fn round_trip(pt in any::<u16>(), c in any::<bool>(), k in proptest::option::of(any::<u32>()), s in proptest::option::of(any::<u32>()),
                      payload in proptest::collection::vec(any::<u8>(), 0..32)) {
            let r = GreRepr { protocol_type: pt, checksum: c, key: k, sequence: s };
            let mut b = vec![0u8; r.buffer_len() + payload.len()];
            r.emit(&mut b);
            b[r.buffer_len()..].copy_from_slice(&payload);
            GrePacket::new_unchecked(&mut b[..]).fill_checksum();
            let p = GrePacket::new_checked(&b[..]).unwrap();
            prop_assert_eq!(GreRepr::parse(&p).unwrap(), r);
            prop_assert_eq!(p.payload(), &payload[..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = GrePacket::new_checked(&data[..]) { let _ = (GreRepr::parse(&p), p.payload()); }
        }
    }
}
