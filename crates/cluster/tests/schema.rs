//! docs/schema: each kind's JSON Schema and examples agree with `model::parse`. A valid
//! example is accepted by both; an invalid one is refused by `parse`; and whatever the
//! schema refuses, `parse` refuses too. The schemas are checked here by a small
//! validator of the keywords they use, less `pattern` and `format` (which `parse` checks
//! with the real parsers; no regex engine is pulled in for a test).

use ovr_cluster::keys::Key;
use ovr_cluster::model;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema")
}

fn read(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A key of the kind an example file is named after (`network.valid.json`).
fn key_of(kind: &str) -> Key {
    let (host, name) = ("h1".to_string(), "x".to_string());
    match kind {
        "network" => Key::Network(name),
        "policy" => Key::Policy(name),
        "port" => Key::Port { host, name },
        "host" => Key::Host(host),
        "endpoint" => Key::Endpoint { host, name },
        "service" => Key::Service(name),
        "chain" => Key::Chain(name),
        other => panic!("no kind {other}"),
    }
}

/// Why `v` does not match `s` (within `root`, for `$ref`), or `Ok`.
fn validate(root: &Value, s: &Value, v: &Value, at: &str) -> Result<(), String> {
    let fail = |why: &str| Err(format!("{at}: {why}"));
    if let Some(r) = s["$ref"].as_str() {
        let name = r.strip_prefix("#/$defs/").expect("local $ref");
        return validate(root, &root["$defs"][name], v, at);
    }
    if let Some(t) = s["type"].as_str() {
        let fits = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            other => panic!("type {other} not handled"),
        };
        if !fits {
            return fail(&format!("not of type {t}"));
        }
    }
    if let Some(options) = s["enum"].as_array()
        && !options.contains(v)
    {
        return fail("not one of the enum");
    }
    if let Some(n) = v.as_f64() {
        if s["minimum"].as_f64().is_some_and(|m| n < m) {
            return fail("below the minimum");
        }
        if s["maximum"].as_f64().is_some_and(|m| n > m) {
            return fail("above the maximum");
        }
    }
    if let Some(text) = v.as_str() {
        let len = text.chars().count() as u64;
        if s["minLength"].as_u64().is_some_and(|m| len < m)
            || s["maxLength"].as_u64().is_some_and(|m| len > m)
        {
            return fail("length out of bounds");
        }
    }
    for (word, exactly_one) in [("anyOf", false), ("oneOf", true)] {
        if let Some(subs) = s[word].as_array() {
            let n = subs
                .iter()
                .filter(|sub| validate(root, sub, v, at).is_ok())
                .count();
            if n == 0 || (exactly_one && n > 1) {
                return fail(&format!("{n} of {word} match"));
            }
        }
    }
    if let Some(items) = v.as_array() {
        let n = items.len() as u64;
        if s["minItems"].as_u64().is_some_and(|m| n < m)
            || s["maxItems"].as_u64().is_some_and(|m| n > m)
        {
            return fail("number of items out of bounds");
        }
        if s["uniqueItems"] == true
            && items
                .iter()
                .enumerate()
                .any(|(i, x)| items[..i].contains(x))
        {
            return fail("an item twice");
        }
        for (i, x) in items.iter().enumerate() {
            if s.get("items").is_some() {
                validate(root, &s["items"], x, &format!("{at}[{i}]"))?;
            }
        }
    }
    if let Some(fields) = v.as_object() {
        for r in s["required"].as_array().into_iter().flatten() {
            if !fields.contains_key(r.as_str().unwrap()) {
                return fail(&format!("{r} is required"));
            }
        }
        for (k, x) in fields {
            let at = format!("{at}.{k}");
            match (s["properties"].get(k), s.get("additionalProperties")) {
                (Some(p), _) => validate(root, p, x, &at)?,
                (None, Some(Value::Bool(false))) => return Err(format!("{at}: not allowed")),
                (None, Some(extra @ Value::Object(_))) => validate(root, extra, x, &at)?,
                (None, _) => {}
            }
        }
    }
    Ok(())
}

#[test]
fn schemas_and_examples_agree_with_the_model() {
    let mut seen = std::collections::BTreeSet::new();
    let mut refused_by_schema = std::collections::BTreeSet::new();
    let mut entries: Vec<_> = std::fs::read_dir(docs().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let (kind, rest) = file.split_once('.').unwrap();
        let valid = rest.starts_with("valid.");
        assert!(
            valid || rest.starts_with("invalid."),
            "{file}: valid.* or invalid.*"
        );
        let schema = read(&docs().join(format!("{kind}.json")));
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{kind}.json"
        );
        let example = read(&path);
        let bytes = serde_json::to_vec(&example).unwrap();
        let parsed = model::parse(&key_of(kind), &bytes);
        let by_schema = validate(&schema, &schema, &example, kind);
        if valid {
            assert!(parsed.is_ok(), "{file}: {parsed:?}");
            assert!(by_schema.is_ok(), "{file}: {by_schema:?}");
            seen.insert(kind.to_string());
        } else {
            assert!(parsed.is_err(), "{file}: parse accepts it");
        }
        if let Err(why) = by_schema {
            refused_by_schema.insert(file.clone());
            assert!(
                parsed.is_err(),
                "{file}: the schema refuses ({why}), parse accepts"
            );
        }
    }
    // What the schema can say on its own (no pattern, no format, no cross-field rule).
    for file in [
        "network.invalid.vni-zero.json",
        "network.invalid.unknown-field.json",
        "network.invalid.encap.json",
        "network.invalid.route-targets-empty.json",
        "policy.invalid.unknown-rule-field.json",
        "port.invalid.ip-twice.json",
        "port.invalid.interface-too-long.json",
        "port.invalid.memif-ring.json",
        "port.invalid.memif-no-socket.json",
        "port.invalid.police-zero.json",
        "host.invalid.reserved-label.json",
        "endpoint.invalid.no-mac.json",
        "service.invalid.no-right.json",
        "service.invalid.probe-interval.json",
        "service.invalid.probe-kind.json",
        "service.invalid.probe-failures.json",
        "chain.invalid.empty.json",
        "chain.invalid.twice.json",
    ] {
        assert!(
            refused_by_schema.contains(file),
            "the schema accepts {file}"
        );
    }
    let kinds = [
        "chain", "endpoint", "host", "network", "policy", "port", "service",
    ];
    assert_eq!(seen, kinds.iter().map(|k| k.to_string()).collect());
}

#[test]
fn the_documentation_shows_the_schema_files() {
    let doc = std::fs::read_to_string(docs().join("../cluster.md")).unwrap();
    for kind in [
        "network", "policy", "port", "service", "chain", "host", "endpoint",
    ] {
        let schema = std::fs::read_to_string(docs().join(format!("{kind}.json"))).unwrap();
        assert!(
            doc.contains(&format!("```json\n{schema}```")),
            "docs/cluster.md does not show docs/schema/{kind}.json as it is"
        );
    }
}
