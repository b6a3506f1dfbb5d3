use super::*;
use axum::response::IntoResponse;
use ovr_dataplane::Pipeline;

fn pipeline() -> Pipeline {
    Pipeline::new(ovr_dataplane::Settings {
        flow_capacity: 64,
        ..Default::default()
    })
}

fn readable(r: &Requests) -> bool {
    let mut p = [rustix::event::PollFd::new(
        &r.wake,
        rustix::event::PollFlags::IN,
    )];
    rustix::event::poll(&mut p, Some(&rustix::event::Timespec::default())).unwrap() == 1
}

#[test]
fn a_request_wakes_the_worker() {
    let (client, rxs) = channel(1);
    let requests = &rxs[0];
    assert!(!readable(requests));
    let (reply, _answer) = oneshot::channel();
    client.send(0, Request::TraceAdd(3, reply)).unwrap();
    assert!(
        readable(requests),
        "a queued request makes the eventfd readable"
    );
    requests.awake();
    assert!(!readable(requests), "awake clears it");
}

#[test]
fn an_abandoned_request_is_not_served() {
    let (client, mut rxs) = channel(1);
    let mut pipe = pipeline();
    // The client gave up (its receiver is dropped) before the worker looked.
    let (reply, answer) = oneshot::channel();
    client.send(0, Request::TraceAdd(5, reply)).unwrap();
    drop(answer);
    drain(&mut rxs[0], &mut pipe);
    assert_eq!(
        pipe.graph().trace().pending(),
        0,
        "the abandoned request was served"
    );
    // One still waited for is.
    let (reply, mut answer) = oneshot::channel();
    client.send(0, Request::TraceAdd(5, reply)).unwrap();
    drain(&mut rxs[0], &mut pipe);
    assert_eq!(answer.try_recv(), Ok(5));
    assert_eq!(pipe.graph().trace().pending(), 5);
}

#[test]
fn a_full_queue_is_503_with_retry_after() {
    let (client, mut rxs) = channel_of(1, 2);
    let mut answers = Vec::new();
    for _ in 0..2 {
        let (reply, answer) = oneshot::channel();
        client.send(0, Request::Trace(reply)).unwrap();
        answers.push(answer);
    }
    let (reply, _answer) = oneshot::channel();
    let e = client.send(0, Request::Trace(reply)).unwrap_err();
    let r = e.into_response();
    assert_eq!(r.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()["retry-after"], "1");
    // Room again once the worker has answered.
    drain(&mut rxs[0], &mut pipeline());
    let (reply, _answer) = oneshot::channel();
    client.send(0, Request::Trace(reply)).unwrap();
}

/// Readers that gave up do not leave a round behind that later readers would join
/// and wait on forever.
#[tokio::test]
async fn a_round_every_reader_left_still_ends() {
    let (client, mut rxs) = channel(1);
    let requests = rxs.remove(0);
    std::thread::spawn(move || {
        let mut pipe = pipeline();
        while let Some(r) = requests.recv() {
            std::thread::sleep(Duration::from_millis(50));
            serve(&mut pipe, r);
        }
    });
    let c = client.clone();
    let gone = tokio::spawn(async move { c.counters().await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    gone.abort();
    let _ = gone.await;
    let later = tokio::time::timeout(Duration::from_secs(5), client.counters()).await;
    assert!(matches!(later, Ok(Ok(_))), "{later:?}");
}

/// A thousand concurrent counter reads: all answered, in a few rounds.
#[tokio::test]
async fn concurrent_counter_reads_share_a_round() {
    let (client, mut rxs) = channel(1);
    let requests = rxs.remove(0);
    let rounds = std::thread::spawn(move || {
        let mut pipe = pipeline();
        let mut rounds = 0;
        while let Some(r) = requests.recv() {
            // Slow, so that reads pile up while a round waits.
            std::thread::sleep(Duration::from_millis(5));
            rounds += usize::from(matches!(r, Request::Counters(..)));
            serve(&mut pipe, r);
        }
        rounds
    });
    let reads: Vec<_> = (0..1000)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.counters().await })
        })
        .collect();
    for r in reads {
        r.await.unwrap().unwrap();
    }
    drop(client);
    let rounds = rounds.join().unwrap();
    assert!(rounds <= 3, "{rounds} rounds for 1000 reads");
}

/// A pipeline whose flow table has `slots` slots and holds `pairs` flow pairs (UDP to
/// port 53 from distinct ports).
fn with_flows(slots: usize, pairs: u32) -> Pipeline {
    use ovr_tables::flow::{FlowAction, FlowKey};
    use ovr_tables::ids::{NextHopId, VrfId};
    let mut pipe = Pipeline::new(ovr_dataplane::Settings {
        flow_capacity: slots,
        ..Default::default()
    });
    let fwd = FlowAction::Forward {
        next_hop: NextHopId(1),
    };
    for i in 0..pairs {
        let src = (0x0a00_0000u32 + i).to_be_bytes();
        let k = FlowKey::v4(VrfId(1), src, [10, 1, 0, 1], 17, 4000, 53);
        pipe.cx
            .flows
            .insert_pair((k, fwd), (k.reverse(), fwd), 0)
            .unwrap();
    }
    pipe
}

/// Calls `drain` (one loop iteration each) until `done`; how many calls it took.
fn iterations(
    rx: &mut Requests,
    pipe: &mut Pipeline,
    below: &mut impl Below,
    mut done: impl FnMut() -> bool,
) -> usize {
    let mut n = 0;
    while !done() {
        drain_with(rx, pipe, below);
        n += 1;
        assert!(n < 100_000, "never answered");
    }
    n
}

/// A dump of a table larger than one step is answered over several loop iterations,
/// none reading more than WALK_STEP slots or recording more than FLOW_STEP flows (so the
/// worker forwards in between), with the same answer as read whole.
#[test]
fn a_flow_dump_is_read_a_bounded_step_per_loop_iteration() {
    let slots = 4 * WALK_STEP;
    let pairs = 10_000;
    let mut pipe = with_flows(slots, pairs);
    let (client, mut rxs) = channel(1);
    let (reply, mut answer) = oneshot::channel();
    let all = FlowFilter {
        limit: usize::MAX,
        ..FlowFilter::default()
    };
    client.send(0, Request::Flows(all, reply)).unwrap();
    drain(&mut rxs[0], &mut pipe);
    assert!(answer.try_recv().is_err(), "answered in one loop iteration");
    assert!(
        readable(&rxs[0]),
        "the worker must not sleep while a dump is under way"
    );
    let mut got = None;
    let n = 1 + iterations(&mut rxs[0], &mut pipe, &mut (), || {
        got = answer.try_recv().ok();
        got.is_some()
    });
    let got = got.unwrap();
    let flows = 2 * pairs as usize;
    assert_eq!(
        (got.matched, got.flows.len(), got.active),
        (flows, flows, flows)
    );
    assert!(
        n >= (slots / WALK_STEP).max(flows / FLOW_STEP),
        "{n} iterations for {slots} slots and {flows} flows"
    );
    // The same answer as one read of the whole table.
    let (reply, mut whole) = oneshot::channel();
    serve(&mut pipe, Request::Flows(all, reply));
    assert_eq!(whole.try_recv().unwrap(), got);
}

/// A flow named by id is read from its slot: answered at once, whatever the table's size.
#[test]
fn a_flow_by_id_is_answered_in_one_iteration() {
    let mut pipe = with_flows(16 * WALK_STEP, 100);
    let (client, mut rxs) = channel(1);
    let (reply, mut answer) = oneshot::channel();
    let one = FlowFilter {
        id: Some(7),
        limit: 1,
        ..FlowFilter::default()
    };
    client.send(0, Request::Flows(one, reply)).unwrap();
    drain(&mut rxs[0], &mut pipe);
    let d = answer.try_recv().expect("answered in the first iteration");
    assert_eq!((d.matched, d.flows[0].id), (1, 7));
}

/// Deleting many flows removes at most FLOW_STEP per loop iteration.
#[test]
fn a_delete_removes_a_bounded_number_per_loop_iteration() {
    let pairs = 5_000;
    let mut pipe = with_flows(2 * WALK_STEP, pairs);
    let (client, mut rxs) = channel(1);
    let (reply, mut answer) = oneshot::channel();
    let port = FlowFilter {
        port: Some(53),
        ..FlowFilter::default()
    };
    client.send(0, Request::DeleteFlows(port, reply)).unwrap();
    let mut removed = None;
    let mut least = pipe.cx.flows.len();
    let n = iterations(&mut rxs[0], &mut pipe, &mut (), || {
        removed = answer.try_recv().ok();
        removed.is_some()
    });
    assert_eq!(removed, Some(2 * pairs as usize));
    assert!(pipe.cx.flows.is_empty());
    // A flow and its reverse go together: up to 2 × FLOW_STEP entries per iteration.
    least = least.div_ceil(2 * FLOW_STEP);
    assert!(n >= least, "{n} iterations, at least {least} expected");
}

/// A fast path that needs `steps` steps to merge its counters.
#[derive(Default)]
struct Slow {
    steps: usize,
    left: usize,
    begun: usize,
    asked: Vec<usize>,
}

impl Below for Slow {
    fn sync_begin(&mut self, _: &mut Pipeline) {
        self.begun += 1;
        self.left = self.steps;
    }
    fn sync_step(&mut self, _: &mut Pipeline, max: usize) -> bool {
        self.asked.push(max);
        self.left = self.left.saturating_sub(1);
        self.left == 0
    }
    fn carries(&self, _: &Pipeline, id: ovr_tables::flow::FlowId) -> bool {
        id.0.is_multiple_of(2)
    }
}

/// Counters are read once the fast path's merge is over, one bounded merge step per
/// loop iteration; a dump marks what the fast path carries.
#[test]
fn a_read_waits_for_the_fast_path_merge_a_step_per_iteration() {
    let mut pipe = with_flows(WALK_STEP, 10);
    let (client, mut rxs) = channel(1);
    let mut below = Slow {
        steps: 5,
        ..Slow::default()
    };
    let (reply, mut answer) = oneshot::channel();
    client
        .send(0, Request::Counters(Arc::default(), reply))
        .unwrap();
    let n = iterations(&mut rxs[0], &mut pipe, &mut below, || {
        answer.try_recv().is_ok()
    });
    assert_eq!((n, below.begun), (5, 1));
    assert!(below.asked.iter().all(|&m| m == SYNC_STEP));
    let (reply, mut answer) = oneshot::channel();
    let all = FlowFilter {
        limit: 100,
        ..FlowFilter::default()
    };
    client.send(0, Request::Flows(all, reply)).unwrap();
    let mut got = None;
    iterations(&mut rxs[0], &mut pipe, &mut below, || {
        got = answer.try_recv().ok();
        got.is_some()
    });
    let got = got.unwrap();
    assert_eq!(below.begun, 2);
    assert!(
        got.flows
            .iter()
            .all(|f| f.offloaded == f.id.is_multiple_of(2))
    );
}
