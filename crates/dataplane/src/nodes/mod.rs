//! The graph's nodes, one per file, in pipeline order (every edge points forward).
//!
//! Each node declares its next nodes once (`next_nodes!`), processes a whole vector and
//! never returns an error per packet: a packet it cannot handle goes to `drop` with a
//! reason in its metadata.

pub mod arp;
pub mod drop;
pub mod encap_mpls;
pub mod encap_vxlan;
pub mod established;
pub mod ethernet_input;
pub mod flood;
pub mod flow;
pub mod flow_setup;
pub mod gateway;
pub mod interface_output;
pub mod ip_input;
pub mod ip_rewrite;
pub mod mpls_decap;
pub mod nd;
mod outer;
pub mod underlay_input;
pub mod vxlan_decap;

use crate::drop::DropReason;
use crate::meta::Meta;

/// Records why a packet is dropped and returns the node's drop next.
#[inline]
pub(crate) fn drop<N>(meta: &mut Meta, reason: impl Into<DropReason>, next: N) -> N {
    meta.drop = reason.into().0;
    next
}
