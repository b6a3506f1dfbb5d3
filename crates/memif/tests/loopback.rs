//! ovr as server and ovr as client in one process, over a real socket and memfd:
//! handshake, frames both ways (a 9000-byte one chained over 2048-byte buffers),
//! the peer's restart, and refusals (wrong secret, unknown id).

use ovr_memif::{Config, LinkState, Manager, Port, Role, SocketAddr};
use std::time::{Duration, Instant};

/// A socket path in a directory of its own, removed with the returned guard.
fn sock(name: &str) -> (tempfile::TempDir, SocketAddr) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("ovr-memif-{name}-"))
        .tempdir()
        .unwrap();
    let path = dir.path().join("memif.sock");
    (dir, SocketAddr::Path(path))
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect();
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x0b]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x0a]);
    f
}

/// Sends `frames` on `tx` and collects what `rx` receives until all arrived.
fn exchange(tx: &mut Port, rx: &mut Port, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    let mut got = Vec::new();
    // The receiver offers buffers on its first receive (client) before the sender can
    // fill them.
    rx.recv(&mut |it| got.extend(it.map(|f| f.to_vec())));
    let mut sent = 0;
    let t = Instant::now();
    while got.len() < frames.len() {
        if sent < refs.len() {
            sent += tx.send(&refs[sent..]);
        }
        rx.recv(&mut |it| got.extend(it.map(|f| f.to_vec())));
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "got {} of {}",
            got.len(),
            frames.len()
        );
    }
    got
}

#[test]
fn server_and_client_exchange_frames() {
    let m = Manager::start().unwrap();
    let (_dir, a) = sock("xchg");
    let mut sc = Config::new("srv", Role::Server, a.clone(), 3);
    sc.secret = "topsecret".into();
    let srv = m.add(sc).unwrap();
    let mut cc = Config::new("cli", Role::Client, a.clone(), 3);
    cc.secret = "topsecret".into();
    cc.log2_ring_size = 8;
    let cli = m.add(cc).unwrap();
    let mut sp = srv.port(0, 1, 64).unwrap();
    let mut cp = cli.port(0, 1, 64).unwrap();
    wait_for("link up", || {
        srv.link().state() == LinkState::Up && cli.link().state() == LinkState::Up
    });
    let s = srv.link().status();
    assert!(s.peer_name.starts_with("ovr"), "{s:?}");
    assert_eq!(s.peer_interface, "cli");
    assert_eq!(s.version, "2.0");
    assert_eq!(cli.link().status().peer_interface, "srv");

    // Client to server: small frames and a 9000-byte one (5 chained buffers).
    let mut frames: Vec<Vec<u8>> = (0..100).map(|i| frame(60 + i, i as u8)).collect();
    frames.push(frame(9000, 99));
    frames.push(frame(64, 100));
    let got = exchange(&mut cp, &mut sp, &frames);
    assert_eq!(got, frames);

    // Server to client, more frames than a ring holds (256 slots).
    let frames: Vec<Vec<u8>> = (0..1000).map(|i| frame(64 + i % 1400, i as u8)).collect();
    let got = exchange(&mut sp, &mut cp, &frames);
    assert_eq!(got, frames);
    let jumbo = vec![frame(9000, 1), frame(9000, 2)];
    assert_eq!(exchange(&mut sp, &mut cp, &jumbo), jumbo);
    assert_eq!(cp.stats().rx.frames, 1002);
    assert_eq!(sp.stats().tx.frames, 1002);

    // The client goes away and comes back: the server's link follows.
    drop(cp);
    drop(cli);
    wait_for("server link down", || srv.link().state() == LinkState::Down);
    let f = vec![frame(64, 5)];
    assert_eq!(
        sp.send(&[&f[0]]),
        0,
        "nothing is sent on a link that is down"
    );
    let mut cc = Config::new("cli2", Role::Client, a.clone(), 3);
    cc.secret = "topsecret".into();
    let cli = m.add(cc).unwrap();
    let mut cp = cli.port(0, 1, 64).unwrap();
    wait_for("link up again", || srv.link().state() == LinkState::Up);
    assert_eq!(srv.link().status().connects, 2);
    assert_eq!(exchange(&mut cp, &mut sp, &f), f);
    assert_eq!(exchange(&mut sp, &mut cp, &f), f);
}

#[test]
fn server_restart_client_reconnects() {
    let m = Manager::start().unwrap();
    let (_dir, a) = sock("restart");
    let srv = m
        .add(Config::new("srv", Role::Server, a.clone(), 0))
        .unwrap();
    let cli = m
        .add(Config::new("cli", Role::Client, a.clone(), 0))
        .unwrap();
    let mut cp = cli.port(0, 1, 32).unwrap();
    wait_for("up", || cli.link().state() == LinkState::Up);
    drop(srv);
    wait_for("client down", || cli.link().state() != LinkState::Up);
    assert_eq!(cp.send(&[&frame(64, 0)]), 0);
    // A new server on the same socket (an ovrd restart, an admin down/up).
    let srv = m
        .add(Config::new("srv", Role::Server, a.clone(), 0))
        .unwrap();
    let mut sp = srv.port(0, 1, 32).unwrap();
    wait_for("client up again", || cli.link().state() == LinkState::Up);
    let f = vec![frame(128, 3)];
    assert_eq!(exchange(&mut cp, &mut sp, &f), f);
}

#[test]
fn refusals_are_named() {
    let m = Manager::start().unwrap();
    let (_dir, a) = sock("refuse");
    let mut sc = Config::new("srv", Role::Server, a.clone(), 1);
    sc.secret = "right".into();
    let srv = m.add(sc).unwrap();
    let mut cc = Config::new("cli", Role::Client, a.clone(), 1);
    cc.secret = "wrong".into();
    let cli = m.add(cc).unwrap();
    wait_for("refused", || {
        cli.link().status().last_reason.contains("Incorrect secret")
    });
    assert_eq!(srv.link().state(), LinkState::Down);
    let other = m
        .add(Config::new("cli2", Role::Client, a.clone(), 9))
        .unwrap();
    wait_for("unknown id", || {
        other.link().status().last_reason.contains("ID not found")
    });
    let n = cli
        .link()
        .status()
        .disconnects
        .get("peer_disconnect")
        .copied()
        .unwrap_or(0);
    assert!(n >= 1);
    // A second server with the same id on the socket is refused at once.
    assert!(
        m.add(Config::new("dup", Role::Server, a.clone(), 1))
            .is_err()
    );
    // Bad settings name their field.
    let mut bad = Config::new("bad", Role::Server, a, 2);
    bad.log2_ring_size = 20;
    let e = m.add(bad).err().unwrap().to_string();
    assert!(e.contains("ring_size"), "{e}");
}

#[test]
fn ip_mode_carries_packets_without_ethernet() {
    let m = Manager::start().unwrap();
    let (_dir, a) = sock("ip");
    let mut sc = Config::new("srv", Role::Server, a.clone(), 0);
    sc.mode = ovr_memif::Mode::Ip;
    sc.mac = [2, 0, 0, 0, 0, 0x11];
    let srv = m.add(sc).unwrap();
    let mut cc = Config::new("cli", Role::Client, a.clone(), 0);
    cc.mode = ovr_memif::Mode::Ip;
    let cli = m.add(cc).unwrap();
    let mut sp = srv.port(0, 1, 32).unwrap();
    let mut cp = cli.port(0, 1, 32).unwrap();
    wait_for("up", || srv.link().state() == LinkState::Up);
    // ovr hands the driver Ethernet frames: the header is left out on the wire, and put
    // back (the interface's MAC as destination, the type from the IP version) on receipt.
    let mut v4 = frame(60, 1);
    v4[12..14].copy_from_slice(&[0x08, 0x00]);
    v4[14] = 0x45;
    let mut v6 = frame(80, 2);
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    v6[14] = 0x60;
    let got = exchange(&mut cp, &mut sp, &[v4.clone(), v6.clone()]);
    assert_eq!(got.len(), 2);
    for (g, s) in got.iter().zip([&v4, &v6]) {
        assert_eq!(&g[..6], &[2, 0, 0, 0, 0, 0x11]);
        assert_eq!(&g[12..], &s[12..], "type and packet as sent");
    }
    // Something that is not IP is dropped and counted, not delivered.
    let mut junk = frame(60, 3);
    junk[14] = 0x00;
    assert_eq!(cp.send(&[&junk]), 1);
    let t = Instant::now();
    while sp.stats().rx.dropped == 0 {
        sp.recv(&mut |it| assert_eq!(it.count(), 0));
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
