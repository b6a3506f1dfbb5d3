//! The API's contract: every endpoint, every class of refusal, and that a refused
//! request changes nothing (neither the model nor the tables).

mod common;
// Requests the API refuses, and that a refusal changes nothing.
#[path = "api/refusals.rs"]
mod refusals;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use ovr_agent::api::{AppState, DEFAULT_BODY_LIMIT, router};
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt;

async fn call(app: &Router, method: &str, uri: &str, body: Option<&str>) -> (StatusCode, Value) {
    call_with(app, method, uri, body, None).await
}

async fn call_with(
    app: &Router,
    method: &str,
    uri: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let mut r = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        r = r.header("authorization", format!("Bearer {t}"));
    }
    let r = r
        .header("content-type", "application/json")
        .body(Body::from(body.unwrap_or("").to_string()))
        .unwrap();
    let resp = app.clone().oneshot(r).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 64 << 20)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

fn setup() -> (Router, AppState) {
    app(example(), DEFAULT_BODY_LIMIT)
}

/// The model and the tables, to check that a refusal changed neither.
fn snapshot(
    s: &AppState,
) -> (
    ovr_config::Config,
    std::collections::BTreeMap<String, String>,
) {
    let a = s.agent().lock().unwrap();
    (a.config().clone(), installed(&a))
}

/// Asserts an error response: its status, and its field (`None`: no field).
fn refused(r: &(StatusCode, Value), status: StatusCode, field: Option<&str>) {
    assert_eq!(r.0, status, "{}", r.1);
    assert!(
        r.1["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{}",
        r.1
    );
    assert_eq!(r.1["field"].as_str(), field, "{}", r.1);
}

#[tokio::test]
async fn openapi_lists_every_endpoint() {
    let (app, _) = setup();
    let (st, doc) = call(&app, "GET", "/openapi.json", None).await;
    assert_eq!(st, StatusCode::OK);
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/api/v1/interfaces/{name}",
        "/api/v1/networks",
        "/api/v1/tunnels/{name}",
        "/api/v1/nexthops",
        "/api/v1/routes/{network}/{addr}/{len}",
        "/api/v1/bridge/{network}/{mac}",
        "/api/v1/labels/{label}",
        "/api/v1/policies/{network}",
        "/api/v1/batch",
        "/api/v1/config",
        "/api/v1/ids",
        "/api/v1/counters",
        "/api/v1/flows",
        "/api/v1/cluster/networks/{name}",
        "/api/v1/cluster/policies",
        "/api/v1/cluster/ports/{host}/{name}",
        "/api/v1/bgp/learnt",
        "/metrics",
    ] {
        assert!(paths.contains_key(p), "{p} missing");
    }
    assert!(doc["components"]["schemas"]["NextHopConfig"].is_object());
    assert!(doc["components"]["schemas"]["LearntEntries"].is_object());
}

#[tokio::test]
async fn lists_and_gets_every_kind() {
    let (app, _) = setup();
    let (st, v) = call(&app, "GET", "/api/v1/interfaces", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v.as_array().unwrap().len(), 3);
    assert_eq!(v[0]["name"], "uplink");
    let (st, v) = call(&app, "GET", "/api/v1/nexthops/b-both", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["kind"], "ecmp");
    // What is got can be put back as it is.
    let (st, _) = call(&app, "PUT", "/api/v1/nexthops/b-both", Some(&v.to_string())).await;
    assert_eq!(st, StatusCode::OK);
    let (st, v) = call(&app, "GET", "/api/v1/ids", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        (
            v["interfaces"]["uplink"].as_u64(),
            v["nexthops"]["b-both"].as_u64()
        ),
        (Some(0), Some(5))
    );
    assert_eq!(v["networks"]["blue"], 2);
    for uri in [
        "/api/v1/networks/red",
        "/api/v1/tunnels/to-b",
        "/api/v1/routes/red/10.2.0.0/24",
        "/api/v1/bridge/red/02:00:00:00:01:06",
        "/api/v1/labels/500",
        "/api/v1/policies/red",
        "/api/v1/policies",
        "/api/v1/routes",
        "/api/v1/bridge",
        "/api/v1/labels",
        "/api/v1/tunnels",
        "/api/v1/networks",
        "/api/v1/config",
    ] {
        let (st, v) = call(&app, "GET", uri, None).await;
        assert_eq!(st, StatusCode::OK, "{uri}: {v}");
    }
    let (_, v) = call(&app, "GET", "/api/v1/policies/red", None).await;
    assert_eq!(v["rules"].as_array().unwrap().len(), 2);
    for uri in [
        "/api/v1/networks/green",
        "/api/v1/routes/red/10.9.0.0/24",
        "/api/v1/bridge/red/02:00:00:00:09:09",
        "/api/v1/labels/999",
        "/api/v1/interfaces/nope",
    ] {
        let r = call(&app, "GET", uri, None).await;
        refused(&r, StatusCode::NOT_FOUND, None);
    }
}

#[tokio::test]
async fn create_replace_delete_a_route() {
    let (app, s) = setup();
    let body = r#"{"network":"blue","prefix":"10.7.0.0/16","nexthop":"b-blue"}"#;
    let (st, v) = call(&app, "POST", "/api/v1/routes", Some(body)).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["table_changes"], 1);
    refused(
        &call(&app, "POST", "/api/v1/routes", Some(body)).await,
        StatusCode::CONFLICT,
        Some("network"),
    );
    let moved = r#"{"network":"blue","prefix":"10.7.0.0/16","nexthop":"vm2"}"#;
    let (st, _) = call(&app, "PUT", "/api/v1/routes/blue/10.7.0.0/16", Some(moved)).await;
    assert_eq!(st, StatusCode::OK);
    {
        let a = s.agent().lock().unwrap();
        let t = installed(&a);
        assert_eq!(t["route blue 10.7.0.0/16"], "vm2");
        assert_eq!(t, fresh(a.config()));
    }
    // The path and the body must name the same route.
    let r = call(&app, "PUT", "/api/v1/routes/blue/10.8.0.0/16", Some(moved)).await;
    refused(&r, StatusCode::UNPROCESSABLE_ENTITY, Some("network"));
    let r = call(
        &app,
        "PUT",
        "/api/v1/routes/blue/10.8.0.0/16",
        Some(&moved.replace("10.7", "10.8")),
    )
    .await;
    refused(&r, StatusCode::NOT_FOUND, None);
    let (st, _) = call(&app, "DELETE", "/api/v1/routes/blue/10.7.0.0/16", None).await;
    assert_eq!(st, StatusCode::OK);
    refused(
        &call(&app, "GET", "/api/v1/routes/blue/10.7.0.0/16", None).await,
        StatusCode::NOT_FOUND,
        None,
    );
    refused(
        &call(&app, "DELETE", "/api/v1/routes/blue/10.7.0.0/16", None).await,
        StatusCode::NOT_FOUND,
        None,
    );
    refused(
        &call(&app, "GET", "/api/v1/routes/blue/10.7.0.0/99", None).await,
        StatusCode::BAD_REQUEST,
        Some("prefix"),
    );
    // IPv6 routes: the address is one path segment.
    let v6 = r#"{"network":"red","prefix":"fd00:9::/64","nexthop":"b-red"}"#;
    assert_eq!(
        call(&app, "POST", "/api/v1/routes", Some(v6)).await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        call(&app, "GET", "/api/v1/routes/red/fd00:9::/64", None)
            .await
            .0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_batch_is_all_or_nothing() {
    let (app, s) = setup();
    let before = snapshot(&s);
    let bad = json!({"changes": [
        {"create": {"network": {"name": "green", "vni": 300}}},
        {"create": {"route": {"network": "green", "prefix": "10.5.0.0/24", "nexthop": "nope"}}},
    ]});
    let r = call(&app, "POST", "/api/v1/batch", Some(&bad.to_string())).await;
    refused(
        &r,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("changes[1].create.route.nexthop"),
    );
    assert!(snapshot(&s) == before);
    let typed = json!({"changes": [{"create": {"route": {"network": "red", "prefix": 7, "nexthop": "x"}}}]});
    let r = call(&app, "POST", "/api/v1/batch", Some(&typed.to_string())).await;
    refused(
        &r,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("changes[0].create.route.prefix"),
    );
    let gone =
        json!({"changes": [{"delete": {"route": {"network": "red", "prefix": "10.99.0.0/24"}}}]});
    let r = call(&app, "POST", "/api/v1/batch", Some(&gone.to_string())).await;
    refused(&r, StatusCode::NOT_FOUND, None);
    // Order matters inside a batch: the route may be deleted, then its next hop.
    let ok = json!({"changes": [
        {"create": {"network": {"name": "green", "vni": 300}}},
        {"create": {"route": {"network": "green", "prefix": "10.5.0.0/24", "nexthop": "b-red"}}},
        {"delete": {"route": {"network": "red", "prefix": "10.3.0.0/24"}}},
        {"delete": {"nexthop": {"name": "b-both"}}},
        {"set_policy": {"network": "red", "rules": null}},
    ]});
    let (st, v) = call(&app, "POST", "/api/v1/batch", Some(&ok.to_string())).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let a = s.agent().lock().unwrap();
    assert_eq!(installed(&a), fresh(a.config()));
    assert!(a.config().networks[0].policy.is_none());
    assert!(!a.names().nexthops.contains_key("b-both"));
}

/// Valid JSON of the wrong shape is a 422 naming where, never "not valid JSON" (that is
/// for bodies that are not JSON at all).
#[tokio::test]
async fn ids_of_what_stays_do_not_change() {
    let (app, s) = setup();
    let ids = |s: &AppState| s.agent().lock().unwrap().names().clone();
    let before = ids(&s);
    // Remove the first route and a next hop written early, add others.
    let b = json!({"changes": [
        {"delete": {"label": {"label": 501}}},
        {"delete": {"nexthop": {"name": "red-l2"}}},
        {"create": {"nexthop": {"name": "new", "kind": "drop"}}},
        {"create": {"route": {"network": "red", "prefix": "10.8.0.0/24", "nexthop": "new"}}},
    ]});
    assert_eq!(
        call(&app, "POST", "/api/v1/batch", Some(&b.to_string()))
            .await
            .0,
        StatusCode::OK
    );
    let after = ids(&s);
    for (name, id) in &before.nexthops {
        if name != "red-l2" {
            assert_eq!(after.nexthops[name], *id, "{name} was renumbered");
        }
    }
    // A freed id is not handed out in the change that frees it.
    assert_ne!(after.nexthops["new"], before.nexthops["red-l2"]);
    assert_eq!(after.interfaces, before.interfaces);
    assert_eq!(after.networks, before.networks);
    // A route change touches only the route: one table change.
    let r = r#"{"network":"red","prefix":"10.2.0.0/24","nexthop":"b-both"}"#;
    let (_, v) = call(&app, "PUT", "/api/v1/routes/red/10.2.0.0/24", Some(r)).await;
    assert_eq!(v["table_changes"], 1);
    assert_eq!(ids(&s).nexthops, after.nexthops);
    // An interface that goes and comes back gets its id back.
    let vm2 = call(&app, "GET", "/api/v1/interfaces/vm2", None).await.1;
    let mut vm2 = vm2.as_object().unwrap().clone();
    vm2.remove("id");
    let del = json!({"changes": [
        {"delete": {"label": {"label": 500}}},
        {"delete": {"interface": {"name": "vm1"}}},
    ]});
    assert_eq!(
        call(&app, "POST", "/api/v1/batch", Some(&del.to_string()))
            .await
            .0,
        StatusCode::OK
    );
    let vm9 = r#"{"name":"vm9","network":"red"}"#;
    assert_eq!(
        call(&app, "POST", "/api/v1/interfaces", Some(vm9)).await.0,
        StatusCode::CREATED
    );
    let vm1 = r#"{"name":"vm1","network":"red","peer_mac":"02:00:00:00:01:05"}"#;
    assert_eq!(
        call(&app, "POST", "/api/v1/interfaces", Some(vm1)).await.0,
        StatusCode::CREATED
    );
    let now = ids(&s);
    assert_eq!(now.interfaces["vm1"], before.interfaces["vm1"]);
    assert_ne!(now.interfaces["vm9"], before.interfaces["vm1"]);
    let a = s.agent().lock().unwrap();
    assert_eq!(installed(&a), fresh(a.config()));
}

#[tokio::test]
async fn policies_set_and_reset() {
    let (app, s) = setup();
    let p = r#"{"rules":[{"action":"deny","protocol":"udp","dst_ports":"53"}]}"#;
    assert_eq!(
        call(&app, "PUT", "/api/v1/policies/blue", Some(p)).await.0,
        StatusCode::OK
    );
    let (_, v) = call(&app, "GET", "/api/v1/policies/blue", None).await;
    assert_eq!(v["rules"][0]["action"], "deny");
    assert_eq!(
        call(&app, "DELETE", "/api/v1/policies/blue", None).await.0,
        StatusCode::OK
    );
    let (_, v) = call(&app, "GET", "/api/v1/policies/blue", None).await;
    assert!(v["rules"].is_null());
    let a = s.agent().lock().unwrap();
    assert_eq!(installed(&a), fresh(a.config()));
}

#[tokio::test]
async fn the_whole_configuration_can_be_replaced() {
    let (app, s) = setup();
    let mut c = example();
    c.routes.clear();
    c.labels.retain(|l| l.label == 500);
    let body = serde_json::to_string(&c).unwrap();
    let (st, v) = call(&app, "PUT", "/api/v1/config", Some(&body)).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let a = s.agent().lock().unwrap();
    assert_eq!(a.config(), &c);
    assert_eq!(installed(&a), fresh(&c));
}

#[tokio::test]
async fn counters_flows_and_metrics_come_from_the_worker() {
    let (app, _) = setup();
    let (st, v) = call(&app, "GET", "/api/v1/counters", None).await;
    assert_eq!(st, StatusCode::OK);
    // Configured interfaces are listed even before traffic.
    assert_eq!(v["interfaces"].as_array().unwrap().len(), 3);
    assert_eq!(v["interfaces"][1]["name"], "vm1");
    for uri in [
        "/api/v1/counters/interfaces",
        "/api/v1/counters/nodes",
        "/api/v1/counters/drops",
    ] {
        assert_eq!(
            call(&app, "GET", uri, None).await.0,
            StatusCode::OK,
            "{uri}"
        );
    }
    let (st, v) = call(&app, "GET", "/metrics", None).await;
    assert_eq!(st, StatusCode::OK);
    assert!(
        v.as_str()
            .unwrap()
            .contains("ovr_interface_rx_packets_total{interface=\"vm1\"} 0")
    );
    let (st, v) = call(
        &app,
        "GET",
        "/api/v1/flows?network=red&addr=10.1.0.5&port=80",
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["matched"], 0);
    refused(
        &call(&app, "GET", "/api/v1/flows?addr=nope", None).await,
        StatusCode::BAD_REQUEST,
        Some("addr"),
    );
    refused(
        &call(&app, "GET", "/api/v1/flows?network=nope", None).await,
        StatusCode::BAD_REQUEST,
        Some("network"),
    );
    refused(
        &call(&app, "GET", "/api/v1/flows?colour=1", None).await,
        StatusCode::BAD_REQUEST,
        Some("colour"),
    );
    refused(
        &call(&app, "GET", "/api/v1/flows/7", None).await,
        StatusCode::NOT_FOUND,
        None,
    );
    refused(
        &call(&app, "DELETE", "/api/v1/flows/7", None).await,
        StatusCode::NOT_FOUND,
        None,
    );
    let (st, v) = call(&app, "DELETE", "/api/v1/flows?vrf=1", None).await;
    assert_eq!((st, v["removed"].as_u64()), (StatusCode::OK, Some(0)));
}

#[tokio::test]
async fn without_a_worker_counters_are_unavailable() {
    let state = AppState::new(agent(example(), None), None);
    let app = router(state, DEFAULT_BODY_LIMIT, None);
    refused(
        &call(&app, "GET", "/api/v1/counters", None).await,
        StatusCode::SERVICE_UNAVAILABLE,
        None,
    );
}

#[tokio::test]
async fn tcp_needs_the_bearer_token() {
    let state = AppState::new(agent(example(), None), Some(worker()));
    let app = router(state, DEFAULT_BODY_LIMIT, Some(Arc::from("s3cret")));
    refused(
        &call(&app, "GET", "/api/v1/config", None).await,
        StatusCode::UNAUTHORIZED,
        None,
    );
    let r = call_with(&app, "GET", "/api/v1/config", None, Some("wrong")).await;
    refused(&r, StatusCode::UNAUTHORIZED, None);
    let r = call_with(&app, "GET", "/api/v1/config", None, Some("s3cret")).await;
    assert_eq!(r.0, StatusCode::OK);
    // The scheme's name is case-insensitive (RFC 9110); the token is not.
    for (header, status) in [
        ("bearer s3cret", StatusCode::OK),
        ("BEARER s3cret", StatusCode::OK),
        ("Bearer   s3cret", StatusCode::OK),
        ("bearer S3CRET", StatusCode::UNAUTHORIZED),
        ("Basic s3cret", StatusCode::UNAUTHORIZED),
        ("Bearers3cret", StatusCode::UNAUTHORIZED),
    ] {
        let r = Request::builder()
            .uri("/api/v1/config")
            .header("authorization", header)
            .body(Body::empty())
            .unwrap();
        let got = app.clone().oneshot(r).await.unwrap().status();
        assert_eq!(got, status, "{header}");
    }
}
