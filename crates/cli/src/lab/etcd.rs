//! The lab as a cluster: its etcd and the intent `up` and `workload` write into it.
//!
//! Each etcd member runs in a namespace of its own (`PREFIX-etcdI`), attached to the
//! underlay bridge at 192.0.2.(249+I), where the hosts' ovrds reach it. Every member
//! also has a point-to-point veth to the root namespace (`PREFIX-eI` there, link-local
//! 169.254.X.(4I-3)/30 on the root side and .(4I-2) on the member's; no other route), so
//! that tools in the root namespace (ovrctl, etcdctl, tests) reach each member directly
//! and keep reaching the cluster when one member is killed. X is derived from the prefix
//! (the next free one if another lab holds it).
//!
//! A host's ovrd owns its uplink (the kernel has no address there): each host reaches
//! etcd through a management veth of its own on the underlay bridge (`mgmt`,
//! 192.0.2.(100+H), kernel-owned, answering ARP only for its own address).

use super::ovrd::{alive, spawn_in, stop_all};
use super::{
    LabEncap, Place, State, Workload, add_address, add_namespace, run, save, topology, veth,
};
use ovr_cluster::etcd::{Endpoints, Etcd};
use ovr_cluster::keys::{self, Key};
use ovr_cluster::model::{Network, Port};
use ovr_cluster::store::Store;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const CLIENT_PORT: u16 = 2379;
const PEER_PORT: u16 = 2380;
/// The lease each host's ovrd publishes under (seconds): a host that dies leaves the
/// cluster within it.
pub const LEASE_TTL_S: u32 = 5;
/// How long `up` waits for etcd to elect a leader and for the hosts to join.
const READY_WITHIN: Duration = Duration::from_secs(20);
/// How long a request is retried (over every member, through an election).
const REQUEST_WITHIN: Duration = Duration::from_secs(10);
/// etcd can take ≈7 s to stop on SIGTERM: it gets this long, then SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Member {
    /// "e1".
    pub name: String,
    pub namespace: String,
    /// Its address on the underlay (where the hosts reach it).
    pub underlay_ip: String,
    /// Its link-local address, reachable from the root namespace.
    pub local_ip: String,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    pub pid: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cluster {
    pub members: Vec<Member>,
    /// How the networks' hosts carry them to each other.
    pub encap: LabEncap,
}

fn url(ip: &str) -> String {
    format!("http://{ip}:{CLIENT_PORT}")
}

/// Runs a future to completion on a runtime of its own (ovrctl is otherwise synchronous).
fn block_on<F: Future>(f: F) -> Result<F::Output, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    Ok(rt.block_on(f))
}

/// The third byte of the lab's link-local /24: derived from the prefix, the next one
/// whose addresses no interface of the root namespace holds.
fn link_local_net(p: &Place) -> Result<u8, String> {
    let used = run(None, &["ip", "-o", "-4", "addr", "show"])?;
    let hash = p.prefix.bytes().fold(2_166_136_261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    });
    (0..254u32)
        .map(|i| ((hash + i) % 254 + 1) as u8)
        .find(|x| !used.contains(&format!(" 169.254.{x}.")))
        .ok_or_else(|| "no free link-local /24 in 169.254.0.0/16 for the lab's etcd".into())
}

/// Starts `members` etcd members on the underlay `ul`, each reachable from the root
/// namespace, and waits until the cluster answers.
pub(super) fn start(
    p: &Place,
    s: &mut State,
    ul: &str,
    members: usize,
    encap: LabEncap,
) -> Result<(), String> {
    let x = link_local_net(p)?;
    let dir = p.dir().join("etcd");
    s.etcd = Some(Cluster {
        members: Vec::new(),
        encap,
    });
    for i in 1..=members {
        let name = format!("e{i}");
        let ns = format!("{}-etcd{i}", p.prefix);
        add_namespace(p, s, &ns)?;
        topology::bridge_port(p, (&ns, "uplink", ""), ul, &name)?;
        let underlay_ip = format!("192.0.2.{}", 249 + i);
        add_address(Some(&ns), &format!("{underlay_ip}/24"), "uplink")?;
        let root_link = format!("{}-{name}", p.prefix);
        s.root_links.push(root_link.clone());
        save(p, s)?;
        veth(p, (None, &root_link, ""), (Some(&ns), "root", ""))?;
        let (root_ip, local_ip) = (
            format!("169.254.{x}.{}", 4 * i - 3),
            format!("169.254.{x}.{}", 4 * i - 2),
        );
        add_address(None, &format!("{root_ip}/30"), &root_link)?;
        add_address(Some(&ns), &format!("{local_ip}/30"), "root")?;
        if let Some(c) = s.etcd.as_mut() {
            c.members.push(Member {
                data_dir: dir.join(&name),
                log: dir.join(format!("{name}.log")),
                name,
                namespace: ns,
                underlay_ip,
                local_ip,
                pid: None,
            });
        }
        save(p, s)?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let c = s.etcd.clone().ok_or("no cluster")?;
    let initial: Vec<String> = c
        .members
        .iter()
        .map(|m| format!("{}=http://{}:{PEER_PORT}", m.name, m.underlay_ip))
        .collect();
    let token = format!("ovrlab-{}-{}", p.prefix, std::process::id());
    for (i, m) in c.members.iter().enumerate() {
        let peer = format!("http://{}:{PEER_PORT}", m.underlay_ip);
        let clients = format!("{},{}", url(&m.underlay_ip), url(&m.local_ip));
        let args: Vec<String> = [
            "--name",
            &m.name,
            "--data-dir",
            &m.data_dir.to_string_lossy(),
            "--listen-client-urls",
            &clients,
            "--advertise-client-urls",
            &clients,
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
            "--initial-cluster",
            &initial.join(","),
            "--initial-cluster-token",
            &token,
            "--initial-cluster-state",
            "new",
            "--heartbeat-interval",
            "50",
            "--election-timeout",
            "500",
            "--logger",
            "zap",
        ]
        .map(String::from)
        .into();
        let (pid, _) = spawn_in(&m.namespace, "etcd", &args, &m.log)?;
        if let Some(c) = s.etcd.as_mut() {
            c.members[i].pid = Some(pid);
        }
        save(p, s)?;
    }
    c.wait_ready()
}

/// Host `h`'s way to etcd: a management veth on the underlay bridge (its uplink is its
/// ovrd's).
pub(super) fn reach(p: &Place, ul: &str, h: usize) -> Result<(), String> {
    let ns = format!("{}-h{h}", p.prefix);
    let port = format!("m{h}");
    // The kernel answers ARP for its management address on `mgmt` only (not on the
    // uplink, whose frames are ovrd's).
    for knob in ["arp_ignore=1", "arp_announce=2"] {
        run(
            Some(&ns),
            &["sysctl", "-qw", &format!("net.ipv4.conf.all.{knob}")],
        )?;
    }
    topology::bridge_port(p, (&ns, "mgmt", ""), ul, &port)?;
    let ip = format!("192.0.2.{}/24", 100 + h);
    run(Some(&ns), &["ip", "addr", "add", &ip, "dev", "mgmt"]).map(drop)
}

impl Cluster {
    /// Client URLs reachable from the root namespace.
    pub fn root_urls(&self) -> Vec<String> {
        self.members.iter().map(|m| url(&m.local_ip)).collect()
    }

    /// What a host's ovrd is started with to join the cluster.
    pub(super) fn ovrd_args(&self, host: &str) -> Vec<String> {
        let urls: Vec<String> = self.members.iter().map(|m| url(&m.underlay_ip)).collect();
        vec![
            "--etcd".into(),
            urls.join(","),
            "--host-name".into(),
            host.into(),
            "--etcd-lease-ttl".into(),
            LEASE_TTL_S.to_string(),
        ]
    }

    /// Runs `f` with a client of one member after another (from the root namespace)
    /// until it succeeds: a member that is down, or without a leader, is passed over, and
    /// the round tried again (an election) until `within`. `f` must be idempotent.
    fn with<T, F: Future<Output = Result<T, String>>>(
        &self,
        within: Duration,
        f: impl Fn(Etcd) -> F,
    ) -> Result<T, String> {
        let t = Instant::now();
        block_on(async {
            loop {
                let mut last = String::new();
                for url in self.root_urls() {
                    let e = Endpoints {
                        urls: vec![url.clone()],
                        ..Endpoints::default()
                    };
                    let r = match Etcd::connect(&e).await {
                        Ok(etcd) => f(etcd).await,
                        Err(e) => Err(e.to_string()),
                    };
                    match r {
                        Ok(v) => return Ok(v),
                        Err(e) => last = format!("{url}: {e}"),
                    }
                }
                if t.elapsed() > within {
                    return Err(last);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })?
    }

    /// Waits until the cluster answers a (linearizable) read: a leader is elected.
    fn wait_ready(&self) -> Result<(), String> {
        let r = self.with(READY_WITHIN, |e| async move {
            e.list(keys::PREFIX).await.map_err(|e| e.to_string())?;
            Ok(())
        });
        r.map_err(|e| {
            let dead: Vec<String> = self
                .members
                .iter()
                .filter(|m| !m.pid.is_some_and(alive))
                .map(|m| format!("{} (log {})", m.name, m.log.display()))
                .collect();
            format!(
                "etcd did not answer within {} s: {e}; members not running: {}",
                READY_WITHIN.as_secs(),
                if dead.is_empty() {
                    "none".into()
                } else {
                    dead.join(", ")
                }
            )
        })
    }

    /// The networks t1..tN and a port per workload of an ovr host (and with
    /// `--service-chain`, the chain's networks, ports, service, chain and policy).
    pub(super) fn write_intent(&self, s: &State) -> Result<(), String> {
        let mut kvs = Vec::new();
        for t in 1..=s.settings.tenants {
            kvs.push((Key::Network(format!("t{t}")), network(t, self.encap)?));
        }
        for w in s.workloads.iter().filter(|w| on_ovr_host(s, w)) {
            kvs.push(port_kv(w)?);
        }
        if s.chain.is_some() {
            for (k, v) in super::chain::intent(s) {
                let key = Key::parse(&k)?;
                let bytes = ovr_cluster::intent::check(&key, &v)?;
                kvs.push((key, bytes));
            }
        }
        let kvs = &kvs;
        self.with(REQUEST_WITHIN, |e| async move {
            for (k, v) in kvs {
                e.put(&k.to_string(), v.clone(), 0)
                    .await
                    .map_err(|e| format!("{k}: {e}"))?;
            }
            Ok(())
        })
    }

    /// Writes workload `w`'s port.
    pub(super) fn put_port(&self, w: &Workload) -> Result<(), String> {
        let (k, v) = port_kv(w)?;
        let (k, v) = (&k.to_string(), &v);
        self.with(REQUEST_WITHIN, |e| async move {
            e.put(k, v.clone(), 0).await.map_err(|e| e.to_string())
        })
    }

    /// Deletes workload `w`'s port.
    pub(super) fn delete_port(&self, w: &Workload) -> Result<(), String> {
        let k = port_key(w);
        let k = &k.to_string();
        self.with(REQUEST_WITHIN, |e| async move {
            e.delete(k).await.map_err(|e| e.to_string())
        })
    }

    /// Waits until every ovr host has joined (its host key) and published every one of
    /// its workloads as an endpoint.
    pub(super) fn wait_converged(&self, s: &State) -> Result<(), String> {
        let mut want: Vec<String> = s
            .hosts
            .iter()
            .filter(|h| !h.kernel)
            .map(|h| Key::Host(h.name.clone()).to_string())
            .collect();
        want.extend(s.workloads.iter().filter(|w| on_ovr_host(s, w)).map(|w| {
            Key::Endpoint {
                host: format!("h{}", w.host),
                name: w.name.clone(),
            }
            .to_string()
        }));
        want.extend(super::chain::endpoints(s));
        let t = Instant::now();
        loop {
            let have = self.with(REQUEST_WITHIN, |e| async move {
                let snap = e.list(keys::PREFIX).await.map_err(|e| e.to_string())?;
                Ok(snap.kvs.into_iter().map(|kv| kv.key).collect::<Vec<_>>())
            })?;
            let missing: Vec<&String> = want.iter().filter(|k| !have.contains(k)).collect();
            if missing.is_empty() {
                return Ok(());
            }
            if t.elapsed() > READY_WITHIN {
                return Err(format!(
                    "the hosts did not join the cluster within {} s; missing in etcd: {}",
                    READY_WITHIN.as_secs(),
                    missing
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops every member (SIGTERM at once, SIGKILL after a grace).
    pub(super) fn stop(&self) {
        let pids: Vec<u32> = self.members.iter().filter_map(|m| m.pid).collect();
        stop_all(&pids, STOP_GRACE);
    }
}

fn on_ovr_host(s: &State, w: &Workload) -> bool {
    s.hosts.get(w.host - 1).is_some_and(|h| !h.kernel)
}

/// Tenant `t`'s network: VNI 100+t, 10.1.0.0/24 with its gateway at 10.1.0.1.
fn network(t: usize, encap: LabEncap) -> Result<Vec<u8>, String> {
    let encap = match encap {
        LabEncap::Vxlan => "vxlan",
        LabEncap::MplsUdp => "mpls_udp",
        LabEncap::MplsGre => "mpls_gre",
    };
    let n: Network = serde_json::from_value(serde_json::json!({
        "vni": 100 + t,
        "subnets": ["10.1.0.0/24"],
        "gateways": ["10.1.0.1/24"],
        "encap": encap,
        "flood": true,
    }))
    .map_err(|e| format!("network t{t}: {e}"))?;
    serde_json::to_vec(&n).map_err(|e| e.to_string())
}

fn port_key(w: &Workload) -> Key {
    Key::Port {
        host: format!("h{}", w.host),
        name: w.name.clone(),
    }
}

/// Workload `w`'s port: its network, MAC, address and the host's side of its veth.
fn port_kv(w: &Workload) -> Result<(Key, Vec<u8>), String> {
    let port: Port = serde_json::from_value(serde_json::json!({
        "network": w.network_name(),
        "mac": w.mac,
        "ips": [w.address],
        "interface": w.host_interface(),
        "metadata": {"made_by": "ovrctl lab"},
    }))
    .map_err(|e| format!("port {}: {e}", w.name))?;
    let v = serde_json::to_vec(&port).map_err(|e| e.to_string())?;
    Ok((port_key(w), v))
}
