//! Service ports' health: a memif port is up while its link is connected to its peer
//! (as ovrd reports it), a kernel port by its link; the instance follows both ports.

mod common;

use common::*;
use ovr_agent::api::DEFAULT_BODY_LIMIT;
use ovr_agent::health;
use ovr_config::Config;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// red → blue through `pmd`, whose instances are testpmd on two memif ports and a
/// bridge on two kernel ports.
const CHAIN: &str = r#"
interfaces:
  - { name: wa, network: red, peer_mac: '02:00:00:0a:00:02' }
  - { name: wb, network: blue, peer_mac: '02:00:00:0b:00:02' }
  - { name: pl, kind: memif, network: svc, mac: '02:00:00:d1:00:01', memif: { socket: /run/l.sock } }
  - { name: pr, kind: memif, network: svc, mac: '02:00:00:d1:00:02', memif: { socket: /run/r.sock } }
  - { name: bl, network: svc, mac: '02:00:00:d1:00:03' }
  - { name: br, network: svc, mac: '02:00:00:d1:00:04' }
networks:
  - name: red
    gateways: [10.1.0.1/24]
    policy: [{ action: chain, chain: through-pmd, dst_network: blue }]
  - { name: blue, gateways: [10.2.0.1/24] }
  - { name: svc, gateways: [10.99.1.1/24] }
services:
  - name: pmd
    mode: transparent
    instances:
      - { name: pmd-1, left: { interface: pl }, right: { interface: pr } }
      - { name: pmd-2, left: { interface: bl }, right: { interface: br } }
chains:
  - { name: through-pmd, functions: [pmd] }
"#;

/// Each instance's health as `GET /api/v1/chains` shows it.
async fn healthy(app: &axum::Router) -> Vec<(String, bool)> {
    let (status, v) = call(app, "GET", "/api/v1/chains", None).await;
    assert!(status.is_success(), "{v}");
    v["chains"][0]["functions"][0]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_string(),
                i["healthy"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn pairs(v: &[(&str, bool)]) -> Vec<(String, bool)> {
    v.iter().map(|&(n, h)| (n.to_string(), h)).collect()
}

#[tokio::test]
async fn a_memif_port_is_up_while_connected_to_its_peer() {
    let (app, state) = app(Config::from_yaml(CHAIN).unwrap(), DEFAULT_BODY_LIMIT);
    // The kernel ports' links stand for the host's: up throughout.
    let kernel = |i: &ovr_tables::interface::Interface| {
        if i.kind == ovr_tables::interface::InterfaceKind::Memif {
            health::port_up(&state, i)
        } else {
            true
        }
    };

    // Nobody said how to know a memif link: its ports are down.
    assert_eq!(health::check(&state, kernel), 2);
    assert_eq!(
        healthy(&app).await,
        pairs(&[("pmd-1", false), ("pmd-2", true)])
    );

    // ovrd's view: connected only when the peer is.
    let connected = Arc::new(AtomicBool::new(false));
    let peer = Arc::clone(&connected);
    state.follow_peer_links(Arc::new(move |name: &str| {
        matches!(name, "pl" | "pr") && peer.load(Ordering::Relaxed)
    }));
    assert_eq!(health::check(&state, kernel), 0);

    connected.store(true, Ordering::Relaxed);
    assert_eq!(health::check(&state, kernel), 2);
    assert_eq!(
        healthy(&app).await,
        pairs(&[("pmd-1", true), ("pmd-2", true)])
    );
    assert_eq!(health::check(&state, kernel), 0, "nothing changed");

    // The peer goes (killed, disconnected): the instance leaves.
    connected.store(false, Ordering::Relaxed);
    assert_eq!(health::check(&state, kernel), 2);
    assert_eq!(
        healthy(&app).await,
        pairs(&[("pmd-1", false), ("pmd-2", true)])
    );
}
