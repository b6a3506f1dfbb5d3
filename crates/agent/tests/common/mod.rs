//! Shared by the agent's tests: an agent on the example configuration, a worker thread
//! answering for a real pipeline, and the tables described by names (so that tables
//! built with different ids can be compared).
#![allow(dead_code)]

use ovr_agent::Agent;
use ovr_agent::api::{AppState, router};
use ovr_agent::store::{Source, Start, Store};
use ovr_agent::worker::{self, WorkerClient};
use ovr_config::{Config, Names};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::nexthop::{NextHop, Tunnel};
use ovr_tables::state::{ForwardingState, new_tables};
use std::collections::BTreeMap;

/// A request to the API (`body` as JSON): the status and the answer, as JSON if it is.
pub async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: Option<serde_json::Value>,
) -> (axum::http::StatusCode, serde_json::Value) {
    use tower::ServiceExt;
    let r = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        ))
        .unwrap();
    let resp = app.clone().oneshot(r).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

pub const EXAMPLE: &str = include_str!("../../../config/examples/two-networks.yaml");

pub fn example() -> Config {
    Config::from_yaml(EXAMPLE).unwrap()
}

pub fn agent(c: Config, store: Option<Store>) -> Agent {
    let (w, _r) = new_tables();
    let start = Start {
        config: c,
        base: None,
        ids: Names::default(),
        source: Source::ConfigFile,
    };
    Agent::start(start, w, store).unwrap()
}

/// A worker thread serving a pipeline with small tables.
pub fn worker() -> WorkerClient {
    let (client, mut requests) = worker::channel(1);
    let requests = requests.remove(0);
    std::thread::spawn(move || {
        let settings = ovr_dataplane::Settings {
            flow_capacity: 1024,
            ..Default::default()
        };
        let mut pipe = ovr_dataplane::Pipeline::new(settings);
        while let Some(r) = requests.recv() {
            worker::serve(&mut pipe, r);
        }
    });
    client
}

pub fn app(c: Config, body_limit: usize) -> (axum::Router, AppState) {
    let state = AppState::new(agent(c, None), Some(worker()));
    (router(state.clone(), body_limit, None), state)
}

/// The forwarding state with every id replaced by the name it stands for.
pub fn by_names(st: &ForwardingState, n: &Names) -> BTreeMap<String, String> {
    let vrf = |v: VrfId| n.network_name(v).unwrap_or("?").to_string();
    let iface = |i: InterfaceId| n.interface_name(i).unwrap_or("?").to_string();
    let nh = |h: NextHopId| n.nexthop_name(h).unwrap_or("?").to_string();
    let mut m = BTreeMap::new();
    for i in st.interfaces().iter() {
        let mut c = i.clone();
        c.id = InterfaceId(0);
        let v = c.vrf.take().map(vrf);
        m.insert(
            format!("interface {}", iface(i.id)),
            format!("{c:?} vrf={v:?}"),
        );
    }
    for (id, h) in st.nexthops() {
        let d = match h {
            NextHop::Interface { interface, dst_mac } => {
                format!("interface {} {dst_mac:?}", iface(*interface))
            }
            NextHop::Tunnel(t) => {
                let u = iface(t.underlay);
                let t = Tunnel {
                    underlay: InterfaceId(0),
                    ..*t
                };
                format!("tunnel via {u} {t:?}")
            }
            NextHop::Vrf { vrf: v, inner } => format!("vrf {} {inner:?}", vrf(*v)),
            NextHop::Composite(e) => {
                let mut ms: Vec<String> = e.members().iter().map(|x| nh(*x)).collect();
                ms.sort();
                format!("ecmp {ms:?}")
            }
            other => format!("{other:?}"),
        };
        m.insert(format!("nexthop {}", nh(id)), d);
    }
    for (label, h) in st.labels().iter() {
        m.insert(format!("label {label}"), nh(h));
    }
    for v in st.vrfs() {
        let name = vrf(v.id);
        m.insert(
            format!("network {name}"),
            format!(
                "vni={:?} mac={:?} gw={:?} flow_quota={:?}",
                v.vni, v.router_mac, v.gateways, v.flow_quota
            ),
        );
        let mut flood: Vec<String> = v.flood.iter().map(|x| nh(*x)).collect();
        flood.sort();
        m.insert(format!("network {name} flood"), format!("{flood:?}"));
        let rules: Vec<String> = v
            .policy
            .rules()
            .iter()
            .map(|r| {
                let mut r = r.clone();
                let (s, d) = (r.src_net.take().map(vrf), r.dst_net.take().map(vrf));
                format!("{r:?} src_net={s:?} dst_net={d:?}")
            })
            .collect();
        m.insert(format!("network {name} policy"), format!("{rules:?}"));
        for (a, l, h) in v.fib4.iter() {
            m.insert(format!("route {name} {a}/{l}"), nh(h));
        }
        for (a, l, h) in v.fib6.iter() {
            m.insert(format!("route {name} {a}/{l}"), nh(h));
        }
        for (mac, h) in v.bridge.iter() {
            m.insert(format!("bridge {name} {mac:?}"), nh(*h));
        }
    }
    m
}

/// What a fresh daemon would install for `c`, by names.
pub fn fresh(c: &Config) -> BTreeMap<String, String> {
    let t = c.translate().unwrap();
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    by_names(&st, &t.names)
}

/// What the agent has installed, by names.
pub fn installed(a: &Agent) -> BTreeMap<String, String> {
    let st = a.writer().read().unwrap();
    by_names(&st, a.names())
}
