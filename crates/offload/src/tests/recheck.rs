//! Table changes that leave an offloaded flow's treatment as it was keep its entry
//! (`crate::recheck`); those that change it remove the entry, and only that one.

use super::*;
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::NextHop;
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::TableOp;
use ovr_wire::ethernet::MacAddr;

impl Rig {
    fn commit(&mut self, ops: Vec<TableOp>) {
        self._writer.commit(ops).expect("change");
    }

    /// Points the /32 of `dst` in network red at a new next hop `id` holding `nh`.
    fn route_via(&mut self, dst: [u8; 4], id: u32, nh: NextHop) {
        let red = self.names.networks["red"];
        let prefix = IpPrefix::new(core::net::Ipv4Addr::from(dst).into(), 32).expect("prefix");
        self.commit(vec![
            TableOp::UpsertNextHop(NextHopId(id), nh),
            TableOp::AddRoute {
                vrf: red,
                prefix,
                nh: NextHopId(id),
            },
        ]);
    }

    fn nexthop(&self, name: &str) -> NextHop {
        let st = self.reader.enter().expect("tables");
        st.nexthop(self.names.nexthops[name])
            .cloned()
            .expect("next hop")
    }

    fn flow_action(&self) -> (Option<FlowAction>, u32) {
        let (_, e) = self
            .pipe
            .cx
            .flows
            .iter()
            .find(|(_, e)| e.flags & flow_flags::REVERSE == 0)
            .expect("flow");
        (e.action, e.epoch)
    }
}

fn routed_case() -> Case {
    cases()
        .into_iter()
        .find(|c| c.name == "encap-routed")
        .expect("the routed case")
}

#[test]
fn a_route_flipped_between_equivalent_next_hops_keeps_the_entry() {
    let c = routed_case();
    let dst: [u8; 4] = c.input[30..34].try_into().expect("address");
    let mut r = rig();
    r.run("vm1", &c.input, 1);
    let key = r.key();
    let generation = r.fake.s.borrow().generation;
    let b_red = r.nexthop("b-red");
    // The route the flow follows is flipped to an equivalent next hop, and back, and
    // unrelated routes come and go: the entry stays in force, nothing is installed
    // again, and user space's flow follows the next hop in force.
    for (k, id) in [900, 901, 900].into_iter().enumerate() {
        r.route_via(dst, id, b_red.clone());
        r.idle(2 + k as u64);
        let s = r.fake.s.borrow();
        assert_eq!(s.generation, generation, "no new generation");
        assert_eq!(s.entries[&key].1, generation, "the entry is still in force");
        drop(s);
        assert_eq!(
            r.flow_action(),
            (
                Some(FlowAction::Forward {
                    next_hop: NextHopId(id)
                }),
                r.epoch()
            )
        );
    }
    let red = r.names.networks["red"];
    r.commit(vec![TableOp::AddRoute {
        vrf: red,
        prefix: "10.9.0.0/16".parse().expect("prefix"),
        nh: r.names.nexthops["b-blue"],
    }]);
    r.idle(5);
    assert_eq!(r.fake.s.borrow().entries[&key].1, generation);
    assert_eq!(r.fast.counters.installed, 1);
    assert_eq!(r.fast.counters.invalidations, 1);
    assert_eq!(r.fast.counters.rechecks, 4);
    // The unrelated route's change is not one the flow's decision reads.
    assert_eq!(r.fast.counters.rechecked_kept, 3);
    assert_eq!(r.fast.counters.recheck_skipped, 1);
    assert_eq!(r.fast.counters.rechecked_removed, 0);
}

#[test]
fn a_change_of_the_flows_treatment_removes_its_entry_only() {
    let c = routed_case();
    let dst: [u8; 4] = c.input[30..34].try_into().expect("address");
    let mut r = rig();
    r.run("vm1", &c.input, 1);
    let bridged = &cases()[0];
    r.run("vm1", &bridged.input, 1);
    assert_eq!(r.fake.s.borrow().entries.len(), 2);
    let generation = r.fake.s.borrow().generation;
    // The routed flow's route now leads to another remote VTEP.
    let NextHop::Tunnel(mut t) = r.nexthop("b-red") else {
        panic!("b-red is a tunnel");
    };
    t.dst = core::net::Ipv4Addr::new(192, 0, 2, 9).into();
    r.route_via(dst, 900, NextHop::Tunnel(t));
    r.idle(2);
    {
        let s = r.fake.s.borrow();
        assert_eq!(s.generation, generation);
        // The bridged flow's entry stays; the routed one's is gone.
        assert_eq!(s.entries.len(), 1);
        assert!(s.entries.keys().all(|k| k.dst != dst));
    }
    assert_eq!(r.fast.counters.rechecked_removed, 1);
    // The bridged flow's decision reads nothing the change touched: not looked at.
    assert_eq!(r.fast.counters.rechecked_kept, 0);
    assert_eq!(r.fast.counters.recheck_skipped, 1);
    // Its next packet goes through user space, with the new decision, and is offloaded
    // again towards the new VTEP.
    let out = r.run("vm1", &c.input, 3);
    assert_eq!(out[0].1[30..34], [192, 0, 2, 9]);
    let s = r.fake.s.borrow();
    assert_eq!(s.entries.len(), 2);
    assert!(
        s.entries
            .values()
            .any(|(a, g, _)| *g == generation && a.template[30..34] == [192, 0, 2, 9])
    );
}

#[test]
fn a_change_of_an_interface_still_starts_a_new_generation() {
    let c = routed_case();
    let mut r = rig();
    r.run("vm1", &c.input, 1);
    let key = r.key();
    let generation = r.fake.s.borrow().generation;
    let st = r.reader.enter().expect("tables");
    let mut uplink = st
        .interface(r.names.interfaces["uplink"])
        .cloned()
        .expect("uplink");
    drop(st);
    uplink.mtu = 1400;
    r.commit(vec![TableOp::UpsertInterface(uplink)]);
    r.idle(2);
    let s = r.fake.s.borrow();
    assert_ne!(s.generation, generation);
    assert_eq!(s.entries[&key].1, generation, "left stale");
    assert_eq!(r.fast.counters.rechecks, 0);
}

impl Rig {
    /// Adds (or replaces) the route of `prefix` in network `net` to next hop `nh`.
    fn add_route(&mut self, net: &str, prefix: &str, nh: NextHopId) {
        let vrf = self.names.networks[net];
        self.commit(vec![TableOp::AddRoute {
            vrf,
            prefix: prefix.parse().expect("prefix"),
            nh,
        }]);
    }

    /// Gives the bridged flow's destination MAC in network `net` to next hop `nh`.
    fn add_bridge(&mut self, net: &str, nh: NextHopId) {
        let vrf = self.names.networks[net];
        let mac = MacAddr(cases()[0].input[..6].try_into().expect("mac"));
        self.commit(vec![TableOp::AddBridge { vrf, mac, nh }]);
    }

    /// The routed and the bridged flows, each with its entry in force.
    fn two_flows(&mut self) -> [u8; 4] {
        let c = routed_case();
        self.run("vm1", &c.input, 1);
        self.run("vm1", &cases()[0].input, 1);
        assert_eq!(self.fake.s.borrow().entries.len(), 2);
        c.input[30..34].try_into().expect("address")
    }

    fn rechecked(&self) -> (u64, u64, u64) {
        let c = &self.fast.counters;
        (c.rechecked_kept, c.rechecked_removed, c.recheck_skipped)
    }
}

#[test]
fn changes_that_touch_nothing_a_flow_reads_recheck_none_of_its_entries() {
    let mut r = rig();
    let dst = r.two_flows();
    let generation = r.fake.s.borrow().generation;
    let b_blue = r.names.nexthops["b-blue"];
    // Another network's route for the very destination, its bridge entry for the very
    // MAC, a route of the flow's network elsewhere, a next hop no entry uses.
    let dst_32 = format!("{}/32", core::net::Ipv4Addr::from(dst));
    r.add_route("blue", &dst_32, b_blue);
    r.idle(2);
    r.add_bridge("blue", b_blue);
    r.idle(3);
    r.add_route("red", "10.9.0.0/16", b_blue);
    r.idle(4);
    let blue_nh = r.nexthop("b-blue");
    r.commit(vec![TableOp::UpsertNextHop(NextHopId(900), blue_nh)]);
    r.idle(5);
    assert_eq!(r.fast.counters.rechecks, 4);
    assert_eq!(r.rechecked(), (0, 0, 8), "no entry taken again");
    let s = r.fake.s.borrow();
    assert_eq!(s.generation, generation);
    assert_eq!(s.entries.len(), 2);
    assert!(s.entries.values().all(|(_, g, _)| *g == generation));
}

#[test]
fn a_covering_prefix_rechecks_the_entries_inside_it_and_removes_those_it_moves() {
    let mut r = rig();
    let dst = r.two_flows();
    let b_blue = r.names.nexthops["b-blue"];
    // A shorter prefix than the flow's route: the route still wins; the routed flow's
    // entry is looked at and kept, the bridged one's is not looked at.
    r.add_route("red", "10.0.0.0/8", b_blue);
    r.idle(2);
    assert_eq!(r.rechecked(), (1, 0, 1));
    // A longer one, towards another network's tunnel: the routed entry goes.
    let dst_32 = format!("{}/32", core::net::Ipv4Addr::from(dst));
    r.add_route("red", &dst_32, b_blue);
    r.idle(3);
    assert_eq!(r.rechecked(), (1, 1, 2));
    {
        let s = r.fake.s.borrow();
        assert_eq!(s.entries.len(), 1);
        assert!(s.entries.keys().all(|k| k.dst != dst));
    }
    // Its removal gives the flow back: routed through b-blue (VNI 200) from now on.
    let out = r.run("vm1", &routed_case().input, 4);
    assert_eq!(out.len(), 1);
    assert_eq!(r.fake.s.borrow().entries.len(), 2);
    // The bridged flow's MAC given another next hop: only its entry is looked at.
    r.add_bridge("red", b_blue);
    r.idle(5);
    assert_eq!(r.rechecked(), (1, 2, 3));
    assert!(r.fake.s.borrow().entries.keys().any(|k| k.dst == dst));
}

#[test]
fn a_change_the_tables_cannot_scope_rechecks_every_entry() {
    let mut r = rig();
    r.two_flows();
    let red = r.names.networks["red"];
    let st = r.reader.enter().expect("tables");
    let policy = st.vrf(red).expect("red").policy.clone();
    drop(st);
    r.commit(vec![TableOp::SetPolicy { vrf: red, policy }]);
    r.idle(2);
    assert_eq!(r.rechecked(), (2, 0, 0));
}

/// Random route, bridge and next-hop changes on two rigs fed the same frames: one whose
/// re-checks are scoped, one made to re-check every entry each time (a change of
/// something the tables do not scope, the same each time, comes with every batch). The
/// entries in force must be the same after every batch.
#[test]
fn scoped_rechecks_keep_what_full_rechecks_keep() {
    let mut scoped = rig();
    let mut full = rig();
    let same = |r: &mut Rig| {
        r.commit(vec![TableOp::SetFlowQuota {
            vrf: r.names.networks["blue"],
            max: None,
        }])
    };
    let frames: Vec<(String, Vec<u8>)> = cases().into_iter().map(|c| (c.iface, c.input)).collect();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let b_red = scoped.nexthop("b-red");
    let NextHop::Tunnel(mut other) = b_red.clone() else {
        panic!("b-red is a tunnel");
    };
    other.dst = core::net::Ipv4Addr::new(192, 0, 2, 9).into();
    let prefixes = [
        "10.0.0.0/8",
        "10.2.0.0/16",
        "10.2.0.0/24",
        "10.2.0.5/32",
        "10.1.0.0/24",
        "10.1.0.5/32",
        "10.9.0.0/16",
    ];
    let mut kept_by_scoped = 0;
    for step in 0..200u64 {
        for r in [&mut scoped, &mut full] {
            for (i, f) in &frames {
                r.run(i, f, 10 + step * 3);
            }
        }
        let net = ["red", "blue"][next(2) as usize];
        let vrf = scoped.names.networks[net];
        let nh = NextHopId(900 + next(3) as u32);
        let op = match next(5) {
            0 => TableOp::RemoveRoute {
                vrf,
                prefix: prefixes[next(prefixes.len() as u64) as usize]
                    .parse()
                    .expect("prefix"),
            },
            1 => TableOp::AddBridge {
                vrf,
                mac: MacAddr(
                    cases()[next(4) as usize].input[..6]
                        .try_into()
                        .expect("mac"),
                ),
                nh: scoped.names.nexthops[["b-red", "b-blue"][next(2) as usize]],
            },
            2 => TableOp::UpsertNextHop(
                nh,
                NextHop::Tunnel(if next(2) == 0 { other } else { t_of(&b_red) }),
            ),
            _ => TableOp::AddRoute {
                vrf,
                prefix: prefixes[next(prefixes.len() as u64) as usize]
                    .parse()
                    .expect("prefix"),
                nh: [
                    nh,
                    scoped.names.nexthops["b-red"],
                    scoped.names.nexthops["b-blue"],
                ][next(3) as usize],
            },
        };
        // Routes to a next hop not made yet are refused alike by both (skipped).
        let ok = scoped._writer.commit(vec![op.clone()]).is_ok();
        same(&mut full);
        if ok {
            full.commit(vec![op]);
        }
        for r in [&mut scoped, &mut full] {
            r.idle(11 + step * 3);
        }
        let entries = |r: &Rig| {
            let s = r.fake.s.borrow();
            let mut v: Vec<(Vec<u8>, Vec<u8>)> = s
                .entries
                .iter()
                .filter(|(_, (_, g, _))| *g == s.generation)
                .map(|(k, (a, _, _))| {
                    (
                        k.encode().to_vec(),
                        [&a.encode(0, 0)[..], &a.template].concat(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(entries(&scoped), entries(&full), "step {step}");
        kept_by_scoped = scoped.fast.counters.recheck_skipped;
    }
    assert!(full.fast.counters.recheck_skipped == 0);
    assert!(kept_by_scoped > 0, "the scope left some entries alone");
    assert!(
        scoped.fast.counters.rechecked_removed > 0,
        "some changes moved flows"
    );
}

fn t_of(nh: &NextHop) -> ovr_tables::nexthop::Tunnel {
    match nh {
        NextHop::Tunnel(t) => *t,
        _ => panic!("a tunnel"),
    }
}
