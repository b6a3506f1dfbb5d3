//! Persistence: every accepted change is saved; a restart resumes; the configuration
//! file and the state combine as docs/agent.md says; a change that cannot be saved is
//! not made.

mod common;

use common::*;
use ovr_agent::change::{Change, Key, Object};
use ovr_agent::store::{Source, Store, initial};
use ovr_agent::{Agent, ApiError};
use ovr_config::model::RouteConfig;
use ovr_tables::state::new_tables;

fn route(prefix: &str) -> Change {
    Change::Create(Object::Route(RouteConfig {
        network: "blue".into(),
        prefix: prefix.parse().unwrap(),
        nexthop: "b-blue".into(),
    }))
}

fn restart(config: Option<&std::path::Path>, store: &Store) -> (Agent, Source) {
    let start = initial(config, Some(store)).unwrap();
    let source = start.source.clone();
    let (w, _r) = new_tables();
    (Agent::start(start, w, Some(store.clone())).unwrap(), source)
}

#[test]
fn a_restart_resumes_with_the_same_tables_and_ids() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("host.yaml");
    std::fs::write(&file, EXAMPLE).unwrap();
    let store = Store::new(dir.path().join("state.json"));
    let (mut a, source) = restart(Some(&file), &store);
    assert_eq!(source, Source::ConfigFile);
    a.apply(vec![route("10.7.0.0/16")], false).unwrap();
    // Delete a next hop written early: ids must survive the restart as they are.
    a.apply(vec![Change::Delete(Key::Label { label: 501 })], false)
        .unwrap();
    a.apply(
        vec![Change::Delete(Key::Nexthop {
            name: "red-l2".into(),
        })],
        false,
    )
    .unwrap();
    let (tables, names, config) = (installed(&a), a.names().clone(), a.config().clone());
    assert!(!dir.path().join("state.json.tmp").exists());
    drop(a);
    // The file did not change: the state (file + API changes) wins.
    let (b, source) = restart(Some(&file), &store);
    assert_eq!(source, Source::State);
    assert_eq!(b.config(), &config);
    assert_eq!(b.names(), &names);
    assert_eq!(installed(&b), tables);
    drop(b);
    // Without --config, the state alone.
    let (c, source) = restart(None, &store);
    assert_eq!(source, Source::State);
    assert_eq!(installed(&c), tables);
}

#[test]
fn an_edited_configuration_file_wins_and_the_old_state_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("host.yaml");
    std::fs::write(&file, EXAMPLE).unwrap();
    let store = Store::new(dir.path().join("state.json"));
    let (mut a, _) = restart(Some(&file), &store);
    a.apply(vec![route("10.7.0.0/16")], false).unwrap();
    drop(a);
    let edited = EXAMPLE.replace("10.2.0.0/24", "10.4.0.0/24");
    std::fs::write(&file, &edited).unwrap();
    let (b, source) = restart(Some(&file), &store);
    let prev = dir.path().join("state.json.prev");
    assert_eq!(
        source,
        Source::ConfigFileChanged {
            previous_state: prev.clone()
        }
    );
    assert_eq!(b.config(), &ovr_config::Config::from_yaml(&edited).unwrap());
    assert_eq!(installed(&b), fresh(b.config()));
    // The API route is in the kept state, not in the new one.
    let kept = std::fs::read_to_string(prev).unwrap();
    assert!(kept.contains("10.7.0.0/16"));
    assert!(
        !b.config()
            .routes
            .iter()
            .any(|r| r.prefix.to_string() == "10.7.0.0/16")
    );
    drop(b);
    // Restarting again with the same file: now the state (based on the edit) wins.
    let (_, source) = restart(Some(&file), &store);
    assert_eq!(source, Source::State);
}

#[test]
fn a_change_that_cannot_be_saved_is_not_made() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let store = Store::new(&path);
    let mut a = agent(example(), Some(store));
    let (config, tables) = (a.config().clone(), installed(&a));
    // Something that is not a file where the state goes: the rename fails.
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir_all(path.join("in-the-way")).unwrap();
    let e = a.apply(vec![route("10.7.0.0/16")], false).unwrap_err();
    assert!(matches!(e, ApiError::Internal(_)), "{e}");
    assert_eq!(a.config(), &config);
    assert_eq!(installed(&a), tables);
}

#[test]
fn an_unreadable_state_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    std::fs::write(&path, "{ not json").unwrap();
    let e = initial(None, Some(&Store::new(&path)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("state.json") && e.contains("not a state file"),
        "{e}"
    );
}

#[test]
fn route_changes_are_appended_and_a_torn_last_record_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let store = Store::new(&path);
    let mut a = agent(example(), Some(store.clone()));
    let snapshot = std::fs::read_to_string(&path).unwrap();
    a.apply(vec![route("10.7.0.0/16"), route("10.8.0.0/16")], true)
        .unwrap();
    let applied = a.apply(vec![route("10.9.0.0/16")], false).unwrap();
    assert!(applied.incremental);
    let text = std::fs::read_to_string(&path).unwrap();
    // The snapshot is untouched; one line per accepted change follows it.
    assert!(text.starts_with(&snapshot), "{text}");
    let records: Vec<&str> = text[snapshot.len()..].lines().collect();
    assert_eq!(records.len(), 2, "{text}");
    assert!(records[1].contains("10.9.0.0/16"));
    let config = a.config().clone();
    drop(a);
    // A crash while a record was written leaves it cut short: it was never answered.
    std::fs::write(&path, format!("{text}{{\"changes\":[{{\"create\":{{\"rou")).unwrap();
    let start = initial(None, Some(&store)).unwrap();
    assert_eq!(start.config, config);
    // A damaged record before the end is not a crash's doing: refused, and named.
    let damaged = text.replacen("10.7.0.0/16", "10.7.0.0/99", 1);
    std::fs::write(&path, &damaged).unwrap();
    let e = initial(None, Some(&store)).unwrap_err().to_string();
    assert!(e.contains("record 0"), "{e}");
}

#[test]
fn the_file_is_rewritten_whole_when_records_outgrow_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let store = Store::new(&path);
    let mut a = agent(example(), Some(store.clone()));
    let mut lines = Vec::new();
    // 1 MiB of records at least before a rewrite: batches of 2,000 routes are ~130 KiB.
    for b in 0..12u32 {
        let batch = (0..2000u32)
            .map(|i| {
                let n = b * 2000 + i;
                route(&format!("11.{}.{}.0/24", n / 256, n % 256))
            })
            .collect();
        a.apply(batch, true).unwrap();
        lines.push(std::fs::read_to_string(&path).unwrap().lines().count());
    }
    assert!(lines.contains(&1), "never rewritten: {lines:?}");
    assert!(lines.iter().any(|&n| n > 2), "never appended: {lines:?}");
    let config = a.config().clone();
    drop(a);
    assert_eq!(initial(None, Some(&store)).unwrap().config, config);
}

#[test]
fn nothing_is_saved_before_the_start_went_well() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("host.yaml");
    std::fs::write(&file, EXAMPLE).unwrap();
    let path = dir.path().join("state.json");
    let store = Store::new(&path);
    let start = initial(Some(&file), Some(&store)).unwrap();
    let (w, _r) = new_tables();
    let mut a = Agent::start_unsaved(start, w, Some(store.clone())).unwrap();
    assert!(!path.exists());
    a.started().unwrap();
    assert!(path.exists());
    drop(a);
    // An edited file replaces the state: the old one is kept only once the start
    // went well.
    let saved = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&file, EXAMPLE.replace("10.2.0.0/24", "10.4.0.0/24")).unwrap();
    let start = initial(Some(&file), Some(&store)).unwrap();
    let prev = dir.path().join("state.json.prev");
    assert_eq!(
        start.source,
        Source::ConfigFileChanged {
            previous_state: prev.clone()
        }
    );
    let (w, _r) = new_tables();
    let mut a = Agent::start_unsaved(start, w, Some(store.clone())).unwrap();
    assert!(!prev.exists());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), saved);
    a.started().unwrap();
    assert_eq!(std::fs::read_to_string(&prev).unwrap(), saved);
    assert_ne!(std::fs::read_to_string(&path).unwrap(), saved);
}

#[test]
fn an_error_in_the_starting_configuration_names_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("host.yaml");
    let text = EXAMPLE.replace("label: 501", "label: 3");
    std::fs::write(&file, &text).unwrap();
    let line = text.lines().position(|l| l.contains("label: 3")).unwrap() + 1;
    let store = Store::new(dir.path().join("state.json"));
    let start = initial(Some(&file), Some(&store)).unwrap();
    let source = start.source.clone();
    let (w, _r) = new_tables();
    let e = Agent::start_unsaved(start, w, Some(store.clone()))
        .err()
        .unwrap();
    let e = ovr_agent::store::in_file(e, &source, Some(&file), Some(&store)).to_string();
    assert!(
        e.starts_with(&format!("{}:{line}: labels[1].label: ", file.display())),
        "{e}"
    );
    // An empty state file is an error, not an empty configuration.
    std::fs::write(dir.path().join("state.json"), "\n").unwrap();
    let e = initial(None, Some(&store)).err().unwrap().to_string();
    assert!(e.ends_with("state.json: the file is empty"), "{e}");
}

/// An empty batch changes nothing, so nothing is written (nor synced) to the state file.
#[test]
fn an_empty_batch_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let store = Store::new(&path);
    let mut a = agent(example(), Some(store.clone()));
    a.apply(vec![route("10.7.0.0/16")], true).unwrap();
    let before = std::fs::read(&path).unwrap();
    let applied = a.apply(Vec::new(), true).unwrap();
    assert_eq!(applied.table_changes, 0);
    assert_eq!(applied.spent_us.save, 0);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the state file was written"
    );
}
