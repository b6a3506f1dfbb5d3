//! ICMPv6 (RFC 4443) echo and neighbour discovery (RFC 4861) solicitation and
//! advertisement: what the virtual gateway answers. The checksum covers the IPv6
//! pseudo-header.

use crate::ethernet::MacAddr;
use crate::field::{read_u16, write_u16};
use crate::{WireError, checksum, ip_proto};
use core::net::Ipv6Addr;

pub mod msg_type {
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;
}

/// Neighbour discovery option types (RFC 4861 section 4.6).
pub mod nd_option {
    pub const SOURCE_LL_ADDR: u8 = 1;
    pub const TARGET_LL_ADDR: u8 = 2;
}

pub const HEADER_LEN: usize = 4;
/// Type, code, checksum, flags/reserved, target address.
const ND_LEN: usize = 24;
const FLAG_ROUTER: u8 = 0x80;
const FLAG_SOLICITED: u8 = 0x40;
const FLAG_OVERRIDE: u8 = 0x20;

view! {
    /// A view of an ICMPv6 message.
    Icmpv6Packet
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Icmpv6Truncated);
        }
        Ok(Self { buffer })
    }

    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.b()[0]
    }

    #[inline]
    pub fn code(&self) -> u8 {
        self.b()[1]
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.b(), 2)
    }

    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let b = self.b();
        checksum::verify_with(
            checksum::pseudo_header_v6(src, dst, ip_proto::ICMPV6, b.len() as u32),
            b,
        )
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let b = self.buffer.as_mut();
        write_u16(b, 2, 0);
        let c = checksum::checksum_with(
            checksum::pseudo_header_v6(src, dst, ip_proto::ICMPV6, b.len() as u32),
            b,
        );
        write_u16(b, 2, c);
    }
}

/// The messages ovr builds and understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    EchoRequest {
        ident: u16,
        seq: u16,
        data: &'a [u8],
    },
    EchoReply {
        ident: u16,
        seq: u16,
        data: &'a [u8],
    },
    NeighborSolicit {
        target: Ipv6Addr,
        source_mac: Option<MacAddr>,
    },
    NeighborAdvert {
        router: bool,
        solicited: bool,
        override_: bool,
        target: Ipv6Addr,
        target_mac: Option<MacAddr>,
    },
    Other {
        msg_type: u8,
        code: u8,
    },
}

/// Finds the link-layer address option of `kind` in the options after an NS/NA header.
fn ll_addr_option(mut opts: &[u8], kind: u8) -> Result<Option<MacAddr>, WireError> {
    let mut found = None;
    while !opts.is_empty() {
        if opts.len() < 2 {
            return Err(WireError::NdpBadOption);
        }
        let len = usize::from(opts[1]) * 8;
        if len == 0 || len > opts.len() {
            return Err(WireError::NdpBadOption);
        }
        if opts[0] == kind && len >= 8 && found.is_none() {
            found = Some(MacAddr(opts[2..8].try_into().unwrap_or_default()));
        }
        opts = &opts[len..];
    }
    Ok(found)
}

fn addr16(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    Ipv6Addr::from(a)
}

impl<'a> Icmpv6Repr<'a> {
    /// Reads a message of the packet from `src` to `dst`, verifying the checksum.
    pub fn parse(
        p: &Icmpv6Packet<&'a [u8]>,
        src: Ipv6Addr,
        dst: Ipv6Addr,
    ) -> Result<Self, WireError> {
        if !p.verify_checksum(src, dst) {
            return Err(WireError::Icmpv6BadChecksum);
        }
        let b: &'a [u8] = p.buffer;
        Ok(match (p.msg_type(), p.code()) {
            (t @ (msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY), 0) => {
                if b.len() < 8 {
                    return Err(WireError::Icmpv6Truncated);
                }
                let (ident, seq, data) = (read_u16(b, 4), read_u16(b, 6), &b[8..]);
                if t == msg_type::ECHO_REQUEST {
                    Icmpv6Repr::EchoRequest { ident, seq, data }
                } else {
                    Icmpv6Repr::EchoReply { ident, seq, data }
                }
            }
            (t @ (msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT), 0) => {
                if b.len() < ND_LEN {
                    return Err(WireError::Icmpv6Truncated);
                }
                let target = addr16(&b[8..]);
                if t == msg_type::NEIGHBOR_SOLICIT {
                    let source_mac = ll_addr_option(&b[ND_LEN..], nd_option::SOURCE_LL_ADDR)?;
                    Icmpv6Repr::NeighborSolicit { target, source_mac }
                } else {
                    let f = b[4];
                    Icmpv6Repr::NeighborAdvert {
                        router: f & FLAG_ROUTER != 0,
                        solicited: f & FLAG_SOLICITED != 0,
                        override_: f & FLAG_OVERRIDE != 0,
                        target,
                        target_mac: ll_addr_option(&b[ND_LEN..], nd_option::TARGET_LL_ADDR)?,
                    }
                }
            }
            (msg_type, code) => Icmpv6Repr::Other { msg_type, code },
        })
    }

    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => {
                8 + data.len()
            }
            Icmpv6Repr::NeighborSolicit { source_mac: m, .. }
            | Icmpv6Repr::NeighborAdvert { target_mac: m, .. } => {
                ND_LEN + if m.is_some() { 8 } else { 0 }
            }
            Icmpv6Repr::Other { .. } => 8,
        }
    }

    /// Writes the message, checksum included, into `buf` (exactly `buffer_len()` bytes).
    pub fn emit(&self, buf: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) {
        buf.fill(0);
        let ll = |buf: &mut [u8], kind: u8, mac: Option<MacAddr>| {
            if let Some(m) = mac {
                buf[ND_LEN] = kind;
                buf[ND_LEN + 1] = 1;
                buf[ND_LEN + 2..ND_LEN + 8].copy_from_slice(&m.0);
            }
        };
        match *self {
            Icmpv6Repr::EchoRequest { ident, seq, data }
            | Icmpv6Repr::EchoReply { ident, seq, data } => {
                buf[0] = if matches!(self, Icmpv6Repr::EchoRequest { .. }) {
                    msg_type::ECHO_REQUEST
                } else {
                    msg_type::ECHO_REPLY
                };
                write_u16(buf, 4, ident);
                write_u16(buf, 6, seq);
                buf[8..8 + data.len()].copy_from_slice(data);
            }
            Icmpv6Repr::NeighborSolicit { target, source_mac } => {
                buf[0] = msg_type::NEIGHBOR_SOLICIT;
                buf[8..24].copy_from_slice(&target.octets());
                ll(buf, nd_option::SOURCE_LL_ADDR, source_mac);
            }
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target,
                target_mac,
            } => {
                buf[0] = msg_type::NEIGHBOR_ADVERT;
                buf[4] = (u8::from(router) * FLAG_ROUTER)
                    | (u8::from(solicited) * FLAG_SOLICITED)
                    | (u8::from(override_) * FLAG_OVERRIDE);
                buf[8..24].copy_from_slice(&target.octets());
                ll(buf, nd_option::TARGET_LL_ADDR, target_mac);
            }
            Icmpv6Repr::Other { msg_type, code } => {
                buf[0] = msg_type;
                buf[1] = code;
            }
        }
        Icmpv6Packet::new_unchecked(buf).fill_checksum(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use proptest::prelude::*;

    fn addrs(frame: &[u8]) -> (Ipv6Addr, Ipv6Addr) {
        (addr16(&frame[22..]), addr16(&frame[38..]))
    }

    fn check(frame: &[u8], want: Icmpv6Repr<'_>) {
        let (s, d) = addrs(frame);
        let m = &frame[54..];
        let r = Icmpv6Repr::parse(&Icmpv6Packet::new_checked(m).unwrap(), s, d).unwrap();
        assert_eq!(r, want);
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf, s, d);
        assert_eq!(buf, m, "emit reproduces scapy's bytes");
    }

    #[test]
    fn echo_ns_na_from_scapy() {
        check(
            fixtures::ICMPV6_ECHO,
            Icmpv6Repr::EchoRequest {
                ident: 1,
                seq: 2,
                data: b"ping6",
            },
        );
        check(
            fixtures::ICMPV6_NS,
            Icmpv6Repr::NeighborSolicit {
                target: "fe80::fe".parse().unwrap(),
                source_mac: Some("02:00:00:00:00:01".parse().unwrap()),
            },
        );
        check(
            fixtures::ICMPV6_NA,
            Icmpv6Repr::NeighborAdvert {
                router: false,
                solicited: true,
                override_: true,
                target: "fe80::fe".parse().unwrap(),
                target_mac: Some("02:00:00:00:00:fe".parse().unwrap()),
            },
        );
    }

    #[test]
    fn malformed_messages_are_named() {
        let (s, d) = addrs(fixtures::ICMPV6_NS);
        let m = &fixtures::ICMPV6_NS[54..];
        for n in 0..4 {
            assert_eq!(
                Icmpv6Packet::new_checked(&m[..n]).unwrap_err(),
                WireError::Icmpv6Truncated
            );
        }
        let mut b = m.to_vec();
        b[8] ^= 1;
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, d),
            Err(WireError::Icmpv6BadChecksum)
        );
        // An option of length zero would loop forever in a careless parser.
        let r = Icmpv6Repr::NeighborSolicit {
            target: "fe80::fe".parse().unwrap(),
            source_mac: Some(MacAddr([2; 6])),
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b, s, d);
        b[ND_LEN + 1] = 0;
        Icmpv6Packet::new_unchecked(&mut b[..]).fill_checksum(s, d);
        assert_eq!(
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap(), s, d),
            Err(WireError::NdpBadOption)
        );
    }

    proptest! {
        #[test]
        fn round_trip(kind in 0u8..4, a in any::<u16>(), t in any::<u128>(), mac in proptest::option::of(any::<[u8; 6]>()),
                      fl in any::<[bool; 3]>(), data in proptest::collection::vec(any::<u8>(), 0..32)) {
            let target = Ipv6Addr::from(t);
            let r = match kind {
                0 => Icmpv6Repr::EchoRequest { ident: a, seq: a ^ 1, data: &data },
                1 => Icmpv6Repr::EchoReply { ident: a, seq: a ^ 1, data: &data },
                2 => Icmpv6Repr::NeighborSolicit { target, source_mac: mac.map(MacAddr) },
                _ => Icmpv6Repr::NeighborAdvert { router: fl[0], solicited: fl[1], override_: fl[2], target, target_mac: mac.map(MacAddr) },
            };
            let (s, d) = (Ipv6Addr::LOCALHOST, target);
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf, s, d);
            prop_assert_eq!(Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&buf[..]).unwrap(), s, d).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut data = data;
            if data.len() >= 4 {
                // Make the checksum valid so that parsing goes past it.
                Icmpv6Packet::new_unchecked(&mut data[..]).fill_checksum(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
            }
            if let Ok(p) = Icmpv6Packet::new_checked(&data[..]) { let _ = Icmpv6Repr::parse(&p, Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST); }
        }
    }
}
