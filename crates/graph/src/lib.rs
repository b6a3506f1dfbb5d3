//! The vector graph, in the spirit of FD.io VPP: packets live in pre-allocated frames
//! (`pool`), travel as vectors of frame indices through nodes (`node`) that each process a
//! whole vector and sort its packets to their next nodes, run by a dispatcher (`graph`)
//! that keeps per-node counters (`stats`) and an optional packet trace (`trace`).
//!
//! No allocation, lock or dynamic dispatch per packet: a node is called once per vector
//! (one virtual call), queues keep their capacity, frames are recycled.
#![forbid(unsafe_code)]

pub mod graph;
pub mod node;
pub mod pool;
pub mod stats;
pub mod trace;

pub use graph::{Graph, GraphError, NodeId, TraceId};
pub use node::{CONSUMED, Node, VECTOR_SIZE, Vector};
pub use pool::PacketPool;
pub use stats::NodeStats;
pub use trace::{Trace, TraceStep, TracedPacket};
