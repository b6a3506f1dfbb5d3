//! ovr's packet I/O: drivers that receive and transmit whole batches of frames on the
//! host's interfaces.
//!
//! Every system call goes through `sys` (the only module with `unsafe`), so the rest is
//! ordinary safe code. Today there is one driver, AF_PACKET with `recvmmsg`/`sendmmsg`
//! (a vector per system call, any interface, no kernel support needed beyond a socket);
//! AF_XDP and TAP come next behind the same interface.
#![deny(unsafe_code)]

pub mod af_packet;
mod sys;

pub use af_packet::AfPacket;

/// Why a driver could not be set up or failed.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("interface '{name}' does not exist")]
    NoSuchInterface { name: String },
    #[error("interface '{name}': {op}: {source}")]
    Os {
        name: String,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Waits until one of `drivers` has frames to read, or `timeout_ms` passes. Returns
/// whether any is readable.
pub fn wait_readable(drivers: &[&AfPacket], timeout_ms: i32) -> std::io::Result<bool> {
    let fds: Vec<i32> = drivers.iter().map(|d| d.fd()).collect();
    sys::poll_readable(&fds, timeout_ms)
}
