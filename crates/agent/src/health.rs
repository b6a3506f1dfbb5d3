//! The health of service chains' ports: ovrd looks at each port's link as the host
//! sees it, and at its probe where its function has one (ARP or ICMP, sent and
//! answered in the workers: `ovr_dataplane::probe`), and reports changes into the tables, where an instance with a port down
//! leaves its function's ECMP group (its sessions move on their next packet, the others'
//! stay; with no instance left the chain drops, counted as `chain_no_instance`).
//!
//! A link is read from sysfs (`operstate`): "up", or "unknown" for devices that do not
//! report one (TAP), count as up; anything else (down, lowerlayerdown when a veth's
//! peer is down, an interface that is gone) as down. A memif port has no kernel
//! interface: it is up while connected to its peer (the network function), as ovrd
//! tells through `AppState::follow_peer_links`; waiting for a peer, during a handshake,
//! or after the peer left or died, it is down. A port whose function has a probe is up
//! only while its probe has not failed too.

use crate::api::AppState;
use ovr_tables::ids::InterfaceId;
use ovr_tables::interface::{Interface, InterfaceKind};
use ovr_tables::state::TableOp;
use std::time::Duration;
use tracing::{info, warn};

/// How often links and probes are looked at: a port that goes down leaves well within
/// a second.
pub const CHECK_EVERY: Duration = Duration::from_millis(100);

/// Whether the host says the link of interface `name` is up.
pub fn link_up(name: &str) -> bool {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return false;
    }
    match std::fs::read_to_string(format!("/sys/class/net/{name}/operstate")) {
        Ok(s) => matches!(s.trim(), "up" | "unknown"),
        Err(_) => false,
    }
}

/// Whether a service port's link is up: its kernel link, or a memif port's connection.
pub fn port_up(state: &AppState, iface: &Interface) -> bool {
    if iface.kind == InterfaceKind::Memif {
        state.peer_link_up(&iface.name)
    } else {
        link_up(&iface.name)
    }
}

/// Whether interface `name` is a service port that health holds down (its link or its
/// probe failed, as last reported into the tables). A cluster member withdraws such a
/// port's endpoint, so that the other hosts leave its instance out too: they take this
/// host's word for it rather than probing it over the overlay.
pub fn held_down(state: &AppState, name: &str) -> bool {
    let Ok(agent) = state.agent().lock() else {
        return false;
    };
    let Some(&port) = agent.names().interfaces.get(name) else {
        return false;
    };
    let Some(st) = agent.writer().read() else {
        return false;
    };
    st.service_port(port).is_some() && st.port_down(port)
}

/// The changes to report: (port, up) for each service port whose link differs from
/// what the tables hold.
fn changes(state: &AppState, up: impl Fn(&Interface) -> bool) -> Vec<(InterfaceId, bool)> {
    let Ok(agent) = state.agent().lock() else {
        return Vec::new();
    };
    let Some(st) = agent.writer().read() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in st.chains().chains() {
        for i in c.functions.iter().flat_map(|f| &f.instances) {
            for port in [i.left, i.right].into_iter().flatten() {
                let Some(iface) = st.interface(port) else {
                    continue;
                };
                if out.iter().any(|(p, _)| *p == port) {
                    continue;
                }
                let now = up(iface) && state.probes().ok(port);
                let held = !st.port_down(port);
                if now != held {
                    out.push((port, now));
                }
            }
        }
    }
    out
}

/// Looks once and reports what changed; returns how many ports changed.
pub fn check(state: &AppState, up: impl Fn(&Interface) -> bool) -> usize {
    let ch = changes(state, up);
    if ch.is_empty() {
        return 0;
    }
    let Ok(mut agent) = state.agent().lock() else {
        return 0;
    };
    let ops = ch
        .iter()
        .map(|&(interface, up)| TableOp::SetPortHealth { interface, up })
        .collect();
    match agent.report_health(ops) {
        Ok(()) => {
            for (port, up) in &ch {
                let name = agent
                    .names()
                    .interface_name(*port)
                    .unwrap_or("?")
                    .to_string();
                let probe = state.probes().get(*port);
                info!(
                    interface = %name,
                    up,
                    probe = probe.map_or("link", |p| p.kind),
                    missed = probe.map_or(0, |p| p.missed()),
                    "service port health changed"
                );
            }
            ch.len()
        }
        Err(e) => {
            warn!("service port health not applied: {e}");
            0
        }
    }
}

/// Follows the ports' links on a thread of its own, for the life of the process.
pub fn watch(state: AppState) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("ovr-health".into())
        .spawn(move || {
            loop {
                check(&state, |i| port_up(&state, i));
                std::thread::sleep(CHECK_EVERY);
            }
        })
        .map(|_| ())
}
