//! Every class of refusal (400, 404, 405, 409, 413, 422), each naming what is wrong,
//! and a refused request changes neither the model nor the tables.

use super::*;

#[tokio::test]
async fn refusals_name_the_field_and_change_nothing() {
    let (app, s) = setup();
    let before = snapshot(&s);
    let cases: &[(&str, &str, &str, StatusCode, Option<&str>)] = &[
        // Unknown reference.
        (
            "POST",
            "/api/v1/routes",
            r#"{"network":"red","prefix":"10.9.0.0/24","nexthop":"nope"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("nexthop"),
        ),
        (
            "POST",
            "/api/v1/routes",
            r#"{"network":"green","prefix":"10.9.0.0/24","nexthop":"b-red"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("network"),
        ),
        // Wrong types and bad values.
        (
            "POST",
            "/api/v1/routes",
            r#"{"network":5,"prefix":"10.9.0.0/24","nexthop":"b-red"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("network"),
        ),
        (
            "POST",
            "/api/v1/routes",
            r#"{"network":"red","prefix":"10.9.0.1/24","nexthop":"b-red"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("prefix"),
        ),
        (
            "POST",
            "/api/v1/networks",
            r#"{"name":"green","vni":"x"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("vni"),
        ),
        // A missing field is named, also inside a nested object.
        (
            "POST",
            "/api/v1/tunnels",
            r#"{"name":"t9","remote":"192.0.2.9"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("underlay"),
        ),
        (
            "POST",
            "/api/v1/batch",
            r#"{"changes":[{"create":{"route":{"network":"red","nexthop":"b-red"}}}]}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("changes[0].create.route.prefix"),
        ),
        (
            "POST",
            "/api/v1/networks",
            r#"{"name":"green","vni":-1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("vni"),
        ),
        (
            "POST",
            "/api/v1/networks",
            r#"{"name":"green","colour":"x"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("colour"),
        ),
        (
            "POST",
            "/api/v1/networks",
            r#"{"vni":7}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("name"),
        ),
        (
            "POST",
            "/api/v1/networks",
            r#"[]"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("(body)"),
        ),
        // Table-level validation: a VNI already used, one out of range.
        (
            "POST",
            "/api/v1/networks",
            r#"{"name":"green","vni":100}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("vni"),
        ),
        (
            "POST",
            "/api/v1/networks",
            r#"{"name":"green","vni":16777216}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("vni"),
        ),
        (
            "POST",
            "/api/v1/nexthops",
            r#"{"name":"x","kind":"drop","vni":3}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("vni"),
        ),
        (
            "POST",
            "/api/v1/nexthops",
            r#"{"name":"x","kind":"ecmp","members":["b-both"]}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("members[0]"),
        ),
        (
            "POST",
            "/api/v1/labels",
            r#"{"label":3,"nexthop":"b-red"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("label"),
        ),
        (
            "POST",
            "/api/v1/interfaces",
            r#"{"name":"vm9","network":"red","mtu":40}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("mtu"),
        ),
        (
            "PUT",
            "/api/v1/policies/red",
            r#"{"rules":[{"action":"allow","dst_ports":80}]}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("rules[0]"),
        ),
        (
            "PUT",
            "/api/v1/policies/red",
            r#"{"rules":[{"action":"allow","src_network":"nope"}]}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("rules[0].src_network"),
        ),
        // Not JSON.
        (
            "POST",
            "/api/v1/routes",
            r#"{"network":"#,
            StatusCode::BAD_REQUEST,
            None,
        ),
        (
            "POST",
            "/api/v1/routes",
            r#"{"network":"red","prefix":"10.9.0.0/24","nexthop":"b-red"} x"#,
            StatusCode::BAD_REQUEST,
            None,
        ),
        // Exists, in use, absent.
        (
            "POST",
            "/api/v1/networks",
            r#"{"name":"red"}"#,
            StatusCode::CONFLICT,
            Some("name"),
        ),
        (
            "DELETE",
            "/api/v1/nexthops/b-red",
            "",
            StatusCode::CONFLICT,
            None,
        ),
        (
            "DELETE",
            "/api/v1/networks/blue",
            "",
            StatusCode::CONFLICT,
            None,
        ),
        (
            "DELETE",
            "/api/v1/interfaces/uplink",
            "",
            StatusCode::CONFLICT,
            None,
        ),
        (
            "DELETE",
            "/api/v1/tunnels/to-b",
            "",
            StatusCode::CONFLICT,
            None,
        ),
        (
            "DELETE",
            "/api/v1/interfaces/vm1",
            "",
            StatusCode::CONFLICT,
            None,
        ),
        (
            "DELETE",
            "/api/v1/nexthops/nope",
            "",
            StatusCode::NOT_FOUND,
            None,
        ),
        (
            "PUT",
            "/api/v1/policies/nope",
            r#"{"rules":null}"#,
            StatusCode::NOT_FOUND,
            None,
        ),
        (
            "GET",
            "/api/v1/labels/abc",
            "",
            StatusCode::BAD_REQUEST,
            Some("label"),
        ),
        (
            "GET",
            "/api/v1/bridge/red/zz",
            "",
            StatusCode::BAD_REQUEST,
            Some("mac"),
        ),
        // Flow settings are the dataplane's, set at start.
        (
            "PUT",
            "/api/v1/config",
            r#"{"flows":{"capacity":5}}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("flows"),
        ),
    ];
    for (m, uri, body, status, field) in cases {
        let r = call(&app, m, uri, Some(body)).await;
        assert_eq!(r.0, *status, "{m} {uri} {body}: {}", r.1);
        assert_eq!(r.1["field"].as_str(), *field, "{m} {uri} {body}: {}", r.1);
        assert!(snapshot(&s) == before, "{m} {uri} {body} changed something");
    }
    // The referrer is named.
    let (_, v) = call(&app, "DELETE", "/api/v1/nexthops/b-red", None).await;
    assert!(
        v["error"].as_str().unwrap().contains("route 10.2.0.0/24"),
        "{v}"
    );
    let (_, v) = call(&app, "DELETE", "/api/v1/interfaces/vm1", None).await;
    assert!(v["error"].as_str().unwrap().contains("label 500"), "{v}");
}

#[tokio::test]
async fn huge_bodies_are_refused() {
    let (app, s) = app(example(), 1024);
    let before = snapshot(&s);
    let big = format!(
        r#"{{"name":"green","gateways":[{}]}}"#,
        vec!["\"10.0.0.1/24\""; 200].join(",")
    );
    let r = call(&app, "POST", "/api/v1/networks", Some(&big)).await;
    refused(&r, StatusCode::PAYLOAD_TOO_LARGE, None);
    assert!(snapshot(&s) == before);
}

#[tokio::test]
async fn a_batch_of_the_wrong_shape_is_422_naming_the_change() {
    let (app, s) = setup();
    let before = snapshot(&s);
    for (body, field) in [
        (r#"{"changes":[1]}"#, "changes[0]"),
        (
            r#"{"changes":[{"create":{"route":{}}},"create"]}"#,
            "changes[0].create.route.network",
        ),
        (
            r#"{"changes":[{"create":{"label":{"label":5,"nexthop":"b-red"}},"delete":{}}]}"#,
            "changes[0]",
        ),
        (r#"{"changes":[[]]}"#, "changes[0]"),
        (r#"{"changes":[{"create":7}]}"#, "changes[0].create"),
    ] {
        let r = call(&app, "POST", "/api/v1/batch", Some(body)).await;
        refused(&r, StatusCode::UNPROCESSABLE_ENTITY, Some(field));
        let msg = r.1["error"].as_str().unwrap();
        assert!(!msg.contains("not valid JSON"), "{body}: {msg}");
    }
    // An object of one key naming the kind is what is expected: the message says so.
    let r = call(&app, "POST", "/api/v1/batch", Some(r#"{"changes":[1]}"#)).await;
    let msg = r.1["error"].as_str().unwrap();
    assert!(msg.contains("one key"), "{msg}");
    // Not JSON at all stays 400.
    let r = call(&app, "POST", "/api/v1/batch", Some(r#"{"changes":[1"#)).await;
    refused(&r, StatusCode::BAD_REQUEST, None);
    assert_eq!(snapshot(&s), before);
}

#[tokio::test]
async fn unknown_endpoints_and_methods_answer_in_json() {
    let (app, _) = setup();
    refused(
        &call(&app, "GET", "/api/v1/nope", None).await,
        StatusCode::NOT_FOUND,
        None,
    );
    refused(
        &call(&app, "PATCH", "/api/v1/routes", None).await,
        StatusCode::METHOD_NOT_ALLOWED,
        None,
    );
}

#[tokio::test]
async fn a_key_twice_is_a_conflict_and_changes_nothing() {
    let (app, s) = setup();
    let before = snapshot(&s);
    let route = json!({"network": "red", "prefix": "10.9.0.0/24", "nexthop": "b-red"});
    // Add: the route exists already.
    let existing = json!({"network": "red", "prefix": "10.2.0.0/24", "nexthop": "b-both"});
    let r = call(&app, "POST", "/api/v1/routes", Some(&existing.to_string())).await;
    refused(&r, StatusCode::CONFLICT, Some("network"));
    // A batch creating one route twice: the incremental way and the whole way.
    let twice = json!({"changes": [{"create": {"route": route}}, {"create": {"route": route}}]});
    let r = call(&app, "POST", "/api/v1/batch", Some(&twice.to_string())).await;
    refused(
        &r,
        StatusCode::CONFLICT,
        Some("changes[1].create.route.network"),
    );
    let twice = json!({"changes": [
        {"create": {"network": {"name": "green"}}},
        {"create": {"bridge": {"network": "red", "mac": "02:00:00:00:09:09", "nexthop": "b-red"}}},
        {"create": {"bridge": {"network": "red", "mac": "02:00:00:00:09:09", "nexthop": "b-blue"}}},
    ]});
    let r = call(&app, "POST", "/api/v1/batch", Some(&twice.to_string())).await;
    refused(
        &r,
        StatusCode::CONFLICT,
        Some("changes[2].create.bridge.network"),
    );
    assert!(snapshot(&s) == before);
    // The whole configuration with a route, a bridge entry or a label listed twice.
    for (section, at) in [("routes", 0), ("bridge", 0), ("labels", 1)] {
        let mut c = example();
        match section {
            "routes" => c.routes.push(c.routes[at].clone()),
            "bridge" => c.bridge.push(c.bridge[at].clone()),
            _ => c.labels.push(c.labels[at].clone()),
        }
        let n = match section {
            "routes" => c.routes.len(),
            "bridge" => c.bridge.len(),
            _ => c.labels.len(),
        } - 1;
        let body = serde_json::to_string(&c).unwrap();
        let r = call(&app, "PUT", "/api/v1/config", Some(&body)).await;
        let field = format!("{section}[{n}]");
        refused(&r, StatusCode::CONFLICT, Some(field.as_str()));
        let msg = r.1["error"].as_str().unwrap();
        assert!(
            msg.starts_with(&format!("duplicate of {section}[{at}] (")),
            "{msg}"
        );
        assert!(snapshot(&s) == before);
    }
    // A workload given an address another workload of its network has.
    let mut vm = example().interfaces[1].clone();
    vm.name = "vm3".into();
    vm.peer_mac = Some("02:00:00:00:01:09".parse().unwrap());
    let r = call(
        &app,
        "POST",
        "/api/v1/interfaces",
        Some(&serde_json::to_string(&vm).unwrap()),
    )
    .await;
    refused(&r, StatusCode::CONFLICT, Some("peer_addresses[0]"));
    assert!(snapshot(&s) == before);
    // The document says so.
    let (_, doc) = call(&app, "GET", "/openapi.json", None).await;
    for (path, method) in [
        ("/api/v1/config", "put"),
        ("/api/v1/networks/{name}", "put"),
    ] {
        assert!(
            doc["paths"][path][method]["responses"]["409"].is_object(),
            "{path} {method}"
        );
    }
    // What was refused can be deleted once, and then it is gone from the list and the
    // tables alike.
    let r = call(&app, "DELETE", "/api/v1/routes/red/10.2.0.0/24", None).await;
    assert_eq!(r.0, StatusCode::OK, "{}", r.1);
    let r = call(&app, "GET", "/api/v1/routes/red/10.2.0.0/24", None).await;
    assert_eq!(r.0, StatusCode::NOT_FOUND, "{}", r.1);
    let a = s.agent().lock().unwrap();
    assert_eq!(installed(&a), fresh(a.config()));
}

#[test]
fn a_starting_configuration_with_a_key_twice_is_refused() {
    let mut c = example();
    c.routes.push(c.routes[1].clone());
    let (w, _r) = ovr_tables::state::new_tables();
    let start = ovr_agent::store::Start {
        config: c,
        base: None,
        ids: ovr_config::Names::default(),
        source: ovr_agent::store::Source::ConfigFile,
    };
    let e = ovr_agent::Agent::start(start, w, None)
        .err()
        .expect("refused");
    assert_eq!(
        e.to_string(),
        "routes[2]: duplicate of routes[1] (network red, prefix 10.3.0.0/24)"
    );
}
