//! ovr-cni: the CNI plugin that attaches containers to ovr networks (docs/cni.md).
//! A runtime runs it with `CNI_COMMAND` and the other `CNI_*` variables set and the
//! network configuration on stdin; it prints a result (ADD), nothing (DEL, CHECK,
//! STATUS, GC), the versions it speaks (VERSION), or the spec's error JSON with a
//! non-zero exit status.

#![forbid(unsafe_code)]

mod conf;
mod error;
mod ipam;
mod link;
mod names;
mod netns;
mod plugin;
mod result;

use conf::{Command, SUPPORTED};
use error::{CniError, code};
use serde_json::{Value, json};
use std::io::{Read, Write};

/// The newest version spoken: what VERSION and errors without a configuration say.
const NEWEST: &str = "1.1.0";

fn version_info() -> Value {
    json!({"cniVersion": NEWEST, "supportedVersions": SUPPORTED})
}

/// One call from the environment (`get`) and stdin: what to print, and whether it is
/// an error.
fn main_with(get: &dyn Fn(&str) -> Option<String>, stdin: &mut dyn Read) -> (Option<Value>, bool) {
    let Some(cmd) = get("CNI_COMMAND").filter(|c| !c.is_empty()) else {
        let about = format!(
            "ovr-cni: attaches containers to ovr networks. CNI protocol versions supported: {}",
            SUPPORTED.join(", ")
        );
        return (Some(Value::String(about)), false);
    };
    let mut raw = Vec::new();
    let mut version = NEWEST.to_string();
    let r = (|| -> Result<Option<Value>, CniError> {
        let command = Command::parse(&cmd)?;
        if command == Command::Version {
            return Ok(Some(version_info()));
        }
        stdin.read_to_end(&mut raw).map_err(|e| {
            CniError::new(code::IO_FAILURE, format!("reading the configuration: {e}"))
        })?;
        if let Ok(v) = serde_json::from_slice::<Value>(&raw)
            && let Some(s) = v["cniVersion"].as_str()
            && SUPPORTED.contains(&s)
        {
            version = s.to_string();
        }
        let call = conf::call(get, command, std::mem::take(&mut raw))?;
        plugin::run(&call)
    })();
    match r {
        Ok(v) => (v, false),
        Err(e) => (Some(e.to_json(&version)), true),
    }
}

fn main() -> std::process::ExitCode {
    let get = |k: &str| std::env::var(k).ok();
    let (out, failed) = main_with(&get, &mut std::io::stdin());
    let mut stdout = std::io::stdout();
    match out {
        Some(Value::String(about)) => {
            let _ = writeln!(stdout, "{about}");
        }
        Some(v) => {
            let _ = writeln!(
                stdout,
                "{}",
                serde_json::to_string_pretty(&v).unwrap_or_default()
            );
        }
        None => {}
    }
    if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(env: &[(&str, &str)], stdin: &str) -> (Option<Value>, bool) {
        let m: std::collections::BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        main_with(&|k| m.get(k).cloned(), &mut stdin.as_bytes())
    }

    #[test]
    fn version_lists_what_is_spoken() {
        let (v, failed) = run(&[("CNI_COMMAND", "VERSION")], r#"{"cniVersion":"1.0.0"}"#);
        let v = v.unwrap();
        assert!(!failed);
        assert_eq!(v["cniVersion"], NEWEST);
        let s: Vec<&str> = v["supportedVersions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(s.contains(&"1.0.0") && s.contains(&"1.1.0"), "{s:?}");
    }

    #[test]
    fn errors_are_the_specs_json_in_the_configurations_version() {
        let (v, failed) = run(&[("CNI_COMMAND", "ADD")], "{not json");
        let v = v.unwrap();
        assert!(failed);
        assert_eq!(v["code"], code::DECODING_FAILURE);
        assert_eq!(v["cniVersion"], NEWEST);
        let (v, failed) = run(
            &[("CNI_COMMAND", "ADD")],
            r#"{"cniVersion":"1.0.0","name":"n","type":"ovr-cni"}"#,
        );
        let v = v.unwrap();
        assert!(failed);
        assert_eq!((&v["code"], &v["cniVersion"]), (&json!(7), &json!("1.0.0")));
        assert!(v["msg"].as_str().unwrap().contains("network"), "{v}");
        // The environment is checked before anything is done.
        let (v, _) = run(
            &[("CNI_COMMAND", "ADD")],
            r#"{"cniVersion":"1.0.0","name":"n","type":"ovr-cni","network":"red"}"#,
        );
        assert_eq!(v.unwrap()["code"], code::INVALID_ENVIRONMENT);
        let (v, _) = run(&[("CNI_COMMAND", "BOGUS")], "{}");
        assert_eq!(v.unwrap()["code"], code::INVALID_ENVIRONMENT);
        // No command: the about text, not an error.
        let (v, failed) = run(&[], "");
        assert!(!failed && v.unwrap().as_str().unwrap().contains("ovr-cni"));
    }
}
