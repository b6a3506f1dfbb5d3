use super::*;
use crate::ids::VrfId;
use core::net::IpAddr;
use proptest::prelude::*;

fn key(i: u32) -> FlowKey {
    FlowKey::new(
        VrfId(1 + i % 3),
        IpAddr::V4((0x0a00_0000 | i).into()),
        IpAddr::V4(0x0b00_0001.into()),
        17,
        i as u16,
        4789,
    )
}

const FWD: FlowAction = FlowAction::Forward {
    next_hop: NextHopId(3),
};

#[test]
fn insert_lookup_touch_remove() {
    let mut t = FlowTable::new(100);
    let id = t.insert(key(1), FWD, 10).unwrap();
    assert_eq!(t.lookup(&key(1)), Some(id));
    assert_eq!(t.lookup(&key(2)), None);
    assert_eq!(t.insert(key(1), FWD, 11), Err(FlowInsertError::Exists(id)));
    t.touch(id, 64, 20);
    let e = t.get(id).unwrap();
    assert_eq!(
        (e.packets, e.bytes, e.created, e.last_seen),
        (1, 64, 10, 20)
    );
    assert_eq!(t.remove(id), 1);
    assert_eq!(t.lookup(&key(1)), None);
    assert_eq!(t.len(), 0);
    assert_eq!(t.stats().inserted, 1);
    assert_eq!(t.stats().removed, 1);
}

#[test]
fn pairs_are_linked_and_removed_together() {
    let mut t = FlowTable::new(100);
    let (f, r) = t
        .insert_pair((key(1), FWD), (key(1).reverse(), FWD), 0)
        .unwrap();
    assert_eq!(t.get(f).unwrap().reverse, Some(r));
    assert_eq!(t.get(r).unwrap().reverse, Some(f));
    assert_eq!(t.lookup(&key(1).reverse()), Some(r));
    assert!(t.get(r).unwrap().flags & flags::REVERSE != 0);
    assert_eq!(t.remove(r), 2);
    assert!(t.is_empty());
}

#[test]
fn removals_are_logged_once_asked_for_both_ways_and_when_aged() {
    let mut t = FlowTable::new(100);
    let (f, _) = t
        .insert_pair((key(1), FWD), (key(1).reverse(), FWD), 0)
        .unwrap();
    t.remove(f);
    assert!(t.take_removed().is_empty(), "not asked for yet");
    t.log_removals();
    let (f, r2) = t
        .insert_pair((key(2), FWD), (key(2).reverse(), FWD), 0)
        .unwrap();
    let one = t.insert(key(3), FWD, 0).unwrap();
    t.remove(r2);
    let mut gone = t.take_removed();
    gone.sort_unstable();
    let mut want = vec![f.0, r2.0];
    want.sort_unstable();
    assert_eq!(gone, want);
    assert!(t.take_removed().is_empty());
    t.age(1_000, 10, 10, 100);
    assert_eq!(t.take_removed(), [one.0]);
}

#[test]
fn a_full_table_refuses_new_flows_and_keeps_every_old_one() {
    let cap = 1000;
    let mut t = FlowTable::new(cap);
    let mut installed = Vec::new();
    for i in 0..cap as u32 {
        if let Ok(id) = t.insert(key(i), FWD, 0) {
            installed.push((i, id));
        }
    }
    assert!(
        installed.len() >= cap * 99 / 100,
        "only {} of {cap} placed",
        installed.len()
    );
    // A flood of new flows.
    for i in cap as u32..cap as u32 * 20 {
        assert!(t.insert(key(i), FWD, 1).is_err());
    }
    let s = t.stats();
    assert_eq!(
        s.refused_full + s.refused_bucket,
        (cap as u64 * 19) + (cap - installed.len()) as u64
    );
    assert!(s.refused_full >= cap as u64 * 19 - 100);
    for (i, id) in &installed {
        assert_eq!(t.lookup(&key(*i)), Some(*id), "established flow {i} lost");
    }
    // A pair that does not fit leaves nothing behind.
    t.remove(installed[0].1);
    let before = t.len();
    assert_eq!(
        t.insert_pair((key(5_000_000), FWD), (key(5_000_000).reverse(), FWD), 2),
        Err(FlowInsertError::TableFull)
    );
    assert_eq!(t.len(), before);
    assert_eq!(t.lookup(&key(5_000_000)), None);
}

#[test]
fn quotas_refuse_per_vrf_and_give_back_on_removal() {
    let mut t = FlowTable::new(100);
    t.set_vrf_quota(1, Some(2));
    let k = |i: u32| {
        FlowKey::new(
            VrfId(1),
            IpAddr::V4(i.into()),
            IpAddr::V4(0.into()),
            6,
            1,
            2,
        )
    };
    let a = t.insert(k(1), FWD, 0).unwrap();
    t.insert(k(2), FWD, 0).unwrap();
    assert_eq!(
        t.insert(k(3), FWD, 0),
        Err(FlowInsertError::QuotaExceeded { vrf: 1, max: 2 })
    );
    assert!(
        t.insert(key(1), FWD, 0).is_ok(),
        "another VRF is not limited"
    );
    t.remove(a);
    assert!(t.insert(k(3), FWD, 0).is_ok());
    assert_eq!(t.stats().refused_quota, 1);
}

#[test]
fn aging_is_incremental_and_denied_flows_go_sooner() {
    let mut t = FlowTable::new(64);
    let live = t.insert(key(1), FWD, 0).unwrap();
    let denied = t.insert(key(2), FlowAction::Drop { reason: 7 }, 0).unwrap();
    let (f, r) = t
        .insert_pair((key(3), FWD), (key(3).reverse(), FWD), 0)
        .unwrap();
    t.touch(r, 100, 90); // the reply direction keeps the pair alive
    // A budget smaller than the table scans only part of it.
    assert_eq!(
        t.age(50, 60, 10, 16),
        AgeStats {
            scanned: 16,
            aged: 1
        }
    );
    assert!(t.get(denied).is_none() && t.get(live).is_some());
    assert_eq!(t.age(50, 60, 10, 64).aged, 0);
    let st = t.age(100, 60, 10, 64);
    assert_eq!(st.aged, 1);
    assert!(t.get(live).is_none() && t.get(f).is_some() && t.get(r).is_some());
    t.age(200, 60, 10, 64);
    assert!(t.is_empty());
    assert_eq!(t.stats().aged, 4);
}

#[test]
fn batch_lookup_matches_single_lookups() {
    let mut t = FlowTable::new(4096);
    for i in 0..3000 {
        t.insert(key(i), FWD, 0).unwrap();
    }
    let keys: Vec<FlowKey> = (0..4000).map(key).collect();
    let mut out = vec![None; keys.len()];
    t.lookup_batch(&keys, &mut out);
    for (k, o) in keys.iter().zip(&out) {
        assert_eq!(*o, t.lookup(k));
    }
    assert_eq!(out.iter().filter(|o| o.is_some()).count(), 3000);
}

proptest! {
    #[test]
    fn behaves_like_a_map(ops in proptest::collection::vec((0u8..3, 0u32..40), 1..200)) {
        let mut t = FlowTable::new(32);
        let mut model: HashMap<FlowKey, FlowId> = HashMap::new();
        for (op, i) in ops {
            let k = key(i);
            match op {
                0 => match t.insert(k, FWD, 0) {
                    Ok(id) => { prop_assert!(model.insert(k, id).is_none()); }
                    Err(FlowInsertError::Exists(id)) => prop_assert_eq!(model.get(&k), Some(&id)),
                    Err(_) => prop_assert!(model.len() >= 28 || t.len() == 32, "refused at {}", model.len()),
                },
                1 => if let Some(id) = model.remove(&k) { prop_assert_eq!(t.remove(id), 1); },
                _ => prop_assert_eq!(t.lookup(&k), model.get(&k).copied()),
            }
            prop_assert_eq!(t.len(), model.len());
        }
    }
}

proptest! {
    /// A bucket's slots matching a signature, as one SSE2 compare finds them, are the
    /// ones a plain loop finds, lowest first (signatures drawn from a few values, so that
    /// several slots match).
    #[test]
    fn signature_matches_are_the_slots_holding_it(sigs in prop::array::uniform8(0u16..4), sig in 0u16..4) {
        let want: Vec<usize> = (0..SLOTS).filter(|&i| sigs[i] == sig).collect();
        prop_assert_eq!(Slots(sig_matches(&sigs, sig)).collect::<Vec<_>>(), want);
    }
}
