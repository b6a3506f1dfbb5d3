//! Injects EVPN routes into a gobgpd through its gRPC API, as fast as GoBGP takes them
//! (`AddPathStream`, many paths per message): the datacenter's side of the end-to-end
//! benchmark (bench/evpn_e2e.py). Per remote VTEP a type 3 route (ingress replication for
//! VNI 100), then N type 2 routes: MAC `i / 2` of VTEP `(i / 2) % VTEPS` alone (even i)
//! or with its address (odd i), as `install_rate` makes them; `--withdraw` withdraws the
//! same routes; `--skip K` leaves out the first K of them (a second set, to load a
//! table beside the measured one). Instead of routes: `--setup` starts the gobgpd's BGP side, `--peer`
//! adds the peer the routes go to (EVPN, the same AS: iBGP), `--delete-peer` removes
//! it (the session goes, and the peer withdraws every route it had from it).
//!
//! `cargo run --release -p ovr-bgp --example evpn_inject -- --api URL --routes N
//! [--withdraw] [--skip K] [--chunk C] [--per-second R] [--asn 65000]`, or `... --api URL [--setup
//! --router-id A --listen A] [--peer A] [--delete-peer A]`
//!
//! Prints one JSON line: the routes sent, the seconds it took, and when it started and
//! ended (Unix time, seconds) so that the caller can time from the first route sent.
//! `--per-second R` paces the messages (C paths each) to R paths a second and adds when
//! each message went (`sent_at`, Unix time), for per-route latencies.

use ovr_bgp::api;
use ovr_bgp::api::gobgp_api_client::GobgpApiClient;
use ovr_bgp::evpn::{Encap, Mac, Nlri, Rd, Route, RouteTarget};
use ovr_bgp::gobgp::{Global, GoBgp, Peer, encode};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const VNI: u32 = 100;
const VTEPS: u8 = 4;

struct Args {
    api: String,
    routes: usize,
    skip: usize,
    withdraw: bool,
    chunk: usize,
    per_second: f64,
    asn: u16,
    setup: Option<(Ipv4Addr, IpAddr)>,
    peer: Option<IpAddr>,
    delete_peer: Option<IpAddr>,
}

fn args() -> Result<Args, String> {
    let (mut api, mut routes, mut withdraw, mut chunk, mut asn) =
        (None, 100_000, false, 1000, 65000);
    let (mut per_second, mut skip) = (0.0, 0);
    let (mut setup, mut router_id, mut listen) = (false, None, None);
    let (mut peer, mut delete_peer) = (None, None);
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| format!("{k} needs a value"));
        let bad = |e: &dyn std::fmt::Display| format!("{k}: {e}");
        match k.as_str() {
            "--api" => api = Some(v()?),
            "--routes" => routes = v()?.parse().map_err(|e| bad(&e))?,
            "--skip" => skip = v()?.parse().map_err(|e| bad(&e))?,
            "--chunk" => chunk = v()?.parse().map_err(|e| bad(&e))?,
            "--per-second" => per_second = v()?.parse().map_err(|e| bad(&e))?,
            "--asn" => asn = v()?.parse().map_err(|e| bad(&e))?,
            "--withdraw" => withdraw = true,
            "--setup" => setup = true,
            "--router-id" => router_id = Some(v()?.parse().map_err(|e| bad(&e))?),
            "--listen" => listen = Some(v()?.parse().map_err(|e| bad(&e))?),
            "--peer" => peer = Some(v()?.parse().map_err(|e| bad(&e))?),
            "--delete-peer" => delete_peer = Some(v()?.parse().map_err(|e| bad(&e))?),
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    let setup = if setup {
        Some((
            router_id.ok_or("--setup needs --router-id")?,
            listen.ok_or("--setup needs --listen")?,
        ))
    } else {
        None
    };
    Ok(Args {
        api: api.ok_or("--api URL is required")?,
        routes,
        skip,
        withdraw,
        chunk: chunk.max(1),
        per_second,
        asn,
        setup,
        peer,
        delete_peer,
    })
}

fn vtep(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(192, 0, 2, 10 + n)
}

/// Addresses 10.0.0.0 (the network's), .1 (its gateway), .10 (a local workload) and
/// .255 are left out: MACs whose address would be one of them are skipped.
fn usable(i: usize) -> bool {
    !matches!(i / 2, 0 | 1 | 10 | 255)
}

fn type2(i: usize, asn: u16) -> Route {
    let m = u32::try_from(i / 2).unwrap_or(u32::MAX);
    let [_, b, c, d] = m.to_be_bytes();
    let from = u8::try_from((i / 2) % usize::from(VTEPS)).unwrap_or(0);
    Route {
        nlri: Nlri::MacIp {
            rd: Rd::Ip {
                router: vtep(from),
                assigned: 1,
            },
            tag: 0,
            mac: Mac([2, 1, 0, b, c, d]),
            ip: (i % 2 == 1).then_some(IpAddr::V4(Ipv4Addr::new(10, b, c, d))),
            label: VNI,
            routed: None,
        },
        next_hop: vtep(from).into(),
        targets: vec![RouteTarget::auto(asn, VNI)],
        encap: Encap::Vxlan,
        router_mac: None,
        pmsi: None,
        mobility: None,
    }
}

fn type3(n: u8, asn: u16) -> Route {
    Route {
        nlri: Nlri::Imet {
            rd: Rd::Ip {
                router: vtep(n),
                assigned: 1,
            },
            tag: 0,
            originator: vtep(n).into(),
        },
        next_hop: vtep(n).into(),
        targets: vec![RouteTarget::auto(asn, VNI)],
        encap: Encap::Vxlan,
        router_mac: None,
        pmsi: Some((VNI, vtep(n))),
        mobility: None,
    }
}

/// `--setup`, `--peer`, `--delete-peer`: the router's BGP side, no routes.
async fn configure(a: &Args) -> Result<(), String> {
    let g = GoBgp::connect(&a.api).await.map_err(|e| e.to_string())?;
    if let Some((router_id, listen)) = a.setup {
        let global = Global {
            asn: u32::from(a.asn),
            router_id,
            listen_port: 179,
            listen_addresses: vec![listen.to_string()],
        };
        g.start(&global).await.map_err(|e| e.to_string())?;
    }
    if let Some(peer) = a.peer {
        let p = Peer {
            address: peer,
            asn: u32::from(a.asn),
            port: 179,
            local_address: a.setup.map(|(_, listen)| listen),
            reflector_client: false,
        };
        g.add_peer(&p).await.map_err(|e| e.to_string())?;
    }
    if let Some(peer) = a.delete_peer {
        let mut client = GobgpApiClient::connect(a.api.clone())
            .await
            .map_err(|e| format!("{}: {e}", a.api))?;
        client
            .delete_peer(api::DeletePeerRequest {
                address: peer.to_string(),
                ..api::DeletePeerRequest::default()
            })
            .await
            .map_err(|e| format!("DeletePeer: {e}"))?;
    }
    Ok(())
}

fn unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

async fn run(a: Args) -> Result<(), String> {
    if a.setup.is_some() || a.peer.is_some() || a.delete_peer.is_some() {
        return configure(&a).await;
    }
    // Encoded before the clock starts: what is timed is GoBGP taking them.
    let mut paths: Vec<api::Path> = (0..VTEPS).map(|n| encode(&type3(n, a.asn))).collect();
    paths.extend(
        (0..)
            .filter(|&i| usable(i))
            .skip(a.skip)
            .take(a.routes)
            .map(|i| encode(&type2(i, a.asn))),
    );
    if a.withdraw {
        // Type 2 first, the VTEPs' type 3 last.
        paths.rotate_left(usize::from(VTEPS));
        for p in &mut paths {
            p.is_withdraw = true;
        }
    }
    let sent = paths.len();
    let messages: Vec<api::AddPathStreamRequest> = paths
        .chunks(a.chunk)
        .map(|c| api::AddPathStreamRequest {
            table_type: api::TableType::Global as i32,
            vrf_id: String::new(),
            paths: c.to_vec(),
        })
        .collect();
    let mut client = GobgpApiClient::connect(a.api.clone())
        .await
        .map_err(|e| format!("{}: {e}", a.api))?
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    let (start, t) = (unix(), Instant::now());
    let mut sent_at = Vec::new();
    if a.per_second > 0.0 {
        // One message every `chunk / per_second` seconds, each stamped as it goes.
        let every = std::time::Duration::from_secs_f64(a.chunk as f64 / a.per_second);
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let pace = tokio::spawn(async move {
            let mut at = Vec::with_capacity(messages.len());
            let mut tick = tokio::time::interval(every);
            for m in messages {
                tick.tick().await;
                at.push(unix());
                if tx.send(m).await.is_err() {
                    break;
                }
            }
            at
        });
        client
            .add_path_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .map_err(|e| format!("AddPathStream: {e}"))?;
        sent_at = pace.await.map_err(|e| e.to_string())?;
    } else {
        client
            .add_path_stream(tokio_stream::iter(messages))
            .await
            .map_err(|e| format!("AddPathStream: {e}"))?;
    }
    let seconds = t.elapsed().as_secs_f64();
    let sent_at: Vec<String> = sent_at.iter().map(|s| format!("{s:.6}")).collect();
    println!(
        "{{\"sent\": {sent}, \"withdraw\": {}, \"seconds\": {seconds:.6}, \"start\": {start:.6}, \"end\": {:.6}, \"sent_at\": [{}]}}",
        a.withdraw,
        unix(),
        sent_at.join(", ")
    );
    Ok(())
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("evpn_inject: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if let Err(e) = rt.block_on(run(a)) {
        eprintln!("evpn_inject: {e}");
        std::process::exit(1);
    }
}
