//! Arbitrary request bodies through the API's own decoding (`ovr_agent::api::parse`:
//! 400 for what is not JSON, 422 for the wrong shape) and, when they decode, through the
//! agent's validation on the example host: nothing may panic, and a refused change must
//! leave the configuration as it was. The first byte picks the endpoint's body type.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovr_agent::api::config::{Batch, PolicyBody};
use ovr_agent::api::diagnose::TraceAdd;
use ovr_agent::api::parse;
use ovr_agent::capture::CaptureRequest;
use ovr_agent::change::{Change, Object, PolicyChange};
use ovr_agent::store::{Source, Start};
use ovr_agent::{Agent, ApiError};
use ovr_config::{Config, Names};

fn agent() -> Agent {
    let yaml = include_str!("../../crates/config/examples/two-networks.yaml");
    let start = Start {
        config: Config::from_yaml(yaml).unwrap(),
        base: None,
        ids: Names::default(),
        source: Source::ConfigFile,
    };
    let (w, _r) = ovr_tables::state::new_tables();
    Agent::start(start, w, None).unwrap()
}

/// Applies `changes` as the API would; a refusal changes nothing.
fn apply(changes: Vec<Change>, batch: bool) {
    let mut a = agent();
    let before = a.config().clone();
    if a.apply(changes, batch).is_err() {
        assert_eq!(a.config(), &before, "a refused change changed the configuration");
    }
}

fn create<T: serde::de::DeserializeOwned>(body: &[u8], object: impl Fn(T) -> Object) {
    if let Ok(o) = parse::<T>(body) {
        apply(vec![Change::Create(object(o))], false);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 12 {
        0 => {
            if let Ok(b) = parse::<Batch>(body) {
                apply(b.changes, true);
            }
        }
        1 => create(body, Object::Route),
        2 => create(body, Object::Bridge),
        3 => create(body, Object::Label),
        4 => create(body, Object::Nexthop),
        5 => create(body, Object::Network),
        6 => create(body, Object::Tunnel),
        7 => create(body, Object::Interface),
        8 => {
            if let Ok(p) = parse::<PolicyBody>(body) {
                let c = PolicyChange {
                    network: "red".into(),
                    rules: p.rules,
                };
                apply(vec![Change::SetPolicy(c)], false);
            }
        }
        9 => {
            if let Ok(c) = parse::<Config>(body) {
                let mut a = agent();
                let before = a.config().clone();
                if a.replace(c).is_err() {
                    assert_eq!(a.config(), &before);
                }
            }
        }
        10 => {
            let _: Result<TraceAdd, ApiError> = parse(body);
        }
        _ => {
            let _: Result<CaptureRequest, ApiError> = parse(body);
        }
    }
    // Whatever the shape, the classification is 400 or 422, never anything else.
    if let Err(e) = parse::<Batch>(body) {
        assert!(matches!(e.status().as_u16(), 400 | 422), "{e:?}");
    }
});
