//! Merging everything for a read through the API, in steps (`crate::sync`).

use super::*;

/// A pass merges every entry's counters as a whole merge does, reading at most `max`
/// entries per step, and says it is over only at its end; the flows it carries are
/// the ones installed in the generation in force.
#[test]
fn a_merge_in_steps_reads_a_bounded_number_per_step_and_counts_everything() {
    let c = &cases()[0];
    let mut r = rig();
    for k in 0..8 {
        r.run("vm1", &flow_k(&c.input, k, false), 1);
    }
    assert_eq!(r.fast.len(), 8);
    let keys: Vec<Key> = r.fake.s.borrow().entries.keys().copied().collect();
    for (i, key) in keys.iter().enumerate() {
        r.fake.set_packets(key, 10 + i as u64);
    }
    let carried = |r: &Rig| -> u64 { r.pipe.cx.flows.iter().map(|(_, e)| e.packets).sum() };
    let before = carried(&r);
    r.fast.sync_begin();
    let mut steps = 0;
    loop {
        let reads = r.fake.s.borrow().reads;
        let over = r.fast.sync_step(&mut r.pipe.cx, 3);
        let read = r.fake.s.borrow().reads - reads;
        assert!(read <= 3, "{read} entries read in one step");
        steps += 1;
        if over {
            break;
        }
        assert!(steps < 100, "the pass never ends");
    }
    // Three reads of 3, 3 and 2 entries, then the end.
    assert!(steps >= 8usize.div_ceil(3), "{steps} steps");
    let merged: u64 = (0..8).map(|i| 10 + i).sum();
    assert_eq!(carried(&r) - before, merged);
    assert_eq!(r.pipe.cx.fast_path.packets, merged);
    // Nothing new: a whole merge adds nothing.
    r.fast.sync_all(&mut r.pipe.cx);
    assert_eq!(carried(&r) - before, merged);
    let ids: Vec<FlowId> = r.pipe.cx.flows.iter().map(|(id, _)| id).collect();
    let carries = ids
        .iter()
        .filter(|id| r.fast.carries(&r.pipe.cx, **id))
        .count();
    assert_eq!(carries, 8);
}
