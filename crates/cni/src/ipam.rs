//! Addresses: from the `ovr` IPAM type (the cluster's allocator, through ovrd's API),
//! or from any other IPAM plugin found by type on CNI_PATH and run as the spec says
//! (the same environment with the command set, the configuration on stdin).

use crate::conf::Call;
use crate::error::{self, CniError, code};
use crate::result::{CniResult, IpConfig};
use ovr_client::{Endpoint, seg};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long an IPAM plugin may take (dhcp waits for a lease).
const DELEGATE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long ovrd may take to answer.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);

/// Where an IPAM plugin of type `kind` is: the first CNI_PATH directory holding it.
fn find(call: &Call, kind: &str) -> Result<PathBuf, CniError> {
    if kind.contains('/') {
        return Err(error::config(format!(
            "ipam.type: '{kind}' is not a plugin name"
        )));
    }
    call.path
        .iter()
        .map(|d| d.join(kind))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            error::config(format!(
                "ipam.type: no plugin '{kind}' in CNI_PATH ({})",
                call.path
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":")
            ))
        })
}

/// Runs the IPAM plugin with `command`: its result on ADD (`None` otherwise). Its
/// error is passed on with its own code.
pub fn delegate(call: &Call, kind: &str, command: &str) -> Result<Option<CniResult>, CniError> {
    let bin = find(call, kind)?;
    let mut child = Command::new(&bin)
        .env("CNI_COMMAND", command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| CniError::new(code::IPAM, format!("{}: {e}", bin.display())))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A plugin that exits without reading is judged by its exit status below.
        let _ = stdin.write_all(&call.raw);
    }
    let mut out = Vec::new();
    let reader = child.stdout.take();
    let read = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = reader {
            let _ = r.read_to_end(&mut buf);
        }
        buf
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child
            .try_wait()
            .map_err(|e| CniError::new(code::IPAM, format!("{}: {e}", bin.display())))?
        {
            break s;
        }
        if start.elapsed() > DELEGATE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(CniError::new(
                code::TRY_AGAIN_LATER,
                format!(
                    "IPAM plugin {kind} did not answer {command} within {} s",
                    DELEGATE_TIMEOUT.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    if let Ok(b) = read.join() {
        out = b;
    }
    if !status.success() {
        let v: Value = serde_json::from_slice(&out).unwrap_or(Value::Null);
        let msg = v["msg"].as_str().map_or_else(
            || format!("IPAM plugin {kind} failed {command} ({status})"),
            |m| format!("IPAM plugin {kind}: {m}"),
        );
        let c = v["code"].as_u64().map_or(code::IPAM, |c| c as u32);
        let details = v["details"].as_str().unwrap_or_default();
        return Err(CniError::new(c, msg).with_details(details));
    }
    if command != "ADD" {
        return Ok(None);
    }
    serde_json::from_slice(&out).map(Some).map_err(|e| {
        CniError::new(
            code::IPAM,
            format!("IPAM plugin {kind} answered something that is not a result: {e}"),
        )
    })
}

/// What to ask the cluster's allocator for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// This address (the runtime's `ips`).
    Address(std::net::IpAddr),
    /// Any address of the network's subnet of this family (4 or 6).
    Family(u8),
}

/// An address from the cluster's allocator for `owner`.
pub fn allocate(
    to: &Endpoint,
    network: &str,
    owner: &str,
    tag: &str,
    ask: Ask,
) -> Result<IpConfig, CniError> {
    let mut body = json!({"owner": owner, "tag": tag});
    match ask {
        Ask::Address(w) => body["address"] = w.to_string().into(),
        Ask::Family(f) => body["family"] = f.into(),
    }
    let v = ovr_client::call(
        to,
        "POST",
        &format!("/api/v1/cluster/ipam/{}", seg(network)),
        Some(&body),
        API_TIMEOUT,
    )
    .map_err(|e| match e {
        ovr_client::CallError::Api(f) if f.status == 409 || f.status == 404 || f.status == 422 => {
            CniError::new(code::IPAM, format!("ovr IPAM: {f}"))
        }
        e => error::ovrd("ovr IPAM", e),
    })?;
    let (Some(a), Some(l)) = (v["address"].as_str(), v["prefix_len"].as_u64()) else {
        return Err(CniError::new(
            code::OVRD,
            format!("ovr IPAM: an answer without an address: {v}"),
        ));
    };
    Ok(IpConfig {
        version: None,
        address: format!("{a}/{l}"),
        gateway: v["gateway"].as_str().and_then(|g| g.parse().ok()),
        interface: Some(0),
    })
}

/// Releases what `owner` holds in `network`.
pub fn release(to: &Endpoint, network: &str, owner: &str) -> Result<(), CniError> {
    ovr_client::call(
        to,
        "DELETE",
        &format!("/api/v1/cluster/ipam/{}?owner={}", seg(network), seg(owner)),
        None,
        API_TIMEOUT,
    )
    .map(|_| ())
    .map_err(|e| error::ovrd("ovr IPAM release", e))
}

/// Every lease of `network`: (address, owner, host, tag).
pub fn leases(
    to: &Endpoint,
    network: &str,
) -> Result<Vec<(String, String, String, String)>, CniError> {
    let v = ovr_client::call(
        to,
        "GET",
        &format!("/api/v1/cluster/ipam/{}", seg(network)),
        None,
        API_TIMEOUT,
    )
    .map_err(|e| error::ovrd("ovr IPAM list", e))?;
    let s = |l: &Value, k: &str| l[k].as_str().unwrap_or_default().to_string();
    Ok(v.as_array()
        .into_iter()
        .flatten()
        .map(|l| (s(l, "address"), s(l, "owner"), s(l, "host"), s(l, "tag")))
        .collect())
}
