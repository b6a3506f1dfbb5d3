//! The health thread follows the workers' probes: a port whose probe is not answered
//! `failures` times in a row is down in the tables (its instance leaves its function's
//! group) though its link is up, and up again after an answer; a cluster member reads
//! it as held down (`health::held_down`).

mod common;

use ovr_agent::api::AppState;
use ovr_agent::health;
use ovr_config::Config;
use ovr_dataplane::{Pipeline, Settings};
use ovr_tables::chain::ChainId;

const CHAIN: &str = include_str!("../../config/examples/service-chain.yaml");

/// Runs the pipeline against the agent's tables at `at` ns (probes only: nothing is
/// received); returns how many frames it sent.
fn run_at(state: &AppState, pipe: &mut Pipeline, at: u64) -> usize {
    let agent = state.agent().lock().unwrap();
    let st = agent.writer().read().unwrap();
    pipe.cx.now = at;
    pipe.run(&st);
    let mut n = 0;
    pipe.drain_tx(|_, _| n += 1);
    n
}

fn healthy(state: &AppState, instance: usize) -> bool {
    let agent = state.agent().lock().unwrap();
    let st = agent.writer().read().unwrap();
    st.chains().healthy(ChainId(0), 0, instance)
}

#[test]
fn an_unanswered_probe_takes_the_instance_out_with_its_link_up() {
    let state = AppState::new(common::agent(Config::from_yaml(CHAIN).unwrap(), None), None);
    let mut pipe = Pipeline::new(Settings {
        flow_capacity: 1024,
        ..Default::default()
    });
    pipe.share_probes(state.probes().clone(), true);
    let links_up = |_: &ovr_tables::interface::Interface| true;
    assert_eq!(health::check(&state, links_up), 0);
    assert!(!health::held_down(&state, "f1l"));
    // 100 ms apart, none answered: after the 4th probe 3 are missed.
    for k in 0..4u64 {
        assert_eq!(
            run_at(&state, &mut pipe, 1 + k * 100_000_000),
            4,
            "probe {k}"
        );
        let changed = health::check(&state, links_up);
        assert_eq!(changed, if k == 3 { 4 } else { 0 }, "after probe {k}");
    }
    assert!(!healthy(&state, 0) && !healthy(&state, 1));
    // What a cluster member reads to withdraw the ports' endpoints: service ports only.
    assert!(health::held_down(&state, "f1l") && health::held_down(&state, "f2r"));
    assert!(!health::held_down(&state, "wa") && !health::held_down(&state, "nope"));
    let agent = state.agent().lock().unwrap();
    let f1l = agent.names().interfaces["f1l"];
    drop(agent);
    let p = state.probes().get(f1l).unwrap();
    assert_eq!((p.kind, p.sent, p.answered, p.missed()), ("arp", 4, 0, 3));
}
