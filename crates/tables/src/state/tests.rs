use super::*;
use crate::interface::{InterfaceAddress, InterfaceKind};
use crate::nexthop::{Ecmp, Encap, Tunnel};
use crate::policy::Policy;
use ovr_wire::ethernet::MacAddr;
use std::sync::Arc;

fn vrf(id: u32, vni: u32) -> TableOp {
    TableOp::UpsertVrf {
        id: VrfId(id),
        name: format!("net{id}"),
        vni: Some(vni),
    }
}

fn workload(id: u32, vrf: u32) -> TableOp {
    TableOp::UpsertInterface(Interface {
        id: InterfaceId(id),
        name: format!("veth{id}"),
        kind: InterfaceKind::Workload,
        vrf: Some(VrfId(vrf)),
        mac: MacAddr([2, 0, 0, 0, 0, id as u8]),
        addresses: vec![InterfaceAddress {
            addr: "10.0.0.1".parse().unwrap(),
            prefix_len: 24,
        }],
        mtu: 1500,
        policy: true,
        admin_up: true,
        memif: None,
        police: None,
    })
}

fn underlay(id: u32) -> TableOp {
    TableOp::UpsertInterface(Interface {
        id: InterfaceId(id),
        name: format!("eth{id}"),
        kind: InterfaceKind::Underlay,
        vrf: None,
        mac: MacAddr([2, 1, 0, 0, 0, id as u8]),
        addresses: vec![],
        mtu: 1500,
        policy: false,
        admin_up: true,
        memif: None,
        police: None,
    })
}

fn local_nh(id: u32, iface: u32) -> TableOp {
    TableOp::UpsertNextHop(
        NextHopId(id),
        NextHop::Interface {
            interface: InterfaceId(iface),
            dst_mac: MacAddr([2, 0, 0, 0, 9, 9]),
        },
    )
}

fn tunnel_nh(id: u32, iface: u32, dst: &str) -> TableOp {
    TableOp::UpsertNextHop(
        NextHopId(id),
        NextHop::Tunnel(Tunnel {
            encap: Encap::Vxlan { vni: 100 },
            underlay: InterfaceId(iface),
            src: "192.0.2.1".parse().unwrap(),
            dst: dst.parse().unwrap(),
            dst_mac: MacAddr([2, 2, 2, 2, 2, 2]),
            inner_dst: None,
        }),
    )
}

fn route(vrf: u32, prefix: &str, nh: u32) -> TableOp {
    TableOp::AddRoute {
        vrf: VrfId(vrf),
        prefix: prefix.parse().unwrap(),
        nh: NextHopId(nh),
    }
}

fn base() -> Vec<TableOp> {
    vec![
        vrf(1, 100),
        underlay(0),
        workload(1, 1),
        local_nh(1, 1),
        tunnel_nh(2, 0, "192.0.2.2"),
    ]
}

#[test]
fn a_committed_batch_is_visible_to_readers() {
    let (mut w, r) = new_tables();
    let mut ops = base();
    ops.push(route(1, "10.1.0.0/16", 2));
    ops.push(route(1, "2001:db8::/32", 1));
    w.commit(ops).unwrap();
    let t = r.enter().unwrap();
    assert_eq!(t.vrf_by_vni(100).unwrap().id, VrfId(1));
    assert_eq!(
        t.route(VrfId(1), "10.1.0.0/16".parse().unwrap()),
        Some(NextHopId(2))
    );
    assert_eq!(
        t.route(VrfId(1), "2001:db8::/32".parse().unwrap()),
        Some(NextHopId(1))
    );
    assert_eq!(t.nexthop_refs(NextHopId(2)), 1);
    assert_eq!(t.interfaces().by_name("veth1").unwrap().id, InterfaceId(1));
}

#[test]
fn a_bad_change_rejects_the_whole_batch() {
    let (mut w, r) = new_tables();
    let mut ops = base();
    ops.push(route(1, "10.1.0.0/16", 2));
    ops.push(route(1, "10.2.0.0/16", 77)); // no such next hop
    let err = w.commit(ops).unwrap_err();
    assert_eq!(
        err,
        BatchError {
            index: 6,
            error: TableError::NoSuchNextHop(NextHopId(77))
        }
    );
    let t = r.enter().unwrap();
    assert!(
        t.vrf(VrfId(1)).is_none(),
        "nothing of the batch was applied"
    );
    assert!(t.interfaces().is_empty());
}

#[test]
fn what_is_in_use_cannot_be_removed() {
    let (mut w, _r) = new_tables();
    let mut ops = base();
    ops.push(route(1, "10.1.0.0/16", 2));
    w.commit(ops).unwrap();
    let e = w
        .commit(vec![TableOp::RemoveNextHop(NextHopId(2))])
        .unwrap_err();
    assert!(
        matches!(
            e.error,
            TableError::InUse {
                what: "next hop",
                refs: 1,
                ..
            }
        ),
        "{e}"
    );
    let e = w
        .commit(vec![TableOp::RemoveInterface(InterfaceId(0))])
        .unwrap_err();
    assert!(
        matches!(
            e.error,
            TableError::InUse {
                what: "interface",
                ..
            }
        ),
        "{e}"
    );
    let e = w.commit(vec![TableOp::RemoveVrf(VrfId(1))]).unwrap_err();
    assert!(
        matches!(e.error, TableError::InUse { what: "VRF", .. }),
        "{e}"
    );
    // Removing the users first, in the same batch, makes it possible.
    w.commit(vec![
        TableOp::RemoveRoute {
            vrf: VrfId(1),
            prefix: "10.1.0.0/16".parse().unwrap(),
        },
        TableOp::RemoveNextHop(NextHopId(2)),
        TableOp::RemoveInterface(InterfaceId(0)),
        TableOp::RemoveNextHop(NextHopId(1)),
        TableOp::RemoveInterface(InterfaceId(1)),
        TableOp::RemoveVrf(VrfId(1)),
    ])
    .unwrap();
    let t = w.read().unwrap();
    assert!(t.vrf(VrfId(1)).is_none() && t.vrf_by_vni(100).is_none());
    assert_eq!(t.nexthops().count(), 0);
}

#[test]
fn names_vnis_and_labels_are_checked() {
    let (mut w, _r) = new_tables();
    w.commit(base()).unwrap();
    let e = w.commit(vec![vrf(2, 100)]).unwrap_err();
    assert_eq!(
        e.error,
        TableError::VniTaken {
            vni: 100,
            by: VrfId(1)
        }
    );
    let mut dup = workload(5, 1);
    if let TableOp::UpsertInterface(i) = &mut dup {
        i.name = "veth1".into();
    }
    assert!(matches!(
        w.commit(vec![dup]).unwrap_err().error,
        TableError::InterfaceNameTaken { .. }
    ));
    let e = w
        .commit(vec![TableOp::AddLabel {
            label: 3,
            nh: NextHopId(1),
        }])
        .unwrap_err();
    assert_eq!(e.error, TableError::BadLabel(3));
    let e = w.commit(vec![vrf(2, 1 << 24)]).unwrap_err();
    assert_eq!(e.error, TableError::VniOutOfRange(1 << 24));
    let e = w
        .commit(vec![TableOp::UpsertVrf {
            id: VrfId(u32::MAX),
            name: "x".into(),
            vni: None,
        }])
        .unwrap_err();
    assert!(matches!(e.error, TableError::IdOutOfRange { .. }));
    // Moving a VNI from one VRF to another within one batch is fine.
    w.commit(vec![vrf(1, 101), vrf(2, 100)]).unwrap();
    let t = w.read().unwrap();
    assert_eq!(t.vrf_by_vni(100).unwrap().id, VrfId(2));
    assert_eq!(t.vrf_by_vni(101).unwrap().id, VrfId(1));
}

#[test]
fn composites_do_not_nest_and_keep_buckets_on_change() {
    let (mut w, r) = new_tables();
    let mut ops = base();
    ops.push(tunnel_nh(3, 0, "192.0.2.3"));
    ops.push(tunnel_nh(4, 0, "192.0.2.4"));
    let ecmp = |m: &[u32]| {
        NextHop::Composite(Ecmp::new(
            &m.iter().map(|i| NextHopId(*i)).collect::<Vec<_>>(),
        ))
    };
    ops.push(TableOp::UpsertNextHop(NextHopId(10), ecmp(&[2, 3, 4])));
    ops.push(route(1, "0.0.0.0/0", 10));
    w.commit(ops).unwrap();
    let e = w
        .commit(vec![TableOp::UpsertNextHop(NextHopId(11), ecmp(&[10, 2]))])
        .unwrap_err();
    assert_eq!(e.error, TableError::NestedComposite(NextHopId(10)));
    let e = w
        .commit(vec![TableOp::UpsertNextHop(NextHopId(11), ecmp(&[2, 2]))])
        .unwrap_err();
    assert_eq!(e.error, TableError::DuplicateMember(NextHopId(2)));
    let e = w
        .commit(vec![TableOp::UpsertNextHop(NextHopId(2), ecmp(&[3]))])
        .unwrap_err();
    assert_eq!(e.error, TableError::KindChangeInUse(NextHopId(2)));

    let before: Vec<NextHopId> = {
        let t = r.enter().unwrap();
        let NextHop::Composite(e) = t.nexthop(NextHopId(10)).unwrap() else {
            panic!()
        };
        (0..256).map(|h| e.select(h)).collect()
    };
    w.commit(vec![TableOp::UpsertNextHop(NextHopId(10), ecmp(&[2, 4]))])
        .unwrap();
    let t = r.enter().unwrap();
    let NextHop::Composite(e) = t.nexthop(NextHopId(10)).unwrap() else {
        panic!()
    };
    for (h, old) in before.iter().enumerate() {
        if *old != NextHopId(3) {
            assert_eq!(
                e.select(h as u32),
                *old,
                "bucket {h} moved although its member stayed"
            );
        }
    }
    assert_eq!(t.nexthop_refs(NextHopId(3)), 0);
}

#[test]
fn bridge_and_policy_changes() {
    let (mut w, r) = new_tables();
    let mut ops = base();
    let mac = MacAddr([2, 0, 0, 0, 0, 7]);
    ops.push(TableOp::AddBridge {
        vrf: VrfId(1),
        mac,
        nh: NextHopId(2),
    });
    ops.push(TableOp::SetPolicy {
        vrf: VrfId(1),
        policy: Arc::new(Policy::default()),
    });
    w.commit(ops).unwrap();
    assert_eq!(
        r.enter()
            .unwrap()
            .vrf(VrfId(1))
            .unwrap()
            .bridge
            .lookup(&mac),
        Some(NextHopId(2))
    );
    let e = w.commit(vec![TableOp::AddBridge {
        vrf: VrfId(1),
        mac: MacAddr([1, 0, 0x5e, 0, 0, 1]),
        nh: NextHopId(2),
    }]);
    assert!(matches!(e.unwrap_err().error, TableError::GroupMac(_)));
    let e = w.commit(vec![TableOp::RemoveBridge {
        vrf: VrfId(1),
        mac: MacAddr([2, 9, 9, 9, 9, 9]),
    }]);
    assert!(matches!(
        e.unwrap_err().error,
        TableError::NoSuchBridgeEntry { .. }
    ));
}

#[test]
fn a_vrf_named_by_another_vrfs_policy_cannot_be_removed() {
    use crate::policy::{PolicyAction, PolicyRule};
    let (mut w, _r) = new_tables();
    let allow_from_2 = Policy::new(vec![PolicyRule {
        src_net: Some(VrfId(2)),
        ..PolicyRule::matching_all(PolicyAction::Allow)
    }])
    .unwrap();
    let set = |p: Policy| TableOp::SetPolicy {
        vrf: VrfId(1),
        policy: Arc::new(p),
    };
    w.commit(vec![vrf(1, 100), vrf(2, 200), set(allow_from_2.clone())])
        .unwrap();
    let e = w.commit(vec![TableOp::RemoveVrf(VrfId(2))]).unwrap_err();
    assert!(
        matches!(
            e.error,
            TableError::InUse {
                what: "VRF",
                by: "policy rules of other VRFs",
                ..
            }
        ),
        "{e}"
    );
    // Replacing the policy first, in the same batch, frees it; so does removing VRF 1.
    w.commit(vec![set(Policy::default()), TableOp::RemoveVrf(VrfId(2))])
        .unwrap();
    w.commit(vec![vrf(2, 200), set(allow_from_2)]).unwrap();
    w.commit(vec![
        TableOp::RemoveVrf(VrfId(1)),
        TableOp::RemoveVrf(VrfId(2)),
    ])
    .unwrap();
}

/// Readers see each batch whole: a reader never observes half of a committed batch.
#[test]
fn readers_see_batches_atomically() {
    let (mut w, r) = new_tables();
    w.commit(base()).unwrap();
    let factory = r.factory();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    let reader = std::thread::spawn(move || {
        let r = factory.reader();
        let mut checks = 0u64;
        // Check at least once, however late this thread gets a core.
        loop {
            let stopping = s.load(std::sync::atomic::Ordering::Relaxed);
            let Some(t) = r.enter() else { break };
            let v = t.vrf(VrfId(1)).unwrap();
            // The batch adds (or removes) both routes together.
            assert_eq!(v.fib4.len() % 2, 0, "half a batch visible");
            checks += 1;
            if stopping {
                break;
            }
        }
        checks
    });
    for i in 0..2000u32 {
        let a = format!("10.{}.{}.0/24", i / 256, i % 256);
        let b = format!("11.{}.{}.0/24", i / 256, i % 256);
        w.commit(vec![route(1, &a, 1), route(1, &b, 2)]).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(r.enter().unwrap().vrf(VrfId(1)).unwrap().fib4.len(), 4000);
}

#[test]
fn flood_lists_hold_their_members_and_refuse_composites() {
    let (mut w, r) = new_tables();
    w.commit(base()).unwrap();
    w.commit(vec![TableOp::SetFlood {
        vrf: VrfId(1),
        members: vec![NextHopId(1), NextHopId(2)],
    }])
    .unwrap();
    assert_eq!(r.enter().unwrap().vrf(VrfId(1)).unwrap().flood.len(), 2);
    let e = w
        .commit(vec![TableOp::RemoveNextHop(NextHopId(2))])
        .unwrap_err();
    assert!(matches!(e.error, TableError::InUse { .. }), "{e}");
    w.commit(vec![TableOp::UpsertNextHop(
        NextHopId(7),
        NextHop::Composite(Ecmp::new(&[NextHopId(1)])),
    )])
    .unwrap();
    let e = w
        .commit(vec![TableOp::SetFlood {
            vrf: VrfId(1),
            members: vec![NextHopId(7)],
        }])
        .unwrap_err();
    assert_eq!(e.error, TableError::NestedComposite(NextHopId(7)));
    // Emptying the list releases the members.
    w.commit(vec![
        TableOp::SetFlood {
            vrf: VrfId(1),
            members: vec![],
        },
        TableOp::RemoveNextHop(NextHopId(7)),
    ])
    .unwrap();
    assert_eq!(r.enter().unwrap().nexthop_refs(NextHopId(2)), 0);
}

#[test]
fn a_vrf_named_by_a_next_hop_stays() {
    let (mut w, _r) = new_tables();
    w.commit(vec![
        vrf(3, 300),
        TableOp::UpsertNextHop(
            NextHopId(5),
            NextHop::Vrf {
                vrf: VrfId(3),
                inner: crate::nexthop::Inner::Ethernet,
            },
        ),
        TableOp::SetGateway {
            vrf: VrfId(3),
            mac: MacAddr([0, 0, 0x5e, 0, 1, 0]),
            addresses: vec![],
        },
    ])
    .unwrap();
    let e = w.commit(vec![TableOp::RemoveVrf(VrfId(3))]).unwrap_err();
    assert!(matches!(e.error, TableError::InUse { .. }), "{e}");
    let e = w
        .commit(vec![TableOp::SetGateway {
            vrf: VrfId(3),
            mac: MacAddr([1, 0, 0x5e, 0, 1, 0]),
            addresses: vec![],
        }])
        .unwrap_err();
    assert!(matches!(e.error, TableError::GroupMac(_)));
    w.commit(vec![
        TableOp::RemoveNextHop(NextHopId(5)),
        TableOp::RemoveVrf(VrfId(3)),
    ])
    .unwrap();
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A random change over a small id space, so that references collide often.
    fn op() -> impl Strategy<Value = TableOp> {
        let id = || 0u32..4;
        prop_oneof![
            (id(), 100u32..103).prop_map(|(i, v)| vrf(i, v)),
            id().prop_map(|i| TableOp::RemoveVrf(VrfId(i))),
            (id(), id()).prop_map(|(i, v)| workload(i + 1, v)),
            Just(underlay(0)),
            id().prop_map(|i| TableOp::RemoveInterface(InterfaceId(i))),
            (id(), id()).prop_map(|(n, i)| local_nh(n, i)),
            id().prop_map(|n| tunnel_nh(n, 0, "192.0.2.9")),
            proptest::sample::subsequence(vec![0u32, 1, 2, 3], 1..4).prop_map(|m| {
                TableOp::UpsertNextHop(
                    NextHopId(8),
                    NextHop::Composite(Ecmp::new(
                        &m.into_iter().map(NextHopId).collect::<Vec<_>>(),
                    )),
                )
            }),
            id().prop_map(|n| TableOp::RemoveNextHop(NextHopId(n))),
            (id(), 0u32..3, prop_oneof![id(), Just(8)]).prop_map(|(v, p, n)| route(
                v,
                &format!("10.{p}.0.0/16"),
                n
            )),
            (id(), 0u32..3).prop_map(|(v, p)| TableOp::RemoveRoute {
                vrf: VrfId(v),
                prefix: format!("10.{p}.0.0/16").parse().unwrap()
            }),
            (16u32..19, id()).prop_map(|(l, n)| TableOp::AddLabel {
                label: l,
                nh: NextHopId(n)
            }),
            (16u32..19).prop_map(TableOp::RemoveLabel),
            (id(), id()).prop_map(|(n, v)| TableOp::UpsertNextHop(
                NextHopId(n),
                NextHop::Vrf {
                    vrf: VrfId(v),
                    inner: crate::nexthop::Inner::Ip
                }
            )),
            (
                id(),
                proptest::sample::subsequence(vec![0u32, 1, 2, 3, 8], 0..3)
            )
                .prop_map(|(v, m)| {
                    TableOp::SetFlood {
                        vrf: VrfId(v),
                        members: m.into_iter().map(NextHopId).collect(),
                    }
                }),
        ]
    }

    /// Reference counts: (next hop, count) and (interface, count), sorted.
    type RefCounts = (Vec<(NextHopId, u32)>, Vec<(InterfaceId, u32)>);

    /// Reference counts recomputed from scratch.
    fn recount(t: &ForwardingState) -> RefCounts {
        let mut nh: HashMap<NextHopId, u32> = HashMap::default();
        let mut ifs: HashMap<InterfaceId, u32> = HashMap::default();
        for v in t.vrfs() {
            for p in 0..3u32 {
                if let Some(n) = v.fib4.exact(format!("10.{p}.0.0").parse().unwrap(), 16) {
                    *nh.entry(n).or_default() += 1;
                }
            }
        }
        for n in (16..19).filter_map(|l| t.labels().lookup(l)) {
            *nh.entry(n).or_default() += 1;
        }
        for v in t.vrfs() {
            for n in &v.flood {
                *nh.entry(*n).or_default() += 1;
            }
        }
        for (_, h) in t.nexthops() {
            for m in h.members() {
                *nh.entry(*m).or_default() += 1;
            }
            if let Some(i) = h.interface() {
                *ifs.entry(i).or_default() += 1;
            }
        }
        let mut a: Vec<_> = nh.into_iter().collect();
        let mut b: Vec<_> = ifs.into_iter().collect();
        a.sort();
        b.sort();
        (a, b)
    }

    fn stored(t: &ForwardingState) -> RefCounts {
        let mut a: Vec<_> = t
            .refs
            .nexthop
            .iter()
            .filter(|(_, c)| **c > 0)
            .map(|(k, v)| (*k, *v))
            .collect();
        let mut b: Vec<_> = t
            .refs
            .interface
            .iter()
            .filter(|(_, c)| **c > 0)
            .map(|(k, v)| (*k, *v))
            .collect();
        a.sort();
        b.sort();
        (a, b)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]
        #[test]
        fn random_batches_keep_every_reference_valid(batches in proptest::collection::vec(proptest::collection::vec(op(), 1..4), 1..25)) {
            let (mut w, r) = new_tables();
            for b in batches {
                let _ = w.commit(b);
                // Both copies (the one just published and, after an empty publish, the other)
                // hold the same state, and every reference points at something that exists.
                for _ in 0..2 {
                    let t = r.enter().unwrap();
                    prop_assert_eq!(recount(&t), stored(&t));
                    for v in t.vrfs() {
                        for p in 0..3u32 {
                            if let Some(n) = v.fib4.exact(format!("10.{p}.0.0").parse().unwrap(), 16) {
                                prop_assert!(t.nexthop(n).is_some());
                            }
                        }
                    }
                    for (_, h) in t.nexthops() {
                        if let Some(i) = h.interface() { prop_assert!(t.interface(i).is_some()); }
                        for m in h.members() { prop_assert!(t.nexthop(*m).is_some()); }
                    }
                    for i in t.interfaces().iter() {
                        if let Some(v) = i.vrf { prop_assert!(t.vrf(v).is_some()); }
                    }
                    for (_, h) in t.nexthops() {
                        if let Some(v) = h.vrf() { prop_assert!(t.vrf(v).is_some()); }
                    }
                    for v in t.vrfs() {
                        for n in &v.flood { prop_assert!(t.nexthop(*n).is_some()); }
                    }
                    drop(t);
                    w.commit(vec![]).unwrap();
                }
            }
        }
    }
}

#[test]
fn routed_tunnels_are_found_by_vni_and_vtep() {
    let (mut w, _r) = new_tables();
    let underlay = InterfaceId(0);
    let tunnel = |vni, last, inner_dst| {
        NextHop::Tunnel(Tunnel {
            encap: Encap::Vxlan { vni },
            underlay,
            src: "192.0.2.1".parse().unwrap(),
            dst: IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, last)),
            dst_mac: MacAddr([2, 0, 0, 0, 0, last]),
            inner_dst,
        })
    };
    let vtep = |last| IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, last));
    let mut ops = vec![TableOp::UpsertInterface(Interface {
        id: underlay,
        name: "uplink".into(),
        kind: InterfaceKind::Underlay,
        vrf: None,
        mac: MacAddr([2, 0, 0, 0, 0, 1]),
        addresses: vec![],
        mtu: 1500,
        policy: false,
        admin_up: true,
        memif: None,
        police: None,
    })];
    ops.extend([
        TableOp::UpsertNextHop(NextHopId(1), tunnel(200, 3, None)),
        // Bridged to a function's MAC: not a routed one.
        TableOp::UpsertNextHop(NextHopId(2), tunnel(200, 4, Some(MacAddr([2; 6])))),
    ]);
    w.commit(ops).unwrap();
    let st = w.read().unwrap();
    assert_eq!(st.routed_tunnel(200, vtep(3)), Some(NextHopId(1)));
    assert_eq!(st.routed_tunnel(100, vtep(3)), None);
    assert_eq!(st.routed_tunnel(200, vtep(4)), None);
    drop(st);
    // Moved to another VTEP, then removed.
    w.commit(vec![TableOp::UpsertNextHop(
        NextHopId(1),
        tunnel(200, 5, None),
    )])
    .unwrap();
    let st = w.read().unwrap();
    assert_eq!(st.routed_tunnel(200, vtep(3)), None);
    assert_eq!(st.routed_tunnel(200, vtep(5)), Some(NextHopId(1)));
    drop(st);
    w.commit(vec![TableOp::RemoveNextHop(NextHopId(1))])
        .unwrap();
    assert_eq!(w.read().unwrap().routed_tunnel(200, vtep(5)), None);
}
