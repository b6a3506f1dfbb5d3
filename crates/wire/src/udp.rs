//! UDP (RFC 768), with its checksum over the IPv4 or IPv6 pseudo-header.

use crate::field::{read_u16, write_u16};
use crate::{WireError, checksum, ip_proto};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

pub const HEADER_LEN: usize = 8;

view! {
    /// A view of a UDP datagram.
    UdpPacket
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps `buffer` (the IP payload), checking the header and the length field.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::UdpTruncated);
        }
        let len = usize::from(read_u16(b, field::LENGTH));
        if len < HEADER_LEN || len > b.len() {
            return Err(WireError::UdpBadLength);
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
    pub fn length(&self) -> u16 {
        read_u16(self.b(), field::LENGTH)
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.b(), field::CHECKSUM)
    }

    /// The payload, up to the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..usize::from(self.length())]
    }

    fn datagram(&self) -> &[u8] {
        &self.b()[..usize::from(self.length())]
    }

    /// Over IPv4 a zero checksum means "not computed" and is accepted (RFC 768).
    pub fn verify_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        self.checksum() == 0
            || checksum::verify_with(
                checksum::pseudo_header_v4(src, dst, ip_proto::UDP, self.length()),
                self.datagram(),
            )
    }

    /// Over IPv6 the checksum is mandatory (RFC 8200 section 8.1): zero is refused.
    /// (RFC 6935/6936 allow zero for tunnel encapsulations: see `verify_tunnel`.)
    pub fn verify_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        self.checksum() != 0
            && checksum::verify_with(
                checksum::pseudo_header_v6(src, dst, ip_proto::UDP, u32::from(self.length())),
                self.datagram(),
            )
    }

    /// The checksum a tunnel endpoint accepts (VXLAN, MPLS-in-UDP), over either IP
    /// version: none (zero; over IPv6 too, RFC 6935), a correct one, or one still to be
    /// finished by a device. That last is the pseudo-header sum alone, not inverted: what
    /// Linux leaves in a datagram whose checksum it offloads (`CHECKSUM_PARTIAL`). A veth
    /// never finishes it and hands such a datagram to an XDP program (an AF_XDP socket)
    /// as it is; only a sender on the same host makes one (the kernel's vxlan device,
    /// ovr's joined tunnel packets cut by the kernel). Taken as the kernel takes it: a
    /// random corruption passes that test as rarely (1 in 65536) as the checksum itself.
    pub fn verify_tunnel(&self, src: IpAddr, dst: IpAddr) -> bool {
        let pseudo = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                checksum::pseudo_header_v4(s, d, ip_proto::UDP, self.length())
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                checksum::pseudo_header_v6(s, d, ip_proto::UDP, u32::from(self.length()))
            }
            _ => return false,
        };
        // The two tests that need no pass over the datagram first.
        let c = self.checksum();
        c == 0 || c == checksum::fold(pseudo) || checksum::verify_with(pseudo, self.datagram())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    #[inline]
    pub fn set_src_port(&mut self, p: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, p);
    }

    #[inline]
    pub fn set_dst_port(&mut self, p: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, p);
    }

    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    fn fill(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::checksum_with(pseudo, self.datagram());
        // A computed zero is sent as all ones: zero means "no checksum" (RFC 768).
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.fill(checksum::pseudo_header_v4(
            src,
            dst,
            ip_proto::UDP,
            self.length(),
        ));
    }

    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.fill(checksum::pseudo_header_v6(
            src,
            dst,
            ip_proto::UDP,
            u32::from(self.length()),
        ));
    }
}

/// The plain form of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: u16,
}

impl UdpRepr {
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Self {
        Self {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: p.length() - HEADER_LEN as u16,
        }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum (fill it once the payload is in place).
    pub fn emit(&self, buf: &mut [u8]) {
        write_u16(buf, field::SRC_PORT, self.src_port);
        write_u16(buf, field::DST_PORT, self.dst_port);
        write_u16(buf, field::LENGTH, HEADER_LEN as u16 + self.payload_len);
        write_u16(buf, field::CHECKSUM, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use proptest::prelude::*;

    const V4: (Ipv4Addr, Ipv4Addr) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));

    fn v6() -> (Ipv6Addr, Ipv6Addr) {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        )
    }

    #[test]
    fn over_ipv4_from_scapy() {
        let p = UdpPacket::new_checked(&fixtures::ETH_IPV4_UDP[34..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.length()), (1234, 5678, 13));
        assert_eq!(p.payload(), b"hello");
        assert!(p.verify_v4(V4.0, V4.1));
        assert!(!p.verify_v4(V4.0, Ipv4Addr::new(10, 0, 0, 3)));
        let mut b = fixtures::ETH_IPV4_UDP[34..].to_vec();
        let mut m = UdpPacket::new_checked(&mut b[..]).unwrap();
        let want = m.checksum();
        m.fill_checksum_v4(V4.0, V4.1);
        assert_eq!(m.checksum(), want);
    }

    #[test]
    fn a_tunnel_takes_no_checksum_a_correct_one_or_one_left_to_the_device() {
        let (s, d) = (IpAddr::V6(v6().0), IpAddr::V6(v6().1));
        let mut b = fixtures::IPV6_UDP[54..].to_vec();
        let ok = |b: &[u8]| UdpPacket::new_checked(b).unwrap().verify_tunnel(s, d);
        assert!(ok(&b));
        b[6..8].fill(0);
        assert!(ok(&b), "zero over IPv6 (RFC 6935)");
        // The pseudo-header sum, as Linux leaves it for checksum offload.
        let len = u16::from_be_bytes([b[4], b[5]]);
        let partial = checksum::fold(checksum::pseudo_header_v6(
            v6().0,
            v6().1,
            ip_proto::UDP,
            u32::from(len),
        ));
        b[6..8].copy_from_slice(&partial.to_be_bytes());
        assert!(ok(&b));
        b[6..8].copy_from_slice(&(partial ^ 0x0101).to_be_bytes());
        assert!(!ok(&b));
        assert!(
            !UdpPacket::new_checked(&b[..])
                .unwrap()
                .verify_tunnel(IpAddr::V4(V4.0), d)
        );
    }

    #[test]
    fn over_ipv6_from_scapy() {
        let p = UdpPacket::new_checked(&fixtures::IPV6_UDP[54..]).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.payload()),
            (40002, 5000, &b"query"[..])
        );
        assert!(p.verify_v6(v6().0, v6().1));
        let mut b = fixtures::IPV6_UDP[54..].to_vec();
        b[6] = 0;
        b[7] = 0;
        assert!(
            !UdpPacket::new_checked(&b[..])
                .unwrap()
                .verify_v6(v6().0, v6().1),
            "zero checksum over IPv6"
        );
        let r = UdpRepr::parse(&p);
        let mut h = [0u8; 8];
        r.emit(&mut h);
        assert_eq!(&h[..6], &fixtures::IPV6_UDP[54..60]);
    }

    #[test]
    fn malformed_lengths_are_named() {
        let d = &fixtures::ETH_IPV4_UDP[34..];
        for n in 0..8 {
            assert_eq!(
                UdpPacket::new_checked(&d[..n]).unwrap_err(),
                WireError::UdpTruncated
            );
        }
        for n in 8..d.len() {
            assert_eq!(
                UdpPacket::new_checked(&d[..n]).unwrap_err(),
                WireError::UdpBadLength,
                "cut at {n}"
            );
        }
        let mut b = d.to_vec();
        b[5] = 7;
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap_err(),
            WireError::UdpBadLength
        );
    }

    proptest! {
        #[test]
        fn round_trip_and_checksum(sp in any::<u16>(), dp in any::<u16>(), payload in proptest::collection::vec(any::<u8>(), 0..40)) {
            let r = UdpRepr { src_port: sp, dst_port: dp, payload_len: payload.len() as u16 };
            let mut buf = vec![0u8; 8 + payload.len()];
            r.emit(&mut buf);
            buf[8..].copy_from_slice(&payload);
            let mut p = UdpPacket::new_checked(&mut buf[..]).unwrap();
            p.fill_checksum_v4(V4.0, V4.1);
            prop_assert!(p.verify_v4(V4.0, V4.1));
            p.fill_checksum_v6(v6().0, v6().1);
            prop_assert!(p.verify_v6(v6().0, v6().1));
            prop_assert_eq!(UdpRepr::parse(&p), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = UdpPacket::new_checked(&data[..]) { let _ = (p.payload(), p.verify_v4(V4.0, V4.1), p.verify_v6(v6().0, v6().1)); }
        }
    }
}
