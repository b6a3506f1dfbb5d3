//! IPv6 (RFC 8200): the fixed header and a walker over the extension headers that a
//! forwarder must skip to find the transport header (hop-by-hop, routing, fragment,
//! destination options).

use crate::field::{read_u16, read_u32, write_u16, write_u32};
use crate::{WireError, ip_proto};
use core::net::Ipv6Addr;

mod field {
    pub const VER_TC_FL: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;
/// How many extension headers the walker follows before giving up (RFC 8200 sets no
/// limit; RFC 7112 and common practice bound the chain a forwarder reads).
pub const MAX_EXT_HEADERS: usize = 8;

view! {
    /// A view of an IPv6 packet.
    Ipv6Packet
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer`, checking the version and that the payload length fits.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Ipv6Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(WireError::Ipv6BadVersion);
        }
        if b.len() < HEADER_LEN + usize::from(read_u16(b, field::PAYLOAD_LEN)) {
            return Err(WireError::Ipv6Truncated);
        }
        Ok(Self { buffer })
    }

    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (read_u16(self.b(), field::VER_TC_FL) >> 4) as u8
    }

    #[inline]
    pub fn flow_label(&self) -> u32 {
        read_u32(self.b(), field::VER_TC_FL) & 0x000f_ffff
    }

    #[inline]
    pub fn payload_len(&self) -> u16 {
        read_u16(self.b(), field::PAYLOAD_LEN)
    }

    #[inline]
    pub fn next_header(&self) -> u8 {
        self.b()[field::NEXT_HEADER]
    }

    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    #[inline]
    pub fn src(&self) -> Ipv6Addr {
        addr_at(self.b(), field::SRC)
    }

    #[inline]
    pub fn dst(&self) -> Ipv6Addr {
        addr_at(self.b(), field::DST)
    }

    /// Everything after the fixed header, up to the payload length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// Walks the extension headers to the upper-layer header.
    pub fn upper_layer(&self) -> Result<UpperLayer, WireError> {
        walk_extension_headers(self.next_header(), self.payload())
    }
}

fn addr_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(a)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Decrements the hop limit (IPv6 has no header checksum). Returns the new value; a
    /// packet at 0 or 1 is left unchanged for the caller to drop.
    #[inline]
    pub fn decrement_hop_limit(&mut self) -> u8 {
        let b = self.buffer.as_mut();
        if b[field::HOP_LIMIT] <= 1 {
            return 0;
        }
        b[field::HOP_LIMIT] -= 1;
        b[field::HOP_LIMIT]
    }
}

/// Fragment header fields (RFC 8200 section 4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentInfo {
    /// Offset in bytes.
    pub offset: u16,
    pub more: bool,
    pub ident: u32,
}

/// Where the transport header is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpperLayer {
    /// The upper-layer protocol (ip_proto::*; IPV6_NONXT when there is none).
    pub protocol: u8,
    /// Offset of the upper-layer header from the start of the IPv6 payload (add
    /// [`HEADER_LEN`] for the offset from the IPv6 header).
    pub offset: usize,
    /// The fragment header, if the packet is a fragment.
    pub fragment: Option<FragmentInfo>,
}

impl UpperLayer {
    /// True when the transport header is present (not a non-first fragment).
    pub fn has_transport_header(&self) -> bool {
        self.fragment.is_none_or(|f| f.offset == 0)
    }
}

/// Skips hop-by-hop (which must come first), routing, fragment and destination-options
/// headers in `payload`, the first being `next_header`.
pub fn walk_extension_headers(
    mut next_header: u8,
    payload: &[u8],
) -> Result<UpperLayer, WireError> {
    let mut offset = 0usize;
    let mut fragment = None;
    for i in 0..=MAX_EXT_HEADERS {
        let len = match next_header {
            ip_proto::HOPOPT if i > 0 => return Err(WireError::Ipv6BadExtHeaderOrder),
            ip_proto::HOPOPT | ip_proto::IPV6_ROUTE | ip_proto::IPV6_OPTS => {
                if payload.len() < offset + 2 {
                    return Err(WireError::Ipv6ExtHeaderTruncated);
                }
                (usize::from(payload[offset + 1]) + 1) * 8
            }
            ip_proto::IPV6_FRAG => {
                if payload.len() < offset + 8 {
                    return Err(WireError::Ipv6ExtHeaderTruncated);
                }
                let off_m = read_u16(payload, offset + 2);
                fragment = Some(FragmentInfo {
                    offset: off_m & 0xfff8,
                    more: off_m & 1 == 1,
                    ident: read_u32(payload, offset + 4),
                });
                8
            }
            protocol => {
                return Ok(UpperLayer {
                    protocol,
                    offset,
                    fragment,
                });
            }
        };
        if payload.len() < offset + len {
            return Err(WireError::Ipv6ExtHeaderTruncated);
        }
        next_header = payload[offset];
        offset += len;
    }
    Err(WireError::Ipv6TooManyExtHeaders)
}

/// The plain form of the fixed IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next_header: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    pub payload_len: u16,
}

impl Ipv6Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Self {
        Self {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            payload_len: p.payload_len(),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header into the front of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        let word =
            (6 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff);
        write_u32(buf, field::VER_TC_FL, word);
        write_u16(buf, field::PAYLOAD_LEN, self.payload_len);
        buf[field::NEXT_HEADER] = self.next_header;
        buf[field::HOP_LIMIT] = self.hop_limit;
        buf[field::SRC..field::SRC + 16].copy_from_slice(&self.src.octets());
        buf[field::DST..field::DST + 16].copy_from_slice(&self.dst.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use proptest::prelude::*;

    fn ip(frame: &[u8]) -> &[u8] {
        &frame[14..]
    }

    #[test]
    fn fixed_header_from_scapy() {
        let p = Ipv6Packet::new_checked(ip(fixtures::IPV6_UDP)).unwrap();
        assert_eq!(p.src(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            (p.traffic_class(), p.flow_label(), p.hop_limit()),
            (0x28, 0x12345, 33)
        );
        assert_eq!((p.next_header(), p.payload_len()), (ip_proto::UDP, 13));
        assert_eq!(
            p.upper_layer().unwrap(),
            UpperLayer {
                protocol: ip_proto::UDP,
                offset: 0,
                fragment: None
            }
        );
        let mut buf = [0u8; 40];
        Ipv6Repr::parse(&p).emit(&mut buf);
        assert_eq!(&buf[..], &ip(fixtures::IPV6_UDP)[..40]);
    }

    #[test]
    fn extension_chain_from_scapy_is_walked() {
        let p = Ipv6Packet::new_checked(ip(fixtures::IPV6_EXT_CHAIN)).unwrap();
        let u = p.upper_layer().unwrap();
        // hop-by-hop 8 + routing 8 + fragment 8 + destination options 8
        assert_eq!((u.protocol, u.offset), (ip_proto::UDP, 32));
        assert_eq!(
            u.fragment,
            Some(FragmentInfo {
                offset: 0,
                more: true,
                ident: 0xabcd
            })
        );
        assert!(u.has_transport_header());
        assert_eq!(
            &p.payload()[u.offset..u.offset + 4],
            &[0, 9, 0, 10],
            "UDP ports 9 and 10"
        );
    }

    #[test]
    fn malformed_chains_are_named() {
        let good = ip(fixtures::IPV6_EXT_CHAIN);
        for n in 0..good.len() {
            assert_eq!(
                Ipv6Packet::new_checked(&good[..n]).unwrap_err(),
                WireError::Ipv6Truncated,
                "cut at {n}"
            );
        }
        let payload = &good[40..];
        for n in 0..32 {
            assert_eq!(
                walk_extension_headers(ip_proto::HOPOPT, &payload[..n]),
                Err(WireError::Ipv6ExtHeaderTruncated),
                "cut at {n}"
            );
        }
        // Hop-by-hop anywhere but first.
        assert_eq!(
            walk_extension_headers(
                ip_proto::IPV6_OPTS,
                &[0, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0]
            ),
            Err(WireError::Ipv6BadExtHeaderOrder)
        );
        // A chain of destination options longer than the walker follows.
        let mut long = Vec::new();
        for _ in 0..MAX_EXT_HEADERS + 1 {
            long.extend_from_slice(&[ip_proto::IPV6_OPTS, 0, 0, 0, 0, 0, 0, 0]);
        }
        assert_eq!(
            walk_extension_headers(ip_proto::IPV6_OPTS, &long),
            Err(WireError::Ipv6TooManyExtHeaders)
        );
        let mut v4 = good.to_vec();
        v4[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&v4[..]).unwrap_err(),
            WireError::Ipv6BadVersion
        );
    }

    #[test]
    fn hop_limit_decrement() {
        let mut b = ip(fixtures::IPV6_UDP).to_vec();
        let mut p = Ipv6Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.decrement_hop_limit(), 32);
    }

    proptest! {
        #[test]
        fn round_trip(src in any::<u128>(), dst in any::<u128>(), nh in any::<u8>(), hl in any::<u8>(), tc in any::<u8>(), fl in 0u32..(1 << 20), len in 0u16..64) {
            let r = Ipv6Repr { src: src.into(), dst: dst.into(), next_header: nh, hop_limit: hl, traffic_class: tc, flow_label: fl, payload_len: len };
            let mut buf = vec![0u8; 40 + usize::from(len)];
            r.emit(&mut buf);
            prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&buf[..]).unwrap()), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(nh in any::<u8>(), data in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = walk_extension_headers(nh, &data);
            if let Ok(p) = Ipv6Packet::new_checked(&data[..]) { let _ = p.upper_layer(); }
        }
    }
}
