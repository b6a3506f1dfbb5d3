//! MPLS label stacks (RFC 3032), as carried by MPLS-in-UDP (RFC 7510: UDP destination
//! port 6635, then the stack) and MPLS-in-GRE (RFC 4023: GRE protocol type 0x8847, then
//! the stack). The payload after the bottom of the stack is IPv4 or IPv6 (its first
//! nibble tells which) or, for L2 services, Ethernet, as the label says.

use crate::WireError;
use crate::field::{read_u32, write_u32};

pub const ENTRY_LEN: usize = 4;
/// The deepest stack ovr reads (an overlay uses one or two labels).
pub const MAX_DEPTH: usize = 8;

/// Reserved label values (RFC 3032 section 2.1).
pub mod reserved {
    pub const IPV4_EXPLICIT_NULL: u32 = 0;
    pub const ROUTER_ALERT: u32 = 1;
    pub const IPV6_EXPLICIT_NULL: u32 = 2;
    pub const IMPLICIT_NULL: u32 = 3;
    /// Entropy label indicator (RFC 6790).
    pub const ENTROPY_LABEL_INDICATOR: u32 = 7;
    /// Generic associated channel label (RFC 5586).
    pub const GAL: u32 = 13;
    /// OAM alert label (RFC 3429).
    pub const OAM_ALERT: u32 = 14;
    /// Extension label (RFC 7274).
    pub const EXTENSION: u32 = 15;
    /// Labels below this are reserved.
    pub const FIRST_UNRESERVED: u32 = 16;
}

/// One label stack entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LabelEntry {
    /// 20 bits.
    pub label: u32,
    /// Traffic class, 3 bits (RFC 5462).
    pub tc: u8,
    pub bottom: bool,
    pub ttl: u8,
}

impl LabelEntry {
    #[inline]
    pub fn from_word(w: u32) -> Self {
        Self {
            label: w >> 12,
            tc: ((w >> 9) & 7) as u8,
            bottom: w & 0x100 != 0,
            ttl: w as u8,
        }
    }

    #[inline]
    pub fn to_word(self) -> u32 {
        ((self.label & 0xf_ffff) << 12)
            | (u32::from(self.tc & 7) << 9)
            | (u32::from(self.bottom) << 8)
            | u32::from(self.ttl)
    }
}

/// A parsed label stack: the entries (no heap) and where the payload starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelStack {
    entries: [LabelEntry; MAX_DEPTH],
    depth: usize,
}

impl LabelStack {
    /// A stack of `labels`, top first; the last one gets the bottom-of-stack bit.
    /// At most [`MAX_DEPTH`] entries are kept.
    pub fn new(labels: &[LabelEntry]) -> Self {
        let mut entries = [LabelEntry::default(); MAX_DEPTH];
        let depth = labels.len().min(MAX_DEPTH);
        for (i, l) in labels[..depth].iter().enumerate() {
            entries[i] = LabelEntry {
                bottom: i + 1 == depth,
                ..*l
            };
        }
        Self { entries, depth }
    }

    /// Reads entries until the bottom-of-stack bit.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        let mut s = Self {
            entries: [LabelEntry::default(); MAX_DEPTH],
            depth: 0,
        };
        loop {
            let at = s.depth * ENTRY_LEN;
            if b.len() < at + ENTRY_LEN {
                return Err(WireError::MplsTruncated);
            }
            if s.depth == MAX_DEPTH {
                return Err(WireError::MplsStackTooDeep);
            }
            let e = LabelEntry::from_word(read_u32(b, at));
            s.entries[s.depth] = e;
            s.depth += 1;
            if e.bottom {
                return Ok(s);
            }
        }
    }

    pub fn entries(&self) -> &[LabelEntry] {
        &self.entries[..self.depth]
    }

    /// The top entry (the one a receiver looks up).
    pub fn top(&self) -> LabelEntry {
        self.entries[0]
    }

    /// Bytes the stack takes, i.e. the payload's offset.
    pub fn buffer_len(&self) -> usize {
        self.depth * ENTRY_LEN
    }

    pub fn emit(&self, buf: &mut [u8]) {
        for (i, e) in self.entries().iter().enumerate() {
            write_u32(buf, i * ENTRY_LEN, e.to_word());
        }
    }
}

/// The IP version of an MPLS payload from its first nibble (4 or 6), as RFC 4023
/// section 3 and RFC 7510 section 3 allow a receiver to infer it.
pub fn payload_ip_version(payload: &[u8]) -> Option<u8> {
    match payload.first()? >> 4 {
        v @ (4 | 6) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use proptest::prelude::*;

    #[test]
    fn two_label_stack_in_udp_from_scapy() {
        let f = fixtures::MPLS_IN_UDP;
        assert_eq!(crate::field::read_u16(f, 36), crate::udp_port::MPLS_IN_UDP);
        let s = LabelStack::parse(&f[42..]).unwrap();
        assert_eq!(
            s.entries(),
            &[
                LabelEntry {
                    label: 1000,
                    tc: 2,
                    bottom: false,
                    ttl: 63
                },
                LabelEntry {
                    label: 17,
                    tc: 0,
                    bottom: true,
                    ttl: 62
                },
            ]
        );
        assert_eq!(payload_ip_version(&f[42 + s.buffer_len()..]), Some(4));
        let mut b = [0u8; 8];
        s.emit(&mut b);
        assert_eq!(&b[..], &f[42..50]);
    }

    #[test]
    fn malformed_stacks_are_named() {
        let f = &fixtures::MPLS_IN_UDP[42..50];
        for n in 0..8 {
            assert_eq!(
                LabelStack::parse(&f[..n]),
                Err(WireError::MplsTruncated),
                "cut at {n}"
            );
        }
        let deep = [0u8; 4 * (MAX_DEPTH + 1)];
        assert_eq!(LabelStack::parse(&deep), Err(WireError::MplsStackTooDeep));
        assert_eq!(payload_ip_version(&[0x20]), None);
    }

    proptest! {
        #[test]
        fn round_trip(entries in proptest::collection::vec((0u32..(1 << 20), 0u8..8, any::<u8>()), 1..=MAX_DEPTH)) {
            let e: Vec<LabelEntry> = entries.iter().map(|&(label, tc, ttl)| LabelEntry { label, tc, bottom: false, ttl }).collect();
            let s = LabelStack::new(&e);
            let mut b = vec![0u8; s.buffer_len()];
            s.emit(&mut b);
            prop_assert_eq!(LabelStack::parse(&b).unwrap(), s);
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..48)) {
            let _ = LabelStack::parse(&data);
        }
    }
}
