//! Table changes that leave an offloaded flow's treatment as it was keep its entry
//! (`crate::recheck`); those that change it remove the entry, and only that one.

use super::*;
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::NextHop;
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::TableOp;

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
    assert_eq!(r.fast.counters.rechecked_kept, 4);
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
    assert_eq!(r.fast.counters.rechecked_kept, 1);
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
