//! ovr's agent: the desired configuration (the `ovr_config` model), served by a REST
//! API, reconciled into the forwarding tables one all-or-nothing batch per change,
//! persisted atomically, plus the questions the API asks the forwarding worker
//! (counters, flows). docs/agent.md describes it for operators.
#![forbid(unsafe_code)]

mod agent;
pub mod api;
pub mod capture;
pub mod change;
pub mod error;
pub mod health;
pub mod learnt;
pub mod listen;
pub mod metrics;
pub mod model;
pub mod reconcile;
mod refs;
pub mod server;
pub mod store;
pub mod worker;

pub use agent::{Agent, Applied};
pub use error::ApiError;
