//! The AF_PACKET driver: a raw socket per interface, a batch of frames per system call
//! (`recvmmsg`/`sendmmsg`). Works on any interface in any namespace, with no kernel
//! feature beyond the socket; it costs a system call per batch each way and the kernel's
//! whole receive path per frame, which AF_XDP saves.

use crate::{Driver, DriverKind, DriverStats, IoError, sys};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Frames are received into buffers of this size: an Ethernet MTU of 9000 and a tag.
pub const MAX_FRAME: usize = 9018;

/// One interface opened for ovr.
pub struct AfPacket {
    name: String,
    ifindex: u32,
    fd: OwnedFd,
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
    truncated: Vec<bool>,
    pub stats: DriverStats,
}

impl AfPacket {
    /// Opens interface `name` for batches of up to `batch` frames.
    pub fn open(name: &str, batch: usize) -> Result<Self, IoError> {
        let index = sys::if_index(name).ok_or_else(|| IoError::NoSuchInterface {
            name: name.to_string(),
        })?;
        let fd = sys::packet_socket(index).map_err(|source| IoError::Os {
            name: name.to_string(),
            op: "AF_PACKET socket",
            source,
        })?;
        let batch = batch.max(1);
        Ok(Self {
            name: name.to_string(),
            ifindex: index,
            fd,
            bufs: vec![vec![0u8; MAX_FRAME]; batch],
            lens: vec![0; batch],
            truncated: vec![false; batch],
            stats: DriverStats::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Receives what is waiting (up to a batch) and returns the frames.
    pub fn recv(&mut self) -> Result<impl Iterator<Item = &[u8]>, IoError> {
        let n = sys::recv_batch(
            &self.fd,
            &mut self.bufs,
            &mut self.lens,
            &mut self.truncated,
        )
        .map_err(|source| IoError::Os {
            name: self.name.clone(),
            op: "recvmmsg",
            source,
        })?;
        self.stats.rx_frames += n as u64;
        self.stats.rx_dropped += self.truncated[..n].iter().filter(|t| **t).count() as u64;
        Ok(self.bufs[..n]
            .iter()
            .zip(&self.lens[..n])
            .zip(&self.truncated[..n])
            .filter(|(_, t)| !**t)
            .map(|((b, l), _)| &b[..*l]))
    }

    /// Sends frames; those the kernel does not take are counted as dropped.
    pub fn send(&mut self, frames: &[&[u8]]) -> Result<(), IoError> {
        if frames.is_empty() {
            return Ok(());
        }
        let sent = sys::send_batch(&self.fd, frames).map_err(|source| IoError::Os {
            name: self.name.clone(),
            op: "sendmmsg",
            source,
        })?;
        self.stats.tx_frames += sent as u64;
        self.stats.tx_dropped += (frames.len() - sent) as u64;
        Ok(())
    }
}

impl Driver for AfPacket {
    fn name(&self) -> &str {
        &self.name
    }

    fn ifindex(&self) -> u32 {
        self.ifindex
    }

    fn kind(&self) -> DriverKind {
        DriverKind::AfPacket
    }

    fn recv(
        &mut self,
        deliver: &mut dyn FnMut(&mut dyn Iterator<Item = &[u8]>),
    ) -> Result<usize, IoError> {
        let before = self.stats.rx_frames;
        let mut frames = AfPacket::recv(self)?;
        deliver(&mut frames);
        drop(frames);
        Ok((self.stats.rx_frames - before) as usize)
    }

    fn send(&mut self, frames: &[&[u8]]) -> Result<(), IoError> {
        AfPacket::send(self, frames)
    }

    fn fds(&self) -> Vec<RawFd> {
        vec![self.fd.as_raw_fd()]
    }

    fn stats(&mut self) -> DriverStats {
        // The kernel's count of frames its socket queue had no room for (reset on read).
        if let Ok(dropped) = sys::packet_drops(&self.fd) {
            self.stats.rx_dropped += u64::from(dropped);
        }
        self.stats
    }
}
