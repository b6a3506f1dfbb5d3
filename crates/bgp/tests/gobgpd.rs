//! ovr's GoBGP client against two real gobgpd processes peered over loopback: each is
//! configured only through the API (global settings, the peer), routes advertised on
//! one arrive at the other as the same routes, and withdrawals follow; neighbors show
//! the session. Each gobgpd has its own API and BGP ports and is killed at the end.

use ovr_bgp::evpn::{Encap, Nlri, Rd, Route, RouteTarget};
use ovr_bgp::gobgp::{Change, Global, GoBgp, Learnt, Peer};
use std::net::{Ipv4Addr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port free now on `addr` (the kernel's pick; taken again at once by gobgpd).
fn free_port(addr: &str) -> u16 {
    TcpListener::bind((addr, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Gobgpd {
    child: Child,
    api: String,
}

impl Gobgpd {
    fn start(dir: &std::path::Path, name: &str) -> Self {
        let port = free_port("127.0.0.1");
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
        let child = Command::new("gobgpd")
            .args([
                "--api-hosts",
                &format!("127.0.0.1:{port}"),
                "--pprof-disable",
                "-p",
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("gobgpd (scripts/setup.sh installs it)");
        Self {
            child,
            api: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn client(&self) -> GoBgp {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match GoBgp::connect(&self.api).await {
                Ok(c) => return c,
                Err(e) if Instant::now() > deadline => panic!("{e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

impl Drop for Gobgpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn until<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "not within 20 s: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn route(host: Ipv4Addr, mac_last: u8) -> [Route; 2] {
    let rd = Rd::Ip {
        router: host,
        assigned: 1,
    };
    let base = Route {
        nlri: Nlri::MacIp {
            rd,
            tag: 0,
            mac: ovr_bgp::evpn::Mac([2, 0, 0, 0, 1, mac_last]),
            ip: Some(format!("10.1.0.{mac_last}").parse().unwrap()),
            label: 100,
            routed: None,
        },
        next_hop: host.into(),
        targets: vec![RouteTarget::auto(65000, 100)],
        encap: Encap::Vxlan,
        router_mac: None,
        pmsi: None,
        mobility: None,
    };
    let imet = Route {
        nlri: Nlri::Imet {
            rd,
            tag: 0,
            originator: host.into(),
        },
        pmsi: Some((100, host)),
        ..base.clone()
    };
    [base, imet]
}

fn from(routes: &[Learnt], neighbor: &str) -> Vec<Route> {
    let mut v: Vec<Route> = routes
        .iter()
        .filter(|l| l.neighbor == neighbor && !l.is_withdrawn())
        .map(|l| l.route().cloned().expect("a route ovr sent decodes"))
        .collect();
    v.sort_by_key(|r| format!("{r:?}"));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_cross_two_gobgpds_and_are_withdrawn() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        Gobgpd::start(dir.path(), "a"),
        Gobgpd::start(dir.path(), "b"),
    );
    let (ca, cb) = (a.client().await, b.client().await);
    let (ia, ib) = (Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2));
    let (pa, pb) = (free_port("127.0.0.1"), free_port("127.0.0.2"));
    for (c, me, port, peer, peer_port) in [(&ca, ia, pa, ib, pb), (&cb, ib, pb, ia, pa)] {
        c.start(&Global {
            asn: 65000,
            router_id: me,
            listen_port: i32::from(port),
            listen_addresses: vec![me.to_string()],
        })
        .await
        .unwrap();
        c.add_peer(&Peer {
            address: peer.into(),
            asn: 65000,
            port: peer_port,
            local_address: Some(me.into()),
            reflector_client: false,
        })
        .await
        .unwrap();
    }
    until("the session is up", async || {
        let n = ca.neighbors().await.unwrap();
        (n.len() == 1 && n[0].state == "established").then_some(())
    })
    .await;
    let mut watch = Box::pin(cb.watch().await.unwrap());
    let sent = route(ia, 10);
    for r in &sent {
        ca.announce(r).await.unwrap();
    }
    let mut expect = sent.to_vec();
    expect.sort_by_key(|r| format!("{r:?}"));
    let got = until("b learns a's routes", async || {
        let r = cb.routes().await.unwrap();
        let f = from(&r, "127.0.0.1");
        (f.len() == 2).then_some(f)
    })
    .await;
    assert_eq!(got, expect);
    // At a, they are its own: no neighbor.
    assert_eq!(from(&ca.routes().await.unwrap(), ""), expect);
    // The watch saw them too.
    use tokio_stream::StreamExt;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let batch = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .expect("watch events")
            .unwrap()
            .unwrap();
        seen.extend(from(&batch, "127.0.0.1"));
    }
    seen.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(seen, expect);
    let nb = cb.neighbors().await.unwrap();
    assert_eq!((nb[0].address.as_str(), nb[0].received), ("127.0.0.1", 2));

    // Withdrawn at a: gone at b, and the watch says so.
    ca.withdraw(&sent[0]).await.unwrap();
    until("b forgets the MAC route", async || {
        let f = from(&cb.routes().await.unwrap(), "127.0.0.1");
        (f.len() == 1).then_some(())
    })
    .await;
    let withdrawn = loop {
        let batch = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .expect("a withdrawal event")
            .unwrap()
            .unwrap();
        if let Some(l) = batch.into_iter().find(Learnt::is_withdrawn) {
            break l;
        }
    };
    // Named by its key alone (its attributes are not read).
    assert_eq!(withdrawn.change, Ok(Change::Withdrawn(sent[0].nlri.key())));
}
