//! TCP (RFC 9293): the header a forwarder reads (ports, flags for flow state), options
//! skipped, and the checksum over the IPv4 or IPv6 pseudo-header.

use crate::field::{read_u16, read_u32, write_u16, write_u32};
use crate::{WireError, checksum, ip_proto};
use core::net::{Ipv4Addr, Ipv6Addr};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const OFFSET_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

pub const HEADER_LEN: usize = 20;

/// TCP flag bits (RFC 9293 section 3.1, RFC 3168 for ECE and CWR).
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

view! {
    /// A view of a TCP segment.
    TcpPacket
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps `buffer` (the IP payload: the whole segment), checking the data offset.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::TcpTruncated);
        }
        let off = usize::from(b[field::OFFSET_FLAGS] >> 4) * 4;
        if off < HEADER_LEN || off > b.len() {
            return Err(WireError::TcpBadDataOffset);
        }
        Ok(Self { buffer })
    }

    #[inline]
    pub fn src_port(&self) -> u16 {
        read_u16(self.b(), field::SRC_PORT)
    }

    #[inline]
    pub fn dst_port(&self) -> u16 {
        read_u16(self.b(), field::DST_PORT)
    }

    #[inline]
    pub fn seq(&self) -> u32 {
        read_u32(self.b(), field::SEQ)
    }

    #[inline]
    pub fn ack(&self) -> u32 {
        read_u32(self.b(), field::ACK)
    }

    /// The header length in bytes (data offset × 4), options included.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::OFFSET_FLAGS] >> 4) * 4
    }

    #[inline]
    pub fn flags(&self) -> u8 {
        self.b()[field::OFFSET_FLAGS + 1]
    }

    #[inline]
    pub fn window(&self) -> u16 {
        read_u16(self.b(), field::WINDOW)
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.b(), field::CHECKSUM)
    }

    #[inline]
    pub fn urgent(&self) -> u16 {
        read_u16(self.b(), field::URGENT)
    }

    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }

    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }

    pub fn verify_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let len = self.b().len() as u16;
        checksum::verify_with(
            checksum::pseudo_header_v4(src, dst, ip_proto::TCP, len),
            self.b(),
        )
    }

    pub fn verify_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let len = self.b().len() as u32;
        checksum::verify_with(
            checksum::pseudo_header_v6(src, dst, ip_proto::TCP, len),
            self.b(),
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn fill(&mut self, pseudo: u64) {
        let b = self.buffer.as_mut();
        write_u16(b, field::CHECKSUM, 0);
        let c = checksum::checksum_with(pseudo, b);
        write_u16(b, field::CHECKSUM, c);
    }

    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let len = self.b().len() as u16;
        self.fill(checksum::pseudo_header_v4(src, dst, ip_proto::TCP, len));
    }

    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let len = self.b().len() as u32;
        self.fill(checksum::pseudo_header_v6(src, dst, ip_proto::TCP, len));
    }
}

/// The plain form of a TCP header without options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
}

impl TcpRepr {
    pub fn parse<T: AsRef<[u8]>>(p: &TcpPacket<T>) -> Self {
        Self {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq: p.seq(),
            ack: p.ack(),
            flags: p.flags(),
            window: p.window(),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header with a zero checksum and urgent pointer.
    pub fn emit(&self, buf: &mut [u8]) {
        write_u16(buf, field::SRC_PORT, self.src_port);
        write_u16(buf, field::DST_PORT, self.dst_port);
        write_u32(buf, field::SEQ, self.seq);
        write_u32(buf, field::ACK, self.ack);
        buf[field::OFFSET_FLAGS] = (HEADER_LEN as u8 / 4) << 4;
        buf[field::OFFSET_FLAGS + 1] = self.flags;
        write_u16(buf, field::WINDOW, self.window);
        write_u16(buf, field::CHECKSUM, 0);
        write_u16(buf, field::URGENT, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use proptest::prelude::*;

    #[test]
    fn syn_ack_with_options_from_scapy() {
        let seg = &fixtures::IPV4_TCP_OPTIONS[34..];
        let p = TcpPacket::new_checked(seg).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.seq(), p.ack()),
            (40000, 443, 1000, 2000)
        );
        assert_eq!(p.flags(), flags::SYN | flags::ACK);
        assert_eq!((p.window(), p.header_len()), (64240, 40));
        assert_eq!(&p.options()[..4], &[2, 4, 0x05, 0xb4], "MSS 1460 first");
        assert!(p.payload().is_empty());
        assert!(p.verify_v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)));
    }

    #[test]
    fn over_ipv6_from_scapy() {
        let seg = &fixtures::IPV6_TCP[54..];
        let p = TcpPacket::new_checked(seg).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.flags()),
            (40001, 50000, flags::PSH | flags::ACK)
        );
        assert_eq!(p.payload(), b"data");
        let (s, d) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        assert!(p.verify_v6(s, d));
        let mut b = seg.to_vec();
        let mut m = TcpPacket::new_checked(&mut b[..]).unwrap();
        m.fill_checksum_v6(s, d);
        assert_eq!(b, seg);
        let mut h = [0u8; 20];
        TcpRepr::parse(&p).emit(&mut h);
        assert_eq!(&h[..16], &seg[..16]);
    }

    #[test]
    fn malformed_offsets_are_named() {
        let seg = &fixtures::IPV4_TCP_OPTIONS[34..];
        for n in 0..seg.len() {
            let want = if n < 20 {
                WireError::TcpTruncated
            } else {
                WireError::TcpBadDataOffset
            };
            assert_eq!(
                TcpPacket::new_checked(&seg[..n]).unwrap_err(),
                want,
                "cut at {n}"
            );
        }
        let mut b = seg.to_vec();
        b[12] = 0x40;
        assert_eq!(
            TcpPacket::new_checked(&b[..]).unwrap_err(),
            WireError::TcpBadDataOffset
        );
    }

    proptest! {
        #[test]
        fn round_trip(sp in any::<u16>(), dp in any::<u16>(), seq in any::<u32>(), ack in any::<u32>(), fl in any::<u8>(), w in any::<u16>()) {
            let r = TcpRepr { src_port: sp, dst_port: dp, seq, ack, flags: fl, window: w };
            let mut buf = [0u8; 20];
            r.emit(&mut buf);
            prop_assert_eq!(TcpRepr::parse(&TcpPacket::new_checked(&buf[..]).unwrap()), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = TcpPacket::new_checked(&data[..]) { let _ = (p.options(), p.payload()); }
        }
    }
}
