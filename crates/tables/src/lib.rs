//! ovr's forwarding tables (DESIGN.md "Tables").
//!
//! Each table is a plain single-writer data structure. Two ways of sharing them with the
//! dataplane workers:
//! - the control-plane tables (interfaces, VRFs and their FIBs, next hops, labels, bridge,
//!   policy) live in [`state`], double-buffered: the writer applies a batch of changes to
//!   the copy no reader sees, swaps, waits for readers to leave the old copy and applies the
//!   same changes there. Readers never lock and see one consistent version per vector.
//! - the flow table is owned by one worker (flows are sharded by a symmetric flow hash), so
//!   its reader is its writer and it needs no synchronisation at all.
#![deny(unsafe_code)]

pub mod bridge;
pub mod chain;
pub mod fasthash;
pub mod flow;
pub mod hugemem;
pub mod ids;
pub mod interface;
pub mod label;
pub mod lpm4;
pub mod lpm6;
pub mod nexthop;
pub mod policy;
pub mod prefetch;
pub mod prefix;
pub mod state;
pub mod synthetic;
pub mod vrf;
