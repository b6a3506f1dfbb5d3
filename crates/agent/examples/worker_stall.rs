//! How long answering the API holds a forwarding worker: a pipeline with N flows (the
//! default flow table of 1M slots), one request of each kind queued, and the worker's
//! `drain` called once per loop iteration as ovrd's loop does, until it has answered.
//! Prints, per kind, the longest single `drain` call (the worker forwards nothing
//! meanwhile), the iterations it took and the time to the answer.
//!
//! `cargo run --release -p ovr-agent --example worker_stall -- [FLOWS] [REPEATS]`

use ovr_agent::worker::{FlowFilter, Request, channel, drain};
use ovr_dataplane::{Pipeline, Settings};
use ovr_tables::flow::{FlowAction, FlowKey};
use ovr_tables::ids::{NextHopId, VrfId};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

fn pipeline(flows: u32) -> Pipeline {
    let mut pipe = Pipeline::new(Settings::default());
    let fwd = FlowAction::Forward {
        next_hop: NextHopId(1),
    };
    for i in 0..flows / 2 {
        let a = (0x0a00_0000u32 + (i >> 16)).to_be_bytes();
        let b = (0x0a01_0000u32 + (i & 0xffff)).to_be_bytes();
        let k = FlowKey::v4(VrfId(1), a, b, 17, 1000 + (i % 50_000) as u16, 53);
        pipe.cx
            .flows
            .insert_pair((k, fwd), (k.reverse(), fwd), 0)
            .expect("room for the flow");
    }
    pipe
}

/// Drives the worker until `done`; the longest `drain`, the iterations, the total.
fn drive(
    rx: &mut ovr_agent::worker::Requests,
    pipe: &mut Pipeline,
    mut done: impl FnMut() -> bool,
) -> (Duration, usize, Duration) {
    let (start, mut longest, mut n) = (Instant::now(), Duration::ZERO, 0);
    while !done() {
        let t = Instant::now();
        drain(rx, pipe);
        longest = longest.max(t.elapsed());
        n += 1;
        assert!(n < 1_000_000, "no answer");
    }
    (longest, n, start.elapsed())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flows: u32 = args.get(1).map_or(256_000, |a| a.parse().expect("FLOWS"));
    let repeats: usize = args.get(2).map_or(5, |a| a.parse().expect("REPEATS"));
    let mut pipe = pipeline(flows);
    pipe.graph_mut().trace_mut().add(0);
    let (client, mut rxs) = channel(1);
    let rx = &mut rxs[0];
    println!(
        "flows {} (table of {} slots)",
        pipe.cx.flows.len(),
        pipe.cx.flows.capacity()
    );
    println!("kind                 longest drain   iterations   to the answer");
    let kinds: [(&str, FlowFilter); 3] = [
        (
            "flows (limit 1000)",
            FlowFilter {
                limit: 1000,
                ..Default::default()
            },
        ),
        (
            "flows (one port)",
            FlowFilter {
                port: Some(53),
                limit: 1_000_000,
                ..Default::default()
            },
        ),
        (
            "flows/{id}",
            FlowFilter {
                id: Some(7),
                limit: 1,
                ..Default::default()
            },
        ),
    ];
    for _ in 0..repeats {
        let (tx, mut answer) = oneshot::channel();
        let taken = Default::default();
        client.send(0, Request::Counters(taken, tx)).unwrap();
        let r = drive(rx, &mut pipe, || answer.try_recv().is_ok());
        println!(
            "{:<20} {:>10.3} ms {:>12} {:>12.3} ms",
            "counters",
            ms(r.0),
            r.1,
            ms(r.2)
        );
        for (name, f) in kinds {
            let (tx, mut answer) = oneshot::channel();
            client.send(0, Request::Flows(f, tx)).unwrap();
            let mut got = None;
            let r = drive(rx, &mut pipe, || {
                got = answer.try_recv().ok().map(|d| (d.flows.len(), d.matched));
                got.is_some()
            });
            println!(
                "{name:<20} {:>10.3} ms {:>12} {:>12.3} ms   ({:?} returned, matched)",
                ms(r.0),
                r.1,
                ms(r.2),
                got.unwrap()
            );
        }
        let (tx, mut answer) = oneshot::channel();
        client.send(0, Request::Trace(tx)).unwrap();
        let r = drive(rx, &mut pipe, || answer.try_recv().is_ok());
        println!(
            "{:<20} {:>10.3} ms {:>12} {:>12.3} ms",
            "trace",
            ms(r.0),
            r.1,
            ms(r.2)
        );
    }
    // Last, as it empties the table: deletes one port's flows (half of them).
    let (tx, mut answer) = oneshot::channel();
    let f = FlowFilter {
        port: Some(1000),
        ..Default::default()
    };
    client.send(0, Request::DeleteFlows(f, tx)).unwrap();
    let mut removed = 0;
    let r = drive(rx, &mut pipe, || {
        answer.try_recv().map(|n| removed = n).is_ok()
    });
    println!(
        "{:<20} {:>10.3} ms {:>12} {:>12.3} ms   ({removed} removed)",
        "delete (one port)",
        ms(r.0),
        r.1,
        ms(r.2)
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
