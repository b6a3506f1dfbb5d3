//! ovr's dataplane: the nodes of the vector graph and the pipeline that joins them.
//!
//! Packets from workloads enter at `ethernet-input`, packets from the underlay at
//! `underlay-input`; they leave through `interface-output` into per-interface transmit
//! queues, or through `drop`, counted under a reason. See DESIGN.md "Data flow".
#![forbid(unsafe_code)]

pub mod capture;
pub mod chain;
pub mod context;
pub mod counters;
pub mod decide;
pub mod describe;
pub mod drop;
pub mod forward;
pub mod ip;
pub mod meta;
pub mod nodes;
pub mod pipeline;
pub mod probe;
pub mod rate;

pub use context::{Cx, Settings};
pub use drop::{DropReason, Reason};
pub use pipeline::Pipeline;
