//! ovr's own share of installing EVPN routes (issue 23): N type-2 routes (N/2 MACs, each
//! as a MAC route and a MAC/IP route, from 4 remote VTEPs) fed to the install path in
//! batches as GoBGP's WatchEvent delivers them, then withdrawn the same way; prints the
//! routes per second of each phase. No gobgpd: the routes are already parsed (`Learnt`),
//! and what the path makes of them is committed to real tables (an agent with no
//! dataplane worker, as ovrd's agent without its pipeline).
//!
//! `cargo run --release -p ovr-bgp --example install_rate -- [--routes N]... [--batch B]
//! [--max-seconds S] [--path incremental|whole] [--json]`
//!
//! `--path incremental` (the default) is what ovrd runs (`evpn::learn` without a cluster):
//! the batch into `sync::Installer`, its changes applied through the agent in one batch.
//! `--path whole` is what it ran before: at every WatchEvent the speaker's table listed
//! again, read into a fresh `Rib`, layered onto the intent and installed whole.
//! `--max-seconds`: a phase that takes longer stops there and reports the rate so far.

use ovr_agent::Agent;
use ovr_agent::api::AppState;
use ovr_agent::store::{Source, Start};
use ovr_bgp::evpn::{Encap, Mac, Nlri, Rd, Route, RouteTarget};
use ovr_bgp::gobgp::Learnt;
use ovr_bgp::install;
use ovr_bgp::learnt::Rib;
use ovr_bgp::sync::{Context, Installer, learnt};
use ovr_config::{Config, Names};
use ovr_tables::state::new_tables;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const INTENT: &str = r#"
interfaces:
  - { name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }
  - { name: w1, kind: workload, network: red, peer_mac: "02:00:00:00:01:0a", peer_addresses: [10.0.0.10] }
networks:
  - { name: red, vni: 100, gateways: [10.0.0.1/8] }
"#;
const ASN: u16 = 65000;
const VTEPS: u8 = 4;

struct Args {
    routes: Vec<usize>,
    batch: usize,
    max: Duration,
    json: bool,
    whole: bool,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        routes: Vec::new(),
        batch: 64,
        max: Duration::from_secs(120),
        json: false,
        whole: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "--routes" => a
                .routes
                .push(v()?.parse().map_err(|e| format!("{k}: {e}"))?),
            "--batch" => a.batch = v()?.parse().map_err(|e| format!("{k}: {e}"))?,
            "--max-seconds" => {
                a.max = Duration::from_secs_f64(v()?.parse().map_err(|e| format!("{k}: {e}"))?);
            }
            "--json" => a.json = true,
            "--path" => match v()?.as_str() {
                "incremental" => a.whole = false,
                "whole" => a.whole = true,
                p => return Err(format!("--path {p}: incremental or whole")),
            },
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    if a.routes.is_empty() {
        a.routes = vec![1_000, 10_000, 100_000];
    }
    if a.batch == 0 {
        return Err("--batch must be at least 1".into());
    }
    Ok(a)
}

fn vtep(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10 + n))
}

/// Route `i` of `n`: MAC `i / 2` of VTEP `(i / 2) % VTEPS`, alone (even) or with its
/// address (odd).
fn route(i: usize) -> Route {
    let m = u32::try_from(i / 2).unwrap_or(u32::MAX);
    let [_, b, c, d] = m.to_be_bytes();
    let from = u8::try_from((i / 2) % usize::from(VTEPS)).unwrap_or(0);
    let ip = (i % 2 == 1).then(|| IpAddr::V4(Ipv4Addr::new(10, b, c, d.wrapping_add(0))));
    Route {
        nlri: Nlri::MacIp {
            rd: Rd::Ip {
                router: Ipv4Addr::new(192, 0, 2, 10 + from),
                assigned: 1,
            },
            tag: 0,
            mac: Mac([2, 1, 0, b, c, d]),
            ip,
            label: 100,
            routed: None,
        },
        next_hop: vtep(from),
        targets: vec![RouteTarget::auto(ASN, 100)],
        encap: Encap::Vxlan,
        router_mac: None,
        pmsi: None,
        mobility: None,
    }
}

/// Address 10.0.0.0 is the network's, 10.0.0.10 the local workload's: skip MACs whose
/// address would be one of them or the gateway.
fn usable(i: usize) -> bool {
    !matches!(i / 2, 0 | 1 | 10 | 255)
}

fn agent() -> AppState {
    let (w, _r) = new_tables();
    let start = Start {
        config: Config::from_yaml(INTENT).expect("the intent parses"),
        base: None,
        ids: Names::default(),
        source: Source::ConfigFile,
    };
    AppState::new(
        Agent::start(start, w, None).expect("the agent starts"),
        None,
    )
}

/// The install path, fed a batch as a WatchEvent brings it.
struct Path {
    whole: bool,
    installer: Installer,
    /// The agent's generation when the installer last installed.
    seen: Option<u64>,
    state: AppState,
    imports: BTreeMap<RouteTarget, String>,
    own: IpAddr,
    macs: BTreeMap<IpAddr, ovr_config::values::Mac>,
    table: BTreeMap<usize, Learnt>,
}

impl Path {
    fn new(whole: bool) -> Self {
        let state = agent();
        let intent = Config::from_yaml(INTENT).expect("the intent parses");
        let imports = intent
            .networks
            .iter()
            .filter_map(|n| Some((RouteTarget::auto(ASN, n.vni?), n.name.clone())))
            .collect();
        let macs = (0..VTEPS)
            .map(|n| {
                let mac: ovr_config::values::Mac = format!("02:00:00:00:00:{:02x}", 0x10 + n)
                    .parse()
                    .expect("a MAC");
                (vtep(n), mac)
            })
            .collect();
        Self {
            whole,
            installer: Installer::default(),
            seen: None,
            state,
            imports,
            own: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            macs,
            table: BTreeMap::new(),
        }
    }

    fn batch(&mut self, ls: Vec<(usize, Learnt)>) {
        if self.whole {
            self.batch_whole(ls);
        } else {
            self.batch_incremental(ls);
        }
    }

    /// As `evpn::learn` does without a cluster: the intent taken again when the
    /// configuration changed under it, the batch learnt, what it makes applied.
    fn batch_incremental(&mut self, ls: Vec<(usize, Learnt)>) {
        let batch: Vec<Learnt> = ls.into_iter().map(|(_, l)| l).collect();
        self.installer.learn(&batch);
        self.installer.set_neighbours(self.macs.clone());
        let (installer, seen, imports, own) =
            (&mut self.installer, &mut self.seen, &self.imports, self.own);
        let r = self.state.with_agent(|a| {
            if *seen != Some(a.generation()) {
                let ctx = Context {
                    imports: imports.clone(),
                    own,
                };
                installer.set_intent(install::strip(a.config()), ctx);
            }
            let r = installer.take().apply(a);
            (r, a.generation())
        });
        match r {
            Ok((Ok(_), g)) => *seen = Some(g),
            Ok((Err(e), _)) | Err(e) => {
                eprintln!("install failed: {e}");
                *seen = None;
            }
        }
    }

    fn batch_whole(&mut self, ls: Vec<(usize, Learnt)>) {
        for (i, l) in ls {
            if l.is_withdrawn() {
                self.table.remove(&i);
            } else {
                self.table.insert(i, l);
            }
        }
        let mut rib = Rib::default();
        for l in self.table.values() {
            rib.apply(l);
        }
        let reach = rib.reach(&self.imports, self.own);
        let r = self.state.update(|a| {
            let l = install::layer(&install::strip(a.config()), &reach, &self.macs);
            let changed = l.config != *a.config() || l.learnt != *a.learnt();
            changed.then_some((l.config, l.learnt))
        });
        if let Err(e) = r {
            eprintln!("install failed: {e}");
        }
    }

    fn installed(&self) -> (usize, usize) {
        let a = self
            .state
            .agent()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let l = a.learnt();
        (l.bridge().count(), l.routes().count())
    }
}

struct Phase {
    routes: usize,
    seconds: f64,
    complete: bool,
}

impl Phase {
    fn rate(&self) -> f64 {
        self.routes as f64 / self.seconds.max(1e-9)
    }
}

fn phase(path: &mut Path, ids: &[usize], batch: usize, withdrawn: bool, max: Duration) -> Phase {
    let t = Instant::now();
    let mut done = 0;
    for chunk in ids.chunks(batch) {
        let ls = chunk
            .iter()
            .map(|&i| (i, learnt("192.0.2.250", route(i), withdrawn)))
            .collect();
        path.batch(ls);
        done += chunk.len();
        if t.elapsed() > max {
            break;
        }
    }
    Phase {
        routes: done,
        seconds: t.elapsed().as_secs_f64(),
        complete: done == ids.len(),
    }
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("install_rate: {e}");
            std::process::exit(2);
        }
    };
    for &n in &a.routes {
        let ids: Vec<usize> = (0..).filter(|&i| usable(i)).take(n).collect();
        let mut path = Path::new(a.whole);
        let install = phase(&mut path, &ids, a.batch, false, a.max);
        let (bridge, routes) = path.installed();
        let withdraw = if install.complete {
            Some(phase(&mut path, &ids, a.batch, true, a.max))
        } else {
            None
        };
        let (bridge_after, routes_after) = path.installed();
        let show = |p: &Phase| {
            serde_json::json!({
                "routes": p.routes, "seconds": p.seconds, "routes_per_s": p.rate(),
                "complete": p.complete,
            })
        };
        if a.json {
            println!(
                "{}",
                serde_json::json!({
                    "n": n, "batch": a.batch, "path": if a.whole { "whole" } else { "incremental" },
                    "install": show(&install),
                    "installed": { "bridge": bridge, "routes": routes },
                    "withdraw": withdraw.as_ref().map(show),
                    "left": { "bridge": bridge_after, "routes": routes_after },
                })
            );
        } else {
            let w = withdraw.as_ref().map_or_else(
                || "not run (install incomplete)".to_string(),
                |w| {
                    format!(
                        "{:>10.0} routes/s ({} routes in {:.3} s{})",
                        w.rate(),
                        w.routes,
                        w.seconds,
                        if w.complete { "" } else { ", stopped" }
                    )
                },
            );
            println!(
                "{} N={n:>7} batch={}: install {:>10.0} routes/s ({} routes in {:.3} s{}; {bridge} bridge entries, {routes} routes), withdraw {w}; left {bridge_after}/{routes_after}",
                if a.whole { "whole" } else { "incremental" },
                a.batch,
                install.rate(),
                install.routes,
                install.seconds,
                if install.complete { "" } else { ", stopped" },
            );
        }
    }
}
