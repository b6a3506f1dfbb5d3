//! `ovrctl lab`: a multi-host overlay on one machine. Each host is a network namespace
//! running its own ovrd; hosts meet on an underlay bridge (in a namespace of its own);
//! each host has workloads (namespaces behind veth pairs) in one or more tenants. Every
//! tenant uses the same subnet, 10.1.0.0/24 with gateway 10.1.0.1, and the same workload
//! addresses: overlapping addresses stay apart because each tenant is its own network.
//!
//! By default the lab is a cluster (`etcd`): an etcd (one member, or `--etcd-members
//! N`) on the underlay; each host's ovrd gets only its base configuration (its underlay
//! interface) and joins the cluster; `up` writes the intent (a network per tenant, a port
//! per workload) into etcd, and each host's agent derives its tunnels, next hops, bridge
//! entries and flood lists from it. Workloads can come and go while the lab runs
//! (`workload`). `up --static` writes each host's whole configuration by hand instead
//! (`topology::host_config`), with no etcd: for one host alone, for comparisons, and for
//! the kernel host (`--kernel-host`), which has no agent and so stays out of clusters.
//!
//! What `up` creates is written to a state file first, so `down` removes exactly that
//! (by name and by process id), even after a failed `up`.
//!
//! Each ovrd pins its fast path under its own directory of one BPF filesystem that the
//! lab mounts in its directory (`DIR/bpf/hN`), so that it outlives the process (`lab
//! restart`, kill -9) as ovrd does on a real host; `down` unmounts it, which lets go of
//! whatever is still pinned.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

mod chain;
mod etcd;
mod evpn;
mod ovrd;
mod status;
mod topology;
mod workload;
pub use ovrd::restart;
use ovrd::{Pinning, alive, start_ovrd, stop};
pub use status::status;
use topology::{add_host, add_workload, base_config, host_config, kernel_host};
pub use workload::{Workload as WorkloadCmd, workload};

/// Where the lab keeps its state, configurations and logs by default.
pub const DIR: &str = "/run/ovr-lab";
/// The underlay carries jumbo frames, so that tenants keep a 1500-byte MTU inside the
/// tunnels (as clouds do).
const UNDERLAY_MTU: u32 = 9000;
/// Every namespace of the lab starts with this by default.
const PREFIX: &str = "ovrlab";

/// Where a lab lives: the prefix of its namespaces and the directory of its state, so that
/// several labs (the tests', a benchmark's) can be up side by side.
#[derive(clap::Args, Debug, Clone)]
pub struct Place {
    /// Prefix of the lab's namespaces (and temporary interfaces): 1 to 10 of a-z, 0-9, '-'.
    #[arg(long, global = true, default_value = PREFIX, value_parser = valid_prefix)]
    pub prefix: String,
    /// The lab's state, configurations and logs [default: /run/ovr-lab, or
    /// /run/ovr-lab-PREFIX with another --prefix].
    #[arg(long, global = true)]
    pub dir: Option<PathBuf>,
}

/// A lab prefix as typed (a usage error otherwise).
fn valid_prefix(p: &str) -> Result<String, String> {
    if p.is_empty()
        || p.len() > 10
        || !p
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(format!(
            "--prefix '{p}': 1 to 10 characters of a-z, 0-9 and '-'"
        ));
    }
    Ok(p.to_string())
}

impl Place {
    pub fn check(&self) -> Result<(), String> {
        valid_prefix(&self.prefix).map(|_| ())
    }

    pub fn dir(&self) -> PathBuf {
        match &self.dir {
            Some(d) => d.clone(),
            None if self.prefix == PREFIX => PathBuf::from(DIR),
            None => PathBuf::from(format!("{DIR}-{}", self.prefix)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum LabEncap {
    Vxlan,
    MplsUdp,
    MplsGre,
}

/// Which fast path the lab's ovrds run (`ovrd --offload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LabOffload {
    Xdp,
    Tc,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    /// "h1-t2-w1": host 1, tenant 2, workload 1.
    pub name: String,
    pub namespace: String,
    pub host: usize,
    pub tenant: usize,
    /// Its number within its host and tenant.
    pub index: usize,
    pub address: String,
    pub mac: String,
    /// Its network when not its tenant's (`ext`, with `up --service-chain`; tenant 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
}

impl Workload {
    /// Its network: its tenant's (`tT`), or the one it names.
    pub fn network_name(&self) -> String {
        self.network
            .clone()
            .unwrap_or_else(|| format!("t{}", self.tenant))
    }

    /// The host's side of its veth.
    pub fn host_interface(&self) -> String {
        match &self.network {
            Some(n) => format!("{n}w{}", self.index),
            None => topology::host_interface(self.tenant, self.index),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Host {
    pub name: String,
    pub namespace: String,
    pub underlay_ip: String,
    pub mac: String,
    pub config: PathBuf,
    pub log: PathBuf,
    pub ovrd_pid: Option<u32>,
    /// A host with the kernel's own bridge and vxlan device instead of ovr.
    #[serde(default)]
    pub kernel: bool,
    /// ovrd and its arguments, as started (`lab restart` starts it again so).
    #[serde(default)]
    pub ovrd_cmd: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    /// Namespaces in creation order (removed in reverse).
    pub namespaces: Vec<String>,
    pub hosts: Vec<Host>,
    pub workloads: Vec<Workload>,
    /// The BPF filesystem the ovrds pin their fast paths on (mounted by `up`).
    #[serde(default)]
    pub bpffs: Option<PathBuf>,
    /// Links the lab made in the root namespace (removed by name).
    #[serde(default)]
    pub root_links: Vec<String>,
    /// The cluster's etcd; none in a static lab (`up --static`).
    #[serde(default)]
    pub etcd: Option<etcd::Cluster>,
    /// BGP EVPN (`up --evpn`): the route reflector and the hosts' speakers.
    #[serde(default)]
    pub bgp: Option<evpn::Bgp>,
    /// How `up` was asked to make workloads (`workload add` makes them the same way).
    #[serde(default)]
    pub settings: Settings,
    /// The firewall's instances (`up --service-chain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<Vec<chain::Instance>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Settings {
    /// Tenants (networks t1..tN).
    pub tenants: usize,
    /// Workloads keep their checksum and segmentation offloads.
    pub workload_offloads: bool,
    /// GRO (NAPI) on the veth ends ovrd's XDP fast path redirects into.
    pub gro: bool,
}

fn state_path(p: &Place) -> PathBuf {
    p.dir().join("state.json")
}

fn save(p: &Place, s: &State) -> Result<(), String> {
    let dir = p.dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let text = serde_json::to_string_pretty(s).map_err(|e| e.to_string())?;
    std::fs::write(state_path(p), text).map_err(|e| format!("{}: {e}", state_path(p).display()))
}

pub fn load(p: &Place) -> Result<Option<State>, String> {
    p.check()?;
    match std::fs::read_to_string(state_path(p)) {
        Ok(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| format!("{}: {e}", state_path(p).display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", state_path(p).display())),
    }
}

/// `ip addr add CIDR dev DEV`, in namespace `ns` (None: the root namespace).
fn add_address(ns: Option<&str>, cidr: &str, dev: &str) -> Result<(), String> {
    run(ns, &["ip", "addr", "add", cidr, "dev", dev]).map(|_| ())
}

/// Runs a command (in a namespace if given), failing with its stderr.
fn run(ns: Option<&str>, args: &[&str]) -> Result<String, String> {
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).args(args);
            c
        }
        None => {
            let mut c = Command::new(args[0]);
            c.args(&args[1..]);
            c
        }
    };
    let out = c.output().map_err(|e| format!("{}: {e}", args[0]))?;
    if !out.status.success() {
        return Err(format!(
            "{}{}: {}",
            ns.map(|n| format!("[{n}] ")).unwrap_or_default(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn mac(kind: u8, a: usize, b: usize, c: usize) -> String {
    format!("02:{kind:02x}:00:{a:02x}:{b:02x}:{c:02x}")
}

/// One end of a veth pair: its namespace (None: the root namespace), name and MAC (empty:
/// the kernel's).
type End<'a> = (Option<&'a str>, &'a str, &'a str);

/// A veth pair with one queue each way, ends named and placed, and up.
fn veth(p: &Place, a: End, b: End) -> Result<(), String> {
    let (ta, tb) = (format!("{}tmpa", p.prefix), format!("{}tmpb", p.prefix));
    let (ta, tb) = (ta.as_str(), tb.as_str());
    run(
        None,
        &[
            "ip",
            "link",
            "add",
            ta,
            "numrxqueues",
            "1",
            "numtxqueues",
            "1",
            "type",
            "veth",
            "peer",
            "name",
            tb,
            "numrxqueues",
            "1",
            "numtxqueues",
            "1",
        ],
    )?;
    for (tmp, (ns, name, mac)) in [(ta, a), (tb, b)] {
        if let Some(ns) = ns {
            run(None, &["ip", "link", "set", tmp, "netns", ns])?;
        }
        run(ns, &["ip", "link", "set", tmp, "name", name])?;
        if !mac.is_empty() {
            run(ns, &["ip", "link", "set", name, "address", mac])?;
        }
        run(ns, &["ip", "link", "set", name, "up"])?;
    }
    Ok(())
}

fn add_namespace(p: &Place, s: &mut State, name: &str) -> Result<(), String> {
    run(None, &["ip", "netns", "add", name])?;
    s.namespaces.push(name.to_string());
    save(p, s)?;
    run(Some(name), &["ip", "link", "set", "lo", "up"])?;
    run(
        Some(name),
        &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
    )?;
    run(
        Some(name),
        &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
    )?;
    Ok(())
}

#[derive(clap::Args)]
pub struct Up {
    /// Hosts: network namespaces, each with its own ovrd (1 to 9).
    #[arg(long, default_value_t = 2, value_parser = one_to_nine())]
    pub hosts: usize,
    /// Tenants: networks that all use 10.1.0.0/24 and the same workload addresses (1 to 9).
    #[arg(long, default_value_t = 2, value_parser = one_to_nine())]
    pub tenants: usize,
    /// Workloads per host and tenant (1 to 9).
    #[arg(long, default_value_t = 1, value_parser = one_to_nine())]
    pub workloads: usize,
    /// How hosts carry tenant traffic to each other.
    #[arg(long, value_enum, default_value_t = LabEncap::Vxlan)]
    pub encap: LabEncap,
    /// Add a host without ovr (the kernel's bridge + vxlan device, tenant 1, VNI 101,
    /// one workload) that ovr's hosts exchange traffic with. With --static (it has no
    /// agent, so it is not in a cluster), or with --evpn (FRR on it, `advertise-all-vni`).
    #[arg(long)]
    pub kernel_host: bool,
    /// Workloads send complete frames (`ethtool -K eth0 tx off`: no checksum or
    /// segmentation offload), as `--ovrd-arg=--driver=af-xdp` requires.
    #[arg(long)]
    pub no_workload_offloads: bool,
    /// Every ovrd with its fast path: `--offload` or `--offload=xdp` (`ovrd --offload
    /// xdp`, and NAPI (GRO) on the veth ends it redirects frames into: the workloads'
    /// eth0 and the underlay bridge's ports), or `--offload=tc` (docs/io.md, "The fast path").
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "xdp")]
    pub offload: Option<LabOffload>,
    /// No cluster: each host's ovrd gets its whole configuration (networks, tunnels, next
    /// hops, bridge entries, flood lists) in a static file, and no etcd is started.
    #[arg(long = "static")]
    pub static_: bool,
    /// etcd members (1 to 5), each in a namespace of its own on the underlay (3: one can
    /// be killed and the cluster goes on).
    #[arg(long, default_value_t = 1, conflicts_with = "static_",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=5))]
    pub etcd_members: usize,
    /// The hosts learn each other through BGP EVPN alone: a gobgpd beside each ovrd, an
    /// FRR bgpd route reflector in a namespace of its own; etcd carries only the intent
    /// (each ovrd runs with `--reach evpn`; docs/bgp.md).
    #[arg(long, conflicts_with = "static_")]
    pub evpn: bool,
    /// A service chain (needs 2 hosts or more, a cluster over VXLAN): a network `ext`
    /// (10.99.0.0/24, a workload per host), a firewall with an instance on h1 and one on
    /// h2 (namespaces with forwarding and nftables; `status --json` lists them under
    /// `services`), and tenant 1's traffic to `ext` steered through it (docs/chains.md);
    /// --functions for a chain of several.
    #[arg(long)]
    pub service_chain: bool,
    /// With --service-chain: the hosts that run an instance of the firewall (`fw-hN`
    /// on host N), e.g. `--instance-hosts 3` for a single instance on h3.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2], requires = "service_chain",
          value_parser = one_to_nine())]
    pub instance_hosts: Vec<usize>,
    /// With --service-chain: how many functions the chain has, in this order (`fw`,
    /// `fw2`, ...), each with an instance on every host of --instance-hosts.
    #[arg(long, default_value_t = 1, requires = "service_chain",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4))]
    pub functions: usize,
    /// An argument for every host's ovrd (repeat for several), e.g.
    /// `--ovrd-arg=--driver=af-packet` or `--ovrd-arg=--busy-poll`.
    #[arg(long = "ovrd-arg", allow_hyphen_values = true)]
    pub ovrd_args: Vec<String>,
}

fn one_to_nine() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=9)
}

impl Up {
    /// What the arguments cannot ask together (a usage error).
    pub fn check(&self) -> Result<(), String> {
        if self.kernel_host && self.encap != LabEncap::Vxlan {
            return Err(
                "--kernel-host needs --encap vxlan (the kernel here has no MPLS or GRE)".into(),
            );
        }
        if self.kernel_host && !self.static_ && !self.evpn {
            return Err(
                "--kernel-host needs --static or --evpn (the kernel host has no agent: it is not \
                 in the cluster; with --evpn it speaks BGP through FRR)"
                    .into(),
            );
        }
        if self.service_chain
            && (self.static_ || self.evpn || self.encap != LabEncap::Vxlan || self.hosts < 2)
        {
            return Err(
                "--service-chain needs a cluster (no --static, no --evpn) over --encap vxlan \
                 and --hosts 2 or more"
                    .into(),
            );
        }
        if let Some(h) = self.instance_hosts.iter().find(|h| **h > self.hosts) {
            return Err(format!(
                "--instance-hosts: there is no host {h} (--hosts {})",
                self.hosts
            ));
        }
        let mut hosts = self.instance_hosts.clone();
        hosts.sort_unstable();
        hosts.dedup();
        if hosts.len() != self.instance_hosts.len() {
            return Err("--instance-hosts: a host is named twice".into());
        }
        Ok(())
    }
}

pub fn up(p: &Place, a: &Up, ovrd: &Path, json: bool) -> Result<(), String> {
    if load(p)?.is_some() {
        return Err(format!(
            "a lab is up already ({}): `ovrctl lab down` first",
            p.dir().display()
        ));
    }
    a.check()?;
    let mut s = State::default();
    save(p, &s)?;
    let r = build(p, &mut s, a, ovrd);
    if r.is_err() {
        // Under --json stdout stays for the answer: the failure is the error object.
        let _ = teardown(p, json).map(|report| {
            if !json {
                out!("{report}");
            }
        });
    }
    r
}

fn build(p: &Place, s: &mut State, a: &Up, ovrd: &Path) -> Result<(), String> {
    s.settings = Settings {
        tenants: a.tenants,
        workload_offloads: !a.no_workload_offloads,
        gro: a.offload == Some(LabOffload::Xdp),
    };
    let ul = format!("{}-underlay", p.prefix);
    add_namespace(p, s, &ul)?;
    run(Some(&ul), &["ip", "link", "add", "br0", "type", "bridge"])?;
    run(Some(&ul), &["ip", "link", "set", "br0", "up"])?;
    if !a.static_ {
        etcd::start(p, s, &ul, a.etcd_members, a.encap)?;
    }
    for h in 1..=a.hosts {
        add_host(p, s, &ul, h, false)?;
        if !a.static_ {
            etcd::reach(p, &ul, h)?;
        }
        for t in 1..=a.tenants {
            for w in 1..=a.workloads {
                add_workload(p, s, (h, t, w), &format!("10.1.0.{}", 10 * h + w))?;
            }
        }
    }
    if a.service_chain {
        for h in 1..=a.hosts {
            chain::add_ext_workload(p, s, h)?;
        }
        for f in 1..=a.functions {
            for h in &a.instance_hosts {
                chain::add_instance(p, s, f, *h)?;
            }
        }
    }
    if a.kernel_host {
        kernel_host(p, s, &ul, a.hosts + 1, a.evpn)?;
    }
    if a.evpn {
        let mut peers: Vec<String> = (1..=a.hosts)
            .map(|h| format!("192.0.2.{}", 100 + h))
            .collect();
        let kernel = a.kernel_host.then(|| s.hosts[a.hosts].clone());
        peers.extend(kernel.iter().map(|k| k.underlay_ip.clone()));
        evpn::start(p, s, &ul, &peers)?;
        if let Some(k) = kernel {
            evpn::kernel_host(p, s, &k.namespace, &k.underlay_ip)?;
        }
    }
    if let Some(c) = &s.etcd {
        // The intent, before any ovrd starts: each finds its ports at its first list.
        c.write_intent(s)?;
    }
    let offload_arg = a.offload.map(|o| match o {
        LabOffload::Xdp => "--offload=xdp",
        LabOffload::Tc => "--offload=tc",
    });
    let bpffs = p.dir().join("bpf");
    std::fs::create_dir_all(&bpffs).map_err(|e| format!("{}: {e}", bpffs.display()))?;
    run(
        None,
        &["mount", "-t", "bpf", "bpf", &bpffs.to_string_lossy()],
    )?;
    s.bpffs = Some(bpffs.clone());
    save(p, s)?;
    let mut cpus = Pinning::new(&a.ovrd_args);
    for h in 1..=a.hosts {
        let cfg = match &s.etcd {
            Some(_) => base_config(s, h),
            None => host_config(s, h, a.tenants, a.encap),
        };
        let host = &s.hosts[h - 1];
        std::fs::write(&host.config, cfg).map_err(|e| format!("{}: {e}", host.config.display()))?;
        let mut cmd = vec![ovrd.to_string_lossy().into_owned()];
        let path = |x: &Path| x.to_string_lossy().into_owned();
        cmd.extend([
            "--config".into(),
            path(&host.config),
            // Each host its own API socket, state and pins (the hosts share one filesystem).
            "--api-socket".into(),
            path(&socket_of(host)),
            "--state".into(),
            path(&host.config.with_extension("state.json")),
            "--fast-path-pin-dir".into(),
            path(&bpffs.join(&host.name)),
        ]);
        if let Some(c) = &s.etcd {
            cmd.extend(c.ovrd_args(&host.name));
        }
        if a.evpn {
            cmd.extend(evpn::speaker(p, s, h)?);
        }
        cmd.extend(offload_arg.map(String::from));
        cmd.extend(cpus.next_host());
        cmd.extend(a.ovrd_args.iter().cloned());
        s.hosts[h - 1].ovrd_cmd = cmd;
        start_ovrd(p, s, h - 1)?;
    }
    match &s.etcd {
        // `up` returns when every host is in the cluster and every workload is up.
        Some(c) => c.wait_converged(s),
        None => Ok(()),
    }
}

/// A host's API socket (each host its own; they share one filesystem).
fn socket_of(h: &Host) -> PathBuf {
    h.config.with_extension("sock")
}

pub fn exec(p: &Place, workload: &str, cmd: &[String]) -> Result<i32, String> {
    let s = load(p)?.ok_or("no lab is up: `ovrctl lab up` first")?;
    let ns = s
        .workloads
        .iter()
        .find(|w| w.name == workload)
        .map(|w| w.namespace.clone())
        .or_else(|| {
            s.hosts
                .iter()
                .find(|h| h.name == workload)
                .map(|h| h.namespace.clone())
        })
        .ok_or_else(|| {
            format!("no workload or host named '{workload}' (see `ovrctl lab status`)")
        })?;
    if cmd.is_empty() {
        return Err("nothing to run: ovrctl lab exec WORKLOAD -- CMD...".into());
    }
    let st = Command::new("ip")
        .args(["netns", "exec", &ns])
        .args(cmd)
        .status()
        .map_err(|e| format!("{}: {e}", cmd[0]))?;
    Ok(st.code().unwrap_or(1))
}

/// Stops every ovrd the lab started (printing its last counters) and removes the
/// lab's namespaces and files. Everything is torn down before anything is printed, so
/// that a closed output cannot leave half a lab behind. With `json`, one object:
/// `namespaces_removed` and each host's `counters_at_exit` (ovrd's text).
pub fn down(p: &Place, json: bool) -> Result<(), String> {
    let report = teardown(p, json)?;
    out!("{report}");
    Ok(())
}

/// Removes the lab; what `down` prints (text, or one JSON object).
fn teardown(p: &Place, json: bool) -> Result<String, String> {
    let Some(s) = load(p)? else {
        return Ok(if json {
            serde_json::json!({"namespaces_removed": 0, "counters_at_exit": {}}).to_string() + "\n"
        } else {
            "no lab is up\n".into()
        });
    };
    let mut report = String::new();
    let mut counters = serde_json::Map::new();
    for h in &s.hosts {
        let Some(pid) = h.ovrd_pid.filter(|p| alive(*p)) else {
            continue;
        };
        stop(pid);
        let log = std::fs::read_to_string(&h.log).unwrap_or_default();
        if let Some(at) = log.rfind(COUNTERS_AT_EXIT) {
            let text = log[at + COUNTERS_AT_EXIT.len()..].trim_start();
            let _ = writeln!(report, "== {}: ovrd's counters at exit", h.name);
            let _ = write!(report, "{text}");
            counters.insert(h.name.clone(), text.into());
        }
    }
    if let Some(b) = &s.bgp {
        b.stop();
    }
    // etcd after the ovrds, which give their leases up as they stop.
    if let Some(c) = &s.etcd {
        c.stop();
    }
    for ns in s.namespaces.iter().rev() {
        let _ = run(None, &["ip", "netns", "del", ns]);
    }
    for link in &s.root_links {
        // Gone with its peer's namespace, unless `up` failed between the two.
        let _ = run(None, &["ip", "link", "del", link]);
    }
    // What the ovrds left pinned (they leave their fast paths at SIGTERM) goes with the
    // filesystem.
    if let Some(fs) = &s.bpffs {
        let _ = run(None, &["umount", &fs.to_string_lossy()]);
    }
    let _ = std::fs::remove_dir_all(p.dir());
    let _ = writeln!(
        report,
        "lab down: {} namespaces removed",
        s.namespaces.len()
    );
    if json {
        report = serde_json::json!({
            "namespaces_removed": s.namespaces.len(),
            "counters_at_exit": counters,
        })
        .to_string()
            + "\n";
    }
    Ok(report)
}

/// What ovrd prints before its counters when it stops.
const COUNTERS_AT_EXIT: &str = "== counters at exit";

#[cfg(test)]
mod tests {
    use super::*;

    fn place(prefix: &str, dir: Option<&str>) -> Place {
        Place {
            prefix: prefix.into(),
            dir: dir.map(PathBuf::from),
        }
    }

    #[test]
    fn default_place_is_the_historical_one_and_others_stay_apart() {
        assert_eq!(place(PREFIX, None).dir(), PathBuf::from("/run/ovr-lab"));
        assert_eq!(
            place("ovrbs-r", None).dir(),
            PathBuf::from("/run/ovr-lab-ovrbs-r")
        );
        assert_eq!(place("x", Some("/tmp/l")).dir(), PathBuf::from("/tmp/l"));
    }

    #[test]
    fn prefixes_must_make_valid_interface_names() {
        for ok in ["ovrlab", "ovrbs-r", "a", "0123456789"] {
            assert!(place(ok, None).check().is_ok(), "{ok}");
        }
        // "{prefix}tmpa" must fit in 15 characters; no shell or path characters.
        for bad in ["", "01234567890", "Ovr", "a/b", "a b", "a.b"] {
            assert!(place(bad, None).check().is_err(), "{bad:?}");
        }
    }
}
