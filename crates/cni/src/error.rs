//! CNI errors: a code from the specification (or 100 and up, ours), a message and
//! details, printed as the spec's error JSON on stdout with a non-zero exit status.

use serde_json::{Value, json};

/// The specification's codes (SPEC.md, "Error").
pub mod code {
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    #[allow(dead_code)] // the spec's list, kept whole
    pub const UNSUPPORTED_FIELD: u32 = 2;
    #[allow(dead_code)]
    pub const UNKNOWN_CONTAINER: u32 = 3;
    pub const INVALID_ENVIRONMENT: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODING_FAILURE: u32 = 6;
    pub const INVALID_CONFIG: u32 = 7;
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// STATUS: the plugin cannot serve ADD now.
    pub const NOT_AVAILABLE: u32 = 50;
    // ovr-cni's own (100 and up).
    /// ovrd refused a request (the message says why), or answered nonsense.
    pub const OVRD: u32 = 100;
    /// An address could not be had (IPAM plugin failed, none free).
    pub const IPAM: u32 = 101;
    /// A kernel request (netlink, namespaces) failed.
    pub const LINK: u32 = 102;
    /// CHECK found something different from what ADD made.
    pub const CHECK: u32 = 103;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{msg}")]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    pub details: String,
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        Self {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// The error as the specification prints it.
    pub fn to_json(&self, cni_version: &str) -> Value {
        let mut v = json!({"cniVersion": cni_version, "code": self.code, "msg": self.msg});
        if !self.details.is_empty() {
            v["details"] = self.details.clone().into();
        }
        v
    }
}

pub fn config(msg: impl Into<String>) -> CniError {
    CniError::new(code::INVALID_CONFIG, msg)
}

pub fn env(msg: impl Into<String>) -> CniError {
    CniError::new(code::INVALID_ENVIRONMENT, msg)
}

pub fn link(what: &str, e: impl std::fmt::Display) -> CniError {
    CniError::new(code::LINK, format!("{what}: {e}"))
}

/// ovrd did not answer or refused: not there (or 503) is "try again later".
pub fn ovrd(what: &str, e: ovr_client::CallError) -> CniError {
    use ovr_client::{CallError, ClientError};
    let c = match &e {
        CallError::Client(ClientError::NotRunning(_)) => code::TRY_AGAIN_LATER,
        CallError::Api(f) if f.status == 503 => code::TRY_AGAIN_LATER,
        CallError::Client(ClientError::Io { .. }) => code::TRY_AGAIN_LATER,
        _ => code::OVRD,
    };
    CniError::new(c, format!("{what}: {e}"))
}
