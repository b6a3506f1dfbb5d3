//! Ethernet II frames (IEEE 802.3 clause 3, RFC 894) and 802.1Q / 802.1ad VLAN tags.

use crate::WireError;
use crate::field::{read_u16, write_u16};
use core::fmt;
use core::str::FromStr;

/// EtherType values (IEEE registry) that ovr handles.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const IPV6: u16 = 0x86dd;
    pub const MPLS: u16 = 0x8847;
    pub const QINQ: u16 = 0x88a8;
    /// Transparent Ethernet bridging, for GRE carrying Ethernet.
    pub const TEB: u16 = 0x6558;
}

/// A MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

/// The bytes' order, compared as one word: the derived order called `memcmp` for six
/// bytes, at every step of a search of the control plane's maps keyed by MAC.
impl Ord for MacAddr {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        let word = |m: &Self| {
            let [a, b, c, d, e, f] = m.0;
            u64::from_be_bytes([0, 0, a, b, c, d, e, f])
        };
        word(self).cmp(&word(other))
    }
}

impl PartialOrd for MacAddr {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// True for group (multicast and broadcast) addresses: the I/G bit is set.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }
}

impl fmt::Display for MacAddr {
    // Written by hand, not with six `{:02x}`: every learnt bridge entry is written out
    // as text (the state file, the API), and the formatting machinery was most of that.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [b':'; 17];
        for (i, b) in self.0.iter().enumerate() {
            text[3 * i] = HEX[usize::from(b >> 4)];
            text[3 * i + 1] = HEX[usize::from(b & 0xf)];
        }
        f.write_str(core::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

/// A MAC address that did not parse as six colon-separated hex octets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacParseError;

impl fmt::Display for MacParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a MAC address is six hex octets separated by ':' (02:00:00:00:00:01)")
    }
}

impl core::error::Error for MacParseError {}

impl FromStr for MacAddr {
    type Err = MacParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for o in &mut out {
            let p = parts.next().ok_or(MacParseError)?;
            if p.is_empty() || p.len() > 2 {
                return Err(MacParseError);
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| MacParseError)?;
        }
        if parts.next().is_some() {
            return Err(MacParseError);
        }
        Ok(MacAddr(out))
    }
}

mod field {
    use crate::field::Field;
    pub const DST: Field = 0..6;
    pub const SRC: Field = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
}

/// Length of an untagged Ethernet header.
pub const HEADER_LEN: usize = field::PAYLOAD;
/// Length of one VLAN tag.
pub const VLAN_TAG_LEN: usize = 4;

view! {
    /// A view of an Ethernet II frame.
    EthernetFrame
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer`, checking that it holds a whole Ethernet header.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::EthernetTruncated);
        }
        Ok(Self { buffer })
    }

    #[inline]
    pub fn dst(&self) -> MacAddr {
        MacAddr(self.b()[field::DST].try_into().unwrap_or_default())
    }

    #[inline]
    pub fn src(&self) -> MacAddr {
        MacAddr(self.b()[field::SRC].try_into().unwrap_or_default())
    }

    /// The first EtherType (a VLAN TPID when the frame is tagged).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        read_u16(self.b(), field::ETHERTYPE)
    }

    /// Everything after the first EtherType (the tags, if any, then the payload).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.b()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    #[inline]
    pub fn set_dst(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&mac.0);
    }

    #[inline]
    pub fn set_src(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&mac.0);
    }

    #[inline]
    pub fn set_ethertype(&mut self, t: u16) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, t);
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// One 802.1Q (C-tag) or 802.1ad (S-tag) VLAN tag: priority, drop eligibility, VLAN id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// The tag protocol identifier: 0x8100 or 0x88a8.
    pub tpid: u16,
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
}

impl VlanTag {
    fn from_tci(tpid: u16, tci: u16) -> Self {
        Self {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    fn tci(&self) -> u16 {
        (u16::from(self.pcp & 7) << 13) | (u16::from(self.dei) << 12) | (self.vid & 0x0fff)
    }
}

/// The L2 header of a frame once its tags are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L2Header {
    pub dst: MacAddr,
    pub src: MacAddr,
    /// The outer tag (S-tag of a QinQ frame, or the only tag).
    pub outer: Option<VlanTag>,
    /// The inner tag of a double-tagged frame.
    pub inner: Option<VlanTag>,
    /// The EtherType of the payload.
    pub ethertype: u16,
    /// Offset of the payload from the start of the frame.
    pub payload_offset: usize,
}

fn is_tpid(t: u16) -> bool {
    t == ethertype::VLAN || t == ethertype::QINQ
}

/// Parses the Ethernet header and up to two stacked VLAN tags (802.1ad S-tag then an
/// 802.1Q C-tag, or two 802.1Q tags as some switches send).
#[inline]
pub fn parse_l2(frame: &[u8]) -> Result<L2Header, WireError> {
    let eth = EthernetFrame::new_checked(frame)?;
    let mut hdr = L2Header {
        dst: eth.dst(),
        src: eth.src(),
        outer: None,
        inner: None,
        ethertype: eth.ethertype(),
        payload_offset: HEADER_LEN,
    };
    while is_tpid(hdr.ethertype) {
        if hdr.inner.is_some() {
            return Err(WireError::VlanTooManyTags);
        }
        let at = hdr.payload_offset;
        if frame.len() < at + VLAN_TAG_LEN {
            return Err(WireError::VlanTruncated);
        }
        let tag = VlanTag::from_tci(hdr.ethertype, read_u16(frame, at));
        if hdr.outer.is_none() {
            hdr.outer = Some(tag);
        } else {
            hdr.inner = Some(tag);
        }
        hdr.ethertype = read_u16(frame, at + 2);
        hdr.payload_offset = at + VLAN_TAG_LEN;
    }
    Ok(hdr)
}

/// The plain form of an Ethernet header, with its tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    pub dst: MacAddr,
    pub src: MacAddr,
    pub tags: [Option<VlanTag>; 2],
    pub ethertype: u16,
}

impl EthernetRepr {
    pub fn parse(frame: &[u8]) -> Result<Self, WireError> {
        let h = parse_l2(frame)?;
        Ok(Self {
            dst: h.dst,
            src: h.src,
            tags: [h.outer, h.inner],
            ethertype: h.ethertype,
        })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + VLAN_TAG_LEN * self.tags.iter().flatten().count()
    }

    /// Writes the header into the front of `buf` (at least `buffer_len()` bytes).
    pub fn emit(&self, buf: &mut [u8]) {
        let mut eth = EthernetFrame::new_unchecked(&mut *buf);
        eth.set_dst(self.dst);
        eth.set_src(self.src);
        let mut at = field::ETHERTYPE;
        for tag in self.tags.iter().flatten() {
            write_u16(buf, at, tag.tpid);
            write_u16(buf, at + 2, tag.tci());
            at += VLAN_TAG_LEN;
        }
        write_u16(buf, at, self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn macs_order_as_their_bytes(a: [u8; 6], b: [u8; 6]) {
            prop_assert_eq!(MacAddr(a).cmp(&MacAddr(b)), a.cmp(&b));
        }
    }

    #[test]
    fn untagged_frame_from_scapy() {
        let f = fixtures::ETH_IPV4_UDP;
        let h = parse_l2(f).unwrap();
        assert_eq!(h.dst.to_string(), "02:00:00:00:00:02");
        assert_eq!(h.src.to_string(), "02:00:00:00:00:01");
        assert_eq!((h.outer, h.inner), (None, None));
        assert_eq!(h.ethertype, ethertype::IPV4);
        assert_eq!(h.payload_offset, 14);
    }

    #[test]
    fn dot1q_and_qinq_from_scapy() {
        let h = parse_l2(fixtures::ETH_DOT1Q).unwrap();
        assert_eq!(
            h.outer,
            Some(VlanTag {
                tpid: 0x8100,
                pcp: 5,
                dei: false,
                vid: 100
            })
        );
        assert_eq!(h.inner, None);
        assert_eq!((h.ethertype, h.payload_offset), (ethertype::IPV4, 18));

        let h = parse_l2(fixtures::ETH_QINQ).unwrap();
        assert_eq!(
            h.outer,
            Some(VlanTag {
                tpid: 0x88a8,
                pcp: 0,
                dei: false,
                vid: 300
            })
        );
        assert_eq!(
            h.inner,
            Some(VlanTag {
                tpid: 0x8100,
                pcp: 3,
                dei: true,
                vid: 42
            })
        );
        assert_eq!((h.ethertype, h.payload_offset), (ethertype::IPV6, 22));
    }

    #[test]
    fn emit_reproduces_scapy_headers() {
        for f in [
            fixtures::ETH_IPV4_UDP,
            fixtures::ETH_DOT1Q,
            fixtures::ETH_QINQ,
        ] {
            let r = EthernetRepr::parse(f).unwrap();
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf);
            assert_eq!(&buf[..], &f[..r.buffer_len()]);
        }
    }

    #[test]
    fn three_tags_are_refused_and_truncation_is_named() {
        let mut f = fixtures::ETH_QINQ[..12].to_vec();
        for _ in 0..3 {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
        }
        f.extend_from_slice(&[0x08, 0x00, 0, 0]);
        assert_eq!(parse_l2(&f), Err(WireError::VlanTooManyTags));
        for n in 0..22 {
            let e = parse_l2(&fixtures::ETH_QINQ[..n]).unwrap_err();
            let want = if n < 14 {
                WireError::EthernetTruncated
            } else {
                WireError::VlanTruncated
            };
            assert_eq!(e, want, "cut at {n}");
        }
    }

    #[test]
    fn mac_text() {
        let m: MacAddr = "02:0a:ff:00:00:01".parse().unwrap();
        assert_eq!(m.to_string(), "02:0a:ff:00:00:01");
        for b in 0..=255u8 {
            let m = MacAddr([b, 0, 0, 0, 0, b]);
            assert_eq!(m.to_string(), format!("{b:02x}:00:00:00:00:{b:02x}"));
            assert_eq!(m.to_string().parse::<MacAddr>(), Ok(m));
        }
        assert!(!m.is_multicast() && MacAddr::BROADCAST.is_multicast());
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "0g:00:00:00:00:00",
            "002:00:00:00:00:0",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
    }

    fn tag() -> impl Strategy<Value = VlanTag> {
        (
            prop_oneof![Just(0x8100u16), Just(0x88a8)],
            0u8..8,
            any::<bool>(),
            0u16..4096,
        )
            .prop_map(|(tpid, pcp, dei, vid)| VlanTag {
                tpid,
                pcp,
                dei,
                vid,
            })
    }

    proptest! {
        #[test]
        fn parse_emit_round_trip(dst in any::<[u8; 6]>(), src in any::<[u8; 6]>(),
                                 t0 in proptest::option::of(tag()), t1 in proptest::option::of(tag()),
                                 ethertype in prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x0806)]) {
            let tags = if t0.is_some() { [t0, t1] } else { [None, None] };
            let r = EthernetRepr { dst: MacAddr(dst), src: MacAddr(src), tags, ethertype };
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf);
            prop_assert_eq!(EthernetRepr::parse(&buf).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_l2(&data);
        }
    }
}
