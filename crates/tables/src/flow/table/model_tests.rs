//! The table against a plain map under random sequences of inserts (single and paired),
//! lookups, packets, removals and aging, with a quota on one VRF.

use super::*;
use crate::ids::VrfId;
use core::net::IpAddr;
use proptest::prelude::*;

const CAP: usize = 64;
const QUOTA_VRF: u32 = 1;
const QUOTA: u32 = 12;
const IDLE: u64 = 50;
const DENIED_IDLE: u64 = 10;

fn key(i: u32) -> FlowKey {
    FlowKey::new(
        VrfId(1 + i % 3),
        IpAddr::V4((0x0a00_0000 | i).into()),
        IpAddr::V4(0x0b00_0001.into()),
        6,
        i as u16,
        80,
    )
}

const FWD: FlowAction = FlowAction::Forward {
    next_hop: NextHopId(9),
};
const DENY: FlowAction = FlowAction::Drop { reason: 4 };

/// What the model knows of one flow.
#[derive(Clone, Copy, Debug)]
struct Flow {
    id: FlowId,
    partner: Option<FlowKey>,
    denied: bool,
    packets: u64,
    last_seen: u64,
}

#[derive(Default)]
struct Model {
    flows: HashMap<FlowKey, Flow>,
}

impl Model {
    fn used(&self, vrf: u32) -> u32 {
        self.flows.keys().filter(|k| k.vrf == vrf).count() as u32
    }

    fn quota(&self, vrf: u32) -> u32 {
        if vrf == QUOTA_VRF { QUOTA } else { u32::MAX }
    }

    /// What inserting `key` as the `extra`-th of a batch should be refused with, if
    /// anything other than a full bucket (which the model cannot predict).
    fn refusal(&self, key: &FlowKey, extra: u32) -> Option<FlowInsertError> {
        if let Some(f) = self.flows.get(key) {
            return Some(FlowInsertError::Exists(f.id));
        }
        let max = self.quota(key.vrf);
        if self.used(key.vrf) + extra >= max {
            return Some(FlowInsertError::QuotaExceeded { vrf: key.vrf, max });
        }
        if self.flows.len() + extra as usize >= CAP {
            return Some(FlowInsertError::TableFull);
        }
        None
    }

    fn remove(&mut self, key: &FlowKey) -> usize {
        let Some(f) = self.flows.remove(key) else {
            return 0;
        };
        1 + f
            .partner
            .map_or(0, |p| usize::from(self.flows.remove(&p).is_some()))
    }

    /// Removes what an aging pass over the whole table at `now` removes.
    fn age(&mut self, now: u64) -> usize {
        let expired: Vec<FlowKey> = self
            .flows
            .iter()
            .filter(|(_, f)| {
                let partner_seen = f
                    .partner
                    .and_then(|p| self.flows.get(&p))
                    .map_or(0, |p| p.last_seen);
                let timeout = if f.denied { DENIED_IDLE } else { IDLE };
                now.saturating_sub(f.last_seen.max(partner_seen)) > timeout
            })
            .map(|(k, _)| *k)
            .collect();
        expired.iter().map(|k| self.remove(k)).sum()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u32, bool),
    InsertPair(u32),
    Lookup(u32, bool),
    Packet(u32, bool),
    Remove(u32, bool),
    Age,
    Wait(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let i = 0u32..48;
    prop_oneof![
        3 => (i.clone(), any::<bool>()).prop_map(|(i, d)| Op::Insert(i, d)),
        3 => i.clone().prop_map(Op::InsertPair),
        3 => (i.clone(), any::<bool>()).prop_map(|(i, r)| Op::Lookup(i, r)),
        3 => (i.clone(), any::<bool>()).prop_map(|(i, r)| Op::Packet(i, r)),
        2 => (i, any::<bool>()).prop_map(|(i, r)| Op::Remove(i, r)),
        1 => Just(Op::Age),
        2 => any::<u8>().prop_map(Op::Wait),
    ]
}

/// The key an op names: flow `i` or the reverse of flow `i`.
fn pick(i: u32, reverse: bool) -> FlowKey {
    if reverse { key(i).reverse() } else { key(i) }
}

fn check_insert(
    got: Result<FlowId, FlowInsertError>,
    want: Option<FlowInsertError>,
    len: usize,
) -> Result<bool, TestCaseError> {
    match (got, want) {
        (Ok(_), None) => Ok(true),
        // A full bucket only ever happens in a well-filled table.
        (Err(FlowInsertError::BucketFull), None) => {
            prop_assert!(len >= CAP / 2, "bucket full at {len} flows");
            Ok(false)
        }
        (got, want) => {
            prop_assert_eq!(got.err(), want);
            Ok(false)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn behaves_like_a_map_with_pairs_quotas_and_aging(
        ops in proptest::collection::vec(op(), 1..300)
    ) {
        let mut t = FlowTable::new(CAP);
        t.set_vrf_quota(QUOTA_VRF, Some(QUOTA));
        let mut m = Model::default();
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Insert(i, deny) => {
                    let k = key(i);
                    let action = if deny { DENY } else { FWD };
                    let want = m.refusal(&k, 0);
                    let got = t.insert(k, action, now);
                    if check_insert(got, want, m.flows.len())? {
                        let id = got.unwrap_or(FlowId(0));
                        m.flows.insert(k, Flow { id, partner: None, denied: deny, packets: 0, last_seen: now });
                    }
                }
                Op::InsertPair(i) => {
                    let (f, r) = (key(i), key(i).reverse());
                    let want = m.refusal(&f, 0).or_else(|| m.refusal(&r, 1));
                    let got = t.insert_pair((f, FWD), (r, FWD), now);
                    if check_insert(got.map(|p| p.0), want, m.flows.len())? {
                        let (fid, rid) = got.unwrap_or((FlowId(0), FlowId(0)));
                        m.flows.insert(f, Flow { id: fid, partner: Some(r), denied: false, packets: 0, last_seen: now });
                        m.flows.insert(r, Flow { id: rid, partner: Some(f), denied: false, packets: 0, last_seen: now });
                    }
                }
                Op::Lookup(i, rev) => {
                    let k = pick(i, rev);
                    prop_assert_eq!(t.lookup(&k), m.flows.get(&k).map(|f| f.id));
                    let mut out = [None; 1];
                    t.lookup_batch(&[k], &mut out);
                    prop_assert_eq!(out[0], m.flows.get(&k).map(|f| f.id));
                }
                Op::Packet(i, rev) => {
                    let k = pick(i, rev);
                    if let Some(f) = m.flows.get_mut(&k) {
                        t.touch(f.id, 100, now);
                        f.packets += 1;
                        f.last_seen = now;
                    }
                }
                Op::Remove(i, rev) => {
                    let k = pick(i, rev);
                    if let Some(f) = m.flows.get(&k).copied() {
                        let want = m.remove(&k);
                        prop_assert_eq!(t.remove(f.id), want);
                    }
                }
                Op::Age => {
                    let want = m.age(now);
                    prop_assert_eq!(t.age(now, IDLE, DENIED_IDLE, CAP).aged, want);
                }
                Op::Wait(d) => now += u64::from(d % 32),
            }
            prop_assert_eq!(t.len(), m.flows.len());
            prop_assert_eq!(t.iter().count(), m.flows.len());
        }
        // Every flow the model holds is in the table as the model says.
        for (k, f) in &m.flows {
            prop_assert_eq!(t.lookup(k), Some(f.id));
            let e = t.get(f.id).unwrap_or_default();
            prop_assert_eq!(e.key, *k);
            prop_assert_eq!((e.packets, e.bytes, e.last_seen), (f.packets, f.packets * 100, f.last_seen));
            prop_assert_eq!(e.flags & flags::DENIED != 0, f.denied);
            prop_assert_eq!(e.reverse.and_then(|r| t.get(r)).map(|r| r.key), f.partner);
        }
        for v in 1..=3 {
            prop_assert_eq!(t.iter().filter(|(_, e)| e.key.vrf == v).count() as u32, m.used(v));
        }
    }
}

/// Keys that all share one primary bucket overflow into their secondary buckets, are
/// found there, and give the primary back its state when removed.
#[test]
fn keys_beyond_a_full_primary_bucket_are_found_in_their_secondary() {
    let mut t = FlowTable::new(1 << 12);
    let (_, b1, _) = split(key(0).hash(), t.mask);
    let same: Vec<FlowKey> = (0..200_000)
        .map(key_wide)
        .filter(|k| split(k.hash(), t.mask).1 == b1)
        .take(SLOTS + 4)
        .collect();
    assert_eq!(same.len(), SLOTS + 4, "not enough keys share a bucket");
    let ids: Vec<FlowId> = same.iter().map(|k| t.insert(*k, FWD, 0).unwrap()).collect();
    assert_eq!(t.buckets[b1].overflowed, 4);
    let mut out = vec![None; same.len()];
    t.lookup_batch(&same, &mut out);
    assert_eq!(out, ids.iter().map(|i| Some(*i)).collect::<Vec<_>>());
    for (k, id) in same.iter().zip(&ids).rev() {
        assert_eq!(t.lookup(k), Some(*id));
        t.remove(*id);
        assert_eq!(t.lookup(k), None);
    }
    assert_eq!(t.buckets[b1].overflowed, 0);
}

fn key_wide(i: u32) -> FlowKey {
    FlowKey::new(
        VrfId(2),
        IpAddr::V4((0x0a00_0000 | i).into()),
        IpAddr::V4(0x0b00_0001.into()),
        17,
        (i >> 8) as u16,
        53,
    )
}

/// A hit of an IPv4 flow reads and writes only the first cache line of its entry.
#[test]
fn slot_layout() {
    use crate::flow::slot::Slot;
    use core::mem::{align_of, size_of};
    assert_eq!(size_of::<FlowHead>(), 64);
    assert_eq!(size_of::<Slot>(), 128);
    assert_eq!(align_of::<Slot>(), 128);
    assert_eq!(size_of::<Bucket>(), 64);
}

/// A table takes as many flows as it was made for: keys preferring their primary
/// bucket never leave a flow refused for a full bucket while the table has room.
#[test]
fn a_table_fills_to_capacity_without_bucket_refusals() {
    for cap in [1_000, 50_000, 300_000] {
        let mut t = FlowTable::new(cap);
        for i in 0..cap as u32 {
            let k = FlowKey::new(
                VrfId(1),
                IpAddr::V4((0x0a01_0000 + i / 4096).into()),
                IpAddr::V4(0x0a01_c806.into()),
                17,
                1024 + (i % 4096) as u16,
                5000,
            );
            assert!(t.insert(k, FWD, 0).is_ok(), "flow {i} of {cap} refused");
        }
        assert_eq!(t.stats().refused_bucket, 0);
        let overflowed: u32 = t.buckets.iter().map(|b| b.overflowed).sum();
        // At a load of 50% or less, about 1% of keys live in their secondary bucket.
        assert!(
            overflowed as usize <= cap / 50,
            "{overflowed} of {cap} overflowed"
        );
    }
}

/// Batches of every shape (partial groups, one group, several) agree with single
/// lookups, for keys present and absent.
#[test]
fn batch_lookups_of_any_length_match_single_lookups() {
    let mut t = FlowTable::new(2048);
    for i in (0..1500).step_by(2) {
        t.insert(key_wide(i), FWD, 0).unwrap();
    }
    for n in [0, 1, 31, 32, 33, 64, 65, 256, 257, 1000] {
        let keys: Vec<FlowKey> = (0..n).map(|i| key_wide(i * 3)).collect();
        let mut out = vec![Some(FlowId(u32::MAX)); keys.len()];
        t.lookup_batch(&keys, &mut out);
        for (k, o) in keys.iter().zip(&out) {
            assert_eq!(*o, t.lookup(k), "batch of {n}");
        }
    }
}
