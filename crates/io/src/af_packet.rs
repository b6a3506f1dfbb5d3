//! The AF_PACKET driver: a raw socket per interface, a batch of frames per system call
//! (`recvmmsg`/`sendmmsg`). Works on any interface in any namespace, with no kernel
//! feature beyond the socket; it costs a system call per batch each way and the kernel's
//! whole receive path per frame, which AF_XDP saves.
//!
//! Every frame carries a virtio-net header both ways. Received, it says what the sender
//! left to the NIC (the pipeline finishes it). Sent, it lets runs of TCP segments of one
//! connection go as one large frame (`ovr_wire::offload::coalesce`): a local stack then
//! receives them as one, as from GRO, and the kernel cuts them again where a device needs.

use crate::{Driver, DriverKind, DriverStats, IoError, sys};
use ovr_wire::offload::{self, VNET_HDR_LEN};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Frames are received into buffers of this size: a virtio-net header and a frame that
/// segmentation offload made as large as an IP packet can be.
pub const MAX_FRAME: usize = VNET_HDR_LEN + 14 + 8 + 65535;
/// Frames received per call.
const MAX_BATCH: usize = 256;
/// The virtio-net header in front of every frame sent: no offload asked for.
const PLAIN: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

/// One interface opened for ovr.
pub struct AfPacket {
    name: String,
    ifindex: u32,
    fd: OwnedFd,
    /// The receive buffers, `MAX_FRAME` bytes each, in one allocation: it comes from
    /// fresh zero pages, and only the bytes frames fill are ever touched.
    buf: Vec<u8>,
    lens: Vec<usize>,
    truncated: Vec<bool>,
    /// Large frames joined from runs of segments, reused from batch to batch.
    joined: Vec<Vec<u8>>,
    pub stats: DriverStats,
}

/// One message of a batch to send: a frame as given, or a joined one.
enum Message {
    Frame(usize),
    Joined {
        buf: usize,
        header: [u8; VNET_HDR_LEN],
        segments: usize,
    },
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
        let batch = batch.clamp(1, MAX_BATCH);
        Ok(Self {
            name: name.to_string(),
            ifindex: index,
            fd,
            buf: vec![0u8; MAX_FRAME * batch],
            lens: vec![0; batch],
            truncated: vec![false; batch],
            joined: Vec::new(),
            stats: DriverStats::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Receives what is waiting (up to a batch) and returns the frames, each behind its
    /// virtio-net header.
    pub fn recv(&mut self) -> Result<impl Iterator<Item = &[u8]>, IoError> {
        let n = sys::recv_batch(
            &self.fd,
            &mut self.buf,
            MAX_FRAME,
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
        Ok(self
            .buf
            .chunks_exact(MAX_FRAME)
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
        let mut plan = Vec::with_capacity(frames.len());
        let (mut i, mut buf) = (0, 0);
        while i < frames.len() {
            if self.joined.len() <= buf {
                self.joined.push(Vec::new());
            }
            match offload::coalesce(&frames[i..], &mut self.joined[buf]) {
                Some((h, n)) => {
                    let mut header = [0; VNET_HDR_LEN];
                    h.emit(&mut header);
                    plan.push(Message::Joined {
                        buf,
                        header,
                        segments: n,
                    });
                    i += n;
                    buf += 1;
                }
                None => {
                    plan.push(Message::Frame(i));
                    i += 1;
                }
            }
        }
        let messages: Vec<(&[u8], &[u8])> = plan
            .iter()
            .map(|m| match m {
                Message::Frame(i) => (&PLAIN[..], frames[*i]),
                Message::Joined { buf, header, .. } => (&header[..], &self.joined[*buf][..]),
            })
            .collect();
        let sent = sys::send_batch(&self.fd, &messages).map_err(|source| IoError::Os {
            name: self.name.clone(),
            op: "sendmmsg",
            source,
        })?;
        // Counted in the frames the pipeline handed over, joined or not.
        let count = |m: &Message| match m {
            Message::Frame(_) => 1,
            Message::Joined { segments, .. } => *segments as u64,
        };
        let taken: u64 = plan[..sent].iter().map(count).sum();
        self.stats.tx_joined += plan[..sent]
            .iter()
            .filter(|m| matches!(m, Message::Joined { .. }))
            .count() as u64;
        self.stats.tx_frames += taken;
        self.stats.tx_dropped += frames.len() as u64 - taken;
        Ok(())
    }
}

impl Driver for AfPacket {
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

    fn vnet_hdr(&self) -> bool {
        true
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
