//! A bare memif endpoint for trying ovr's memif against another implementation:
//! `memif_peer server|client SOCKET ID SECONDS [tx]` receives (and with `tx` also sends
//! 64-byte frames) for SECONDS, then prints its counters and the link's status.

use ovr_memif::{Config, Manager, Role, SocketAddr};
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: memif_peer server|client SOCKET ID SECONDS [tx]");
        std::process::exit(2);
    }
    let role = if a[1] == "client" {
        Role::Client
    } else {
        Role::Server
    };
    let sock = SocketAddr::Path(a[2].clone().into());
    let id: u32 = a[3].parse().expect("id");
    let secs: u64 = a[4].parse().expect("seconds");
    let tx = a.get(5).is_some_and(|s| s == "tx");
    let m = Manager::start().expect("manager");
    let h = m.add(Config::new("peer", role, sock, id)).expect("add");
    let mut p = h.port(0, 1, 256).expect("port");
    let end = Instant::now() + Duration::from_secs(secs);
    let mut first: Option<Vec<u8>> = None;
    let mut f = [0u8; 64];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x0b]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x0a]);
    f[12] = 0x88;
    f[13] = 0xb5;
    let batch: Vec<&[u8]> = vec![&f[..]; 32];
    while Instant::now() < end {
        let n = p.recv(&mut |it| {
            for fr in it {
                if first.is_none() {
                    first = Some(fr.to_vec());
                }
            }
        });
        if tx {
            p.send(&batch);
        }
        if n == 0 && !tx {
            std::thread::yield_now();
        }
    }
    let s = p.stats();
    println!("status {:?}", h.link().status());
    println!("rx {} bytes {} bad {:?}", s.rx.frames, s.rx.bytes, s.rx.bad);
    println!("tx {} dropped {}", s.tx.frames, s.tx.dropped);
    if let Some(fr) = first {
        println!("first {:02x?}", &fr[..fr.len().min(48)]);
    }
}
