//! The contract of the packet trace and capture endpoints: every refusal names its
//! field and starts nothing (no file, no capture); what is accepted is listed, stopped
//! and leaves a pcap file that an independent reader opens.

mod common;

use axum::Router;
use axum::http::StatusCode;
use common::*;
use ovr_agent::api::DEFAULT_BODY_LIMIT;
use serde_json::{Value, json};

fn refused(r: &(StatusCode, Value), status: StatusCode, field: Option<&str>) {
    assert_eq!(r.0, status, "{}", r.1);
    assert!(
        r.1["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{}",
        r.1
    );
    assert_eq!(r.1["field"].as_str(), field, "{}", r.1);
}

fn setup() -> Router {
    app(example(), DEFAULT_BODY_LIMIT).0
}

#[tokio::test]
async fn the_trace_is_added_to_listed_and_cleared() {
    let app = setup();
    let (st, v) = call(&app, "GET", "/api/v1/trace", None).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v, json!({"pending": 0, "packets": [], "full": false}));
    let (st, v) = call(&app, "POST", "/api/v1/trace", Some(json!({"packets": 5}))).await;
    assert_eq!((st, v), (StatusCode::OK, json!({"pending": 5})));
    let (_, v) = call(
        &app,
        "POST",
        "/api/v1/trace",
        Some(json!({"packets": 1000})),
    )
    .await;
    assert_eq!(v["pending"], 1005);
    for (body, status, field) in [
        (
            json!({"packets": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("packets"),
        ),
        (
            json!({"packets": 1001}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("packets"),
        ),
        (
            json!({"packets": -1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("packets"),
        ),
        (
            json!({"packets": "5"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("packets"),
        ),
        (
            json!({"packets": 4294967296u64}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("packets"),
        ),
        (json!({}), StatusCode::UNPROCESSABLE_ENTITY, Some("packets")),
        (
            json!({"packets": 1, "colour": 2}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("colour"),
        ),
    ] {
        refused(
            &call(&app, "POST", "/api/v1/trace", Some(body)).await,
            status,
            field,
        );
    }
    // Nothing refused was added.
    assert_eq!(
        call(&app, "GET", "/api/v1/trace", None).await.1["pending"],
        1005
    );
    let (st, v) = call(&app, "DELETE", "/api/v1/trace", None).await;
    assert_eq!((st, v), (StatusCode::OK, json!({"cleared": true})));
    assert_eq!(
        call(&app, "GET", "/api/v1/trace", None).await.1["pending"],
        0
    );
}

#[tokio::test]
async fn capture_refusals_name_the_field_and_start_nothing() {
    let app = setup();
    let dir = tempfile::tempdir().unwrap();
    let file = |n: &str| dir.path().join(n).display().to_string();
    let existing = file("there.pcap");
    std::fs::write(&existing, b"keep me").unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
    // Root writes anywhere: the unwritable directory is checked only when not root.
    let root = std::fs::write(ro.join("probe"), b"").is_ok();
    let ok = |f: &str| json!({"interface": "vm1", "path": file(f)});
    let with = |k: &str, v: Value| {
        let mut b = ok("x.pcap");
        b[k] = v;
        b
    };
    let mut cases = vec![
        (
            with("interface", json!("nope")),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("interface"),
        ),
        (
            with("interface", json!(3)),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("interface"),
        ),
        (
            with("path", json!("relative.pcap")),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("path"),
        ),
        (
            with("path", json!("/")),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("path"),
        ),
        (
            with("path", json!(file("no/such/dir.pcap"))),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("path"),
        ),
        (
            with("path", json!(existing)),
            StatusCode::CONFLICT,
            Some("path"),
        ),
        (
            with("path", json!(dir.path().display().to_string())),
            StatusCode::CONFLICT,
            Some("path"),
        ),
        (
            with("direction", json!("sideways")),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("direction"),
        ),
        (
            with("packets", json!(0)),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("packets"),
        ),
        (
            with("packets", json!(-3)),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("packets"),
        ),
        (
            with("seconds", json!(0)),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("seconds"),
        ),
        (
            with("seconds", json!(10_000_000)),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("seconds"),
        ),
        (
            with("snaplen", json!(13)),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("snaplen"),
        ),
        (
            with("snaplen", json!(65536)),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("snaplen"),
        ),
        (
            with("colour", json!(1)),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("colour"),
        ),
        (
            json!({"path": file("x.pcap")}),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("interface"),
        ),
    ];
    if !root {
        cases.push((
            with("path", json!(ro.join("x.pcap").display().to_string())),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("path"),
        ));
    }
    for (body, status, field) in cases {
        refused(
            &call(&app, "POST", "/api/v1/captures", Some(body)).await,
            status,
            field,
        );
    }
    let r = call(&app, "POST", "/api/v1/captures", Some(json!("x"))).await;
    assert_eq!(r.0, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.1);
    let (st, v) = call(&app, "POST", "/api/v1/captures", None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    // Nothing started, nothing written, the existing file kept.
    assert_eq!(
        call(&app, "GET", "/api/v1/captures", None).await.1,
        json!([])
    );
    assert!(!dir.path().join("x.pcap").exists());
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
    for (m, uri, status, field) in [
        ("GET", "/api/v1/captures/1", StatusCode::NOT_FOUND, None),
        ("DELETE", "/api/v1/captures/1", StatusCode::NOT_FOUND, None),
        (
            "GET",
            "/api/v1/captures/one",
            StatusCode::BAD_REQUEST,
            Some("id"),
        ),
        (
            "DELETE",
            "/api/v1/captures/-1",
            StatusCode::BAD_REQUEST,
            Some("id"),
        ),
    ] {
        refused(&call(&app, m, uri, None).await, status, field);
    }
}

#[tokio::test]
async fn a_capture_is_listed_stopped_and_leaves_a_pcap_file() {
    let app = setup();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vm1.pcap");
    let body = json!({"interface": "vm1", "path": path.display().to_string(),
        "direction": "rx", "packets": 10, "snaplen": 128});
    let (st, v) = call(&app, "POST", "/api/v1/captures", Some(body)).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(
        (
            &v["id"],
            &v["state"],
            &v["direction"],
            &v["snaplen"],
            &v["written"]
        ),
        (
            &json!(1),
            &json!("running"),
            &json!("rx"),
            &json!(128),
            &json!(0)
        )
    );
    // The same file again: refused, the running capture untouched.
    let again = json!({"interface": "vm2", "path": path.display().to_string()});
    refused(
        &call(&app, "POST", "/api/v1/captures", Some(again)).await,
        StatusCode::CONFLICT,
        Some("path"),
    );
    let (_, list) = call(&app, "GET", "/api/v1/captures", None).await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let (st, one) = call(&app, "GET", "/api/v1/captures/1", None).await;
    assert_eq!((st, &one["interface"]), (StatusCode::OK, &json!("vm1")));
    let (st, done) = call(&app, "DELETE", "/api/v1/captures/1", None).await;
    assert_eq!(st, StatusCode::OK, "{done}");
    assert_eq!(
        (&done["state"], &done["ended"]),
        (&json!("finished"), &json!("stopped"))
    );
    assert_eq!(
        call(&app, "GET", "/api/v1/captures", None).await.1,
        json!([])
    );
    // An empty capture, but a well-formed one: the header an independent reader checks.
    let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(r.header().datalink, pcap_file::DataLink::ETHERNET);
    assert_eq!(r.header().snaplen, 128);
    assert!(r.next_packet().is_none());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn captures_are_bounded() {
    let app = setup();
    let dir = tempfile::tempdir().unwrap();
    for i in 0..8 {
        let body = json!({"interface": "vm1", "path": dir.path().join(format!("{i}.pcap")).display().to_string()});
        assert_eq!(
            call(&app, "POST", "/api/v1/captures", Some(body)).await.0,
            StatusCode::CREATED
        );
    }
    let body = json!({"interface": "vm1", "path": dir.path().join("9.pcap").display().to_string()});
    refused(
        &call(&app, "POST", "/api/v1/captures", Some(body)).await,
        StatusCode::CONFLICT,
        None,
    );
    assert!(!dir.path().join("9.pcap").exists());
    for i in 1..=8 {
        assert_eq!(
            call(&app, "DELETE", &format!("/api/v1/captures/{i}"), None)
                .await
                .0,
            StatusCode::OK
        );
    }
}

#[tokio::test]
async fn openapi_lists_trace_and_captures() {
    let app = setup();
    let (_, doc) = call(&app, "GET", "/openapi.json", None).await;
    for p in ["/api/v1/trace", "/api/v1/captures", "/api/v1/captures/{id}"] {
        assert!(doc["paths"][p].is_object(), "{p} missing");
    }
    for s in ["CaptureRequest", "CaptureInfo", "TraceDump", "TraceAdd"] {
        assert!(doc["components"]["schemas"][s].is_object(), "{s} missing");
    }
}
