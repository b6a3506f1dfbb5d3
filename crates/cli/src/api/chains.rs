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
        println!("no chains");
    }
    for ch in &chains {
        println!("chain {} (from {})", text(&ch["name"]), text(&ch["from"]));
        for (k, f) in ch["functions"].as_array().into_iter().flatten().enumerate() {
            println!("  {}. {} ({})", k + 1, text(&f["name"]), text(&f["mode"]));
            for i in f["instances"].as_array().into_iter().flatten() {
                let port = |p: &Value| {
                    let at = match p["via"].as_str() {
                        Some(via) => format!("via {via}"),
                        None => text(&p["interface"]),
                    };
                    format!(
                        "{} {} (to it {}, from it {})",
                        at,
                        if p["up"] == Value::Bool(true) {
                            "up"
                        } else {
                            "down"
                        },
                        text(&p["to_function"]),
                        text(&p["from_function"])
                    )
                };
                println!(
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
    println!(
        "dropped for want of a healthy instance (chain_no_instance): {}",
        text(&v["dropped_no_instance"])
    );
}
