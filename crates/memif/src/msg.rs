//! The control messages of memif protocol version 2.0, as libmemif, VPP and DPDK's
//! net_memif lay them out (VPP `src/plugins/memif/memif.h`, DPDK
//! `drivers/net/memif/memif.h`): every message is one packed 128-byte record, a 16-bit
//! type followed by the body of that type, sent as one SOCK_SEQPACKET datagram.
//!
//! Hand-written rather than derived (e.g. with `zerocopy`): the layout is a packed C
//! union whose body starts at byte 2, so most fields are unaligned, and each body is
//! small; byte ranges checked once against the fixed length are as short and need no
//! `unsafe`. [`Message`] is a thin view (getters over `AsRef`, setters over `AsMut`);
//! [`Msg`] is the decoded, owned form the control channel works with.

use core::ops::Range;

/// The size of every control message.
pub const MSG_LEN: usize = 128;
/// Protocol version 2.0, as a major << 8 | minor.
pub const VERSION: u16 = 0x0200;
/// The value every ring's `cookie` field holds.
pub const COOKIE: u32 = 0x03E3_1F20;
/// The length of the name fields (application and interface names).
pub const NAME_LEN: usize = 32;
/// The length of the secret.
pub const SECRET_LEN: usize = 24;
/// The length of a disconnect reason.
pub const REASON_LEN: usize = 96;
/// ADD_RING's flag: the ring carries frames from the client to the server.
pub const ADD_RING_FLAG_C2S: u16 = 1;

/// Message types (`memif_msg_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum MsgType {
    Ack = 1,
    Hello = 2,
    Init = 3,
    AddRegion = 4,
    AddRing = 5,
    Connect = 6,
    Connected = 7,
    Disconnect = 8,
}

impl MsgType {
    pub fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            1 => Self::Ack,
            2 => Self::Hello,
            3 => Self::Init,
            4 => Self::AddRegion,
            5 => Self::AddRing,
            6 => Self::Connect,
            7 => Self::Connected,
            8 => Self::Disconnect,
            _ => return None,
        })
    }
}

/// What a memif interface carries (`memif_interface_mode_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Ethernet frames.
    #[default]
    Ethernet,
    /// IPv4 or IPv6 packets with no link-layer header.
    Ip,
    /// Punt/inject (VPP): not supported by ovr.
    PuntInject,
}

impl Mode {
    pub fn to_u8(self) -> u8 {
        match self {
            Mode::Ethernet => 0,
            Mode::Ip => 1,
            Mode::PuntInject => 2,
        }
    }

    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Mode::Ethernet),
            1 => Some(Mode::Ip),
            2 => Some(Mode::PuntInject),
            _ => None,
        }
    }
}

/// Byte ranges of the fields, from the start of the message (the body begins at 2).
mod field {
    use core::ops::Range;
    pub const TYPE: Range<usize> = 0..2;

    pub const HELLO_NAME: Range<usize> = 2..34;
    pub const HELLO_MIN_VERSION: Range<usize> = 34..36;
    pub const HELLO_MAX_VERSION: Range<usize> = 36..38;
    pub const HELLO_MAX_REGION: Range<usize> = 38..40;
    pub const HELLO_MAX_S2C_RING: Range<usize> = 40..42;
    pub const HELLO_MAX_C2S_RING: Range<usize> = 42..44;
    pub const HELLO_MAX_LOG2_RING_SIZE: usize = 44;

    pub const INIT_VERSION: Range<usize> = 2..4;
    pub const INIT_ID: Range<usize> = 4..8;
    pub const INIT_MODE: usize = 8;
    pub const INIT_SECRET: Range<usize> = 9..33;
    pub const INIT_NAME: Range<usize> = 33..65;

    pub const REGION_INDEX: Range<usize> = 2..4;
    pub const REGION_SIZE: Range<usize> = 4..12;

    pub const RING_FLAGS: Range<usize> = 2..4;
    pub const RING_INDEX: Range<usize> = 4..6;
    pub const RING_REGION: Range<usize> = 6..8;
    pub const RING_OFFSET: Range<usize> = 8..12;
    pub const RING_LOG2_SIZE: usize = 12;
    pub const RING_PRIVATE_HDR_SIZE: Range<usize> = 13..15;

    pub const IF_NAME: Range<usize> = 2..34;

    pub const DISC_CODE: Range<usize> = 2..6;
    pub const DISC_STRING: Range<usize> = 6..102;
}

/// Why bytes received are not a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MsgError {
    #[error("message of {0} bytes (a message has 128)")]
    Length(usize),
    #[error("unknown message type {0}")]
    UnknownType(u16),
}

/// A view of one control message over bytes whose length was checked.
#[derive(Debug, Clone)]
pub struct Message<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Message<T> {
    /// Wraps `buf`, which must be exactly [`MSG_LEN`] bytes long.
    pub fn new_checked(buf: T) -> Result<Self, MsgError> {
        let n = buf.as_ref().len();
        if n != MSG_LEN {
            return Err(MsgError::Length(n));
        }
        Ok(Self { buf })
    }

    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }

    fn u16_at(&self, r: Range<usize>) -> u16 {
        let b = &self.b()[r];
        u16::from_le_bytes([b[0], b[1]])
    }

    fn u32_at(&self, r: Range<usize>) -> u32 {
        let b = &self.b()[r];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    fn u64_at(&self, r: Range<usize>) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.b()[r]);
        u64::from_le_bytes(a)
    }

    pub fn msg_type(&self) -> u16 {
        self.u16_at(field::TYPE)
    }

    /// A NUL-padded string field, read no further than its own length.
    fn string(&self, r: Range<usize>) -> String {
        let b = &self.b()[r];
        let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Message<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    fn set_u16(&mut self, r: Range<usize>, v: u16) {
        self.bm()[r].copy_from_slice(&v.to_le_bytes());
    }

    fn set_u32(&mut self, r: Range<usize>, v: u32) {
        self.bm()[r].copy_from_slice(&v.to_le_bytes());
    }

    fn set_u64(&mut self, r: Range<usize>, v: u64) {
        self.bm()[r].copy_from_slice(&v.to_le_bytes());
    }

    /// Writes `s` into a string field, cut to leave at least one NUL at its end.
    fn set_string(&mut self, r: Range<usize>, s: &[u8]) {
        let f = &mut self.bm()[r];
        f.fill(0);
        let n = s.len().min(f.len() - 1);
        f[..n].copy_from_slice(&s[..n]);
    }

    pub fn set_msg_type(&mut self, t: MsgType) {
        self.set_u16(field::TYPE, t as u16);
    }
}

/// HELLO (server to client): what the server accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub name: String,
    pub min_version: u16,
    pub max_version: u16,
    /// The highest region index (count - 1).
    pub max_region: u16,
    /// The highest ring index of each direction (count - 1).
    pub max_s2c_ring: u16,
    pub max_c2s_ring: u16,
    pub max_log2_ring_size: u8,
}

/// INIT (client to server): which interface the client wants, and as what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Init {
    pub version: u16,
    pub id: u32,
    /// The raw mode byte (checked by the receiver against its own mode).
    pub mode: u8,
    pub secret: [u8; SECRET_LEN],
    pub name: String,
}

/// ADD_REGION (client to server); the region's memfd comes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddRegion {
    pub index: u16,
    pub size: u64,
}

/// ADD_RING (client to server); the ring's interrupt eventfd comes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddRing {
    pub flags: u16,
    pub index: u16,
    pub region: u16,
    pub offset: u32,
    pub log2_size: u8,
    pub private_hdr_size: u16,
}

impl AddRing {
    pub fn c2s(&self) -> bool {
        self.flags & ADD_RING_FLAG_C2S != 0
    }
}

/// One decoded control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    Ack,
    Hello(Hello),
    Init(Init),
    AddRegion(AddRegion),
    AddRing(AddRing),
    /// The client's interface name.
    Connect(String),
    /// The server's interface name.
    Connected(String),
    Disconnect {
        code: u32,
        reason: String,
    },
}

impl Msg {
    /// Decodes one received message; any length but 128 and any unknown type is an error.
    pub fn parse(buf: &[u8]) -> Result<Msg, MsgError> {
        let m = Message::new_checked(buf)?;
        let t = m.msg_type();
        let Some(kind) = MsgType::from_u16(t) else {
            return Err(MsgError::UnknownType(t));
        };
        Ok(match kind {
            MsgType::Ack => Msg::Ack,
            MsgType::Hello => Msg::Hello(Hello {
                name: m.string(field::HELLO_NAME),
                min_version: m.u16_at(field::HELLO_MIN_VERSION),
                max_version: m.u16_at(field::HELLO_MAX_VERSION),
                max_region: m.u16_at(field::HELLO_MAX_REGION),
                max_s2c_ring: m.u16_at(field::HELLO_MAX_S2C_RING),
                max_c2s_ring: m.u16_at(field::HELLO_MAX_C2S_RING),
                max_log2_ring_size: m.b()[field::HELLO_MAX_LOG2_RING_SIZE],
            }),
            MsgType::Init => {
                let mut secret = [0u8; SECRET_LEN];
                secret.copy_from_slice(&m.b()[field::INIT_SECRET]);
                Msg::Init(Init {
                    version: m.u16_at(field::INIT_VERSION),
                    id: m.u32_at(field::INIT_ID),
                    mode: m.b()[field::INIT_MODE],
                    secret,
                    name: m.string(field::INIT_NAME),
                })
            }
            MsgType::AddRegion => Msg::AddRegion(AddRegion {
                index: m.u16_at(field::REGION_INDEX),
                size: m.u64_at(field::REGION_SIZE),
            }),
            MsgType::AddRing => Msg::AddRing(AddRing {
                flags: m.u16_at(field::RING_FLAGS),
                index: m.u16_at(field::RING_INDEX),
                region: m.u16_at(field::RING_REGION),
                offset: m.u32_at(field::RING_OFFSET),
                log2_size: m.b()[field::RING_LOG2_SIZE],
                private_hdr_size: m.u16_at(field::RING_PRIVATE_HDR_SIZE),
            }),
            MsgType::Connect => Msg::Connect(m.string(field::IF_NAME)),
            MsgType::Connected => Msg::Connected(m.string(field::IF_NAME)),
            MsgType::Disconnect => Msg::Disconnect {
                code: m.u32_at(field::DISC_CODE),
                reason: m.string(field::DISC_STRING),
            },
        })
    }

    pub fn msg_type(&self) -> MsgType {
        match self {
            Msg::Ack => MsgType::Ack,
            Msg::Hello(_) => MsgType::Hello,
            Msg::Init(_) => MsgType::Init,
            Msg::AddRegion(_) => MsgType::AddRegion,
            Msg::AddRing(_) => MsgType::AddRing,
            Msg::Connect(_) => MsgType::Connect,
            Msg::Connected(_) => MsgType::Connected,
            Msg::Disconnect { .. } => MsgType::Disconnect,
        }
    }

    /// The 128 bytes of this message; strings longer than their field are cut.
    pub fn emit(&self) -> [u8; MSG_LEN] {
        let mut buf = [0u8; MSG_LEN];
        let mut m = Message { buf: &mut buf[..] };
        m.set_msg_type(self.msg_type());
        match self {
            Msg::Ack => {}
            Msg::Hello(h) => {
                m.set_string(field::HELLO_NAME, h.name.as_bytes());
                m.set_u16(field::HELLO_MIN_VERSION, h.min_version);
                m.set_u16(field::HELLO_MAX_VERSION, h.max_version);
                m.set_u16(field::HELLO_MAX_REGION, h.max_region);
                m.set_u16(field::HELLO_MAX_S2C_RING, h.max_s2c_ring);
                m.set_u16(field::HELLO_MAX_C2S_RING, h.max_c2s_ring);
                m.bm()[field::HELLO_MAX_LOG2_RING_SIZE] = h.max_log2_ring_size;
            }
            Msg::Init(i) => {
                m.set_u16(field::INIT_VERSION, i.version);
                m.set_u32(field::INIT_ID, i.id);
                m.bm()[field::INIT_MODE] = i.mode;
                m.bm()[field::INIT_SECRET].copy_from_slice(&i.secret);
                m.set_string(field::INIT_NAME, i.name.as_bytes());
            }
            Msg::AddRegion(r) => {
                m.set_u16(field::REGION_INDEX, r.index);
                m.set_u64(field::REGION_SIZE, r.size);
            }
            Msg::AddRing(r) => {
                m.set_u16(field::RING_FLAGS, r.flags);
                m.set_u16(field::RING_INDEX, r.index);
                m.set_u16(field::RING_REGION, r.region);
                m.set_u32(field::RING_OFFSET, r.offset);
                m.bm()[field::RING_LOG2_SIZE] = r.log2_size;
                m.set_u16(field::RING_PRIVATE_HDR_SIZE, r.private_hdr_size);
            }
            Msg::Connect(n) | Msg::Connected(n) => m.set_string(field::IF_NAME, n.as_bytes()),
            Msg::Disconnect { code, reason } => {
                m.set_u32(field::DISC_CODE, *code);
                m.set_string(field::DISC_STRING, reason.as_bytes());
            }
        }
        buf
    }
}

/// A secret as configured (up to 24 bytes), NUL-padded as it travels.
pub fn secret_bytes(s: &str) -> Option<[u8; SECRET_LEN]> {
    let b = s.as_bytes();
    if b.len() > SECRET_LEN || b.contains(&0) {
        return None;
    }
    let mut out = [0u8; SECRET_LEN];
    out[..b.len()].copy_from_slice(b);
    Some(out)
}

/// Compares two secrets in time independent of where they differ.
pub fn secrets_equal(a: &[u8; SECRET_LEN], b: &[u8; SECRET_LEN]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An INIT as DPDK 22.11's testpmd sends it (id 7, ethernet, secret "abc", name
    /// "DPDK 22.11.4"), written byte by byte from the packed C layout.
    fn dpdk_init() -> [u8; MSG_LEN] {
        let mut b = [0u8; MSG_LEN];
        b[0] = 3; // type INIT
        b[2..4].copy_from_slice(&[0x00, 0x02]); // version 2.0
        b[4..8].copy_from_slice(&[7, 0, 0, 0]);
        b[8] = 0;
        b[9..12].copy_from_slice(b"abc");
        b[33..45].copy_from_slice(b"DPDK 22.11.4");
        b
    }

    #[test]
    fn init_from_c_layout() {
        let Msg::Init(i) = Msg::parse(&dpdk_init()).unwrap() else {
            panic!("not an INIT")
        };
        assert_eq!(i.version, VERSION);
        assert_eq!(i.id, 7);
        assert_eq!(i.mode, 0);
        assert_eq!(&i.secret[..4], b"abc\0");
        assert_eq!(i.name, "DPDK 22.11.4");
        assert_eq!(Msg::Init(i).emit(), dpdk_init());
    }

    #[test]
    fn add_ring_and_region_layout() {
        let mut b = [0u8; MSG_LEN];
        b[0] = 5;
        b[2] = 1; // C2S
        b[4] = 3; // index
        b[6] = 0; // region
        b[8..12].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        b[12] = 10;
        let m = Msg::parse(&b).unwrap();
        let Msg::AddRing(r) = &m else { panic!() };
        assert!(r.c2s());
        assert_eq!(
            (r.index, r.region, r.offset, r.log2_size),
            (3, 0, 0x1234_5678, 10)
        );
        assert_eq!(m.emit(), b);

        let mut b = [0u8; MSG_LEN];
        b[0] = 4;
        b[2] = 2;
        b[4..12].copy_from_slice(&(1u64 << 33).to_le_bytes());
        assert_eq!(
            Msg::parse(&b).unwrap(),
            Msg::AddRegion(AddRegion {
                index: 2,
                size: 1 << 33
            })
        );
    }

    #[test]
    fn hello_layout() {
        let h = Hello {
            name: "ovr".into(),
            min_version: VERSION,
            max_version: VERSION,
            max_region: 255,
            max_s2c_ring: 1,
            max_c2s_ring: 2,
            max_log2_ring_size: 14,
        };
        let b = Msg::Hello(h.clone()).emit();
        assert_eq!(&b[..5], &[2, 0, b'o', b'v', b'r']);
        assert_eq!(&b[34..45], &[0, 2, 0, 2, 255, 0, 1, 0, 2, 0, 14]);
        assert_eq!(Msg::parse(&b).unwrap(), Msg::Hello(h));
    }

    #[test]
    fn lengths_and_types_checked() {
        assert_eq!(Msg::parse(&[0u8; 127]), Err(MsgError::Length(127)));
        assert_eq!(Msg::parse(&[0u8; 129]), Err(MsgError::Length(129)));
        assert_eq!(Msg::parse(&[]), Err(MsgError::Length(0)));
        let mut b = [0u8; MSG_LEN];
        assert_eq!(Msg::parse(&b), Err(MsgError::UnknownType(0)));
        b[0] = 9;
        assert_eq!(Msg::parse(&b), Err(MsgError::UnknownType(9)));
    }

    #[test]
    fn strings_stay_in_their_field() {
        // A name with no NUL fills its field; the next field is not read into it.
        let mut b = [b'x'; MSG_LEN];
        b[0] = 6;
        b[1] = 0;
        let Msg::Connect(n) = Msg::parse(&b).unwrap() else {
            panic!()
        };
        assert_eq!(n.len(), NAME_LEN);
        // A long reason is cut, keeping a NUL at the end.
        let long = "r".repeat(200);
        let e = Msg::Disconnect {
            code: 1,
            reason: long,
        }
        .emit();
        assert_eq!(e[6 + REASON_LEN - 1], 0);
        let Msg::Disconnect { reason, .. } = Msg::parse(&e).unwrap() else {
            panic!()
        };
        assert_eq!(reason.len(), REASON_LEN - 1);
    }

    #[test]
    fn secrets() {
        let a = secret_bytes("s3cret").unwrap();
        assert!(secrets_equal(&a, &secret_bytes("s3cret").unwrap()));
        assert!(!secrets_equal(&a, &secret_bytes("s3cres").unwrap()));
        assert!(secret_bytes(&"x".repeat(25)).is_none());
        assert!(secret_bytes(&"x".repeat(24)).is_some());
        assert!(secret_bytes("a\0b").is_none());
    }
}
