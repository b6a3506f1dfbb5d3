//! The flow table: (VRF, 5-tuple) → cached action, so that only a flow's first packet
//! takes the slow path (lookups, policy, ECMP choice).
//!
//! Each dataplane worker owns one table (flows are sharded by [`FlowKey::symmetric_hash`],
//! so a flow and its reply land on the same worker): the table is single-owner, with no
//! atomics or locks. Its size is fixed at construction; nothing allocates per packet.

mod key;
mod slot;
mod table;

pub use key::{FlowKey, ipv4_mapped};
pub use slot::{EntryMut, FlowHead};
pub use table::{
    AgeStats, FlowAction, FlowEntry, FlowId, FlowInsertError, FlowStats, FlowTable, flags,
};
