//! `GET /api/v1/chains`: each service chain, its functions and their instances, with
//! each instance's health, sessions and packet counters (its ports' interface counters).

use super::AppState;
use super::observe::snapshot;
use crate::error::{ApiError, ErrorBody};
use crate::worker::FlowFilter;
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use std::collections::HashMap;
use utoipa::ToSchema;

/// Flows looked at to count sessions.
const SESSION_SCAN: usize = 1 << 20;

/// One side of an instance.
#[derive(Debug, Serialize, ToSchema)]
pub struct PortReport {
    /// The port's interface here (empty for an instance on another host).
    pub interface: String,
    /// An instance on another host: the tunnel next hop it is reached through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    pub mac: Option<String>,
    pub address: Option<String>,
    /// Up as the tables hold it: its link as last seen (and administratively up), and
    /// its probe answered, where its function has one.
    pub up: bool,
    /// Packets ovr sent into the function on this side, and received out of it.
    pub to_function: u64,
    pub from_function: u64,
    /// Its health probe (none: the function follows links only, or the instance is on
    /// another host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeReport>,
}

/// Where the probes of one side stand.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProbeReport {
    /// arp or icmp.
    pub kind: String,
    pub sent: u64,
    pub answered: u64,
    /// Probes left unanswered in a row (the latest, still within its interval, aside).
    pub missed: u32,
    /// Missed as many as the function's `failures`: the side is down.
    pub failed: bool,
    /// How long ago the last answer came (none yet: null).
    pub last_answer_ms_ago: Option<u64>,
}

/// A function's probe as configured.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProbeSettings {
    /// link, arp or icmp.
    pub kind: String,
    pub interval_ms: u32,
    pub failures: u32,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceReport {
    pub name: String,
    /// In its function's ECMP group: both ports up.
    pub healthy: bool,
    /// Sessions pinned to it (flows sent into its left side).
    pub sessions: u64,
    pub left: PortReport,
    pub right: PortReport,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FunctionReport {
    pub name: String,
    pub mode: String,
    pub probe: ProbeSettings,
    pub instances: Vec<InstanceReport>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChainReport {
    pub name: String,
    /// The network whose policy steers into it (none: no policy uses it).
    pub from: Option<String>,
    pub functions: Vec<FunctionReport>,
}

/// Every chain, and the packets dropped because a function had no instance left.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainsReport {
    pub chains: Vec<ChainReport>,
    pub dropped_no_instance: u64,
}

#[utoipa::path(get, path = "/api/v1/chains", tag = "chains",
    responses((status = 200, body = ChainsReport), (status = 503, body = ErrorBody)))]
pub async fn chains(State(s): State<AppState>) -> Result<Json<ChainsReport>, ApiError> {
    let snap = snapshot(&s).await?;
    let flows = match &s.worker {
        Some(w) => {
            w.flows(FlowFilter {
                limit: SESSION_SCAN,
                ..FlowFilter::default()
            })
            .await?
            .flows
        }
        None => Vec::new(),
    };
    let mut sessions: HashMap<u32, u64> = HashMap::new();
    for f in flows.iter().filter(|f| f.action == "forward") {
        if let Some(nh) = f.nexthop {
            *sessions.entry(nh).or_default() += 1;
        }
    }
    let counters: HashMap<u32, (u64, u64)> = snap
        .interfaces
        .iter()
        .map(|i| (i.id, (i.tx_packets, i.rx_packets)))
        .collect();
    let book = s.probes().clone();
    let report = s
        .read(move |a| {
            let config = a.config().clone();
            let Some(st) = a.writer().read() else {
                return Vec::new();
            };
            let names = a.names();
            st.chains()
                .chains()
                .iter()
                .map(|c| ChainReport {
                    name: c.name.clone(),
                    from: c
                        .from
                        .and_then(|v| names.network_name(v))
                        .map(str::to_string),
                    functions: c
                        .functions
                        .iter()
                        .enumerate()
                        .map(|(k, f)| {
                            let written = config.services.iter().find(|s| s.name == f.name);
                            FunctionReport {
                                name: f.name.clone(),
                                mode: match f.mode {
                                    ovr_tables::chain::FunctionMode::InNetwork => "in-network",
                                    ovr_tables::chain::FunctionMode::Transparent => "transparent",
                                }
                                .into(),
                                probe: ProbeSettings {
                                    kind: f.probe.kind.name().into(),
                                    interval_ms: f.probe.interval_ms,
                                    failures: f.probe.failures,
                                },
                                instances: f
                                    .instances
                                    .iter()
                                    .enumerate()
                                    .map(|(n, i)| {
                                        let w = written.and_then(|s| {
                                            s.instances.iter().find(|x| x.name == i.name)
                                        });
                                        let port = |id: Option<ovr_tables::ids::InterfaceId>,
                                                    cfg: Option<
                                            &ovr_config::model::ServicePortConfig,
                                        >| {
                                            let (tx, rx) = id
                                                .and_then(|id| counters.get(&id.0).copied())
                                                .unwrap_or_default();
                                            PortReport {
                                                interface: id
                                                    .map(|id| {
                                                        names
                                                            .interface_name(id)
                                                            .unwrap_or("?")
                                                            .to_string()
                                                    })
                                                    .unwrap_or_default(),
                                                via: cfg.and_then(|c| c.via.clone()),
                                                mac: cfg
                                                    .and_then(|c| c.mac)
                                                    .map(|m| m.0.to_string()),
                                                address: cfg
                                                    .and_then(|c| c.address)
                                                    .map(|a| a.to_string()),
                                                // On another host: up while its host
                                                // says so (it is configured).
                                                up: id.is_none_or(|id| {
                                                    !st.port_down(id)
                                                        && st
                                                            .interface(id)
                                                            .is_some_and(|x| x.admin_up)
                                                }),
                                                to_function: tx,
                                                from_function: rx,
                                                probe: id.and_then(|id| probe_report(&book, id)),
                                            }
                                        };
                                        InstanceReport {
                                            name: i.name.clone(),
                                            healthy: st.chains().healthy(c.id, k, n),
                                            sessions: sessions
                                                .get(&i.left_nh.0)
                                                .copied()
                                                .unwrap_or(0),
                                            left: port(i.left, w.map(|w| &w.left)),
                                            right: port(i.right, w.map(|w| &w.right)),
                                        }
                                    })
                                    .collect(),
                            }
                        })
                        .collect(),
                })
                .collect()
        })
        .await?;
    Ok(Json(ChainsReport {
        chains: report,
        dropped_no_instance: snap.drops.get("chain_no_instance").copied().unwrap_or(0),
    }))
}

/// The probes of port `id`, if it is probed.
fn probe_report(
    book: &ovr_dataplane::probe::Book,
    id: ovr_tables::ids::InterfaceId,
) -> Option<ProbeReport> {
    let p = book.get(id)?;
    Some(ProbeReport {
        kind: p.kind.into(),
        sent: p.sent,
        answered: p.answered,
        missed: p.missed(),
        failed: p.failed(),
        last_answer_ms_ago: p
            .last_answer_ns
            .map(|t| book.now().saturating_sub(t) / 1_000_000),
    })
}
