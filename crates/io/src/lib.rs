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

/// Waits for frames on a fixed set of drivers (built once, not per wait).
pub struct Poller {
    fds: Vec<libc::pollfd>,
}

impl Poller {
    pub fn new<'a>(drivers: impl IntoIterator<Item = &'a AfPacket>) -> Self {
        let fds: Vec<i32> = drivers.into_iter().map(|d| d.fd()).collect();
        Self {
            fds: sys::pollfds(&fds),
        }
    }

    /// Waits until a driver has frames to read, or `timeout_ms` passes; returns whether
    /// one is readable.
    pub fn wait(&mut self, timeout_ms: i32) -> std::io::Result<bool> {
        sys::poll_readable(&mut self.fds, timeout_ms)
    }
}
