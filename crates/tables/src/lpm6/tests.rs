use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

fn a(s: &str) -> u128 {
    u128::from(s.parse::<Ipv6Addr>().unwrap())
}

fn add(t: &mut Lpm6, s: &str, len: u8, nh: u32) -> Option<NextHopId> {
    t.insert(s.parse().unwrap(), len, NextHopId(nh)).unwrap()
}

/// Every block of nodes and leaves is either reachable or on a free list, and an empty
/// table has nothing reachable: removals leak nothing.
fn assert_all_free(t: &Lpm6) {
    assert!(t.top.iter().all(|e| e & NODE == 0));
    let free = |lists: &Vec<Vec<u32>>| -> usize {
        lists.iter().enumerate().map(|(n, l)| n * l.len()).sum()
    };
    assert_eq!(free(&t.free_nodes), t.nodes.len());
    assert_eq!(free(&t.free_leaves), t.leaves.len() - 1);
}

#[test]
fn longest_match_and_remove() {
    let mut t = Lpm6::new();
    t.insert(Ipv6Addr::UNSPECIFIED, 0, NextHopId(1)).unwrap();
    add(&mut t, "2001:db8::", 32, 2);
    add(&mut t, "2001:db8:1::", 48, 3);
    add(&mut t, "2001:db8:1::1", 128, 4);
    assert_eq!(t.lookup(a("2001:db8:1::1")), Some(NextHopId(4)));
    assert_eq!(t.lookup(a("2001:db8:1::2")), Some(NextHopId(3)));
    assert_eq!(t.lookup(a("2001:db8:2::2")), Some(NextHopId(2)));
    assert_eq!(t.lookup(a("3000::")), Some(NextHopId(1)));
    assert_eq!(
        t.remove("2001:db8:1::".parse().unwrap(), 48),
        Some(NextHopId(3))
    );
    assert_eq!(t.lookup(a("2001:db8:1::2")), Some(NextHopId(2)));
    assert_eq!(t.lookup(a("2001:db8:1::1")), Some(NextHopId(4)));
    assert_eq!(
        t.insert("2001:db8::1".parse().unwrap(), 32, NextHopId(1)),
        Err(LpmError::HostBits)
    );
    assert_eq!(
        t.insert("2001:db8::".parse().unwrap(), 129, NextHopId(1)),
        Err(LpmError::BadLength(129))
    );
    assert_eq!(
        t.insert("2001:db8::".parse().unwrap(), 32, NextHopId(LEAF_MASK)),
        Err(LpmError::NextHopOutOfRange(LEAF_MASK))
    );
    assert_eq!(t.len(), 3);
    assert_eq!(
        t.exact("2001:db8::".parse().unwrap(), 32),
        Some(NextHopId(2))
    );
    assert_eq!(t.exact("2001:db8::".parse().unwrap(), 33), None);
    assert_eq!(t.iter().count(), 3);
}

/// A short route (≤ /16) over deep ones reaches the deep nodes' defaults, and taking it
/// away restores the next covering route there.
#[test]
fn short_routes_reach_deep_nodes() {
    let mut t = Lpm6::new();
    add(&mut t, "2001:db8:1::", 48, 3);
    add(&mut t, "2001:db8:1:2::", 64, 4);
    assert_eq!(t.lookup(a("2001:db8:2::")), None);
    add(&mut t, "2000::", 3, 7);
    add(&mut t, "2001::", 16, 8);
    assert_eq!(t.lookup(a("2001:db8:2::")), Some(NextHopId(8)));
    assert_eq!(t.lookup(a("2001:db8:1:3::")), Some(NextHopId(3)));
    assert_eq!(t.lookup(a("2001:db8:1:2::9")), Some(NextHopId(4)));
    assert_eq!(t.lookup(a("2002::")), Some(NextHopId(7)));
    assert_eq!(t.remove("2001::".parse().unwrap(), 16), Some(NextHopId(8)));
    assert_eq!(t.lookup(a("2001:db8:2::")), Some(NextHopId(7)));
    let mut out = [None; 2];
    t.lookup_batch(&[a("2001:db8:2::"), a("2001:db8:1:2::9")], &mut out);
    assert_eq!(out, [Some(NextHopId(7)), Some(NextHopId(4))]);
    assert_eq!(t.remove("2000::".parse().unwrap(), 3), Some(NextHopId(7)));
    assert_eq!(t.lookup(a("2001:db8:2::")), None);
    assert_eq!(t.lookup(a("2001:db8:1:2::9")), Some(NextHopId(4)));
}

/// Routes at the depth boundaries of the nodes (/16, /17, /22, /23, /124, /128) and a
/// full /128 path, then all removed: nothing is left behind.
#[test]
fn node_boundaries_and_cleanup() {
    let mut t = Lpm6::new();
    let routes = [
        ("2001::", 16),
        ("2001::", 17),
        ("2001:fc00::", 22),
        ("2001:fe00::", 23),
        ("2001:db8::10", 124),
        ("2001:db8::1", 128),
        ("2001:db8::1f", 128),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 128),
        ("::", 128),
    ];
    for (i, (p, l)) in routes.iter().enumerate() {
        assert_eq!(add(&mut t, p, *l, i as u32), None);
    }
    assert_eq!(t.lookup(a("2001:db8::1")), Some(NextHopId(5)));
    assert_eq!(t.lookup(a("2001:db8::2")), Some(NextHopId(1)));
    assert_eq!(t.lookup(a("2001:db8::1f")), Some(NextHopId(6)));
    assert_eq!(t.lookup(a("2001:db8::1e")), Some(NextHopId(4)));
    assert_eq!(t.lookup(a("2001:fdff::")), Some(NextHopId(2)));
    assert_eq!(t.lookup(a("2001:ff00::")), Some(NextHopId(3)));
    assert_eq!(t.lookup(a("2001:8000::")), Some(NextHopId(0)));
    assert_eq!(t.lookup(u128::MAX), Some(NextHopId(7)));
    assert_eq!(t.lookup(u128::MAX - 1), None);
    assert_eq!(t.lookup(0), Some(NextHopId(8)));
    assert_eq!(t.lookup(1), None);
    for (p, l) in routes {
        assert!(t.remove(p.parse().unwrap(), l).is_some());
    }
    assert!(t.is_empty());
    assert_all_free(&t);
}

fn oracle(m: &HashMap<(u128, u8), u32>, addr: u128) -> Option<NextHopId> {
    m.iter()
        .filter(|((p, l), _)| addr & mask(u32::from(*l)) == *p)
        .max_by_key(|((_, l), _)| *l)
        .map(|(_, n)| NextHopId(*n))
}

/// Prefix lengths, weighted towards /0, /128 and the node boundaries.
fn length() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(0u8),
        Just(128u8),
        prop::sample::select(vec![1u8, 15, 16, 17, 21, 22, 23, 28, 29, 124, 125, 127]),
        0u8..=128,
    ]
}

proptest! {
    #[test]
    fn agrees_with_a_linear_scan(ops in proptest::collection::vec((any::<bool>(), 0u128..64, 0u8..=128, 0u32..50), 1..60),
                                 probes in proptest::collection::vec(any::<u128>(), 16)) {
        let mut t = Lpm6::new();
        let mut m = HashMap::new();
        let mut interesting = probes;
        for (add, jitter, len, nh) in ops {
            let p = ((0x2001_0db8u128 << 96) ^ (jitter << 70) ^ (jitter << 120)) & mask(u32::from(len));
            if add {
                prop_assert_eq!(t.insert(p.into(), len, NextHopId(nh)).unwrap().map(|n| n.0), m.insert((p, len), nh));
                interesting.extend([p, p | !mask(u32::from(len)), p.wrapping_sub(1)]);
            } else {
                prop_assert_eq!(t.remove(p.into(), len).map(|n| n.0), m.remove(&(p, len)));
            }
        }
        let mut out = vec![None; interesting.len()];
        t.lookup_batch(&interesting, &mut out);
        for (x, o) in interesting.iter().zip(out) {
            prop_assert_eq!(o, oracle(&m, *x));
            prop_assert_eq!(t.lookup(*x), oracle(&m, *x));
        }
        prop_assert_eq!(t.len(), m.len());
    }

    /// Overlapping routes of every length over a few bases (so the same nodes gain and
    /// lose routes and children), removals included, then everything removed.
    #[test]
    fn overlapping_routes_and_removals(
        ops in proptest::collection::vec((0u8..4, 0usize..4, any::<u128>(), length(), 0u32..8), 1..120),
        probes in proptest::collection::vec((0usize..4, any::<u128>()), 64),
    ) {
        let bases = [a("2001:db8::"), a("2001:db8:0:1::"), a("2001:db9::"), a("fe80::")];
        let mut t = Lpm6::new();
        let mut m = HashMap::new();
        let mut interesting: Vec<u128> = probes.iter().map(|(b, x)| bases[*b] ^ (x >> (x & 127))).collect();
        for (op, base, noise, len, nh) in ops {
            let p = (bases[base] ^ (noise >> (noise & 127))) & mask(u32::from(len));
            if op == 0 {
                prop_assert_eq!(t.remove(p.into(), len).map(|n| n.0), m.remove(&(p, len)));
            } else {
                prop_assert_eq!(t.insert(p.into(), len, NextHopId(nh)).unwrap().map(|n| n.0), m.insert((p, len), nh));
                interesting.extend([p, p | !mask(u32::from(len)), p.wrapping_sub(1), p ^ (1 << (127 - u32::from(len.min(127))))]);
            }
            let x = interesting[interesting.len() / 2];
            prop_assert_eq!(t.lookup(x), oracle(&m, x));
        }
        let mut out = vec![None; interesting.len()];
        t.lookup_batch(&interesting, &mut out);
        for (x, o) in interesting.iter().zip(out) {
            prop_assert_eq!(o, oracle(&m, *x));
        }
        prop_assert_eq!(t.len(), m.len());
        let mut routes: Vec<_> = t.iter().collect();
        routes.sort();
        let mut expected: Vec<_> = m.iter().map(|((p, l), n)| (Ipv6Addr::from(*p), *l, NextHopId(*n))).collect();
        expected.sort();
        prop_assert_eq!(routes, expected);
        for (p, l) in m.keys() {
            prop_assert!(t.remove((*p).into(), *l).is_some());
        }
        prop_assert!(t.is_empty());
        assert_all_free(&t);
    }
}

/// What a routed lookup costs on the benchmark's tables, as docs/dataplane.md says:
/// about four nodes, few of them leaf reads, most nodes with their next hop inline.
/// (`--nocapture` prints the shape.)
#[test]
fn a_routed_lookup_reads_about_four_nodes_and_rarely_a_leaf() {
    for n in [200_000, 500_000] {
        let s = shape(n);
        eprintln!("{n} routes: {s:?}");
        assert!(s.nodes_per_lookup < 4.5, "{n}: {s:?}");
        assert!(s.leaf_reads_per_lookup < 0.1, "{n}: {s:?}");
        assert!(s.inline_share > 0.9, "{n}: {s:?}");
        // Lookups read part of the table; path compression serves some of the walk.
        assert!(s.nodes > n / 2 && s.lookup_kib < s.total_kib, "{n}: {s:?}");
        assert!(s.skipping_per_lookup > 0.0 && s.skipping_per_lookup < s.nodes_per_lookup);
    }
}

#[derive(Debug)]
struct Shape {
    nodes: usize,
    inline_share: f64,
    lookup_kib: usize,
    total_kib: usize,
    nodes_per_lookup: f64,
    skipping_per_lookup: f64,
    leaf_reads_per_lookup: f64,
}

fn shape(n: usize) -> Shape {
    let routes = crate::synthetic::ipv6_prefixes(n, 9);
    let mut t = Lpm6::new();
    for (i, (p, l)) in routes.iter().enumerate() {
        t.insert(*p, *l, NextHopId(i as u32 % 4096)).unwrap();
    }
    let mut r = crate::synthetic::Rng::new(5);
    let (mut steps, mut fetches, mut skips) = (0usize, 0usize, 0usize);
    let probes = 100_000;
    for _ in 0..probes {
        let (p, l) = routes[r.next_u64() as usize % routes.len()];
        let noise = (u128::from(r.next_u64()) << 64) | u128::from(r.next_u64());
        let addr = u128::from(p) | (noise & !mask(u32::from(l)));
        let e = t.top[top_index(addr)];
        let mut node = &t.nodes[(e & !NODE) as usize];
        let mut depth = DIRECT;
        loop {
            steps += 1;
            skips += usize::from(node.skip != 0);
            match node.step(addr, depth) {
                Step::Down(c, d) => (node, depth) = (&t.nodes[c as usize], d),
                Step::Leaf(_) => break,
                Step::Fetch(_) => {
                    fetches += 1;
                    break;
                }
            }
        }
    }
    let inline = t.nodes.iter().filter(|n| n.base0 & INLINE != 0).count();
    Shape {
        nodes: t.nodes.len(),
        inline_share: inline as f64 / t.nodes.len() as f64,
        lookup_kib: t.lookup_bytes() >> 10,
        total_kib: t.memory_bytes() >> 10,
        nodes_per_lookup: steps as f64 / probes as f64,
        skipping_per_lookup: skips as f64 / probes as f64,
        leaf_reads_per_lookup: fetches as f64 / probes as f64,
    }
}

#[test]
fn a_table_without_routes_beyond_the_default_holds_no_direct_table() {
    let mut t = Lpm6::new();
    assert!(t.memory_bytes() < 1024 && t.top.is_empty());
    assert_eq!(t.lookup(1), None);
    t.insert(Ipv6Addr::UNSPECIFIED, 0, NextHopId(7)).unwrap();
    assert!(t.memory_bytes() < 1024 && t.top.is_empty());
    let mut out = [None; 3];
    t.lookup_batch(&[0, 1, u128::MAX], &mut out);
    assert_eq!(out, [Some(NextHopId(7)); 3]);
    assert_eq!(t.lookup(u128::MAX), Some(NextHopId(7)));
    // The first longer route brings the direct table; lookups go on as before.
    t.insert("2001:db8::".parse().unwrap(), 32, NextHopId(8))
        .unwrap();
    assert!(t.memory_bytes() >= 4096);
    assert_eq!(t.lookup(0x2001_0db8_u128 << 96), Some(NextHopId(8)));
    assert_eq!(t.lookup(1), Some(NextHopId(7)));
}
