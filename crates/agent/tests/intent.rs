//! The cluster's intent through the API
//! (`/api/v1/cluster/{networks,policies,ports,services,chains}`),
//! against a store of the test's own: names taken from the path or the body, create-only
//! POST and create-or-replace PUT, refusals passed on with their status, and 404 when
//! ovrd is not a member of a cluster.

mod common;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use ovr_agent::api::intent::{IntentKey, IntentKind, IntentStore, Pending};
use ovr_agent::api::{AppState, ClusterLink, DEFAULT_BODY_LIMIT};
use ovr_agent::error::ApiError;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tower::ServiceExt;

/// Keys as "kind/host/name"; a value with "vni": 0 is refused as the real check would.
#[derive(Default)]
struct Fake {
    kv: Mutex<BTreeMap<String, Value>>,
    revision: Mutex<i64>,
    down: Mutex<bool>,
}

fn path(k: &IntentKey) -> String {
    format!("{:?}/{}/{}", k.kind, k.host, k.name)
}

impl Fake {
    fn next(&self) -> i64 {
        let mut r = self.revision.lock().unwrap();
        *r += 1;
        *r
    }

    fn up(&self) -> Result<(), ApiError> {
        if *self.down.lock().unwrap() {
            return Err(ApiError::Unavailable("etcd: unreachable".into()));
        }
        Ok(())
    }
}

impl IntentStore for Fake {
    fn list(&self, kind: IntentKind, host: Option<String>) -> Pending<Vec<Value>> {
        let r = self.up().map(|()| {
            let prefix = format!("{kind:?}/{}", host.map(|h| h + "/").unwrap_or_default());
            let kv = self.kv.lock().unwrap();
            kv.iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(_, v)| v.clone())
                .collect()
        });
        Box::pin(async move { r })
    }

    fn get(&self, key: IntentKey) -> Pending<Value> {
        let r = self.up().and_then(|()| {
            self.kv
                .lock()
                .unwrap()
                .get(&path(&key))
                .cloned()
                .ok_or_else(|| ApiError::NotFound(format!("not found: {}", path(&key))))
        });
        Box::pin(async move { r })
    }

    fn write(&self, key: IntentKey, value: Value, replace: bool) -> Pending<i64> {
        let r = self.up().and_then(|()| {
            if value.get("vni") == Some(&json!(0)) {
                return Err(ApiError::invalid("vni", "0 is not a VNI"));
            }
            let mut kv = self.kv.lock().unwrap();
            if !replace && kv.contains_key(&path(&key)) {
                return Err(ApiError::Conflict {
                    message: "exists".into(),
                    field: Some("name".into()),
                });
            }
            let mut o = value.clone();
            o["name"] = key.name.clone().into();
            if key.kind == IntentKind::Port {
                o["host"] = key.host.clone().into();
            }
            kv.insert(path(&key), o);
            Ok(self.next())
        });
        Box::pin(async move { r })
    }

    fn delete(&self, key: IntentKey) -> Pending<i64> {
        let r = self.up().and_then(|()| {
            let gone = self.kv.lock().unwrap().remove(&path(&key));
            gone.map(|_| self.next())
                .ok_or_else(|| ApiError::NotFound(format!("not found: {}", path(&key))))
        });
        Box::pin(async move { r })
    }
}

fn member() -> (Router, AppState, Arc<Fake>) {
    let (app, state) = app(example(), DEFAULT_BODY_LIMIT);
    let fake = Arc::new(Fake::default());
    state.join_cluster(ClusterLink {
        host: "h7".into(),
        intent: fake.clone(),
        ipam: None,
        report: Arc::new(|| json!({})),
        metrics: Arc::new(String::new),
    });
    (app, state, fake)
}

#[tokio::test]
async fn networks_are_created_once_replaced_listed_and_deleted() {
    let (app, _, fake) = member();
    let (st, v) = call(
        &app,
        "POST",
        "/api/v1/cluster/networks",
        Some(json!({"name": "red", "vni": 100})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(
        v,
        json!({"name": "red", "revision": 1, "value": {"vni": 100}})
    );
    let (st, v) = call(
        &app,
        "POST",
        "/api/v1/cluster/networks",
        Some(json!({"name": "red", "vni": 5})),
    )
    .await;
    assert_eq!(
        (st, &v["field"]),
        (StatusCode::CONFLICT, &json!("name")),
        "{v}"
    );
    // What is got can be put back as it is (names in the body agree with the path).
    let (st, got) = call(&app, "GET", "/api/v1/cluster/networks/red", None).await;
    assert_eq!(
        (st, &got),
        (StatusCode::OK, &json!({"name": "red", "vni": 100}))
    );
    let (st, _) = call(&app, "PUT", "/api/v1/cluster/networks/red", Some(got)).await;
    assert_eq!(st, StatusCode::OK);
    let (st, v) = call(
        &app,
        "PUT",
        "/api/v1/cluster/networks/blue",
        Some(json!({"vni": 200})),
    )
    .await;
    assert_eq!((st, &v["revision"]), (StatusCode::OK, &json!(3)), "{v}");
    let (_, v) = call(&app, "GET", "/api/v1/cluster/networks", None).await;
    assert_eq!(v.as_array().unwrap().len(), 2);
    let (st, v) = call(&app, "DELETE", "/api/v1/cluster/networks/blue", None).await;
    assert_eq!(
        (st, v),
        (StatusCode::OK, json!({"name": "blue", "revision": 4}))
    );
    let (st, _) = call(&app, "DELETE", "/api/v1/cluster/networks/blue", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(fake.kv.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn services_and_chains_are_written_under_their_own_kind() {
    let (app, _, fake) = member();
    let fw = json!({"name": "fw", "mode": "in-network",
        "instances": [{"name": "fw-1", "host": "h1", "left": "fw1-l", "right": "fw1-r"}]});
    let (st, v) = call(&app, "POST", "/api/v1/cluster/services", Some(fw)).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, v) = call(
        &app,
        "PUT",
        "/api/v1/cluster/chains/through-fw",
        Some(json!({"functions": ["fw"]})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    {
        let kv = fake.kv.lock().unwrap();
        assert_eq!(kv["Service//fw"]["instances"][0]["host"], "h1");
        assert_eq!(kv["Chain//through-fw"]["functions"], json!(["fw"]));
    }
    let (st, v) = call(&app, "GET", "/api/v1/cluster/chains/through-fw", None).await;
    assert_eq!(
        (st, &v["name"]),
        (StatusCode::OK, &json!("through-fw")),
        "{v}"
    );
    let (_, v) = call(&app, "GET", "/api/v1/cluster/services", None).await;
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    let (st, _) = call(&app, "DELETE", "/api/v1/cluster/services/fw", None).await;
    assert_eq!(st, StatusCode::OK);
    let (st, _) = call(&app, "GET", "/api/v1/cluster/services/fw", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_port_without_a_host_is_this_hosts() {
    let (app, _, fake) = member();
    let port =
        json!({"name": "w1", "network": "red", "mac": "02:00:00:00:00:01", "interface": "v1"});
    let (st, v) = call(&app, "POST", "/api/v1/cluster/ports", Some(port.clone())).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!((&v["host"], &v["name"]), (&json!("h7"), &json!("w1")));
    let mut other = port.clone();
    other["host"] = "h2".into();
    let (st, _) = call(&app, "POST", "/api/v1/cluster/ports", Some(other)).await;
    assert_eq!(st, StatusCode::CREATED);
    let (_, v) = call(&app, "GET", "/api/v1/cluster/ports?host=h2", None).await;
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["host"], "h2");
    let (_, v) = call(&app, "GET", "/api/v1/cluster/ports", None).await;
    assert_eq!(v.as_array().unwrap().len(), 2);
    let (st, v) = call(&app, "GET", "/api/v1/cluster/ports/h7/w1", None).await;
    assert_eq!((st, &v["interface"]), (StatusCode::OK, &json!("v1")));
    let (st, _) = call(&app, "DELETE", "/api/v1/cluster/ports/h7/w1", None).await;
    assert_eq!(st, StatusCode::OK);
    assert!(!fake.kv.lock().unwrap().contains_key("Port/h7/w1"));
}

#[tokio::test]
async fn refusals_change_nothing() {
    let (app, _, fake) = member();
    let cases = [
        (
            "POST",
            "/api/v1/cluster/networks",
            Some(json!({"vni": 1})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("name"),
        ),
        (
            "POST",
            "/api/v1/cluster/networks",
            Some(json!({"name": 7, "vni": 1})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("name"),
        ),
        (
            "POST",
            "/api/v1/cluster/networks",
            Some(json!([1])),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some(""),
        ),
        (
            "POST",
            "/api/v1/cluster/networks",
            Some(json!({"name": "red", "vni": 0})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("vni"),
        ),
        (
            "PUT",
            "/api/v1/cluster/networks/red",
            Some(json!({"name": "blue", "vni": 1})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("name"),
        ),
        (
            "PUT",
            "/api/v1/cluster/ports/h1/w1",
            Some(json!({"host": "h2"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("host"),
        ),
        (
            "GET",
            "/api/v1/cluster/ports?hots=h1",
            None,
            StatusCode::BAD_REQUEST,
            Some("host"),
        ),
        (
            "GET",
            "/api/v1/cluster/policies/none",
            None,
            StatusCode::NOT_FOUND,
            None,
        ),
    ];
    for (method, uri, body, status, field) in cases {
        let (st, v) = call(&app, method, uri, body.clone()).await;
        assert_eq!(st, status, "{method} {uri} {body:?}: {v}");
        assert_eq!(v["field"].as_str(), field, "{method} {uri}: {v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    }
    // A body that is not JSON is 400 before the store is asked.
    let r = Request::builder()
        .method("POST")
        .uri("/api/v1/cluster/policies")
        .body(Body::from("{"))
        .unwrap();
    assert_eq!(
        app.clone().oneshot(r).await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
    *fake.down.lock().unwrap() = true;
    let (st, _) = call(&app, "GET", "/api/v1/cluster/networks", None).await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE);
    assert!(fake.kv.lock().unwrap().is_empty());
}

#[tokio::test]
async fn without_a_cluster_intent_is_not_found() {
    let (app, _) = app(example(), DEFAULT_BODY_LIMIT);
    for (m, uri) in [
        ("GET", "/api/v1/cluster/networks"),
        ("POST", "/api/v1/cluster/ports"),
        ("DELETE", "/api/v1/cluster/policies/p"),
    ] {
        let (st, v) = call(&app, m, uri, Some(json!({"name": "x"}))).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{m} {uri}");
        assert!(v["error"].as_str().unwrap().contains("--etcd"), "{v}");
    }
}
