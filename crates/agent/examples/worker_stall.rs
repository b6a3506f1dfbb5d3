//! How long answering the API holds a forwarding worker: a pipeline with N flows (the
//! default flow table of 1M slots), one request of each kind queued, and the worker's
//! `drain` called once per loop iteration as ovrd's loop does, until it has answered.
//! Prints, per kind, the longest single `drain` call (the worker forwards nothing
//! meanwhile) in the thread's CPU time (what the call cost, whatever else ran on the
//! machine) and in wall time, the iterations it took and the wall time to the answer.
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

/// The calling thread's CPU time.
fn cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec the call writes; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The longest `drain` (thread CPU time, wall time), the iterations, the total.
struct Run {
    cpu: Duration,
    wall: Duration,
    n: usize,
    total: Duration,
}

/// Drives the worker until `done`.
fn drive(
    rx: &mut ovr_agent::worker::Requests,
    pipe: &mut Pipeline,
    mut done: impl FnMut() -> bool,
) -> Run {
    let start = Instant::now();
    let mut r = Run {
        cpu: Duration::ZERO,
        wall: Duration::ZERO,
        n: 0,
        total: Duration::ZERO,
    };
    while !done() {
        let (t, c) = (Instant::now(), cpu());
        drain(rx, pipe);
        r.cpu = r.cpu.max(cpu() - c);
        r.wall = r.wall.max(t.elapsed());
        r.n += 1;
        assert!(r.n < 1_000_000, "no answer");
    }
    r.total = start.elapsed();
    r
}

fn line(kind: &str, r: &Run, note: &str) {
    println!(
        "{kind:<20} {:>9.3} ms {:>9.3} ms {:>10} {:>11.3} ms  {note}",
        ms(r.cpu),
        ms(r.wall),
        r.n,
        ms(r.total)
    );
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
    println!("kind                 longest drain (cpu, wall)  iterations  to the answer");
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
        line("counters", &r, "");
        for (name, f) in kinds {
            let (tx, mut answer) = oneshot::channel();
            client.send(0, Request::Flows(f, tx)).unwrap();
            let mut got = None;
            let r = drive(rx, &mut pipe, || {
                got = answer.try_recv().ok().map(|d| (d.flows.len(), d.matched));
                got.is_some()
            });
            let (returned, matched) = got.unwrap();
            line(name, &r, &format!("{returned} returned, {matched} matched"));
        }
        let (tx, mut answer) = oneshot::channel();
        client.send(0, Request::Trace(tx)).unwrap();
        let r = drive(rx, &mut pipe, || answer.try_recv().is_ok());
        line("trace", &r, "");
    }
    // Last, as it empties the table: deletes the flows of one source port.
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
    line("delete (one port)", &r, &format!("{removed} removed"));
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
