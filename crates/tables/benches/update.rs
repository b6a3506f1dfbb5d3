//! Route updates through the double-buffered forwarding state while another thread keeps
//! looking up: the update rate, and the lookup rate with and without the churn.
//!
//! `cargo bench -p ovr-tables --bench update [-- SECONDS [BATCH]]` (defaults: 5 s, 1024)
//!
//! A plain program rather than criterion: what matters is two threads running at once
//! for a while, and the rates each achieved.

use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceKind};
use ovr_tables::nexthop::NextHop;
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::{TableOp, TablesReaderFactory, new_tables};
use ovr_wire::ethernet::MacAddr;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const PRELOAD: u32 = 500_000;
const LOOKUP_BATCH: usize = 256;

fn prefix24(i: u32) -> IpPrefix {
    // Spread over the address space: i's bits reversed into the top 24 bits.
    let a = (i.reverse_bits() >> 8) << 8;
    IpPrefix::new(IpAddr::V4(Ipv4Addr::from(a)), 24).expect("a /24 without host bits")
}

/// Runs lookups until `stop`, counting them; one read guard per vector of lookups.
fn lookups(factory: TablesReaderFactory, stop: Arc<AtomicBool>, count: Arc<AtomicU64>) {
    let r = factory.reader();
    let mut x = 0x1234_5678u32;
    let mut addrs = [0u32; LOOKUP_BATCH];
    let mut out = [None; LOOKUP_BATCH];
    while !stop.load(Ordering::Relaxed) {
        for a in &mut addrs {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *a = x;
        }
        let Some(t) = r.enter() else { return };
        let v = t.vrf(VrfId(1)).expect("vrf 1");
        v.fib4.lookup_batch(&addrs, &mut out);
        std::hint::black_box(&out);
        drop(t);
        count.fetch_add(LOOKUP_BATCH as u64, Ordering::Relaxed);
    }
}

fn main() {
    // cargo bench passes flags of its own ("--bench"): take the numeric arguments.
    let nums: Vec<f64> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    let secs = nums.first().copied().unwrap_or(5.0);
    let batch = nums.get(1).map_or(1024, |b| (*b as usize).max(2));
    let (mut w, _r) = new_tables();
    let mut setup = vec![
        TableOp::UpsertVrf {
            id: VrfId(1),
            name: "bench".into(),
            vni: Some(1),
        },
        TableOp::UpsertInterface(Interface {
            id: InterfaceId(1),
            name: "w1".into(),
            kind: InterfaceKind::Workload,
            vrf: Some(VrfId(1)),
            mac: MacAddr([2, 0, 0, 0, 0, 1]),
            addresses: vec![],
            mtu: 1500,
            policy: false,
            admin_up: true,
            memif: None,
            police: None,
        }),
    ];
    for n in 0..16 {
        setup.push(TableOp::UpsertNextHop(
            NextHopId(n),
            NextHop::Interface {
                interface: InterfaceId(1),
                dst_mac: MacAddr([2, 0, 0, 0, 1, n as u8]),
            },
        ));
    }
    w.commit(setup).expect("setup");
    let start = Instant::now();
    for chunk in (0..PRELOAD).collect::<Vec<_>>().chunks(16_384) {
        let ops = chunk
            .iter()
            .map(|i| TableOp::AddRoute {
                vrf: VrfId(1),
                prefix: prefix24(*i),
                nh: NextHopId(i % 16),
            })
            .collect();
        w.commit(ops).expect("preload");
    }
    println!(
        "preloaded {PRELOAD} /24 routes in {:.2} s",
        start.elapsed().as_secs_f64()
    );

    let run = |w: &mut ovr_tables::state::TablesWriter, churn: bool| -> (f64, f64) {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let reader = {
            let (f, s, c) = (w.readers(), stop.clone(), count.clone());
            std::thread::spawn(move || lookups(f, s, c))
        };
        let start = Instant::now();
        let mut updates = 0u64;
        let mut next = PRELOAD;
        while start.elapsed() < Duration::from_secs_f64(secs) {
            if churn {
                // Each batch adds batch/2 new routes and removes batch/2 old ones, so the
                // table size stays constant.
                let ops = (0..batch as u32 / 2)
                    .flat_map(|k| {
                        let i = next + k;
                        [
                            TableOp::AddRoute {
                                vrf: VrfId(1),
                                prefix: prefix24(i),
                                nh: NextHopId(i % 16),
                            },
                            TableOp::RemoveRoute {
                                vrf: VrfId(1),
                                prefix: prefix24(i - PRELOAD),
                            },
                        ]
                    })
                    .collect();
                w.commit(ops).expect("churn batch");
                next += batch as u32 / 2;
                updates += batch as u64;
            } else {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let t = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        reader.join().expect("reader");
        (updates as f64 / t, count.load(Ordering::Relaxed) as f64 / t)
    };
    let (_, quiet) = run(&mut w, false);
    let (updates, busy) = run(&mut w, true);
    println!("lookups without churn: {:.1} M/s (one thread)", quiet / 1e6);
    println!(
        "route updates: {:.2} M/s in batches of {batch} while lookups ran at {:.1} M/s ({:+.0}%)",
        updates / 1e6,
        busy / 1e6,
        100.0 * (busy - quiet) / quiet
    );
}
