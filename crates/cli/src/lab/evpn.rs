//! The lab over BGP EVPN (`up --evpn`): a gobgpd beside each host's ovrd (in the host's
//! namespace, its API on that namespace's 127.0.0.1:50051) and a route reflector, FRR's
//! bgpd (with zebra) in a namespace of its own on the underlay at 192.0.2.240. Each
//! host's speaker peers with the reflector from its management address (192.0.2.(100+H),
//! see `etcd::reach`), and its ovrd runs with `--reach evpn`: etcd carries the intent
//! (networks, ports), and everything the hosts know of each other comes through BGP.
//!
//! With `--kernel-host`, the kernel host runs FRR too (zebra + bgpd, `advertise-all-vni`,
//! a client of the reflector from its underlay address) over its bridge and VXLAN device
//! (no learning, ARP suppression): it learns the ovr hosts' workloads from BGP alone.
//!
//! FRR runs as user frr (it refuses root here) with every path in a directory of its own
//! under /tmp (the lab's directory under /run is root's).

use super::ovrd::{alive, spawn_in, stop_all};
use super::{Place, State, add_address, add_namespace, run, save, topology};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const ASN: u32 = 65000;
/// The reflector's address on the underlay.
pub const REFLECTOR: &str = "192.0.2.240";
/// Where each host's gobgpd serves its API (inside the host's namespace).
pub const SPEAKER_API: &str = "127.0.0.1:50051";
const FRR: &str = "/usr/lib/frr";
const STOP_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Speaker {
    pub host: String,
    pub pid: Option<u32>,
    pub log: PathBuf,
}

/// FRR (zebra + bgpd) in a namespace, with its run directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Frr {
    pub namespace: String,
    /// FRR's run directory (config, pid files, sockets, logs).
    pub frr_dir: PathBuf,
    pub zebra_pid: Option<u32>,
    pub bgpd_pid: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Bgp {
    /// The route reflector.
    #[serde(flatten)]
    pub reflector: Frr,
    /// The kernel host's FRR (`--kernel-host`).
    #[serde(default)]
    pub kernel: Option<Frr>,
    pub speakers: Vec<Speaker>,
}

/// The start of a bgpd.conf of AS `ASN`.
fn bgpd_head(name: &str, router_id: &str) -> String {
    format!(
        "frr defaults datacenter\nhostname {name}\nrouter bgp {ASN}\n bgp router-id {router_id}\n \
         no bgp ebgp-requires-policy\n no bgp default ipv4-unicast\n"
    )
}

/// The reflector's configuration: every peer (the ovr hosts' management addresses, the
/// kernel host's) a route-reflector client for EVPN.
fn reflector_conf(peers: &[String]) -> String {
    let mut c = bgpd_head("reflector", REFLECTOR);
    for n in peers {
        c += &format!(" neighbor {n} remote-as {ASN}\n neighbor {n} timers 3 9\n");
    }
    c += " address-family l2vpn evpn\n";
    for n in peers {
        c += &format!("  neighbor {n} activate\n  neighbor {n} route-reflector-client\n");
    }
    c + " exit-address-family\n"
}

/// The kernel host's configuration: a client of the reflector advertising every VNI
/// of its bridges (type 2 for the MACs its bridge learns, type 3 per VNI).
fn kernel_conf(address: &str) -> String {
    let mut c = bgpd_head("kernel-host", address);
    let n = REFLECTOR;
    c += &format!(" neighbor {n} remote-as {ASN}\n neighbor {n} timers 3 9\n");
    c += &format!(" address-family l2vpn evpn\n  neighbor {n} activate\n  advertise-all-vni\n");
    c + " exit-address-family\n"
}

/// The reflector's namespace and FRR (its clients: `peers`); the hosts' speakers start
/// with `speaker`, the kernel host's FRR with `kernel_host`.
pub(super) fn start(p: &Place, s: &mut State, ul: &str, peers: &[String]) -> Result<(), String> {
    let ns = format!("{}-rr", p.prefix);
    add_namespace(p, s, &ns)?;
    topology::bridge_port(p, (&ns, "eth0", ""), ul, "rr")?;
    add_address(Some(&ns), &format!("{REFLECTOR}/24"), "eth0")?;
    let dir = PathBuf::from(format!("/tmp/ovr-lab-{}-frr", p.prefix));
    s.bgp = Some(Bgp {
        reflector: Frr::new(&ns, &dir),
        kernel: None,
        speakers: Vec::new(),
    });
    save(p, s)?;
    // The reflector listens (on 179 in its namespace): the kernel host's bgpd connects to
    // it; the hosts' gobgpd are connected to.
    start_frr(p, s, &reflector_conf(peers), "179", |b| &mut b.reflector)
}

/// FRR on the kernel host (namespace `ns`, underlay address `address`).
pub(super) fn kernel_host(p: &Place, s: &mut State, ns: &str, address: &str) -> Result<(), String> {
    let dir = PathBuf::from(format!("/tmp/ovr-lab-{}-frr-kernel", p.prefix));
    if let Some(b) = &mut s.bgp {
        b.kernel = Some(Frr::new(ns, &dir));
    }
    save(p, s)?;
    start_frr(p, s, &kernel_conf(address), "0", |b| {
        b.kernel.get_or_insert_with(|| Frr::new("", Path::new("")))
    })
}

impl Frr {
    fn new(ns: &str, dir: &Path) -> Self {
        Frr {
            namespace: ns.to_string(),
            frr_dir: dir.to_path_buf(),
            zebra_pid: None,
            bgpd_pid: None,
        }
    }

    fn stop(&self) {
        let pids: Vec<u32> = self.bgpd_pid.into_iter().chain(self.zebra_pid).collect();
        stop_all(&pids, STOP_GRACE);
        let _ = std::fs::remove_dir_all(&self.frr_dir);
    }

    fn running(&self) -> bool {
        self.bgpd_pid.is_some_and(alive) && self.zebra_pid.is_some_and(alive)
    }
}

/// Starts zebra, then bgpd with `conf` (listening on `bgp_port`, 0: only connecting
/// out), for the instance `which` picks; their pids are saved as they start.
fn start_frr(
    p: &Place,
    s: &mut State,
    conf: &str,
    bgp_port: &str,
    which: impl Fn(&mut Bgp) -> &mut Frr,
) -> Result<(), String> {
    let Some(b) = &mut s.bgp else {
        return Err("no BGP in this lab".into());
    };
    let f = which(b).clone();
    let dir = f.frr_dir.clone();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("zebra.conf"), "hostname zebra\n")
        .and_then(|()| std::fs::write(dir.join("bgpd.conf"), conf))
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let d = dir.to_string_lossy().into_owned();
    run(None, &["chown", "-R", "frr:frr", &d])?;
    run(None, &["chmod", "755", &d])?;
    let zebra = frr_daemon(&f.namespace, &dir, "zebra", &[])?;
    if let Some(b) = &mut s.bgp {
        which(b).zebra_pid = Some(zebra);
    }
    save(p, s)?;
    let zserv = dir.join("zserv.api");
    let t = Instant::now();
    while !zserv.exists() {
        if t.elapsed() > Duration::from_secs(10) {
            return Err(format!("FRR's zebra did not start: {d}/zebra.log"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let bgpd = frr_daemon(&f.namespace, &dir, "bgpd", &["-p", bgp_port])?;
    if let Some(b) = &mut s.bgp {
        which(b).bgpd_pid = Some(bgpd);
    }
    save(p, s)
}

fn frr_daemon(ns: &str, dir: &Path, daemon: &str, extra: &[&str]) -> Result<u32, String> {
    let d = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let mut args = vec![
        "-f".to_string(),
        d(&format!("{daemon}.conf")),
        "-i".into(),
        d(&format!("{daemon}.pid")),
        "-z".into(),
        d("zserv.api"),
        "--vty_socket".into(),
        dir.to_string_lossy().into_owned(),
        "-P".into(),
        "0".into(),
        "--log".into(),
        format!("file:{}", d(&format!("{daemon}.log"))),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let (pid, _) = spawn_in(
        ns,
        &format!("{FRR}/{daemon}"),
        &args,
        &dir.join(format!("{daemon}.err")),
    )?;
    Ok(pid)
}

/// Host `h`'s gobgpd, and the arguments its ovrd gets to drive it.
pub(super) fn speaker(p: &Place, s: &mut State, h: usize) -> Result<Vec<String>, String> {
    let host = &s.hosts[h - 1];
    let log = p.dir().join(format!("{}-gobgpd.log", host.name));
    let args: Vec<String> = ["--api-hosts", SPEAKER_API, "--pprof-disable", "-p"]
        .map(String::from)
        .to_vec();
    let (pid, _) = spawn_in(&host.namespace, "gobgpd", &args, &log)?;
    let name = host.name.clone();
    if let Some(b) = &mut s.bgp {
        b.speakers.push(Speaker {
            host: name,
            pid: Some(pid),
            log,
        });
    }
    save(p, s)?;
    Ok(vec![
        "--bgp".into(),
        format!("http://{SPEAKER_API}"),
        "--bgp-asn".into(),
        ASN.to_string(),
        "--bgp-peer".into(),
        REFLECTOR.into(),
        "--bgp-address".into(),
        format!("192.0.2.{}", 100 + h),
        "--reach".into(),
        "evpn".into(),
    ])
}

impl Bgp {
    /// Stops the speakers and FRR (after the ovrds).
    pub(super) fn stop(&self) {
        let pids: Vec<u32> = self.speakers.iter().filter_map(|x| x.pid).collect();
        stop_all(&pids, STOP_GRACE);
        if let Some(k) = &self.kernel {
            k.stop();
        }
        self.reflector.stop();
    }

    /// What `lab status --json` shows of BGP.
    pub fn status(&self) -> serde_json::Value {
        let running = |p: Option<u32>| p.is_some_and(alive);
        let r = &self.reflector;
        serde_json::json!({
            "reflector": {
                "namespace": r.namespace,
                "address": REFLECTOR,
                "asn": ASN,
                "running": r.running(),
                "vty_socket_dir": r.frr_dir.display().to_string(),
            },
            "kernel_host": self.kernel.as_ref().map(|k| serde_json::json!({
                "namespace": k.namespace,
                "running": k.running(),
                "vty_socket_dir": k.frr_dir.display().to_string(),
            })),
            "speakers": self.speakers.iter().map(|x| serde_json::json!({
                "host": x.host,
                "pid": x.pid,
                "running": running(x.pid),
                "api": format!("http://{SPEAKER_API}"),
                "log": x.log.display().to_string(),
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_reflector_serves_every_host_as_a_client_for_evpn() {
        let c = super::reflector_conf(&["192.0.2.101".into(), "192.0.2.3".into()]);
        assert!(c.contains(" neighbor 192.0.2.3 remote-as 65000\n"));
        assert!(c.contains("  neighbor 192.0.2.101 route-reflector-client\n"));
        assert!(c.starts_with("frr defaults datacenter\n"));
        let k = super::kernel_conf("192.0.2.3");
        assert!(k.contains(" bgp router-id 192.0.2.3\n") && k.contains("  advertise-all-vni\n"));
    }
}
