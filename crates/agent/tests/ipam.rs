//! Addresses through the API (`/api/v1/cluster/ipam/{network}`), against an allocator
//! of the test's own: the request reaches it as sent (the host defaulting to this one),
//! refusals keep their status, and without a cluster (or an allocator) the resource is
//! 404.

mod common;

use axum::Router;
use axum::http::StatusCode;
use common::*;
use ovr_agent::api::intent::{IntentKey, IntentKind, IntentStore, Pending};
use ovr_agent::api::ipam::{Allocate, IpamStore};
use ovr_agent::api::{ClusterLink, DEFAULT_BODY_LIMIT};
use ovr_agent::error::ApiError;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Hands out 10.1.0.2, .3, ... in order; remembers (network, address, owner, host).
#[derive(Default)]
struct Fake {
    leases: Mutex<Vec<(String, String, String, String)>>,
}

impl IpamStore for Fake {
    fn allocate(&self, network: String, a: Allocate) -> Pending<Value> {
        let r = if network == "nosuch" {
            Err(ApiError::NotFound("network 'nosuch' does not exist".into()))
        } else {
            let mut l = self.leases.lock().unwrap();
            let address = a
                .address
                .map_or_else(|| format!("10.1.0.{}", l.len() + 2), |x| x.to_string());
            let host = a.host.unwrap_or_default();
            l.push((network, address.clone(), a.owner.clone(), host.clone()));
            Ok(
                json!({"address": address, "prefix_len": 24, "gateway": "10.1.0.1",
                      "owner": a.owner, "host": host, "tag": a.tag}),
            )
        };
        Box::pin(async move { r })
    }

    fn release(&self, network: String, owner: String, address: Option<IpAddr>) -> Pending<Value> {
        let mut l = self.leases.lock().unwrap();
        let mut gone = Vec::new();
        l.retain(|(n, a, o, _)| {
            let hit = *n == network && *o == owner && address.is_none_or(|x| x.to_string() == *a);
            if hit {
                gone.push(a.clone());
            }
            !hit
        });
        let r = Ok(json!({ "released": gone }));
        Box::pin(async move { r })
    }

    fn list(&self, network: String) -> Pending<Value> {
        let l = self.leases.lock().unwrap();
        let v = l
            .iter()
            .filter(|(n, ..)| *n == network)
            .map(|(_, a, o, h)| json!({"address": a, "owner": o, "host": h}))
            .collect();
        let r = Ok(Value::Array(v));
        Box::pin(async move { r })
    }
}

/// No intent is needed here.
struct NoIntent;

impl IntentStore for NoIntent {
    fn list(&self, _: IntentKind, _: Option<String>) -> Pending<Vec<Value>> {
        Box::pin(async { Ok(vec![]) })
    }
    fn get(&self, _: IntentKey) -> Pending<Value> {
        Box::pin(async { Err(ApiError::NotFound("none".into())) })
    }
    fn write(&self, _: IntentKey, _: Value, _: bool) -> Pending<i64> {
        Box::pin(async { Ok(1) })
    }
    fn delete(&self, _: IntentKey) -> Pending<i64> {
        Box::pin(async { Ok(1) })
    }
}

fn member(with_ipam: bool) -> Router {
    let (app, state) = app(example(), DEFAULT_BODY_LIMIT);
    state.join_cluster(ClusterLink {
        host: "h7".into(),
        intent: Arc::new(NoIntent),
        ipam: with_ipam.then(|| Arc::new(Fake::default()) as Arc<dyn IpamStore>),
        report: Arc::new(|| json!({"connected": true})),
        metrics: Arc::new(String::new),
    });
    app
}

#[tokio::test]
async fn addresses_are_allocated_listed_and_released() {
    let app = member(true);
    let (st, v) = call(
        &app,
        "POST",
        "/api/v1/cluster/ipam/red",
        Some(json!({"owner": "c1-eth0", "tag": "red-net"})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(
        (&v["address"], &v["host"], &v["tag"]),
        (&json!("10.1.0.2"), &json!("h7"), &json!("red-net"))
    );
    let (st, v) = call(
        &app,
        "POST",
        "/api/v1/cluster/ipam/red",
        Some(json!({"owner": "c2-eth0", "host": "h2", "address": "10.1.0.9"})),
    )
    .await;
    assert_eq!(
        (st, &v["address"], &v["host"]),
        (StatusCode::CREATED, &json!("10.1.0.9"), &json!("h2"))
    );
    let (_, v) = call(&app, "GET", "/api/v1/cluster/ipam/red", None).await;
    assert_eq!(v.as_array().unwrap().len(), 2);
    let (st, v) = call(
        &app,
        "DELETE",
        "/api/v1/cluster/ipam/red?owner=c1-eth0",
        None,
    )
    .await;
    assert_eq!((st, v), (StatusCode::OK, json!({"released": ["10.1.0.2"]})));
    let (_, v) = call(
        &app,
        "DELETE",
        "/api/v1/cluster/ipam/red?owner=c1-eth0",
        None,
    )
    .await;
    assert_eq!(v, json!({"released": []}), "releasing twice is fine");
}

#[tokio::test]
async fn bad_requests_and_refusals_keep_their_status() {
    let app = member(true);
    let post = |b: Value| call(&app, "POST", "/api/v1/cluster/ipam/red", Some(b));
    assert_eq!(
        post(json!({"owner": ""})).await.0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(post(json!({})).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        post(json!({"owner": "x", "address": "nope"})).await.0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        post(json!({"owner": "x", "color": "red"})).await.0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    // A family is 4 or 6, and goes without an address.
    let (st, v) = post(json!({"owner": "x", "family": 5})).await;
    assert_eq!(
        (st, &v["field"]),
        (StatusCode::UNPROCESSABLE_ENTITY, &json!("family"))
    );
    let (st, v) = post(json!({"owner": "x", "family": 6, "address": "fd00::5"})).await;
    assert_eq!(
        (st, &v["field"]),
        (StatusCode::UNPROCESSABLE_ENTITY, &json!("family"))
    );
    assert_eq!(
        post(json!({"owner": "x", "family": 6})).await.0,
        StatusCode::CREATED
    );
    let (st, _) = call(
        &app,
        "POST",
        "/api/v1/cluster/ipam/nosuch",
        Some(json!({"owner": "x"})),
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, v) = call(&app, "DELETE", "/api/v1/cluster/ipam/red", None).await;
    assert_eq!(
        (st, &v["field"]),
        (StatusCode::BAD_REQUEST, &json!("owner"))
    );
    // A member without an allocator, and an ovrd outside any cluster: 404.
    let (st, _) = call(&member(false), "GET", "/api/v1/cluster/ipam/red", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (alone, _) = common::app(example(), DEFAULT_BODY_LIMIT);
    let (st, _) = call(&alone, "GET", "/api/v1/cluster/ipam/red", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
}
