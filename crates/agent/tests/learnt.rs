//! Entries learnt from peers: installed beside the configuration, never in it nor in the
//! state file; a configured entry with the same key wins; a change that cannot be
//! installed changes nothing.

mod common;

use common::*;
use ovr_agent::change::{Change, Key, Object};
use ovr_agent::learnt::{Learnt, LearntChange, LearntKey};
use ovr_agent::store::{Store, initial};
use ovr_agent::{Agent, ApiError};
use ovr_config::model::BridgeConfig;
use ovr_tables::state::new_tables;
use ovr_wire::ethernet::MacAddr;
use std::sync::Arc;

/// The MAC red's configured bridge entry has (through `b-red`).
const CONFIGURED: MacAddr = MacAddr([2, 0, 0, 0, 1, 6]);

fn mac(last: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, 9, last])
}

fn bridge(network: &str, mac: MacAddr, nexthop: Option<&str>) -> LearntChange {
    LearntChange {
        network: Arc::from(network),
        key: LearntKey::Bridge(mac),
        nexthop: nexthop.map(Arc::from),
    }
}

fn host(network: &str, prefix: &str, nexthop: Option<&str>) -> LearntChange {
    LearntChange {
        network: Arc::from(network),
        key: LearntKey::Route(prefix.parse().unwrap()),
        nexthop: nexthop.map(Arc::from),
    }
}

/// A bridge entry's key in `installed`.
fn key(network: &str, mac: MacAddr) -> String {
    format!("bridge {network} {mac:?}")
}

#[test]
fn learnt_entries_are_installed_but_neither_configured_nor_saved() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path().join("state.json"));
    let mut a = agent(example(), Some(store.clone()));
    let read = || std::fs::read(dir.path().join("state.json")).unwrap();
    let (config, saved) = (a.config().clone(), read());
    let applied = a
        .apply_learnt(vec![
            bridge("red", mac(1), Some("b-red")),
            host("blue", "10.9.0.7/32", Some("b-blue")),
        ])
        .unwrap();
    assert_eq!((applied.table_changes, applied.incremental), (2, true));
    let t = installed(&a);
    assert_eq!(t[&key("red", mac(1))], "b-red");
    assert_eq!(t["route blue 10.9.0.7/32"], "b-blue");
    assert_eq!(a.config(), &config);
    assert_eq!(read(), saved);
    assert!(a.learnt_installed("red", LearntKey::Bridge(mac(1))));
    // Withdrawn: gone from the tables and the set.
    a.apply_learnt(vec![host("blue", "10.9.0.7/32", None)])
        .unwrap();
    assert!(!installed(&a).contains_key("route blue 10.9.0.7/32"));
    assert_eq!(a.learnt().len(), 1);
    // A restart starts without them (the peers give them again).
    drop(a);
    let (w, _r) = new_tables();
    let b = Agent::start(initial(None, Some(&store)).unwrap(), w, Some(store)).unwrap();
    assert!(b.learnt().is_empty());
    assert_eq!(installed(&b), fresh(&config));
}

#[test]
fn a_configured_entry_wins_over_a_learnt_one_and_gives_it_back_when_deleted() {
    let mut a = agent(example(), None);
    let c = key("red", CONFIGURED);
    a.apply_learnt(vec![bridge("red", CONFIGURED, Some("b-blue"))])
        .unwrap();
    assert_eq!(installed(&a)[&c], "b-red");
    assert!(!a.learnt_installed("red", LearntKey::Bridge(CONFIGURED)));
    // The configured entry deleted (entry by entry): the learnt one is installed.
    let configured = Key::Bridge {
        network: "red".into(),
        mac: ovr_config::values::Mac(CONFIGURED),
    };
    a.apply(vec![Change::Delete(configured)], false).unwrap();
    assert_eq!(installed(&a)[&c], "b-blue");
    assert!(a.learnt_installed("red", LearntKey::Bridge(CONFIGURED)));
    // Configured again: it wins again; a learnt change to the entry leaves it alone.
    let entry = BridgeConfig {
        network: "red".into(),
        mac: ovr_config::values::Mac(CONFIGURED),
        nexthop: "b-red".into(),
    };
    a.apply(vec![Change::Create(Object::Bridge(entry))], false)
        .unwrap();
    assert_eq!(installed(&a)[&c], "b-red");
    let applied = a
        .apply_learnt(vec![bridge("red", CONFIGURED, None)])
        .unwrap();
    assert_eq!(applied.table_changes, 0);
    assert_eq!(installed(&a)[&c], "b-red");
}

#[test]
fn a_whole_install_keeps_the_learnt_entries_where_their_names_are() {
    let mut a = agent(example(), None);
    a.apply_learnt(vec![
        bridge("red", mac(1), Some("b-red")),
        bridge("blue", mac(2), Some("b-blue")),
    ])
    .unwrap();
    // The whole way (a network's change): both stay.
    let mut c = a.config().clone();
    c.networks[0].flow_quota = Some(1000);
    a.replace(c.clone()).unwrap();
    let t = installed(&a);
    assert_eq!(
        (&t[&key("red", mac(1))], &t[&key("blue", mac(2))]),
        (&"b-red".to_string(), &"b-blue".to_string())
    );
    // blue's next hop gone: its learnt entry waits, kept, until the name is back.
    let mut without = c.clone();
    without.nexthops.retain(|n| n.name != "b-blue");
    without.networks[1].flood.clear();
    a.replace(without).unwrap();
    assert!(!installed(&a).contains_key(&key("blue", mac(2))));
    assert!(!a.learnt_installed("blue", LearntKey::Bridge(mac(2))));
    assert_eq!(a.learnt().len(), 2);
    a.replace(c).unwrap();
    assert_eq!(installed(&a)[&key("blue", mac(2))], "b-blue");
}

#[test]
fn entry_by_entry_and_whole_install_the_same_tables() {
    let changes = vec![
        bridge("red", mac(1), Some("b-red")),
        bridge("red", mac(2), Some("b-red")),
        bridge("red", CONFIGURED, Some("b-blue")),
        host("blue", "10.9.0.7/32", Some("b-blue")),
        bridge("red", mac(2), None),
        bridge("red", mac(1), Some("b-blue")),
    ];
    let mut by_entry = agent(example(), None);
    by_entry.apply_learnt(changes.clone()).unwrap();
    let mut learnt = Learnt::default();
    for c in &changes {
        learnt.set(&c.network, c.key, c.nexthop.clone());
    }
    let mut whole = agent(example(), None);
    whole.replace_layered(example(), learnt.clone()).unwrap();
    assert_eq!(by_entry.learnt(), &learnt);
    assert_eq!(installed(&by_entry), installed(&whole));
    // And the whole way back to none of them.
    whole.replace_layered(example(), Learnt::default()).unwrap();
    assert_eq!(installed(&whole), fresh(&example()));
}

#[test]
fn a_learnt_batch_that_cannot_be_installed_changes_nothing() {
    let mut a = agent(example(), None);
    a.apply_learnt(vec![bridge("red", mac(1), Some("b-red"))])
        .unwrap();
    let (tables, learnt) = (installed(&a), a.learnt().clone());
    let e = a
        .apply_learnt(vec![
            bridge("red", mac(1), None),
            bridge("red", mac(3), Some("no-such-hop")),
        ])
        .unwrap_err();
    assert!(matches!(&e, ApiError::Invalid { .. }), "{e:?}");
    assert!(e.to_string().contains("no-such-hop"), "{e}");
    assert_eq!((installed(&a), a.learnt()), (tables, &learnt));
    // A network not there: kept (not installed), not an error.
    a.apply_learnt(vec![bridge("green", mac(4), Some("b-red"))])
        .unwrap();
    assert_eq!(a.learnt().len(), 2);
    assert!(!a.learnt_installed("green", LearntKey::Bridge(mac(4))));
}
