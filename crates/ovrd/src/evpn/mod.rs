//! ovrd's BGP EVPN speaker (`--bgp URL`): a gobgpd beside ovrd, configured by ovrd over
//! its gRPC API (AS, router id, peers), advertising what this host has: its networks
//! (type 3 and a type 5 per gateway subnet) and its workloads whose interface is up
//! (type 2). What is advertised follows the installed configuration (looked at every
//! 100 ms; only changes are sent). If gobgpd goes away ovrd reconnects, configures it
//! again and advertises everything; if ovrd restarts while gobgpd keeps running, it
//! takes gobgpd's table as what it advertised and sends only the difference.
//!
//! With `--reach evpn|both` it also installs what it learns (`learn`), resolving the
//! remote VTEPs' underlay MACs with ARP (`arp`).

pub mod arp;
pub mod learn;

use crate::ports::Attached;
use learn::Learning;
use ovr_agent::api::AppState;
use ovr_agent::api::bgp::BgpView;
use ovr_agent::api::intent::Pending;
use ovr_agent::error::ApiError;
use ovr_bgp::advertise::{self, LocalNetwork, LocalPort};
use ovr_bgp::evpn::{Encap, Mac, Nlri, Route, RouteTarget};
use ovr_bgp::gobgp::{BgpError, Change, Global, GoBgp, Learnt, Peer};
use ovr_config::model::{
    self, Config, InnerConfig, InterfaceKindConfig, NetworkConfig, NextHopKindConfig,
};
use ovr_tables::prefix::mask;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;
use tracing::{info, warn};

/// How often the installed configuration is compared with what is advertised.
const FOLLOW_EVERY: Duration = Duration::from_millis(100);
/// How often ovrd asks gobgpd whether it still runs BGP (a gobgpd that restarted does
/// not, and has lost what was advertised).
const ALIVE_EVERY: Duration = Duration::from_secs(1);
/// How often gobgpd's own table is compared with what was advertised (at least; see
/// [`listing_period`]): a listing brings every learnt route too, and gobgpd holds its
/// updates while it gathers one, so it is the rare check, for routes lost some other
/// way than a restart.
const CHECK_EVERY: Duration = Duration::from_secs(300);

/// When to list gobgpd's table again after a listing that took `took`: at least `base`
/// apart, and far enough apart that listings take at most 2% of the time. A listing
/// grows with the table (all learnt routes come with it): at 10K routes, listing every
/// second made most of ovrd's and its gobgpd's CPU while routes arrived.
pub(crate) fn listing_period(base: Duration, took: Duration) -> Duration {
    base.max(took.saturating_mul(50))
}

/// The speaker's settings, from ovrd's command line.
#[derive(Debug, Clone)]
pub struct Settings {
    /// gobgpd's API (`http://127.0.0.1:50051`).
    pub url: String,
    pub asn: u32,
    /// BGP's TCP port (179; -1: do not listen).
    pub listen_port: i32,
    /// The address BGP speaks from and listens on: one the host's kernel owns (the VTEP
    /// address is ovrd's, so not that one); absent: gobgpd's choice, every address.
    pub local: Option<IpAddr>,
    pub peers: Vec<Peer>,
}

/// Parses `ADDR` or `ADDR:PORT` (`[V6]:PORT`) of a peer in `asn`.
pub fn peer(s: &str, asn: u32) -> Result<Peer, String> {
    let (address, port) = match s.parse::<IpAddr>() {
        Ok(a) => (a, 179),
        Err(_) => {
            let sa: std::net::SocketAddr = s
                .parse()
                .map_err(|_| format!("--bgp-peer {s}: give ADDRESS or ADDRESS:PORT"))?;
            (sa.ip(), sa.port())
        }
    };
    Ok(Peer {
        address,
        asn,
        port,
        local_address: None,
        reflector_client: false,
    })
}

/// This host's VTEP: the underlay interface's first IPv4 address.
fn vtep(c: &Config) -> Option<Ipv4Addr> {
    c.interfaces
        .iter()
        .filter(|i| i.kind == InterfaceKindConfig::Underlay)
        .flat_map(|i| &i.addresses)
        .find_map(|a| match a.0.addr {
            IpAddr::V4(v) => Some(v),
            IpAddr::V6(_) => None,
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Import,
    Export,
}

/// The route targets network `n` imports or exports as BGP carries them: its configured
/// ones (`auto` being ASN:VNI), or ASN:VNI alone; none without a VNI.
pub fn targets(n: &NetworkConfig, asn: u16, way: Direction) -> Vec<RouteTarget> {
    let Some(vni) = n.vni else { return vec![] };
    let auto = RouteTarget::auto(asn, vni);
    let Some(rt) = &n.route_targets else {
        return vec![auto];
    };
    let list = match way {
        Direction::Import => &rt.import,
        Direction::Export => &rt.export,
    };
    list.iter()
        .map(|t| match *t {
            model::RouteTarget::Auto => auto,
            model::RouteTarget::As2 { asn, value } => RouteTarget { asn, value },
        })
        .collect()
}

/// The encapsulation other hosts send to network `n` with, and for MPLS the labels that
/// lead into it here (bridged, routed): the `labels` entries whose next hop looks up in
/// the network, Ethernet for the first, IP for the second. None: an MPLS network
/// without both labels, which is not advertised (a peer could not send to it).
fn encap_of(c: &Config, n: &NetworkConfig) -> Option<(Encap, Option<(u32, u32)>)> {
    let encap = ovr_bgp::install::encap_of(n);
    if encap == Encap::Vxlan {
        return Some((encap, None));
    }
    let label = |inner: InnerConfig| {
        c.labels.iter().find_map(|l| {
            let h = c.nexthops.iter().find(|h| h.name == l.nexthop)?;
            let into = h.kind == NextHopKindConfig::Vrf
                && h.network.as_deref() == Some(n.name.as_str())
                && h.inner == Some(inner);
            into.then_some(l.label)
        })
    };
    Some((
        encap,
        Some((label(InnerConfig::Ethernet)?, label(InnerConfig::Ip)?)),
    ))
}

/// What this host advertises for configuration `c`: networks with a VNI and a workload
/// here, the workloads (with a peer MAC) whose interface `up` says is attached. An MPLS
/// network is advertised with its encapsulation and labels (`encap_of`).
pub fn wanted(c: &Config, asn: u16, vtep: Ipv4Addr, up: impl Fn(&str) -> bool) -> BTreeSet<Route> {
    let ports: Vec<LocalPort> = c
        .interfaces
        .iter()
        .filter(|i| i.kind == InterfaceKindConfig::Workload && up(&i.name))
        .filter_map(|i| {
            Some(LocalPort {
                network: i.network.clone()?,
                mac: Mac(i.peer_mac?.0.0),
                ips: i.peer_addresses.clone(),
            })
        })
        .collect();
    let networks: Vec<LocalNetwork> = c
        .networks
        .iter()
        .enumerate()
        .filter(|(_, n)| ports.iter().any(|p| p.network == n.name))
        .filter_map(|(i, n)| {
            let (encap, labels) = encap_of(c, n)?;
            Some(LocalNetwork {
                name: n.name.clone(),
                vni: n.vni?,
                encap,
                labels,
                rd_index: u16::try_from(i + 1).ok()?,
                export: targets(n, asn, Direction::Export),
                subnets: n
                    .gateways
                    .iter()
                    .map(|g| (mask(g.0.addr, g.0.prefix_len), g.0.prefix_len))
                    .collect(),
                router_mac: Mac(n
                    .router_mac
                    .map_or(ovr_tables::vrf::DEFAULT_ROUTER_MAC.0, |m| m.0.0)),
            })
        })
        .collect();
    advertise::routes(asn, vtep, &networks, &ports)
}

/// Starts the speaker's thread: from here on, what the host has is advertised, and with
/// `learning` what is learnt installed (`cluster`: the intent is the member's).
pub fn start(
    settings: Settings,
    state: &AppState,
    attached: Attached,
    learning: Option<Arc<Learning>>,
    cluster: bool,
) -> Result<(), String> {
    let asn = u16::try_from(settings.asn).map_err(|_| {
        format!(
            "--bgp-asn {}: route targets need a two-octet AS",
            settings.asn
        )
    })?;
    state.speak_bgp(Arc::new(View {
        url: settings.url.clone(),
        client: Arc::default(),
        learning: learning.clone(),
    }));
    let state = state.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("bgp runtime: {e}"))?;
    std::thread::Builder::new()
        .name("ovr-bgp".into())
        .spawn(move || {
            runtime.block_on(async move {
                let speak = async {
                    let mut backoff = Duration::from_millis(100);
                    loop {
                        let e = session(&settings, asn, &state, &attached).await;
                        warn!(error = %e, "bgp: session with gobgpd ended; again soon");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                };
                let learn = async {
                    let Some(learning) = &learning else {
                        return std::future::pending().await;
                    };
                    loop {
                        let e = learn::run(&settings.url, asn, learning, cluster).await;
                        warn!(error = %e, "bgp: learning from gobgpd stopped; again soon");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                };
                tokio::join!(speak, learn);
            });
        })
        .map_err(|e| format!("bgp thread: {e}"))?;
    Ok(())
}

/// The routes of a listing that gobgpd advertises for us (no neighbour: not learnt).
fn own(listing: Vec<Learnt>) -> BTreeSet<Route> {
    listing
        .into_iter()
        .filter(|l| l.neighbor.is_empty())
        .filter_map(|l| match l.change {
            Ok(Change::Announced(r)) => Some(r),
            _ => None,
        })
        .collect()
}

/// The installed configuration's interfaces and networks (not its routes: they can be
/// many and are not advertised).
fn installed(state: &AppState) -> Config {
    let a = state
        .agent()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let c = a.config();
    // The labels, and the next hops they lead to: an MPLS network's labels (`encap_of`).
    let into = |h: &&model::NextHopConfig| c.labels.iter().any(|l| l.nexthop == h.name);
    Config {
        interfaces: c.interfaces.clone(),
        networks: c.networks.clone(),
        labels: c.labels.clone(),
        nexthops: c.nexthops.iter().filter(into).cloned().collect(),
        ..Config::default()
    }
}

/// One connection to gobgpd: configure it, then follow the configuration until a
/// request fails.
async fn session(s: &Settings, asn: u16, state: &AppState, attached: &Attached) -> BgpError {
    let run = async {
        let bgp = GoBgp::connect(&s.url).await?;
        let vtep = loop {
            match vtep(&installed(state)) {
                Some(v) => break v,
                None => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        };
        let global = Global {
            asn: s.asn,
            router_id: vtep,
            listen_port: s.listen_port,
            listen_addresses: s.local.iter().map(ToString::to_string).collect(),
        };
        // A gobgpd that outlived an earlier ovrd is configured already.
        match bgp.start(&global).await {
            Err(BgpError::Refused { message, .. }) if message.contains("already") => {}
            r => r?,
        }
        for p in &s.peers {
            let p = Peer {
                local_address: s.local,
                ..p.clone()
            };
            match bgp.add_peer(&p).await {
                Err(BgpError::Refused { message, .. }) if message.contains("exist") => {}
                r => r?,
            }
        }
        // What gobgpd advertises for us now (nothing, unless it outlived an ovrd).
        let mut advertised = own(bgp.routes().await?);
        info!(url = %s.url, %vtep, peers = s.peers.len(), kept = advertised.len(), "bgp: speaker configured");
        let (mut checked, mut check_every) = (std::time::Instant::now(), CHECK_EVERY);
        let mut alive = std::time::Instant::now();
        loop {
            // A gobgpd that restarted (not running BGP) ends the session, which
            // configures it again and advertises everything.
            if alive.elapsed() >= ALIVE_EVERY {
                alive = std::time::Instant::now();
                if !bgp.started().await? {
                    return Err(BgpError::Unavailable {
                        url: s.url.clone(),
                        message: "not running BGP (restarted?): configuring it again".into(),
                    });
                }
            }
            // gobgpd's own table, looked at now and then (less often for a large table):
            // one that lost routes gets them again.
            if checked.elapsed() >= check_every {
                checked = std::time::Instant::now();
                let listing = bgp.routes().await?;
                check_every = listing_period(CHECK_EVERY, checked.elapsed());
                let own = own(listing);
                if own != advertised {
                    warn!(
                        had = own.len(),
                        expected = advertised.len(),
                        "bgp: gobgpd's table is not what was advertised; advertising again"
                    );
                    advertised = own;
                }
            }
            let want = wanted(&installed(state), asn, vtep, |n| attached.contains(n));
            let (announce, withdraw) = advertise::changes(&advertised, &want);
            for r in &withdraw {
                bgp.withdraw(r).await?;
            }
            for r in &announce {
                bgp.announce(r).await?;
            }
            if !announce.is_empty() || !withdraw.is_empty() {
                info!(
                    announced = announce.len(),
                    withdrawn = withdraw.len(),
                    "bgp: advertisements follow the configuration"
                );
            }
            advertised = want;
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
    };
    match run.await {
        Ok(()) => unreachable!("the loop ends only with an error"),
        Err(e) => e,
    }
}

/// The API's view of the speaker: its own client of gobgpd, made at the first request
/// on the API's runtime.
#[derive(Clone)]
struct View {
    url: String,
    client: Arc<OnceCell<GoBgp>>,
    learning: Option<Arc<Learning>>,
}

impl View {
    async fn client(&self) -> Result<&GoBgp, ApiError> {
        self.client
            .get_or_try_init(|| GoBgp::connect(&self.url))
            .await
            .map_err(|e| ApiError::Unavailable(e.to_string()))
    }
}

fn unavailable(e: BgpError) -> ApiError {
    ApiError::Unavailable(e.to_string())
}

/// A route as `GET /api/v1/bgp/routes` shows it.
pub fn describe(l: &Learnt) -> Value {
    let mut o = json!({
        "direction": if l.neighbor.is_empty() { "out" } else { "in" },
        "neighbor": l.neighbor,
    });
    match &l.change {
        Err(refusal) => {
            o["refused"] = refusal.reason.into();
            o["detail"] = refusal.detail.clone().into();
        }
        // A listing has none: its routes are the ones there.
        Ok(Change::Withdrawn(key)) => {
            o["withdrawn"] = true.into();
            o["key"] = format!("{key:?}").into();
        }
        Ok(Change::Announced(r)) => {
            let (kind, fields) = match &r.nlri {
                Nlri::Imet { originator, .. } => ("imet", json!({ "originator": originator })),
                Nlri::MacIp {
                    mac,
                    ip,
                    label,
                    routed,
                    ..
                } => {
                    let mut f = json!({ "mac": mac.to_string(), "ip": ip, "label": label });
                    if let Some(l) = routed {
                        f["routed_label"] = (*l).into();
                    }
                    (if ip.is_some() { "mac-ip" } else { "mac" }, f)
                }
                Nlri::Prefix {
                    addr,
                    len,
                    gateway,
                    label,
                    ..
                } => (
                    "prefix",
                    json!({ "prefix": format!("{addr}/{len}"), "gateway": gateway, "label": label }),
                ),
            };
            o["type"] = kind.into();
            o["rd"] = r.nlri.rd().to_string().into();
            o["next_hop"] = r.next_hop.to_string().into();
            o["route_targets"] = r.targets.iter().map(ToString::to_string).collect();
            o["encap"] = format!("{:?}", r.encap).to_lowercase().into();
            // The encapsulation community's value (RFC 9012): 8, 11 or 13.
            o["tunnel_type"] = r.encap.tunnel_type().into();
            if let Some(m) = r.router_mac {
                o["router_mac"] = m.to_string().into();
            }
            if let Some((label, endpoint)) = r.pmsi {
                o["pmsi"] = json!({ "label": label, "endpoint": endpoint });
            }
            if let Some(seq) = r.mobility {
                o["mobility_sequence"] = seq.into();
            }
            if let (Some(o), Value::Object(f)) = (o.as_object_mut(), fields) {
                o.extend(f);
            }
        }
    }
    o
}

impl BgpView for View {
    fn neighbors(&self) -> Pending<Value> {
        let this = self.clone();
        Box::pin(async move {
            let n = this
                .client()
                .await?
                .neighbors()
                .await
                .map_err(unavailable)?;
            Ok(n.iter()
                .map(|n| {
                    json!({ "address": n.address, "asn": n.asn, "state": n.state,
                            "received": n.received, "advertised": n.advertised })
                })
                .collect())
        })
    }

    fn installed(&self) -> Value {
        match &self.learning {
            Some(l) => l.report(),
            None => json!({ "source": "etcd", "vteps": [] }),
        }
    }

    fn routes(&self) -> Pending<Value> {
        let this = self.clone();
        Box::pin(async move {
            let r = this.client().await?.routes().await.map_err(unavailable)?;
            Ok(r.iter().map(describe).collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
interfaces:
  - { name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }
  - { name: w1, kind: workload, network: red, peer_mac: "02:00:00:00:01:0a", peer_addresses: [10.1.0.10] }
  - { name: w2, kind: workload, network: red, peer_mac: "02:00:00:00:01:0b" }
  - { name: w3, kind: workload, network: blue, peer_mac: "02:00:00:00:02:0a" }
networks:
  - { name: red, vni: 100, gateways: [10.1.0.1/24] }
  - { name: blue, vni: 200 }
  - { name: green, vni: 300 }
"#;

    #[test]
    fn the_hosts_networks_and_attached_workloads_are_advertised() {
        let c = Config::from_yaml(CONFIG).unwrap();
        let v = vtep(&c).unwrap();
        assert_eq!(v, Ipv4Addr::new(192, 0, 2, 1));
        // w2 is not attached (its interface is not there): not advertised; blue has only
        // w3, which is not up either: blue is not advertised; green has no workload.
        let r = wanted(&c, 65000, v, |n| n == "w1");
        let mut kinds: Vec<String> = r
            .iter()
            .map(|r| match &r.nlri {
                Nlri::Imet { .. } => format!("imet {}", r.targets[0]),
                Nlri::MacIp { mac, ip, .. } => format!("mac {mac} {ip:?}"),
                Nlri::Prefix { addr, len, .. } => format!("prefix {addr}/{len}"),
            })
            .collect();
        kinds.sort();
        assert_eq!(
            kinds,
            [
                "imet 65000:100",
                "mac 02:00:00:00:01:0a None",
                "mac 02:00:00:00:01:0a Some(10.1.0.10)",
                "prefix 10.1.0.0/24",
            ]
        );
        // All up: red (imet, prefix, w1 alone and with its address, w2), blue (imet, w3).
        assert_eq!(wanted(&c, 65000, v, |_| true).len(), 7);
    }

    #[test]
    fn configured_route_targets_replace_the_automatic_one_which_auto_puts_back() {
        let c = Config::from_yaml(
            r#"
interfaces:
  - { name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }
  - { name: w1, kind: workload, network: red, peer_mac: "02:00:00:00:01:0a" }
  - { name: w3, kind: workload, network: blue, peer_mac: "02:00:00:00:02:0a" }
networks:
  - { name: red, vni: 100 }
  - { name: blue, vni: 200, route_targets: { import: ["65000:4242", auto], export: ["65001:7"] } }
  - { name: green, vni: 300, route_targets: { export: ["65000:4242", auto] } }
  - { name: grey, vni: 400, route_targets: { import: ["65000:100"] } }
"#,
        )
        .unwrap();
        let rt = |asn, value| RouteTarget { asn, value };
        let net = |name: &str| c.networks.iter().find(|n| n.name == name).unwrap();
        assert_eq!(
            targets(net("red"), 65000, Direction::Export),
            [rt(65000, 100)]
        );
        assert_eq!(
            targets(net("blue"), 65000, Direction::Export),
            [rt(65001, 7)]
        );
        assert_eq!(
            targets(net("green"), 65000, Direction::Export),
            [rt(65000, 4242), rt(65000, 300)]
        );
        // What each network's routes carry, as advertised.
        let routes = wanted(&c, 65000, vtep(&c).unwrap(), |_| true);
        let imet = |vni| {
            routes
                .iter()
                .find(|r| matches!(r.nlri, Nlri::Imet { .. }) && r.pmsi.unwrap().0 == vni)
                .unwrap()
                .targets
                .clone()
        };
        assert_eq!(
            (imet(100), imet(200)),
            (vec![rt(65000, 100)], vec![rt(65001, 7)])
        );
        // Imports: a route target names one network. grey's configured 65000:100 is red's
        // automatic one: the first network by name, grey, keeps it.
        let imports = learn::imports(&c, 65000);
        let named = |t| imports.get(&t).map(String::as_str);
        assert_eq!(named(rt(65000, 4242)), Some("blue"));
        assert_eq!(named(rt(65000, 200)), Some("blue"));
        assert_eq!(named(rt(65000, 300)), Some("green"));
        assert_eq!(named(rt(65000, 100)), Some("grey"));
        assert_eq!(named(rt(65001, 7)), None);
        assert_eq!(imports.len(), 4);
    }

    #[test]
    fn an_mpls_network_is_advertised_with_its_encapsulation_and_the_labels_into_it() {
        let yaml = |encap: &str, labels: &str| {
            format!(
                r#"
interfaces:
  - {{ name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }}
  - {{ name: w1, kind: workload, network: red, peer_mac: "02:00:00:00:01:0a", peer_addresses: [10.1.0.10] }}
networks:
  - {{ name: red, vni: 100, gateways: [10.1.0.1/24], encap: {encap} }}
nexthops:
  - {{ name: "local:red:l2", kind: vrf, network: red, inner: ethernet }}
  - {{ name: "local:red:l3", kind: vrf, network: red, inner: ip }}
labels: [{labels}]
"#
            )
        };
        let both = "{ label: 100000, nexthop: \"local:red:l2\" }, \
                    { label: 100001, nexthop: \"local:red:l3\" }";
        let c = Config::from_yaml(&yaml("mpls_udp", both)).unwrap();
        let r = wanted(&c, 65000, vtep(&c).unwrap(), |_| true);
        assert_eq!(r.len(), 4);
        for route in &r {
            assert_eq!(route.encap, Encap::MplsOverUdp);
            assert_eq!(route.targets, [RouteTarget::auto(65000, 100)]);
            let label = match route.nlri {
                Nlri::Imet { .. } => route.pmsi.unwrap().0,
                Nlri::MacIp { label, .. } => label,
                Nlri::Prefix { label, .. } => {
                    assert_eq!(label, 100_001, "routed packets: the IP label");
                    continue;
                }
            };
            assert_eq!(label, 100_000, "bridged frames: the Ethernet label");
        }
        let c = Config::from_yaml(&yaml("mpls_gre", both)).unwrap();
        let r = wanted(&c, 65000, vtep(&c).unwrap(), |_| true);
        assert!(r.iter().all(|r| r.encap == Encap::MplsOverGre));
        // Without a label into the network for routed packets, a peer could not send
        // to it as it says: not advertised.
        let one = "{ label: 100000, nexthop: \"local:red:l2\" }";
        let c = Config::from_yaml(&yaml("mpls_udp", one)).unwrap();
        assert!(wanted(&c, 65000, vtep(&c).unwrap(), |_| true).is_empty());
    }

    #[test]
    fn peers_are_an_address_with_an_optional_port() {
        let p = peer("192.0.2.250", 65000).unwrap();
        assert_eq!((p.address.to_string(), p.port), ("192.0.2.250".into(), 179));
        let p = peer("192.0.2.250:1790", 65000).unwrap();
        assert_eq!(p.port, 1790);
        assert!(peer("[fd00::1]:179", 65000).is_ok());
        assert!(peer("router", 65000).is_err());
    }

    #[test]
    fn a_slow_listing_is_repeated_less_often() {
        let (second, ms) = (Duration::from_secs(1), Duration::from_millis);
        assert_eq!(listing_period(second, ms(2)), second);
        assert_eq!(listing_period(second, ms(200)), Duration::from_secs(10));
    }
}
