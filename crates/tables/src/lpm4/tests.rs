use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

fn a(s: &str) -> u32 {
    u32::from(s.parse::<Ipv4Addr>().unwrap())
}

fn ins(t: &mut Lpm4, p: &str, len: u8, nh: u32) {
    t.insert(p.parse().unwrap(), len, NextHopId(nh)).unwrap();
}

#[test]
fn longest_match_wins_at_every_level() {
    let mut t = Lpm4::new();
    ins(&mut t, "0.0.0.0", 0, 1);
    ins(&mut t, "10.0.0.0", 8, 2);
    ins(&mut t, "10.1.0.0", 16, 3);
    ins(&mut t, "10.1.2.0", 24, 4);
    ins(&mut t, "10.1.2.128", 25, 5);
    ins(&mut t, "10.1.2.129", 32, 6);
    let cases = [
        ("9.9.9.9", 1),
        ("10.9.9.9", 2),
        ("10.1.9.9", 3),
        ("10.1.2.1", 4),
        ("10.1.2.200", 5),
        ("10.1.2.129", 6),
        ("10.1.2.130", 5),
        ("10.1.3.0", 3),
    ];
    for (addr, nh) in cases {
        assert_eq!(t.lookup(a(addr)), Some(NextHopId(nh)), "{addr}");
    }
    assert_eq!(t.len(), 6);
    assert_eq!(t.groups_in_use(), 1);
}

#[test]
fn removing_restores_the_covering_prefix_and_collapses_groups() {
    let mut t = Lpm4::new();
    ins(&mut t, "10.0.0.0", 8, 2);
    ins(&mut t, "10.1.2.0", 24, 4);
    ins(&mut t, "10.1.2.128", 25, 5);
    assert_eq!(
        t.remove("10.1.2.0".parse().unwrap(), 24),
        Some(NextHopId(4))
    );
    assert_eq!(t.lookup(a("10.1.2.1")), Some(NextHopId(2)));
    assert_eq!(t.lookup(a("10.1.2.130")), Some(NextHopId(5)));
    assert_eq!(
        t.remove("10.1.2.128".parse().unwrap(), 25),
        Some(NextHopId(5))
    );
    assert_eq!(t.lookup(a("10.1.2.130")), Some(NextHopId(2)));
    assert_eq!(t.groups_in_use(), 0, "the group folded back");
    assert_eq!(t.remove("10.0.0.0".parse().unwrap(), 8), Some(NextHopId(2)));
    assert_eq!(t.lookup(a("10.1.2.130")), None);
    assert_eq!(t.remove("10.0.0.0".parse().unwrap(), 8), None);
    // A freed group is reused.
    ins(&mut t, "10.1.2.128", 25, 7);
    assert_eq!(t.tbl8.len(), GROUP);
}

#[test]
fn default_route_is_not_written_into_the_table() {
    let mut t = Lpm4::new();
    ins(&mut t, "0.0.0.0", 0, 9);
    assert!(t.tbl24.iter().all(|e| *e == 0));
    assert_eq!(t.lookup(a("1.2.3.4")), Some(NextHopId(9)));
    assert_eq!(t.exact(Ipv4Addr::UNSPECIFIED, 0), Some(NextHopId(9)));
    assert_eq!(t.remove(Ipv4Addr::UNSPECIFIED, 0), Some(NextHopId(9)));
    assert_eq!(t.lookup(a("1.2.3.4")), None);
}

#[test]
fn replacing_returns_the_old_next_hop_and_errors_are_named() {
    let mut t = Lpm4::new();
    assert_eq!(
        t.insert("10.0.0.0".parse().unwrap(), 8, NextHopId(1)),
        Ok(None)
    );
    assert_eq!(
        t.insert("10.0.0.0".parse().unwrap(), 8, NextHopId(2)),
        Ok(Some(NextHopId(1)))
    );
    assert_eq!(t.lookup(a("10.2.3.4")), Some(NextHopId(2)));
    assert_eq!(
        t.insert("10.0.0.1".parse().unwrap(), 8, NextHopId(1)),
        Err(LpmError::HostBits)
    );
    assert_eq!(
        t.insert("10.0.0.0".parse().unwrap(), 33, NextHopId(1)),
        Err(LpmError::BadLength(33))
    );
    assert_eq!(
        t.insert("10.0.0.0".parse().unwrap(), 8, NextHopId(MAX_NEXTHOP + 1)),
        Err(LpmError::NextHopOutOfRange(MAX_NEXTHOP + 1))
    );
    assert_eq!(t.len(), 1);
}

/// The naive answer: the longest of all prefixes containing `addr`.
fn oracle(routes: &HashMap<(u32, u8), u32>, addr: u32) -> Option<NextHopId> {
    routes
        .iter()
        .filter(|((p, l), _)| addr & mask(*l) == *p)
        .max_by_key(|((_, l), _)| *l)
        .map(|(_, nh)| NextHopId(*nh))
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u32, u8, u32),
    Remove(u32, u8),
}

fn op() -> impl Strategy<Value = Op> {
    // Prefixes drawn from a small space so that they nest and collide.
    let prefix = (
        prop_oneof![Just(0x0a00_0000u32), Just(0x0a01_0200), Just(0xc0a8_0000)],
        0u32..1024,
        0u8..=32,
    )
        .prop_map(|(base, jitter, len)| ((base ^ (jitter << 6)) & mask(len), len));
    prop_oneof![
        (prefix.clone(), 0u32..100).prop_map(|((p, l), nh)| Op::Insert(p, l, nh)),
        prefix.prop_map(|(p, l)| Op::Remove(p, l)),
    ]
}

proptest! {
    #[test]
    fn agrees_with_a_linear_scan(ops in proptest::collection::vec(op(), 1..60), probes in proptest::collection::vec(any::<u32>(), 32)) {
        let mut t = Lpm4::new();
        let mut model: HashMap<(u32, u8), u32> = HashMap::new();
        let mut interesting = probes.clone();
        for o in &ops {
            match *o {
                Op::Insert(p, l, nh) => {
                    let old = t.insert(p.into(), l, NextHopId(nh)).unwrap();
                    prop_assert_eq!(old.map(|n| n.0), model.insert((p, l), nh));
                    interesting.extend([p, p | !mask(l), p.wrapping_sub(1), (p | !mask(l)).wrapping_add(1)]);
                }
                Op::Remove(p, l) => {
                    prop_assert_eq!(t.remove(p.into(), l).map(|n| n.0), model.remove(&(p, l)));
                }
            }
        }
        let mut batch = vec![None; interesting.len()];
        t.lookup_batch(&interesting, &mut batch);
        for (addr, b) in interesting.iter().zip(&batch) {
            let want = oracle(&model, *addr);
            prop_assert_eq!(t.lookup(*addr), want, "address {}", Ipv4Addr::from(*addr));
            prop_assert_eq!(*b, want);
        }
        prop_assert_eq!(t.len(), model.len());
        // Emptying the table leaves no group behind.
        for (p, l) in model.keys() {
            t.remove((*p).into(), *l);
        }
        prop_assert_eq!(t.groups_in_use(), 0);
    }
}
