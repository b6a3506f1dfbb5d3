//! `ovrctl lab status`: the lab as people and scripts read it.

use super::ovrd::alive;
use super::{Place, load, socket_of};

/// The lab as scripts read it (`lab status --json`): hosts with their namespace,
/// underlay address, API socket and ovrd's pid; workloads with their host, tenant,
/// namespace, address and MAC; `etcd`: the cluster's client URLs reachable from the
/// root namespace (none in a static lab), and `etcd_members` with their namespace, pid and
/// whether they run; `bgp` (with `up --evpn`): the route reflector and each host's
/// speaker, with whether they run; `services` (with `up --service-chain`): each
/// firewall instance's name, function, chain, host, namespace and ports. `up` is false,
/// and the lists empty, when no lab is up.
pub fn status_json(p: &Place) -> Result<serde_json::Value, String> {
    use serde_json::json;
    let s = load(p)?.unwrap_or_default();
    let hosts: Vec<_> = s
        .hosts
        .iter()
        .map(|h| {
            let ovrd = !h.kernel;
            json!({
                "name": h.name,
                "namespace": h.namespace,
                "underlay": h.underlay_ip,
                "underlay_prefix": format!("{}/24", h.underlay_ip),
                "mac": h.mac,
                "kernel": h.kernel,
                "socket": ovrd.then(|| socket_of(h).display().to_string()),
                "ovrd_pid": h.ovrd_pid.filter(|_| ovrd),
                "running": ovrd && h.ovrd_pid.is_some_and(alive),
                "config": ovrd.then(|| h.config.display().to_string()),
                "log": h.log.display().to_string(),
            })
        })
        .collect();
    let workloads: Vec<_> = s
        .workloads
        .iter()
        .map(|w| {
            json!({
                "name": w.name,
                "host": format!("h{}", w.host),
                "tenant": w.tenant,
                "network": w.network_name(),
                "namespace": w.namespace,
                "address": w.address,
                "mac": w.mac,
            })
        })
        .collect();
    let members: Vec<_> = s
        .etcd
        .iter()
        .flat_map(|c| &c.members)
        .map(|m| {
            json!({
                "name": m.name,
                "namespace": m.namespace,
                "underlay": m.underlay_ip,
                "pid": m.pid,
                "running": m.pid.is_some_and(alive),
                "log": m.log.display().to_string(),
            })
        })
        .collect();
    Ok(json!({
        "prefix": p.prefix,
        "dir": p.dir().display().to_string(),
        "up": !s.namespaces.is_empty(),
        "hosts": hosts,
        "workloads": workloads,
        "etcd": s.etcd.as_ref().map(|c| c.root_urls()).unwrap_or_default(),
        "etcd_members": members,
        "bgp": s.bgp.as_ref().map(super::evpn::Bgp::status),
        "services": super::chain::status(&s),
    }))
}

pub fn status(p: &Place, json: bool) -> Result<(), String> {
    if json {
        let v = status_json(p)?;
        outln!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    let Some(s) = load(p)? else {
        outln!("no lab is up");
        return Ok(());
    };
    // A host or an etcd member: name, namespace, underlay address, its process.
    let row = |name: &str, ns: &str, ip: &str, process: String| {
        let underlay = format!("{ip}/24");
        outln!("{name:<6} {ns:<16} {underlay:<18} {process}");
    };
    outln!("{:<6} {:<16} {:<18} ovrd", "host", "namespace", "underlay");
    for h in &s.hosts {
        let ovrd = if h.kernel {
            "none: the kernel's bridge + vxlan device (VNI 101)".into()
        } else {
            process(h.ovrd_pid, &h.log)
        };
        row(&h.name, &h.namespace, &h.underlay_ip, ovrd);
    }
    if let Some(c) = &s.etcd {
        outln!();
        outln!("etcd: {} (from this namespace)", c.root_urls().join(","));
        for m in &c.members {
            row(
                &m.name,
                &m.namespace,
                &m.underlay_ip,
                process(m.pid, &m.log),
            );
        }
    }
    outln!();
    outln!(
        "{:<10} {:<6} {:<8} {:<12} mac",
        "workload",
        "host",
        "tenant",
        "address"
    );
    for w in &s.workloads {
        outln!(
            "{:<10} h{:<5} t{:<7} {:<12} {}",
            w.name,
            w.host,
            w.tenant,
            w.address,
            w.mac
        );
    }
    Ok(())
}

/// Whether a process the lab started runs, and where its log is.
fn process(pid: Option<u32>, log: &std::path::Path) -> String {
    match pid {
        Some(p) if alive(p) => format!("running (pid {p}), log {}", log.display()),
        Some(p) => format!("NOT running (was pid {p}), log {}", log.display()),
        None => "not started".into(),
    }
}
