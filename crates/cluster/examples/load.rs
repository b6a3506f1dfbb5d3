//! Writes a simulated cluster into etcd, for the scale benchmark (bench/cluster_scale.py):
//! `--hosts` host records, `--networks` networks and `--endpoints` endpoints spread
//! evenly over hosts and networks; then, with `--rate`, that many endpoint changes a
//! second for `--seconds` (an endpoint's address moves). Prints one JSON line per phase
//! with the etcd revision it ended at, so that the caller can wait for an agent to have
//! applied it.
//!
//! `cargo run --release -p ovr-cluster --example load -- --etcd URL ...`

use etcd_client::{Client, Txn, TxnOp};
use std::time::{Duration, Instant};

struct Args {
    etcd: String,
    hosts: usize,
    networks: usize,
    endpoints: usize,
    rate: usize,
    seconds: u64,
    /// Network 0 is this existing network (not written): its endpoints are a host's
    /// local network's.
    local: Option<String>,
    /// Only the steady phase (the initial keys are there).
    steady_only: bool,
}

impl Args {
    fn network(&self, n: usize) -> String {
        match (&self.local, n) {
            (Some(l), 0) => l.clone(),
            _ => format!("n{n}"),
        }
    }
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        etcd: "http://127.0.0.1:2379".into(),
        hosts: 1000,
        networks: 100,
        endpoints: 100_000,
        rate: 0,
        seconds: 10,
        local: None,
        steady_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--steady-only" {
            a.steady_only = true;
            continue;
        }
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        let n = || v.parse::<usize>().map_err(|e| format!("{k}: {e}"));
        match k.as_str() {
            "--etcd" => a.etcd = v.clone(),
            "--hosts" => a.hosts = n()?,
            "--networks" => a.networks = n()?,
            "--endpoints" => a.endpoints = n()?,
            "--rate" => a.rate = n()?,
            "--seconds" => a.seconds = n()? as u64,
            "--local" => a.local = Some(v.clone()),
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    Ok(a)
}

/// Simulated hosts are named `sim-N` and their underlay is 198.18.0.0/15 (benchmarking
/// addresses), so that nothing they stand for can be reached.
fn host(i: usize) -> (String, String) {
    let (hi, lo) = (i / 250, i % 250 + 1);
    (
        format!("/ovr/v1/hosts/sim-{i}"),
        format!(
            r#"{{"vtep":"198.18.{hi}.{lo}","mac":"02:aa:00:00:{:02x}:{:02x}","underlay":["198.18.{hi}.{lo}/15"],"labels":{{}},"version":"sim"}}"#,
            i / 256,
            i % 256
        ),
    )
}

/// Endpoint `i`: in network i % networks, on host (i / networks) % hosts (so that every
/// host has endpoints in every network when there are enough), with the address moved by
/// `turn`.
fn endpoint(a: &Args, i: usize, turn: usize) -> (String, String) {
    let (h, n) = ((i / a.networks) % a.hosts, i % a.networks);
    let k = i / a.networks + turn;
    (
        format!("/ovr/v1/endpoints/sim-{h}/e{i}"),
        format!(
            r#"{{"network":"{}","mac":"02:bb:{:02x}:{:02x}:{:02x}:{:02x}","ips":["10.{}.{}.{}"]}}"#,
            a.network(n),
            (i >> 24) & 255,
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255,
            100 + (k >> 16) % 100,
            (k >> 8) & 255,
            k & 255
        ),
    )
}

async fn put_all(c: &Client, kvs: Vec<(String, String)>) -> Result<i64, String> {
    // Transactions of 128 puts, 8 at a time: what etcd takes fastest here.
    let mut revision = 0;
    for group in kvs.chunks(128 * 8) {
        let mut tasks = Vec::new();
        for chunk in group.chunks(128) {
            let ops: Vec<TxnOp> = chunk
                .iter()
                .map(|(k, v)| TxnOp::put(k.as_str(), v.as_str(), None))
                .collect();
            let mut c = c.clone();
            tasks.push(tokio::spawn(async move {
                c.txn(Txn::new().and_then(ops)).await
            }));
        }
        for t in tasks {
            let r = t
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            revision = revision.max(r.header().map_or(0, |h| h.revision()));
        }
    }
    Ok(revision)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let a = args()?;
    let c = Client::connect([a.etcd.as_str()], None)
        .await
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    let mut kvs: Vec<(String, String)> = (0..a.networks)
        .filter(|n| *n > 0 || a.local.is_none())
        .map(|n| {
            (
                format!("/ovr/v1/networks/n{n}"),
                format!(r#"{{"vni":{},"subnets":["10.0.0.0/8"]}}"#, 1000 + n),
            )
        })
        .collect();
    kvs.extend((0..a.hosts).map(host));
    kvs.extend((0..a.endpoints).map(|i| endpoint(&a, i, 0)));
    if !a.steady_only {
        let keys = kvs.len();
        let revision = put_all(&c, kvs).await?;
        println!(
            r#"{{"phase":"initial","keys":{keys},"seconds":{:.3},"revision":{revision}}}"#,
            t.elapsed().as_secs_f64()
        );
    }
    if a.rate == 0 || a.endpoints == 0 {
        return Ok(());
    }
    // Steady changes: a batch every 10 ms.
    let per_tick = (a.rate / 100).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let (t, mut written, mut next, mut revision) = (Instant::now(), 0usize, 0usize, 0i64);
    while t.elapsed() < Duration::from_secs(a.seconds) {
        tick.tick().await;
        let batch: Vec<_> = (0..per_tick)
            .map(|j| endpoint(&a, (next + j) % a.endpoints, 1 + (next + j) / a.endpoints))
            .collect();
        next += per_tick;
        written += batch.len();
        revision = put_all(&c, batch).await?;
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        r#"{{"phase":"steady","changes":{written},"seconds":{s:.3},"rate":{:.0},"revision":{revision}}}"#,
        written as f64 / s
    );
    Ok(())
}
