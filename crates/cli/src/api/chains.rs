//! `ovrctl chains`: service chains, their functions and instances, with health,
//! sessions and packets per instance.

use super::{Conn, Failure, call, print};
use serde_json::Value;

pub fn chains(c: &Conn) -> Result<(), Failure> {
    let v = call(c, "GET", "/api/v1/chains", None)?;
    print(c, &v, show);
    Ok(())
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// One block per chain, a line per instance:
/// `  fw-1  healthy  sessions 3  left fw1l up (in 10 / out 10)  right fw1r up (...)`.
fn show(v: &Value) {
    let chains = v["chains"].as_array().cloned().unwrap_or_default();
    if chains.is_empty() {
        outln!("no chains");
    }
    for ch in &chains {
        outln!("chain {} (from {})", text(&ch["name"]), text(&ch["from"]));
        for (k, f) in ch["functions"].as_array().into_iter().flatten().enumerate() {
            let probe = &f["probe"];
            let probed = match probe["kind"].as_str() {
                None | Some("link") => String::new(),
                Some(kind) => format!(
                    ", probe {kind} every {} ms, down after {} missed",
                    text(&probe["interval_ms"]),
                    text(&probe["failures"])
                ),
            };
            outln!(
                "  {}. {} ({}{probed})",
                k + 1,
                text(&f["name"]),
                text(&f["mode"])
            );
            for i in f["instances"].as_array().into_iter().flatten() {
                let port = |p: &Value| {
                    let at = match p["via"].as_str() {
                        Some(via) => format!("via {via}"),
                        None => text(&p["interface"]),
                    };
                    format!(
                        "{} {} (to it {}, from it {}){}",
                        at,
                        if p["up"] == Value::Bool(true) {
                            "up"
                        } else {
                            "down"
                        },
                        text(&p["to_function"]),
                        text(&p["from_function"]),
                        probe_text(&p["probe"])
                    )
                };
                outln!(
                    "     {:<12} {:<9} sessions {:<6} left {}  right {}",
                    text(&i["name"]),
                    if i["healthy"] == Value::Bool(true) {
                        "healthy"
                    } else {
                        "down"
                    },
                    text(&i["sessions"]),
                    port(&i["left"]),
                    port(&i["right"])
                );
            }
        }
    }
    outln!(
        "dropped for want of a healthy instance (chain_no_instance): {}",
        text(&v["dropped_no_instance"])
    );
}

/// ` [arp answered 12 of 13, missed 0, last answer 40 ms ago]` for a probed side.
fn probe_text(p: &Value) -> String {
    if p.is_null() {
        return String::new();
    }
    let last = match p["last_answer_ms_ago"].as_u64() {
        Some(ms) => format!("last answer {ms} ms ago"),
        None => "never answered".into(),
    };
    format!(
        " [{} answered {} of {}, missed {}{}, {last}]",
        text(&p["kind"]),
        text(&p["answered"]),
        text(&p["sent"]),
        text(&p["missed"]),
        if p["failed"] == Value::Bool(true) {
            " (failed)"
        } else {
            ""
        }
    )
}
