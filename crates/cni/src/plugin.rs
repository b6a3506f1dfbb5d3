//! The commands. ADD makes, in order: the address (IPAM), the veth pair (host end in
//! ovrd's namespace, container end in CNI_NETNS), the container end's addresses and
//! routes, and the port in the cluster; each step done is recorded, and a failure
//! undoes them all in reverse before the error is returned. DEL undoes the same steps,
//! each one finding its thing gone being fine. CHECK compares the container interface
//! and ovrd's port with what ADD made; STATUS asks ovrd; GC removes what this
//! configuration made for attachments that are no longer valid.

use crate::conf::{Call, Command, NetConf};
use crate::error::{self, CniError, code};
use crate::ipam::{self, API_TIMEOUT, Ask};
use crate::link;
use crate::names;
use crate::netns;
use crate::result::{CniResult, Interface, IpConfig, Route};
use core::net::IpAddr;
use ovr_client::{CallError, Endpoint, seg};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs::File;
use std::time::{Duration, Instant};

/// Bytes encapsulation adds, by the network's `encap` (outer IPv4 + UDP/GRE + VXLAN
/// header or label + the inner Ethernet header).
fn overhead(encap: &str) -> u32 {
    match encap {
        "mpls_udp" => 20 + 8 + 4 + 14,
        "mpls_gre" => 20 + 4 + 4 + 14,
        _ => 20 + 8 + 8 + 14,
    }
}

fn api(to: &Endpoint, method: &str, path: &str, body: Option<&Value>) -> Result<Value, CallError> {
    ovr_client::call(to, method, path, body, API_TIMEOUT)
}

/// What ovrd tells about the host and the network.
struct Context {
    to: Endpoint,
    host: String,
}

impl Context {
    fn new(conf: &NetConf) -> Result<Self, CniError> {
        let to = Endpoint::Unix(conf.socket.clone());
        let c = api(&to, "GET", "/api/v1/cluster", None).map_err(|e| match e {
            CallError::Api(f) if f.status == 404 => CniError::new(
                code::TRY_AGAIN_LATER,
                format!(
                    "the ovrd on {} is not a member of a cluster (started without --etcd)",
                    conf.socket.display()
                ),
            ),
            e => error::ovrd("ovrd", e),
        })?;
        let host = c["host"]
            .as_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| CniError::new(code::OVRD, "ovrd did not say which host it is"))?
            .to_string();
        Ok(Self { to, host })
    }

    fn port_path(&self, name: &str) -> String {
        format!("/api/v1/cluster/ports/{}/{}", seg(&self.host), seg(name))
    }
}

/// Steps of ADD that were done, to undo in reverse on failure.
enum Done {
    OvrAddress,
    DelegatedAddress(String),
    Pair,
    Port,
}

/// Runs one call; what to print on success.
pub fn run(call: &Call) -> Result<Option<Value>, CniError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| error::link("runtime", e))?;
    rt.block_on(async {
        match call.command {
            Command::Add => add(call).await.map(Some),
            Command::Del => del(call).await.map(|()| None),
            Command::Check => check(call).await.map(|()| None),
            Command::Status => status(call).map(|()| None),
            Command::Gc => gc(call).await.map(|()| None),
            Command::Version => Ok(None),
        }
    })
}

struct Plan {
    port: String,
    host_if: String,
    mac: [u8; 6],
}

fn plan(call: &Call) -> Result<Plan, CniError> {
    let mac = match &call.conf.runtime_config.mac {
        Some(m) => names::parse_mac(m).ok_or_else(|| {
            error::config(format!("runtimeConfig.mac: '{m}' is not a unicast MAC"))
        })?,
        None => names::mac(&call.container_id, &call.ifname),
    };
    Ok(Plan {
        port: names::port_name(&call.container_id, &call.ifname),
        host_if: names::host_ifname(&call.container_id, &call.ifname),
        mac,
    })
}

/// Addresses the runtime asked for (capability `ips`), with or without a length.
fn wanted(call: &Call) -> Result<Vec<(IpAddr, Option<u8>)>, CniError> {
    call.conf
        .runtime_config
        .ips
        .iter()
        .map(|s| {
            let (a, l) = match s.split_once('/') {
                Some((a, l)) => (a, Some(l)),
                None => (s.as_str(), None),
            };
            let ip: IpAddr = a.parse().map_err(|_| {
                error::config(format!("runtimeConfig.ips: '{s}' is not an address"))
            })?;
            let len = l
                .map(|l| {
                    l.parse::<u8>().map_err(|_| {
                        error::config(format!("runtimeConfig.ips: '{s}': bad prefix length"))
                    })
                })
                .transpose()?;
            Ok((ip, len))
        })
        .collect()
}

/// The address families the network has subnets of (4 first), from its JSON; 4 when it
/// has none (the allocator then says so).
fn families(net: &Value) -> Vec<u8> {
    let subnets: Vec<&str> = net["subnets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut f: Vec<u8> = Vec::new();
    if subnets.is_empty() || subnets.iter().any(|s| !s.contains(':')) {
        f.push(4);
    }
    if subnets.iter().any(|s| s.contains(':')) {
        f.push(6);
    }
    f
}

async fn add(call: &Call) -> Result<Value, CniError> {
    let conf = &call.conf;
    let cx = Context::new(conf)?;
    let net = api(
        &cx.to,
        "GET",
        &format!("/api/v1/cluster/networks/{}", seg(&conf.network)),
        None,
    )
    .map_err(|e| match e {
        CallError::Api(f) if f.status == 404 => error::config(format!(
            "network: ovr network '{}' does not exist in the cluster",
            conf.network
        )),
        e => error::ovrd("reading the network", e),
    })?;
    let netns_path = call
        .netns
        .as_ref()
        .ok_or_else(|| error::env("CNI_NETNS is missing"))?;
    let container = netns::open(netns_path)?.ok_or_else(|| {
        error::env(format!(
            "CNI_NETNS: {} does not exist",
            netns_path.display()
        ))
    })?;
    let ovrd_ns = netns::of_ovrd(&conf.socket)?;
    // The container's namespace must be neither ours nor ovrd's: the interface would
    // land beside the host's (or ovrd's) own.
    let own = netns::open(std::path::Path::new("/proc/self/ns/net"))?;
    if own.as_ref().is_some_and(|o| netns::same(o, &container)) || netns::same(&ovrd_ns, &container)
    {
        return Err(error::env(format!(
            "CNI_NETNS: {} is the plugin's or ovrd's own namespace, not a container's",
            netns_path.display()
        )));
    }
    let p = plan(call)?;
    let mtu = match conf.mtu {
        Some(m) => m,
        None => underlay_mtu(&cx.to) - overhead(net["encap"].as_str().unwrap_or("vxlan")),
    };
    let mut done = Vec::new();
    let r = add_steps(call, &cx, &net, &container, &ovrd_ns, &p, mtu, &mut done).await;
    if r.is_err() {
        undo(call, &cx, &ovrd_ns, &p, done).await;
    }
    r
}

/// The underlay's MTU as ovrd has it (1500 if it does not say).
fn underlay_mtu(to: &Endpoint) -> u32 {
    api(to, "GET", "/api/v1/interfaces", None)
        .ok()
        .and_then(|v| {
            v.as_array()?
                .iter()
                .find(|i| i["kind"] == "underlay")
                .and_then(|i| i["mtu"].as_u64())
        })
        .map_or(1500, |m| m as u32)
}

#[allow(clippy::too_many_arguments)]
async fn add_steps(
    call: &Call,
    cx: &Context,
    net: &Value,
    container: &File,
    ovrd_ns: &File,
    p: &Plan,
    mtu: u32,
    done: &mut Vec<Done>,
) -> Result<Value, CniError> {
    let conf = &call.conf;
    let gateways: Vec<IpAddr> = net["gateways"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str()?.split('/').next()?.parse().ok())
        .collect();
    // The address.
    let mut result = CniResult::default();
    let wanted = wanted(call)?;
    match conf.ipam_type() {
        Some("ovr") => {
            // The runtime's addresses if it gives some, else one of each family the
            // network has a subnet of (dual stack).
            let asks: Vec<Ask> = if wanted.is_empty() {
                families(net).into_iter().map(Ask::Family).collect()
            } else {
                wanted.iter().map(|(a, _)| Ask::Address(*a)).collect()
            };
            done.push(Done::OvrAddress);
            for ask in asks {
                result.ips.push(ipam::allocate(
                    &cx.to,
                    &conf.network,
                    &p.port,
                    &conf.name,
                    ask,
                )?);
            }
        }
        Some(kind) => {
            done.push(Done::DelegatedAddress(kind.to_string()));
            let r = ipam::delegate(call, kind, "ADD")?.unwrap_or_default();
            result.ips = r.ips;
            result.routes = r.routes;
            result.dns = r.dns;
        }
        None => {
            // No IPAM: the runtime's addresses, with the network's subnet's length.
            for (a, l) in wanted {
                let len = l.unwrap_or_else(|| subnet_len(net, a));
                result.ips.push(IpConfig {
                    version: None,
                    address: format!("{a}/{len}"),
                    gateway: gateways
                        .iter()
                        .copied()
                        .find(|g| g.is_ipv4() == a.is_ipv4()),
                    interface: Some(0),
                });
            }
        }
    }
    for ip in &mut result.ips {
        ip.interface = Some(0);
        if ip.gateway.is_none()
            && let Some((a, _)) = ip.parts()
        {
            ip.gateway = gateways
                .iter()
                .copied()
                .find(|g| g.is_ipv4() == a.is_ipv4());
        }
    }
    let addrs: Vec<(IpAddr, u8)> = result
        .ips
        .iter()
        .map(|ip| {
            ip.parts()
                .ok_or_else(|| CniError::new(code::IPAM, format!("bad address '{}'", ip.address)))
        })
        .collect::<Result<_, _>>()?;
    // A default route per family through the network's gateway, unless IPAM gave routes.
    if result.routes.is_empty() {
        for ip in &result.ips {
            if let (Some(gw), Some((a, _))) = (ip.gateway, ip.parts())
                && !result
                    .routes
                    .iter()
                    .any(|r| r.gw.is_some_and(|g| g.is_ipv4() == a.is_ipv4()))
            {
                result.routes.push(Route {
                    dst: if a.is_ipv4() { "0.0.0.0/0" } else { "::/0" }.into(),
                    gw: Some(gw),
                });
            }
        }
    }

    // The pair.
    let ho = link::handle_in(ovrd_ns)?;
    let hc = link::handle_in(container)?;
    if link::index(&hc, &call.ifname).await?.is_some() {
        return Err(CniError::new(
            code::LINK,
            format!(
                "{} exists already in {}",
                call.ifname,
                call.netns
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
        ));
    }
    done.push(Done::Pair);
    link::create_pair(&ho, &p.host_if, &call.ifname, container, p.mac, mtu).await?;
    let hi = link::index(&ho, &p.host_if)
        .await?
        .ok_or_else(|| error::link(&p.host_if, "vanished after it was made"))?;
    link::up(&ho, hi).await?;
    let ci = link::index(&hc, &call.ifname)
        .await?
        .ok_or_else(|| error::link(&call.ifname, "not in the container after it was made"))?;
    // The kernel announces the addresses (a gratuitous ARP, an unsolicited NA) when the
    // interface comes up, which is once ovrd forwards for it (below): a peer holding an
    // address's old MAC (a container gone, the address given again) learns the new one
    // instead of sending to the old one until its entry goes stale.
    prepare(
        container,
        &call.ifname,
        addrs.iter().any(|(a, _)| a.is_ipv6()),
    )?;
    for (a, l) in &addrs {
        link::add_address(&hc, ci, *a, *l).await?;
    }

    // The port.
    let mut meta = BTreeMap::new();
    meta.insert("cni.containerID".to_string(), call.container_id.clone());
    meta.insert("cni.ifname".to_string(), call.ifname.clone());
    meta.insert("cni.network".to_string(), conf.name.clone());
    for (k, m) in [
        ("K8S_POD_NAMESPACE", "k8s.namespace"),
        ("K8S_POD_NAME", "k8s.pod"),
    ] {
        if let Some(v) = call.args.get(k) {
            meta.insert(m.to_string(), v.clone());
        }
    }
    let mut port = json!({
        "network": conf.network,
        "mac": names::format_mac(&p.mac),
        "ips": addrs.iter().map(|(a, _)| a.to_string()).collect::<Vec<_>>(),
        "interface": p.host_if,
        "metadata": meta,
    });
    if let Some(police) = conf.police {
        port["police"] = json!({
            "packets_per_second": police.packets_per_second,
            "burst": police.burst,
        });
    }
    done.push(Done::Port);
    api(&cx.to, "PUT", &cx.port_path(&p.port), Some(&port))
        .map_err(|e| error::ovrd("writing the port", e))?;
    wait_installed(&cx.to, &p.host_if);
    link::up(&hc, ci).await?;
    for r in &result.routes {
        let dst = r
            .parts()
            .ok_or_else(|| CniError::new(code::IPAM, format!("bad route '{}'", r.dst)))?;
        let gw = r.gw.or_else(|| {
            result
                .ips
                .iter()
                .filter_map(|ip| ip.gateway)
                .find(|g| g.is_ipv4() == dst.0.is_ipv4())
        });
        link::add_route(&hc, ci, dst, gw).await?;
    }

    result.interfaces = vec![Interface {
        name: call.ifname.clone(),
        mac: names::format_mac(&p.mac),
        mtu: Some(mtu),
        sandbox: call.netns.as_ref().map(|p| p.display().to_string()),
    }];
    serde_json::to_value(result.for_version(&conf.cni_version))
        .map_err(|e| CniError::new(code::OVRD, e.to_string()))
}

/// The container interface's settings, before it gets its addresses: IPv6 on if it gets
/// an IPv6 address (a namespace may start with it off: adding one would be refused, as
/// the reference plugins also find), and its addresses announced when it comes up
/// (`arp_notify`, `ndisc_notify`).
fn prepare(container: &File, ifname: &str, ipv6: bool) -> Result<(), CniError> {
    netns::run_in(container, || {
        let set =
            |path: String, v: &str| std::fs::write(&path, v).map_err(|e| error::link(&path, e));
        set(format!("/proc/sys/net/ipv4/conf/{ifname}/arp_notify"), "1")?;
        if ipv6 {
            set(
                format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"),
                "0",
            )?;
            set(
                format!("/proc/sys/net/ipv6/conf/{ifname}/ndisc_notify"),
                "1",
            )?;
        }
        Ok(())
    })?
}

/// How long ADD waits for the host's ovrd to take the port in.
const INSTALL_WAIT: Duration = Duration::from_secs(2);

/// Returns once this host's ovrd receives from the port's interface (it learns the port
/// from the cluster, like every host; `attached` in `GET /api/v1/cluster`), or after
/// [`INSTALL_WAIT`]: the container's peers send their first ARP as soon as the runtime
/// starts it, and one that ovrd cannot deliver yet costs the peer's ARP retry, a second;
/// the container's own announcement would be lost too. Not having it by then is no
/// failure (the cluster may be slow; ovrd takes the port in when it hears of it).
fn wait_installed(to: &Endpoint, host_if: &str) {
    let deadline = Instant::now() + INSTALL_WAIT;
    let mut pause = Duration::from_millis(1);
    while Instant::now() < deadline {
        let attached = api(to, "GET", "/api/v1/cluster", None).is_ok_and(|c| {
            c["attached"]
                .as_array()
                .is_some_and(|a| a.iter().any(|n| n == host_if))
        });
        if attached {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
    eprintln!("ovr-cni: ovrd has not taken {host_if} in after {INSTALL_WAIT:?}; going on");
}

/// The prefix length of the network's subnet holding `a` (a host route if none).
fn subnet_len(net: &Value, a: IpAddr) -> u8 {
    net["subnets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let (p, l) = s.as_str()?.split_once('/')?;
            let p: IpAddr = p.parse().ok()?;
            let l: u8 = l.parse().ok()?;
            contains(p, l, a).then_some(l)
        })
        .next()
        .unwrap_or(if a.is_ipv4() { 32 } else { 128 })
}

fn contains(p: IpAddr, l: u8, a: IpAddr) -> bool {
    match (p, a) {
        (IpAddr::V4(p), IpAddr::V4(a)) => {
            let m = u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0);
            u32::from(p) & m == u32::from(a) & m
        }
        (IpAddr::V6(p), IpAddr::V6(a)) => {
            let m = u128::MAX.checked_shl(128 - u32::from(l)).unwrap_or(0);
            u128::from(p) & m == u128::from(a) & m
        }
        _ => false,
    }
}

/// Undoes ADD's steps, last first; each failure is only reported (on stderr).
async fn undo(call: &Call, cx: &Context, ovrd_ns: &File, p: &Plan, done: Vec<Done>) {
    for d in done.into_iter().rev() {
        let r = match d {
            Done::Port => match api(&cx.to, "DELETE", &cx.port_path(&p.port), None) {
                Err(CallError::Api(f)) if f.status == 404 => Ok(()),
                r => r
                    .map(|_| ())
                    .map_err(|e| error::ovrd("deleting the port", e)),
            },
            Done::Pair => match link::handle_in(ovrd_ns) {
                Ok(h) => link::delete(&h, &p.host_if).await.map(|_| ()),
                Err(e) => Err(e),
            },
            Done::OvrAddress => ipam::release(&cx.to, &call.conf.network, &p.port),
            Done::DelegatedAddress(kind) => ipam::delegate(call, &kind, "DEL").map(|_| ()),
        };
        if let Err(e) = r {
            eprintln!("ovr-cni: undoing ADD: {e}");
        }
    }
}

async fn del(call: &Call) -> Result<(), CniError> {
    let conf = &call.conf;
    let p = plan(call)?;
    // ovrd down or not a member: nothing of the cluster's can be undone now (GC will);
    // the interface still goes.
    let cx = Context::new(conf);
    if let Ok(cx) = &cx {
        match api(&cx.to, "DELETE", &cx.port_path(&p.port), None) {
            Ok(_) => {}
            Err(CallError::Api(f)) if f.status == 404 => {}
            Err(e) => return Err(error::ovrd("deleting the port", e)),
        }
        if conf.ipam_type() == Some("ovr") {
            ipam::release(&cx.to, &conf.network, &p.port)?;
        }
    }
    if let Some(kind) = conf.ipam_type().filter(|k| *k != "ovr") {
        ipam::delegate(call, kind, "DEL")?;
    }
    if let Ok(ovrd_ns) = netns::of_ovrd(&conf.socket) {
        let h = link::handle_in(&ovrd_ns)?;
        link::delete(&h, &p.host_if).await?;
    }
    if let Some(path) = &call.netns
        && let Some(ns) = netns::open(path)?
    {
        let h = link::handle_in(&ns)?;
        // Only our own: a veth whose peer is gone is gone too; anything left under
        // the name is deleted only if it is a veth we made (its MAC is ours).
        if let Some(seen) = link::inspect(&h, &call.ifname).await?
            && seen.mac == p.mac
        {
            link::delete(&h, &call.ifname).await?;
        }
    }
    Ok(())
}

async fn check(call: &Call) -> Result<(), CniError> {
    let conf = &call.conf;
    let cx = Context::new(conf)?;
    let p = plan(call)?;
    let bad = |m: String| CniError::new(code::CHECK, m);
    let port = api(&cx.to, "GET", &cx.port_path(&p.port), None).map_err(|e| match e {
        CallError::Api(f) if f.status == 404 => {
            bad(format!("port {} is not in the cluster", p.port))
        }
        e => error::ovrd("reading the port", e),
    })?;
    if port["interface"] != p.host_if.as_str() || port["network"] != conf.network.as_str() {
        return Err(bad(format!(
            "port {} is not the one ADD wrote: {port}",
            p.port
        )));
    }
    let ns_path = call
        .netns
        .as_ref()
        .ok_or_else(|| error::env("CNI_NETNS is missing"))?;
    let ns = netns::open(ns_path)?
        .ok_or_else(|| error::env(format!("CNI_NETNS: {} does not exist", ns_path.display())))?;
    let h = link::handle_in(&ns)?;
    let seen = link::inspect(&h, &call.ifname)
        .await?
        .ok_or_else(|| bad(format!("{} is not in the container", call.ifname)))?;
    let mac = names::format_mac(&seen.mac);
    if port["mac"].as_str() != Some(mac.as_str()) {
        return Err(bad(format!(
            "{} has MAC {mac}, the port {}",
            call.ifname, port["mac"]
        )));
    }
    let ips: Vec<String> = port["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    for ip in &ips {
        if !seen.addresses.iter().any(|(a, _)| a.to_string() == *ip) {
            return Err(bad(format!(
                "{} lacks the port's address {ip}",
                call.ifname
            )));
        }
    }
    if let Some(prev) = &conf.prev_result {
        let prev: CniResult = serde_json::from_value(prev.clone())
            .map_err(|e| error::config(format!("prevResult: {e}")))?;
        for ip in prev.ips.iter().filter_map(IpConfig::parts) {
            if !seen.addresses.contains(&ip) {
                return Err(bad(format!(
                    "{} lacks {}/{} of the previous result",
                    call.ifname, ip.0, ip.1
                )));
            }
        }
    }
    let ovrd_ns = netns::of_ovrd(&conf.socket)?;
    let ho = link::handle_in(&ovrd_ns)?;
    if link::index(&ho, &p.host_if).await?.is_none() {
        return Err(bad(format!("{} is not in ovrd's namespace", p.host_if)));
    }
    if let Some(kind) = conf.ipam_type().filter(|k| *k != "ovr") {
        ipam::delegate(call, kind, "CHECK")?;
    }
    Ok(())
}

fn status(call: &Call) -> Result<(), CniError> {
    let cx = Context::new(&call.conf).map_err(|e| CniError::new(code::NOT_AVAILABLE, e.msg))?;
    let c = api(&cx.to, "GET", "/api/v1/cluster", None)
        .map_err(|e| CniError::new(code::NOT_AVAILABLE, e.to_string()))?;
    if c["connected"] == false {
        return Err(CniError::new(
            code::NOT_AVAILABLE,
            format!("ovrd on host {} has no session with etcd", cx.host),
        ));
    }
    Ok(())
}

async fn gc(call: &Call) -> Result<(), CniError> {
    let conf = &call.conf;
    let cx = Context::new(conf)?;
    let valid: Vec<String> = conf
        .valid_attachments
        .iter()
        .flatten()
        .map(|a| names::port_name(&a.container_id, &a.ifname))
        .collect();
    let ports = api(
        &cx.to,
        "GET",
        &format!("/api/v1/cluster/ports?host={}", seg(&cx.host)),
        None,
    )
    .map_err(|e| error::ovrd("listing ports", e))?;
    let ovrd_ns = netns::of_ovrd(&conf.socket)?;
    let ho = link::handle_in(&ovrd_ns)?;
    for port in ports.as_array().into_iter().flatten() {
        let ours = port["metadata"]["cni.network"] == conf.name.as_str()
            && port["network"] == conf.network.as_str();
        let name = port["name"].as_str().unwrap_or_default();
        if !ours || valid.iter().any(|v| v == name) {
            continue;
        }
        match api(&cx.to, "DELETE", &cx.port_path(name), None) {
            Ok(_) => {}
            Err(CallError::Api(f)) if f.status == 404 => {}
            Err(e) => return Err(error::ovrd("deleting a stale port", e)),
        }
        if let Some(i) = port["interface"].as_str()
            && i.starts_with("ovr")
        {
            link::delete(&ho, i).await?;
        }
    }
    if conf.ipam_type() == Some("ovr") {
        for (_, owner, host, tag) in ipam::leases(&cx.to, &conf.network)? {
            if host == cx.host && tag == conf.name && !valid.contains(&owner) {
                ipam::release(&cx.to, &conf.network, &owner)?;
            }
        }
    } else if let Some(kind) = conf.ipam_type() {
        ipam::delegate(call, kind, "GC")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_mtu_leaves_room_for_the_encapsulation() {
        assert_eq!(1500 - overhead("vxlan"), 1450);
        assert_eq!(1500 - overhead("mpls_udp"), 1454);
        assert_eq!(1500 - overhead("mpls_gre"), 1458);
    }

    #[test]
    fn runtime_addresses_take_the_subnets_length() {
        let net = json!({"subnets": ["10.1.0.0/24", "fd00:1::/64"]});
        assert_eq!(subnet_len(&net, "10.1.0.9".parse().unwrap()), 24);
        assert_eq!(subnet_len(&net, "fd00:1::9".parse().unwrap()), 64);
        assert_eq!(subnet_len(&net, "10.2.0.9".parse().unwrap()), 32);
    }
}
