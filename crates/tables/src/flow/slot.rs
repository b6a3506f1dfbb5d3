//! How the table stores a flow: two cache lines, the first holding everything a packet
//! of an IPv4 flow reads and writes, so that a hit costs one line from memory.
//!
//! A [`FlowEntry`]'s fields take about 120 bytes; a hit reads the key (44 bytes as
//! [`FlowKey`] holds it), the epoch, the action, the flags and a bridged flow's MAC, and
//! writes three counters: 87 bytes, one line too many. Most of the key is the
//! IPv4-mapped prefix of its two addresses, so the first line keeps an IPv4 key in its
//! short form (the two 4-byte addresses) and an IPv6 one with its addresses in the
//! second line ("wide"): an IPv6 hit reads two lines, as every hit did before. The sender
//! a flow out of a tunnel compares is likewise kept short when it is an IPv4 VTEP.
//!
//! The table hands out entries by value ([`Slot::entry`]) and takes them back
//! ([`Slot::set`]); only the per-packet paths read the first line alone ([`FlowHead`]).

use super::key::{FlowKey, ipv4_mapped};
use super::table::{FlowAction, FlowEntry, FlowId};
use crate::ids::NextHopId;

/// The first 12 bytes of an IPv4-mapped IPv6 address.
const MAPPED: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/// `FlowHead::bits`: the action's kind, and where the sender is.
const ACT_FORWARD: u8 = 1;
const ACT_DROP: u8 = 2;
const ACT_KIND: u8 = 3;
/// The sender is not an IPv4 VTEP: its 16 bytes are in the second line.
const SENDER_WIDE: u8 = 0x80;

/// No reverse flow.
const NO_REVERSE: u32 = u32::MAX;

fn short_v4(a: &[u8; 16]) -> Option<[u8; 4]> {
    (a[..12] == MAPPED).then(|| [a[12], a[13], a[14], a[15]])
}

/// A key as the first line holds it: three words compared whole. `k0`: VRF and ports;
/// `k1`: protocol, bridged, wide (the addresses are in the second line) and the IPv4
/// source; `k2`: the IPv4 destination (both addresses zero when wide).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Short {
    k0: u64,
    k1: u64,
    k2: u32,
}

impl Short {
    #[inline]
    pub(super) fn of(k: &FlowKey) -> Self {
        let (src, dst, wide) = match (short_v4(&k.src), short_v4(&k.dst)) {
            (Some(s), Some(d)) => (u32::from_ne_bytes(s), u32::from_ne_bytes(d), 0u64),
            _ => (0, 0, 1),
        };
        Self {
            k0: u64::from(k.vrf) | (u64::from(k.src_port) << 32) | (u64::from(k.dst_port) << 48),
            k1: u64::from(k.protocol)
                | (u64::from(k.bridged) << 8)
                | (wide << 16)
                | (u64::from(src) << 32),
            k2: dst,
        }
    }

    /// The key's addresses are in the second line.
    #[inline]
    pub(super) fn wide(&self) -> bool {
        self.k1 & (1 << 16) != 0
    }
}

/// An entry's first cache line: what a hit reads and writes. `tests::slot_layout` pins it
/// to 64 bytes.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct FlowHead {
    /// The key's short form ([`Short`], laid out here without its padding).
    k0: u64,
    k1: u64,
    k2: u32,
    flags: u8,
    bits: u8,
    dst_mac: [u8; 6],
    /// The next hop (forward) or the drop reason, by `bits`' kind.
    act: u32,
    packets: u64,
    bytes: u64,
    last_seen: u64,
    epoch: u32,
    /// The sender as an IPv4 address (unless `SENDER_WIDE`).
    sender: [u8; 4],
}

impl FlowHead {
    #[inline]
    pub fn flags(&self) -> u8 {
        self.flags
    }

    #[inline]
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    #[inline]
    pub fn action(&self) -> Option<FlowAction> {
        match self.bits & ACT_KIND {
            ACT_FORWARD => Some(FlowAction::Forward {
                next_hop: NextHopId(self.act),
            }),
            ACT_DROP => Some(FlowAction::Drop {
                reason: self.act as u16,
            }),
            _ => None,
        }
    }

    /// The key's VRF.
    #[inline]
    pub fn vrf(&self) -> u32 {
        self.k0 as u32
    }

    /// The key is of a bridged flow.
    #[inline]
    pub fn bridged(&self) -> bool {
        self.k1 & (1 << 8) != 0
    }

    #[inline]
    fn short(&self) -> Short {
        Short {
            k0: self.k0,
            k1: self.k1,
            k2: self.k2,
        }
    }

    /// For a bridged flow, the destination MAC its next hop was looked up by.
    #[inline]
    pub fn dst_mac(&self) -> &[u8; 6] {
        &self.dst_mac
    }

    /// Whether `sender` (IPv4-mapped, as packet metadata holds it) is the flow's sender;
    /// `None` when the first line cannot say (the flow's sender is not an IPv4 VTEP: see
    /// the whole entry).
    #[inline]
    pub fn sender_is(&self, sender: &[u8; 16]) -> Option<bool> {
        if self.bits & SENDER_WIDE != 0 {
            return None;
        }
        Some(sender[..12] == MAPPED && sender[12..] == self.sender)
    }

    #[inline]
    pub(super) fn live(&self) -> bool {
        self.flags & super::table::flags::LIVE != 0
    }

    #[inline]
    pub(super) fn touch(&mut self, bytes: u64, now: u64) {
        self.packets += 1;
        self.bytes += bytes;
        self.last_seen = now;
    }
}

/// The second line: an IPv6 key's addresses, a sender that is not an IPv4 VTEP, and
/// what only the slow path reads.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct Tail {
    src: [u8; 16],
    dst: [u8; 16],
    sender: [u8; 16],
    created: u64,
    reverse: u32,
}

/// One flow as the table stores it, its two lines aligned together.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(128))]
pub(super) struct Slot {
    pub(super) head: FlowHead,
    tail: Tail,
}

impl Slot {
    /// Holds `e`.
    pub(super) fn new(e: &FlowEntry) -> Self {
        let mut s = Self::default();
        s.set(e);
        s
    }

    /// Whether this is `key`'s entry (`short`: the key's short form, [`Short::of`]).
    #[inline]
    pub(super) fn holds(&self, short: &Short, key: &FlowKey) -> bool {
        self.head.short() == *short
            && (!short.wide() || (self.tail.src == key.src && self.tail.dst == key.dst))
    }

    /// The flow's key.
    pub(super) fn key(&self) -> FlowKey {
        let Short { k0, k1, k2 } = self.head.short();
        let (src, dst) = if k1 & (1 << 16) != 0 {
            (self.tail.src, self.tail.dst)
        } else {
            (
                ipv4_mapped(((k1 >> 32) as u32).to_ne_bytes()),
                ipv4_mapped(k2.to_ne_bytes()),
            )
        };
        let mut k = FlowKey::default();
        k.src = src;
        k.dst = dst;
        k.vrf = k0 as u32;
        k.src_port = (k0 >> 32) as u16;
        k.dst_port = (k0 >> 48) as u16;
        k.protocol = k1 as u8;
        k.bridged = k1 & (1 << 8) != 0;
        k
    }

    pub(super) fn reverse(&self) -> Option<FlowId> {
        (self.tail.reverse != NO_REVERSE).then_some(FlowId(self.tail.reverse))
    }

    pub(super) fn set_reverse(&mut self, r: Option<FlowId>) {
        self.tail.reverse = r.map_or(NO_REVERSE, |r| r.0);
    }

    pub(super) fn last_seen(&self) -> u64 {
        self.head.last_seen
    }

    /// The whole entry.
    pub(super) fn entry(&self) -> FlowEntry {
        let h = &self.head;
        let sender = match h.bits & SENDER_WIDE {
            0 => ipv4_mapped(h.sender),
            _ => self.tail.sender,
        };
        FlowEntry {
            key: self.key(),
            flags: h.flags,
            epoch: h.epoch,
            action: h.action(),
            packets: h.packets,
            bytes: h.bytes,
            created: self.tail.created,
            last_seen: h.last_seen,
            reverse: self.reverse(),
            dst_mac: h.dst_mac,
            sender,
        }
    }

    /// Stores `e` whole.
    pub(super) fn set(&mut self, e: &FlowEntry) {
        let short = Short::of(&e.key);
        let (kind, act) = match e.action {
            Some(FlowAction::Forward { next_hop }) => (ACT_FORWARD, next_hop.0),
            Some(FlowAction::Drop { reason }) => (ACT_DROP, u32::from(reason)),
            None => (0, 0),
        };
        let (bits, sender4, wide_sender) = match short_v4(&e.sender) {
            Some(s) => (kind, s, [0; 16]),
            None => (kind | SENDER_WIDE, [0; 4], e.sender),
        };
        let (src, dst) = match short.wide() {
            true => (e.key.src, e.key.dst),
            false => ([0; 16], [0; 16]),
        };
        self.head = FlowHead {
            k0: short.k0,
            k1: short.k1,
            k2: short.k2,
            flags: e.flags,
            bits,
            dst_mac: e.dst_mac,
            act,
            packets: e.packets,
            bytes: e.bytes,
            last_seen: e.last_seen,
            epoch: e.epoch,
            sender: sender4,
        };
        self.tail = Tail {
            src,
            dst,
            sender: wide_sender,
            created: e.created,
            reverse: e.reverse.map_or(NO_REVERSE, |r| r.0),
        };
    }
}

/// A flow entry lent out for changing ([`super::FlowTable::get_mut`]): a copy, stored
/// back when it goes. Its key must not change (the table files the flow under it).
pub struct EntryMut<'a> {
    slot: &'a mut Slot,
    entry: FlowEntry,
}

impl<'a> EntryMut<'a> {
    pub(super) fn new(slot: &'a mut Slot) -> Self {
        let entry = slot.entry();
        Self { slot, entry }
    }
}

impl core::ops::Deref for EntryMut<'_> {
    type Target = FlowEntry;

    fn deref(&self) -> &FlowEntry {
        &self.entry
    }
}

impl core::ops::DerefMut for EntryMut<'_> {
    fn deref_mut(&mut self) -> &mut FlowEntry {
        &mut self.entry
    }
}

impl Drop for EntryMut<'_> {
    fn drop(&mut self) {
        debug_assert_eq!(self.entry.key, self.slot.key(), "a flow's key changed");
        self.slot.set(&self.entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An address: IPv4-mapped, or any 16 bytes (IPv6, and the mapped prefix nearly
    /// matched).
    fn addr() -> impl Strategy<Value = [u8; 16]> {
        prop_oneof![
            any::<[u8; 4]>().prop_map(ipv4_mapped),
            any::<[u8; 16]>(),
            (any::<[u8; 4]>(), 0..12usize).prop_map(|(a, i)| {
                let mut m = ipv4_mapped(a);
                m[i] ^= 1;
                m
            }),
        ]
    }

    fn key() -> impl Strategy<Value = FlowKey> {
        (addr(), addr(), any::<(u32, u16, u16, u8, bool)>()).prop_map(
            |(src, dst, (vrf, sp, dp, proto, bridged))| {
                let mut k = FlowKey::default();
                (k.src, k.dst, k.vrf, k.src_port, k.dst_port) = (src, dst, vrf, sp, dp);
                (k.protocol, k.bridged) = (proto, bridged);
                k
            },
        )
    }

    fn entry() -> impl Strategy<Value = FlowEntry> {
        let action = prop_oneof![
            Just(None),
            any::<u32>().prop_map(|n| Some(FlowAction::Forward {
                next_hop: NextHopId(n)
            })),
            any::<u16>().prop_map(|reason| Some(FlowAction::Drop { reason })),
        ];
        (
            key(),
            action,
            any::<(u8, u32, u64, u64, u64, u64)>(),
            proptest::option::of(any::<u32>().prop_map(FlowId)),
            any::<[u8; 6]>(),
            prop_oneof![Just([0; 16]), addr()],
        )
            .prop_map(
                |(
                    key,
                    action,
                    (flags, epoch, packets, bytes, created, last_seen),
                    reverse,
                    dst_mac,
                    sender,
                )| {
                    FlowEntry {
                        key,
                        flags,
                        epoch,
                        action,
                        packets,
                        bytes,
                        created,
                        last_seen,
                        reverse: reverse.filter(|r| r.0 != NO_REVERSE),
                        dst_mac,
                        sender,
                    }
                },
            )
    }

    proptest! {
        /// What is stored is what comes back, whatever its addresses' family.
        #[test]
        fn an_entry_comes_back_as_stored(e in entry()) {
            let s = Slot::new(&e);
            prop_assert_eq!(s.entry(), e);
            prop_assert_eq!(s.key(), e.key);
            prop_assert_eq!(s.head.action(), e.action);
            prop_assert_eq!((s.head.vrf(), s.head.bridged()), (e.key.vrf, e.key.bridged));
            if let Some(same) = s.head.sender_is(&e.sender) {
                prop_assert_eq!(same, true);
            }
        }

        /// An entry holds its own key and no other.
        #[test]
        fn an_entry_holds_its_key_only(e in entry(), other in key()) {
            let s = Slot::new(&e);
            prop_assert!(s.holds(&Short::of(&e.key), &e.key));
            prop_assert_eq!(s.holds(&Short::of(&other), &other), other == e.key);
        }

        /// The first line tells a sender from another when it is an IPv4 VTEP.
        #[test]
        fn the_first_line_compares_ipv4_senders(e in entry(), other in addr()) {
            let s = Slot::new(&e);
            match s.head.sender_is(&other) {
                Some(same) => prop_assert_eq!(same, other == e.sender),
                None => prop_assert!(short_v4(&e.sender).is_none()),
            }
        }
    }
}
