//! The dispatcher: nodes in an order where every edge points forward, a queue per node,
//! and one pass that runs each node over everything queued for it.
//!
//! Requiring forward edges (checked when the graph is built) makes one pass enough and
//! rules out packets circling forever, whatever they contain.

use crate::node::{CONSUMED, Node, VECTOR_SIZE, Vector};
use crate::stats::NodeStats;
use crate::trace::{Trace, TraceStep};
use std::time::Instant;

/// Why a graph could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("node '{from}' names next node '{to}', which does not exist")]
    UnknownNext {
        from: &'static str,
        to: &'static str,
    },
    #[error(
        "node '{from}' names next node '{to}', which comes before it: edges must point forward"
    )]
    BackwardEdge {
        from: &'static str,
        to: &'static str,
    },
    #[error("two nodes are named '{0}'")]
    DuplicateName(&'static str),
    #[error("node '{0}' has more than {max} next nodes", max = u16::MAX)]
    TooManyNexts(&'static str),
}

/// The queue a next index leads to: none for a consumed packet. A next index out of
/// range is a node bug; the last next is the node's drop by convention, so the packet is
/// not lost.
#[inline]
fn target(edges: &[usize], next: u16) -> Option<usize> {
    if next == CONSUMED {
        return None;
    }
    edges.get(usize::from(next)).or(edges.last()).copied()
}

/// Where the graph finds a packet's trace id (0: not traced).
pub trait TraceId {
    fn trace_id(&self, pkt: u32) -> u32;
}

/// Index of a node in its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId(pub usize);

type BoxedNode<C, E> = Box<dyn Node<C, E> + Send>;

/// A built graph.
pub struct Graph<C, E: ?Sized> {
    nodes: Vec<BoxedNode<C, E>>,
    /// Per node, the node index of each next index.
    edges: Vec<Vec<usize>>,
    queues: Vec<Vec<u32>>,
    stats: Vec<NodeStats>,
    trace: Trace,
    next: Vec<u16>,
    extra: Vec<(u32, u16)>,
}

impl<C: TraceId, E: ?Sized> Graph<C, E> {
    /// Builds a graph from nodes in processing order.
    pub fn new(nodes: Vec<BoxedNode<C, E>>) -> Result<Self, GraphError> {
        let names: Vec<&'static str> = nodes.iter().map(|n| n.name()).collect();
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(GraphError::DuplicateName(n));
            }
        }
        let mut edges = Vec::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            let from = node.name();
            if node.next_nodes().len() > usize::from(u16::MAX) {
                return Err(GraphError::TooManyNexts(from));
            }
            let mut e = Vec::new();
            for to in node.next_nodes() {
                let j = names
                    .iter()
                    .position(|n| n == to)
                    .ok_or(GraphError::UnknownNext { from, to })?;
                if j <= i {
                    return Err(GraphError::BackwardEdge { from, to });
                }
                e.push(j);
            }
            edges.push(e);
        }
        let n = nodes.len();
        Ok(Self {
            nodes,
            edges,
            queues: (0..n).map(|_| Vec::with_capacity(VECTOR_SIZE)).collect(),
            stats: vec![NodeStats::default(); n],
            trace: Trace::default(),
            next: vec![0; VECTOR_SIZE],
            extra: Vec::new(),
        })
    }

    /// The node with this name.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.name() == name).map(NodeId)
    }

    /// Queues packets at a node (the entry point of a receive path).
    pub fn enqueue(&mut self, node: NodeId, pkts: &[u32]) {
        self.queues[node.0].extend_from_slice(pkts);
    }

    /// Queues one packet for `node`.
    #[inline]
    pub fn enqueue_one(&mut self, node: NodeId, pkt: u32) {
        self.queues[node.0].push(pkt);
    }

    /// Runs every node, in order, over what is queued for it, until all queues are empty.
    pub fn run(&mut self, cx: &mut C, env: &E) {
        let tracing = self.trace.begin_run();
        for i in 0..self.nodes.len() {
            if self.queues[i].is_empty() {
                continue;
            }
            let queue = core::mem::take(&mut self.queues[i]);
            for chunk in queue.chunks(VECTOR_SIZE) {
                let mut v = Vector {
                    pkts: chunk,
                    next: &mut self.next[..chunk.len()],
                    extra: &mut self.extra,
                };
                let start = Instant::now();
                self.nodes[i].process(cx, env, &mut v);
                self.stats[i].add(chunk.len(), start.elapsed());
                if tracing {
                    self.trace_vector(i, cx, env, chunk);
                }
                let edges = &self.edges[i];
                let next = &self.next[..chunk.len()];
                let first = next[0];
                if next.iter().all(|n| *n == first) {
                    // The common case, every packet to one next node: one copy.
                    if let Some(to) = target(edges, first) {
                        self.queues[to].extend_from_slice(chunk);
                    }
                } else {
                    for (p, n) in chunk.iter().zip(next) {
                        if let Some(to) = target(edges, *n) {
                            self.queues[to].push(*p);
                        }
                    }
                }
                for (p, n) in &self.extra {
                    if let Some(to) = target(edges, *n) {
                        self.queues[to].push(*p);
                    }
                }
                self.extra.clear();
            }
            // Edges point forward, so nothing was queued here meanwhile: hand the
            // allocation back so that the queue keeps its capacity.
            let mut queue = queue;
            queue.clear();
            self.queues[i] = queue;
        }
    }

    #[cold]
    fn trace_vector(&mut self, i: usize, cx: &C, env: &E, chunk: &[u32]) {
        let node = &self.nodes[i];
        for (k, p) in chunk.iter().enumerate() {
            let id = cx.trace_id(*p);
            if id == 0 {
                continue;
            }
            let next = node.next_nodes().get(usize::from(self.next[k])).copied();
            self.trace.record(TraceStep {
                packet: id,
                node: node.name(),
                next,
                detail: node.trace(cx, env, *p),
            });
        }
    }

    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    pub fn trace_mut(&mut self) -> &mut Trace {
        &mut self.trace
    }

    /// Per-node counters, in node order, with the node names.
    pub fn stats(&self) -> impl Iterator<Item = (&'static str, &NodeStats)> {
        self.nodes.iter().map(|n| n.name()).zip(self.stats.iter())
    }

    pub fn reset_stats(&mut self) {
        self.stats.fill(NodeStats::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets are plain numbers; the context records what each sink received.
    #[derive(Default)]
    struct Cx {
        got: Vec<(&'static str, u32)>,
    }

    impl TraceId for Cx {
        fn trace_id(&self, pkt: u32) -> u32 {
            u32::from(pkt == 4)
        }
    }

    crate::next_nodes! { enum Parity { Even = "even", Odd = "odd" } }

    struct Classify;
    impl Node<Cx, u32> for Classify {
        fn name(&self) -> &'static str {
            "classify"
        }
        fn next_nodes(&self) -> &'static [&'static str] {
            Parity::NAMES
        }
        fn process(&mut self, _cx: &mut Cx, modulus: &u32, v: &mut Vector<'_>) {
            for (p, n) in v.pkts.iter().zip(v.next.iter_mut()) {
                *n = if p % modulus == 0 {
                    Parity::Even
                } else {
                    Parity::Odd
                }
                .into();
            }
            // Every multiple of 100 is also copied (as p + 1000) to odd.
            for p in v.pkts.iter().filter(|p| *p % 100 == 0) {
                v.extra.push((p + 1000, Parity::Odd.into()));
            }
        }
        fn trace(&self, _cx: &Cx, modulus: &u32, pkt: u32) -> Option<String> {
            Some(format!("value {pkt} mod {modulus}"))
        }
    }

    struct Sink(&'static str);
    impl Node<Cx, u32> for Sink {
        fn name(&self) -> &'static str {
            self.0
        }
        fn next_nodes(&self) -> &'static [&'static str] {
            &[]
        }
        fn process(&mut self, cx: &mut Cx, _e: &u32, v: &mut Vector<'_>) {
            cx.got.extend(v.pkts.iter().map(|p| (self.0, *p)));
            v.next.fill(CONSUMED);
        }
    }

    fn graph() -> Graph<Cx, u32> {
        Graph::new(vec![
            Box::new(Classify),
            Box::new(Sink("even")),
            Box::new(Sink("odd")),
        ])
        .unwrap()
    }

    #[test]
    fn packets_reach_the_next_node_their_node_chose() {
        let mut g = graph();
        let mut cx = Cx::default();
        let input: Vec<u32> = (0..600).collect();
        g.enqueue(g.node_id("classify").unwrap(), &input);
        g.run(&mut cx, &2);
        assert_eq!(cx.got.len(), 606);
        assert!(
            cx.got
                .iter()
                .all(|(s, p)| *p >= 1000 || (*s == "even") == (p % 2 == 0))
        );
        assert!(cx.got.contains(&("odd", 1500)));
        let stats: Vec<_> = g.stats().map(|(n, s)| (n, s.vectors, s.packets)).collect();
        // 600 packets: three vectors (256, 256, 88) at the classifier.
        assert_eq!(stats[0], ("classify", 3, 600));
        assert_eq!(stats[1].2 + stats[2].2, 606);
    }

    #[test]
    fn a_trace_records_the_path_and_the_decision() {
        let mut g = graph();
        g.trace_mut().add(1);
        let mut cx = Cx::default();
        // The context marks packet 4 as traced; picking arms the next run.
        assert_eq!(g.trace_mut().pick(9), 1);
        g.enqueue(NodeId(0), &[3, 4]);
        g.run(&mut cx, &2);
        let text = g.trace().to_string();
        assert_eq!(
            text,
            "packet 1\n  classify         value 4 mod 2 -> even\n  even            \n"
        );
    }

    #[test]
    fn nodes_look_for_traced_packets_only_after_one_was_picked() {
        let mut g = graph();
        let mut cx = Cx::default();
        // Packet 4 carries a trace id, but nothing was picked: the run does not look.
        g.trace_mut().add(1);
        g.enqueue(NodeId(0), &[4]);
        g.run(&mut cx, &2);
        assert!(g.trace().steps().is_empty());
        // Picked: this run records, the next one (nothing picked since) does not.
        assert_eq!(g.trace_mut().pick(0), 1);
        g.enqueue(NodeId(0), &[4]);
        g.run(&mut cx, &2);
        assert_eq!(g.trace().steps().len(), 2);
        g.enqueue(NodeId(0), &[4]);
        g.run(&mut cx, &2);
        assert_eq!(g.trace().steps().len(), 2);
    }

    #[test]
    fn edges_must_exist_and_point_forward() {
        let e = Graph::<Cx, u32>::new(vec![
            Box::new(Sink("even")),
            Box::new(Classify),
            Box::new(Sink("odd")),
        ]);
        assert_eq!(
            e.err(),
            Some(GraphError::BackwardEdge {
                from: "classify",
                to: "even"
            })
        );
        let e = Graph::<Cx, u32>::new(vec![Box::new(Classify), Box::new(Sink("odd"))]);
        assert_eq!(
            e.err(),
            Some(GraphError::UnknownNext {
                from: "classify",
                to: "even"
            })
        );
    }
}
