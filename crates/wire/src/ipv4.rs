//! IPv4 (RFC 791). Options are skipped (the payload starts at IHL × 4); fragments are
//! recognised so that the dataplane can treat them apart.

use crate::WireError;
use crate::checksum;
use crate::field::{read_u16, write_u16};
use core::net::Ipv4Addr;

mod field {
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET: u16 = 0x1fff;

view! {
    /// A view of an IPv4 packet.
    Ipv4Packet
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer`, checking the version, the header length and that the buffer holds
    /// the whole packet as the total length gives it (bytes past it, such as Ethernet
    /// padding, are ignored). The checksum is checked apart: [`Self::verify_checksum`].
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Ipv4Truncated);
        }
        if b[field::VER_IHL] >> 4 != 4 {
            return Err(WireError::Ipv4BadVersion);
        }
        let p = Self { buffer };
        let (ihl, total) = (p.header_len(), usize::from(p.total_len()));
        if ihl < HEADER_LEN {
            return Err(WireError::Ipv4BadHeaderLength);
        }
        if total < ihl {
            return Err(if total < HEADER_LEN {
                WireError::Ipv4BadTotalLength
            } else {
                WireError::Ipv4BadHeaderLength
            });
        }
        if p.buffer.as_ref().len() < total {
            return Err(WireError::Ipv4Truncated);
        }
        Ok(p)
    }

    /// The header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0f) * 4
    }

    #[inline]
    pub fn dscp(&self) -> u8 {
        self.b()[field::DSCP_ECN] >> 2
    }

    #[inline]
    pub fn ecn(&self) -> u8 {
        self.b()[field::DSCP_ECN] & 3
    }

    #[inline]
    pub fn total_len(&self) -> u16 {
        read_u16(self.b(), field::TOTAL_LEN)
    }

    #[inline]
    pub fn ident(&self) -> u16 {
        read_u16(self.b(), field::IDENT)
    }

    #[inline]
    pub fn dont_frag(&self) -> bool {
        read_u16(self.b(), field::FLAGS_FRAG) & FLAG_DF != 0
    }

    #[inline]
    pub fn more_frags(&self) -> bool {
        read_u16(self.b(), field::FLAGS_FRAG) & FLAG_MF != 0
    }

    /// The fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (read_u16(self.b(), field::FLAGS_FRAG) & FRAG_OFFSET) * 8
    }

    /// True for any fragment of a fragmented datagram (first, middle or last).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        read_u16(self.b(), field::FLAGS_FRAG) & (FLAG_MF | FRAG_OFFSET) != 0
    }

    /// True for the fragment that carries the transport header.
    #[inline]
    pub fn is_first_fragment(&self) -> bool {
        self.is_fragment() && self.frag_offset() == 0
    }

    #[inline]
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    #[inline]
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.b(), field::CHECKSUM)
    }

    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(
            b[field::SRC],
            b[field::SRC + 1],
            b[field::SRC + 2],
            b[field::SRC + 3],
        )
    }

    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(
            b[field::DST],
            b[field::DST + 1],
            b[field::DST + 2],
            b[field::DST + 3],
        )
    }

    /// True when the header checksum verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        let h = &self.b()[..self.header_len()];
        match h.first_chunk::<20>() {
            Some(h20) if h.len() == 20 => checksum::verify_ipv4_header(h20),
            _ => checksum::verify(h),
        }
    }

    /// The payload, up to the total length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Recomputes the header checksum.
    pub fn fill_checksum(&mut self) {
        let n = self.header_len();
        let b = self.buffer.as_mut();
        write_u16(b, field::CHECKSUM, 0);
        let c = checksum::checksum(&b[..n]);
        write_u16(b, field::CHECKSUM, c);
    }

    /// Decrements the TTL and patches the checksum incrementally (RFC 1624): the router's
    /// per-packet rewrite. Returns the new TTL; a packet whose TTL was 0 or 1 is the
    /// caller's to drop (it is left unchanged).
    #[inline]
    pub fn decrement_ttl(&mut self) -> u8 {
        let b = self.buffer.as_mut();
        let ttl = b[field::TTL];
        if ttl <= 1 {
            return 0;
        }
        // TTL and protocol share one 16-bit word of the checksum.
        let old = read_u16(b, field::TTL);
        b[field::TTL] = ttl - 1;
        let new = read_u16(b, field::TTL);
        let c = checksum::update16(read_u16(b, field::CHECKSUM), old, new);
        write_u16(b, field::CHECKSUM, c);
        ttl - 1
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[h..t]
    }
}

/// The plain form of an IPv4 header (without options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    pub ttl: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub payload_len: u16,
}

impl Ipv4Repr {
    /// Reads the header of a checked packet; a bad checksum is an error here.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Self, WireError> {
        if !p.verify_checksum() {
            return Err(WireError::Ipv4BadChecksum);
        }
        Ok(Self {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            ttl: p.ttl(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            payload_len: p.total_len() - p.header_len() as u16,
        })
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header, checksum included, into the front of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::VER_IHL] = 0x45;
        buf[field::DSCP_ECN] = (self.dscp << 2) | (self.ecn & 3);
        write_u16(buf, field::TOTAL_LEN, HEADER_LEN as u16 + self.payload_len);
        write_u16(buf, field::IDENT, self.ident);
        write_u16(
            buf,
            field::FLAGS_FRAG,
            if self.dont_frag { FLAG_DF } else { 0 },
        );
        buf[field::TTL] = self.ttl;
        buf[field::PROTOCOL] = self.protocol;
        buf[field::SRC..field::SRC + 4].copy_from_slice(&self.src.octets());
        buf[field::DST..field::DST + 4].copy_from_slice(&self.dst.octets());
        // Summed from the fields, not re-read from `buf`: reading back bytes just stored
        // in narrower pieces stalls store forwarding, which made this the costliest line
        // of the encapsulation.
        let words = [
            0x4500 | u16::from((self.dscp << 2) | (self.ecn & 3)),
            HEADER_LEN as u16 + self.payload_len,
            self.ident,
            if self.dont_frag { FLAG_DF } else { 0 },
            u16::from_be_bytes([self.ttl, self.protocol]),
        ];
        let addrs = (u32::from(self.src), u32::from(self.dst));
        let mut acc: u64 = words.iter().map(|w| u64::from(*w)).sum();
        acc += u64::from(addrs.0 >> 16) + u64::from(addrs.0 & 0xffff);
        acc += u64::from(addrs.1 >> 16) + u64::from(addrs.1 & 0xffff);
        write_u16(buf, field::CHECKSUM, !checksum::fold(acc));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{fixtures, ip_proto};
    use proptest::prelude::*;

    fn ip(frame: &[u8]) -> &[u8] {
        &frame[14..]
    }

    #[test]
    fn udp_packet_from_scapy() {
        let p = Ipv4Packet::new_checked(ip(fixtures::ETH_IPV4_UDP)).unwrap();
        assert_eq!(
            (p.src(), p.dst()),
            (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
        );
        assert_eq!((p.ttl(), p.protocol(), p.ident()), (64, ip_proto::UDP, 1));
        assert_eq!((p.header_len(), p.total_len()), (20, 33));
        assert!(p.verify_checksum() && !p.is_fragment() && !p.dont_frag());
        assert_eq!(p.payload().len(), 13);
        let r = Ipv4Repr::parse(&p).unwrap();
        let mut buf = [0u8; 20];
        r.emit(&mut buf);
        assert_eq!(&buf[..], &ip(fixtures::ETH_IPV4_UDP)[..20]);
    }

    #[test]
    fn options_are_skipped() {
        let p = Ipv4Packet::new_checked(ip(fixtures::IPV4_OPTIONS)).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!((p.dscp(), p.ecn(), p.ttl()), (0xb8 >> 2, 0, 1));
        assert!(p.verify_checksum());
        assert_eq!(
            &p.payload()[..4],
            &[0, 7, 0, 8],
            "UDP ports 7 and 8 follow the options"
        );
    }

    #[test]
    fn fragments_are_recognised() {
        let first = Ipv4Packet::new_checked(ip(fixtures::IPV4_FRAG_FIRST)).unwrap();
        assert!(first.is_fragment() && first.is_first_fragment() && first.more_frags());
        assert_eq!((first.ident(), first.frag_offset()), (77, 0));
        let later = Ipv4Packet::new_checked(ip(fixtures::IPV4_FRAG_LATER)).unwrap();
        assert!(later.is_fragment() && !later.is_first_fragment() && !later.more_frags());
        assert_eq!(later.frag_offset(), 24);
    }

    #[test]
    fn ttl_decrement_patches_the_checksum_as_a_full_recompute_does() {
        let mut buf = ip(fixtures::ETH_IPV4_UDP).to_vec();
        let mut p = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.decrement_ttl(), 63);
        assert!(p.verify_checksum());
        let incremental = p.checksum();
        p.fill_checksum();
        assert_eq!(p.checksum(), incremental);
        // TTL 1 is not decremented: the packet is the caller's to drop.
        let mut buf = ip(fixtures::IPV4_OPTIONS).to_vec();
        let mut p = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
        assert_eq!(p.decrement_ttl(), 0);
        assert_eq!(p.ttl(), 1);
    }

    #[test]
    fn malformed_headers_are_named() {
        let good = ip(fixtures::IPV4_OPTIONS);
        for n in 0..good.len() {
            assert_eq!(
                Ipv4Packet::new_checked(&good[..n]).unwrap_err(),
                WireError::Ipv4Truncated,
                "cut at {n}"
            );
        }
        let with = |at: usize, v: u8| {
            let mut b = good.to_vec();
            b[at] = v;
            Ipv4Packet::new_checked(b).err()
        };
        assert_eq!(with(0, 0x66), Some(WireError::Ipv4BadVersion));
        assert_eq!(with(0, 0x44), Some(WireError::Ipv4BadHeaderLength));
        assert_eq!(
            with(0, 0x4f),
            Some(WireError::Ipv4BadHeaderLength),
            "IHL 60 bytes beyond total length 32"
        );
        assert_eq!(with(3, 10), Some(WireError::Ipv4BadTotalLength));
        assert_eq!(with(3, 200), Some(WireError::Ipv4Truncated));
        let mut b = good.to_vec();
        b[11] ^= 1;
        assert_eq!(
            Ipv4Repr::parse(&Ipv4Packet::new_checked(&b[..]).unwrap()),
            Err(WireError::Ipv4BadChecksum)
        );
    }

    proptest! {
        #[test]
        fn round_trip(src in any::<u32>(), dst in any::<u32>(), protocol in any::<u8>(), ttl in any::<u8>(),
                      dscp in 0u8..64, ecn in 0u8..4, ident in any::<u16>(), dont_frag in any::<bool>(), len in 0u16..100) {
            let r = Ipv4Repr { src: src.into(), dst: dst.into(), protocol, ttl, dscp, ecn, ident, dont_frag, payload_len: len };
            let mut buf = vec![0u8; 20 + usize::from(len)];
            r.emit(&mut buf);
            prop_assert_eq!(Ipv4Repr::parse(&Ipv4Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Ipv4Packet::new_checked(&data[..]) {
                let _ = (p.payload(), Ipv4Repr::parse(&p), p.is_first_fragment());
            }
        }
    }
}
