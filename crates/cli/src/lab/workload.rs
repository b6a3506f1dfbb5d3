//! `ovrctl lab workload add|del`: workloads that come and go while the lab runs, as a
//! cluster's do. The lab makes the namespace and veth and writes the port's intent to
//! etcd; it never talks to an ovrd: the host's agent sees the port and attaches it, and
//! every other host learns the endpoint it publishes.

use super::topology::add_workload;
use super::{Place, load, run, save};

#[derive(clap::Subcommand)]
pub enum Workload {
    /// Add a workload on a host in a tenant (the next free address of the tenant's
    /// 10.1.0.0/24) and print its name.
    Add {
        /// The host's number (N of hN).
        #[arg(long)]
        host: usize,
        /// The tenant's number (T of tT).
        #[arg(long)]
        tenant: usize,
    },
    /// Delete a workload: its port, its namespace and veth.
    Del { name: String },
}

pub fn workload(p: &Place, what: &Workload) -> Result<(), String> {
    match what {
        Workload::Add { host, tenant } => add(p, *host, *tenant).map(|name| outln!("{name}")),
        Workload::Del { name } => del(p, name),
    }
}

/// The lab's cluster, or why workloads cannot come and go in it.
fn cluster_of(s: &super::State) -> Result<super::etcd::Cluster, String> {
    s.etcd.clone().ok_or_else(|| {
        "this lab is static (`up --static`): its hosts' configurations are fixed files; \
         workloads come and go only in a cluster lab"
            .into()
    })
}

/// Adds workload `hH-tT-wN` (N: one more than the host's highest in the tenant); its name.
fn add(p: &Place, host: usize, tenant: usize) -> Result<String, String> {
    let mut s = load(p)?.ok_or("no lab is up: `ovrctl lab up` first")?;
    let c = cluster_of(&s)?;
    if !s
        .hosts
        .iter()
        .any(|h| h.name == format!("h{host}") && !h.kernel)
    {
        return Err(format!("no ovr host h{host} (see `ovrctl lab status`)"));
    }
    if tenant == 0 || tenant > s.settings.tenants {
        return Err(format!(
            "no tenant {tenant}: the lab has tenants 1 to {}",
            s.settings.tenants
        ));
    }
    let index = 1 + s
        .workloads
        .iter()
        .filter(|w| w.host == host && w.tenant == tenant)
        .map(|w| w.index)
        .max()
        .unwrap_or(0);
    if index > 255 {
        return Err(format!("h{host} has 255 workloads in t{tenant} already"));
    }
    let taken: Vec<&str> = s
        .workloads
        .iter()
        .filter(|w| w.tenant == tenant)
        .map(|w| w.address.as_str())
        .collect();
    let address = next_free(&taken, 10 * host + index)
        .ok_or_else(|| format!("no free address left in tenant {tenant}'s 10.1.0.0/24"))?;
    add_workload(p, &mut s, (host, tenant, index), &address)?;
    let w = s.workloads.last().cloned().ok_or("no workload")?;
    if let Err(e) = c.put_port(&w) {
        // No port, no workload: what was made goes.
        let last = s.workloads.len() - 1;
        let _ = remove(p, &mut s, last);
        return Err(format!("{}: its port could not be written: {e}", w.name));
    }
    Ok(w.name)
}

/// The first address of 10.1.0.2-254 no one in `taken` holds, from `.from` on (and
/// around).
fn next_free(taken: &[&str], from: usize) -> Option<String> {
    let from = from.clamp(2, 254);
    (from..=254)
        .chain(2..from)
        .map(|i| format!("10.1.0.{i}"))
        .find(|a| !taken.contains(&a.as_str()))
}

/// Deletes workload `name`: its port first (its host detaches it), then its namespace
/// (the veth goes with it) and its place in the lab's state.
fn del(p: &Place, name: &str) -> Result<(), String> {
    let mut s = load(p)?.ok_or("no lab is up: `ovrctl lab up` first")?;
    let c = cluster_of(&s)?;
    let i = s
        .workloads
        .iter()
        .position(|w| w.name == name)
        .ok_or_else(|| format!("no workload named '{name}' (see `ovrctl lab status`)"))?;
    c.delete_port(&s.workloads[i])?;
    remove(p, &mut s, i)
}

/// Removes workload `i`: its namespace (the veth goes with it) and its entry.
fn remove(p: &Place, s: &mut super::State, i: usize) -> Result<(), String> {
    let w = s.workloads.remove(i);
    s.namespaces.retain(|n| *n != w.namespace);
    let r = run(None, &["ip", "netns", "del", &w.namespace]).map(drop);
    save(p, s).and(r)
}

#[cfg(test)]
mod tests {
    use super::next_free;

    #[test]
    fn the_next_free_address_starts_at_the_usual_one_and_wraps() {
        assert_eq!(next_free(&[], 32).as_deref(), Some("10.1.0.32"));
        assert_eq!(
            next_free(&["10.1.0.32", "10.1.0.33"], 32).as_deref(),
            Some("10.1.0.34")
        );
        assert_eq!(next_free(&["10.1.0.254"], 300).as_deref(), Some("10.1.0.2"));
        let all: Vec<String> = (2..=254).map(|i| format!("10.1.0.{i}")).collect();
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        assert_eq!(next_free(&all, 11), None);
    }
}
