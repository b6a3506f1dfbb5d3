//! ICMPv4 (RFC 792): echo for the virtual gateway, and the error messages a router sends
//! (time exceeded, destination unreachable) carrying the offending header.

use crate::field::{read_u16, write_u16};
use crate::{WireError, checksum};

/// Message types ovr reads or writes.
pub mod msg_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACHABLE: u8 = 3;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
}

pub const HEADER_LEN: usize = 8;

view! {
    /// A view of an ICMPv4 message.
    Icmpv4Packet
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Icmpv4Truncated);
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

    /// Echo identifier (meaningful for echo request/reply).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.b(), 4)
    }

    /// Echo sequence number.
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        read_u16(self.b(), 6)
    }

    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }

    pub fn verify_checksum(&self) -> bool {
        checksum::verify(self.b())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    pub fn fill_checksum(&mut self) {
        let b = self.buffer.as_mut();
        write_u16(b, 2, 0);
        let c = checksum::checksum(b);
        write_u16(b, 2, c);
    }
}

/// The messages ovr builds and understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
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
    /// Code 0: TTL exceeded in transit. `original` is the IP header plus at least 8
    /// bytes of the datagram that expired (RFC 792, RFC 1812 section 4.3.2.3).
    TimeExceeded {
        original: &'a [u8],
    },
    DestUnreachable {
        code: u8,
        original: &'a [u8],
    },
    Other {
        msg_type: u8,
        code: u8,
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Reads a message, verifying its checksum.
    pub fn parse(p: &Icmpv4Packet<&'a [u8]>) -> Result<Self, WireError> {
        if !p.verify_checksum() {
            return Err(WireError::Icmpv4BadChecksum);
        }
        let b: &'a [u8] = p.buffer;
        let data = &b[HEADER_LEN..];
        Ok(match (p.msg_type(), p.code()) {
            (msg_type::ECHO_REQUEST, 0) => Icmpv4Repr::EchoRequest {
                ident: p.echo_ident(),
                seq: p.echo_seq(),
                data,
            },
            (msg_type::ECHO_REPLY, 0) => Icmpv4Repr::EchoReply {
                ident: p.echo_ident(),
                seq: p.echo_seq(),
                data,
            },
            (msg_type::TIME_EXCEEDED, 0) => Icmpv4Repr::TimeExceeded { original: data },
            (msg_type::DEST_UNREACHABLE, code) => Icmpv4Repr::DestUnreachable {
                code,
                original: data,
            },
            (msg_type, code) => Icmpv4Repr::Other { msg_type, code },
        })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => {
                    data.len()
                }
                Icmpv4Repr::TimeExceeded { original }
                | Icmpv4Repr::DestUnreachable { original, .. } => original.len(),
                Icmpv4Repr::Other { .. } => 0,
            }
    }

    /// Writes the message, checksum included, into the front of `buf`
    /// (`buffer_len()` bytes).
    pub fn emit(&self, buf: &mut [u8]) {
        let (t, code, rest, body): (u8, u8, [u16; 2], &[u8]) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq, data } => {
                (msg_type::ECHO_REQUEST, 0, [ident, seq], data)
            }
            Icmpv4Repr::EchoReply { ident, seq, data } => {
                (msg_type::ECHO_REPLY, 0, [ident, seq], data)
            }
            Icmpv4Repr::TimeExceeded { original } => (msg_type::TIME_EXCEEDED, 0, [0, 0], original),
            Icmpv4Repr::DestUnreachable { code, original } => {
                (msg_type::DEST_UNREACHABLE, code, [0, 0], original)
            }
            Icmpv4Repr::Other { msg_type, code } => (msg_type, code, [0, 0], &[]),
        };
        let n = HEADER_LEN + body.len();
        buf[0] = t;
        buf[1] = code;
        write_u16(buf, 4, rest[0]);
        write_u16(buf, 6, rest[1]);
        buf[HEADER_LEN..n].copy_from_slice(body);
        Icmpv4Packet::new_unchecked(&mut buf[..n]).fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use proptest::prelude::*;

    #[test]
    fn echo_request_from_scapy() {
        let m = &fixtures::ICMPV4_ECHO[34..];
        let p = Icmpv4Packet::new_checked(m).unwrap();
        let r = Icmpv4Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Icmpv4Repr::EchoRequest {
                ident: 7,
                seq: 3,
                data: b"ping"
            }
        );
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf);
        assert_eq!(buf, m);
    }

    #[test]
    fn bad_checksum_and_truncation_are_named() {
        let m = &fixtures::ICMPV4_ECHO[34..];
        for n in 0..8 {
            assert_eq!(
                Icmpv4Packet::new_checked(&m[..n]).unwrap_err(),
                WireError::Icmpv4Truncated
            );
        }
        let mut b = m.to_vec();
        b[9] ^= 0x40;
        assert_eq!(
            Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&b[..]).unwrap()),
            Err(WireError::Icmpv4BadChecksum)
        );
    }

    proptest! {
        #[test]
        fn round_trip(kind in 0u8..4, a in any::<u16>(), b in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..40)) {
            let r = match kind {
                0 => Icmpv4Repr::EchoRequest { ident: a, seq: b, data: &data },
                1 => Icmpv4Repr::EchoReply { ident: a, seq: b, data: &data },
                2 => Icmpv4Repr::TimeExceeded { original: &data },
                _ => Icmpv4Repr::DestUnreachable { code: (a % 16) as u8, original: &data },
            };
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf);
            prop_assert_eq!(Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = Icmpv4Packet::new_checked(&data[..]) { let _ = Icmpv4Repr::parse(&p); }
        }
    }
}
