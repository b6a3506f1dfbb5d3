//! The AF_PACKET driver: a raw socket per interface. Works on any interface in any
//! namespace, with no kernel feature beyond the socket; it costs the kernel's whole
//! receive path per frame, which AF_XDP saves.
//!
//! Receive: a TPACKET_V2 ring shared with the kernel, read with no system call while
//! frames keep coming. Not TPACKET_V3: V3 hands user space a block of frames only when
//! the block is full or its timer (at least 1 ms) expires, so at low rates every frame
//! would wait up to that long — a router cannot. V2 releases each frame as it lands. A
//! frame larger than a slot (offloaded TCP up to 64 KiB, jumbo frames) is also queued on
//! the socket whole and read from there in its turn.
//!
//! Send: `sendmmsg`, a batch per call. Not a TX ring: its frames are sent zero-copy from
//! the ring's pages, and a slot comes back only when the receiver frees the packet — on a
//! veth that is when the workload's application has read it, so a TCP receiver's window
//! would pin the ring (the AF_XDP driver lives with the same rule, see af_xdp).
//!
//! Every frame carries a virtio-net header both ways. Received, it says what the sender
//! left to the NIC (the pipeline finishes it). Sent, it lets runs of TCP segments of one
//! connection go as one large frame (`ovr_wire::offload::coalesce`): a local stack then
//! receives them as one, as from GRO, and the kernel cuts them again where a device needs.
//! On the underlay, runs of tunnel datagrams toward one peer go the same way, as one
//! frame with UDP segmentation offload (`coalesce_datagrams`, see `Driver::join_datagrams`).
//!
//! A policed interface's sockets get the socket filters of bpf/police.c (`police`),
//! which drop frames over the rate before they are copied into the ring.

use crate::police::SocketPolicer;
use crate::{Driver, DriverKind, DriverStats, IoError, Rate, sys};
use ovr_wire::offload::{self, Joined, VNET_HDR_LEN};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

/// Frames received into the ring's slots: room for a 1500-byte MTU frame, its
/// virtio-net header and the ring's own header (larger frames take the socket's queue).
const SLOT: usize = 2048;
/// Ring slots: bursts of this many frames wait for the worker (4 MiB per interface).
const SLOTS: usize = 2048;
/// Ring slots of the socket for what is not IPv4 behind a TC program (ARP, IPv6, ...).
const OTHER_SLOTS: usize = 256;
/// A frame that did not fit its slot is read whole into a buffer of this size: a
/// virtio-net header and a frame that segmentation offload made as large as an IP
/// packet can be.
pub const MAX_FRAME: usize = VNET_HDR_LEN + 14 + 8 + 65535;
/// Frames received per call.
const MAX_BATCH: usize = 256;
/// The virtio-net header in front of every frame sent: no offload asked for.
const PLAIN: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

/// Where a slot's frame is: from `tpacket2_hdr` (status, len, snaplen, mac offset).
const TP_LEN: usize = 4;
const TP_SNAPLEN: usize = 8;
const TP_MAC: usize = 12;

/// One interface opened for ovr.
pub struct AfPacket {
    name: String,
    ifindex: u32,
    /// Its receiving sockets: one, or two behind a TC program (`open_behind_tc`). The
    /// first also sends.
    rx: Vec<Rx>,
    batch: usize,
    tx: Tx,
    pub stats: DriverStats,
    /// Loaded the first time the interface is policed, then kept (a policer removed is
    /// one of no rate).
    policer: Option<SocketPolicer>,
}

/// One receiving socket and its ring.
struct Rx {
    fd: OwnedFd,
    /// What it is bound to take.
    what: sys::Receive,
    ring: sys::RxRing,
    /// The next slot to read.
    next: usize,
    /// Where frames too large for their slot are read to, one per such frame of a batch.
    large: Vec<Vec<u8>>,
    /// Per frame of the batch being delivered: its length in `large[k]` (too large for the
    /// slot), or 0 (in its slot, or dropped when also 0 there).
    large_len: Vec<usize>,
}

/// The sending half: runs of segments joined into large frames, a batch per call.
#[derive(Default)]
struct Tx {
    /// Headers of large frames joined from runs of segments, reused from batch to batch.
    joined: Vec<Joined>,
    /// Whether runs of UDP datagrams of one flow are joined too (tunnel packets toward
    /// one peer, `offload::coalesce_datagrams`).
    datagrams: bool,
}

/// A send-only AF_PACKET socket on an interface another worker receives from (it
/// receives nothing itself).
pub struct PacketSender {
    name: String,
    ifindex: u32,
    fd: OwnedFd,
    tx: Tx,
    stats: DriverStats,
}

impl PacketSender {
    pub fn open(name: &str) -> Result<Self, IoError> {
        let index = sys::if_index(name).ok_or_else(|| IoError::NoSuchInterface {
            name: name.to_string(),
        })?;
        let fd = sys::packet_send_socket(index).map_err(|source| IoError::Os {
            name: name.to_string(),
            op: "AF_PACKET socket for sending",
            source,
        })?;
        Ok(Self {
            name: name.to_string(),
            ifindex: index,
            fd,
            tx: Tx::default(),
            stats: DriverStats::default(),
        })
    }
}

impl Driver for PacketSender {
    fn ifindex(&self) -> u32 {
        self.ifindex
    }

    fn kind(&self) -> DriverKind {
        DriverKind::AfPacket
    }

    fn recv(
        &mut self,
        _deliver: &mut dyn FnMut(&mut dyn Iterator<Item = &[u8]>),
    ) -> Result<usize, IoError> {
        Ok(0)
    }

    fn send(&mut self, frames: &[&[u8]]) -> Result<(), IoError> {
        self.tx.send(&self.fd, &self.name, &mut self.stats, frames)
    }

    fn join_datagrams(&mut self) {
        self.tx.datagrams = true;
    }

    fn vnet_hdr(&self) -> bool {
        true
    }

    fn fds(&self) -> Vec<RawFd> {
        Vec::new()
    }

    fn stats(&mut self) -> DriverStats {
        self.stats
    }
}

/// One message of a batch to send: a frame as given, or a joined one.
enum Message {
    Frame(usize),
    Joined {
        /// The run's first frame.
        first: usize,
        /// Its headers and payload ranges: `Tx::joined[buf]`.
        buf: usize,
        header: [u8; VNET_HDR_LEN],
        segments: usize,
    },
}

impl AfPacket {
    /// Opens interface `name` for batches of up to `batch` frames.
    pub fn open(name: &str, batch: usize) -> Result<Self, IoError> {
        Self::open_for(name, batch, &[(sys::Receive::Every, SLOTS)])
    }

    /// Opens interface `name` for ARP frames only, into a ring of 64 slots: for asking
    /// neighbours (ovrd's VTEPs). Keep it open: setting a ring up and closing the socket
    /// each wait for an RCU grace period, 10-35 ms on a VM.
    pub fn open_arp(name: &str, batch: usize) -> Result<Self, IoError> {
        Self::open_for(name, batch, &[(sys::Receive::Arp, 64)])
    }

    /// Opens interface `name`, on whose TC ingress a program may take frames away (the
    /// fast path at TC): IPv4 is received by a socket bound to IPv4, which the kernel
    /// serves after TC ingress (`__netif_receive_skb_core`: packet sockets of every
    /// EtherType see a frame before TC, those of its own EtherType after), so it gets
    /// only what the program let through; every other EtherType by a second socket,
    /// whose filter refuses IPv4. Each frame reaches exactly one of them, once.
    pub fn open_behind_tc(name: &str, batch: usize) -> Result<Self, IoError> {
        Self::open_for(
            name,
            batch,
            &[
                (sys::Receive::Ipv4, SLOTS),
                (sys::Receive::AllButIpv4, OTHER_SLOTS),
            ],
        )
    }

    fn open_for(
        name: &str,
        batch: usize,
        sockets: &[(sys::Receive, usize)],
    ) -> Result<Self, IoError> {
        let index = sys::if_index(name).ok_or_else(|| IoError::NoSuchInterface {
            name: name.to_string(),
        })?;
        let batch = batch.clamp(1, MAX_BATCH);
        let mut rx = Vec::with_capacity(sockets.len());
        for &(what, slots) in sockets {
            let (fd, ring) =
                sys::packet_socket(index, SLOT, slots, what).map_err(|source| IoError::Os {
                    name: name.to_string(),
                    op: "AF_PACKET socket with a receive ring",
                    source,
                })?;
            rx.push(Rx {
                fd,
                what,
                ring,
                next: 0,
                large: Vec::new(),
                large_len: vec![0; batch],
            });
        }
        Ok(Self {
            name: name.to_string(),
            ifindex: index,
            rx,
            batch,
            tx: Tx::default(),
            stats: DriverStats::default(),
            policer: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Rx {
    /// Where slot `i`'s frame lies in it (behind its virtio-net header), and whether it
    /// is whole there.
    fn in_slot(slot: &[u8]) -> (core::ops::Range<usize>, bool) {
        let u32_at =
            |o: usize| u32::from_ne_bytes([slot[o], slot[o + 1], slot[o + 2], slot[o + 3]]);
        let len = u32_at(TP_LEN) as usize;
        let snap = u32_at(TP_SNAPLEN) as usize;
        let mac = usize::from(u16::from_ne_bytes([slot[TP_MAC], slot[TP_MAC + 1]]));
        let start = mac.saturating_sub(VNET_HDR_LEN);
        let end = (mac + snap).min(slot.len());
        (start..end, snap >= len && mac >= VNET_HDR_LEN)
    }

    /// Takes the frames waiting in the ring (up to a batch), reading those too large for
    /// their slot from the socket; returns how many slots it took. Frames that are
    /// neither whole in their slot nor copied (the socket's queue was full) are dropped
    /// and counted.
    fn take(
        &mut self,
        batch: usize,
        name: &str,
        stats: &mut DriverStats,
    ) -> Result<usize, IoError> {
        let mut n = 0;
        let mut k = 0;
        while n < batch {
            let i = (self.next + n) % self.ring.frames();
            let status = self.ring.status(i);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            self.large_len[n] = 0;
            let (_, whole) = Self::in_slot(self.ring.slot(i));
            if !whole {
                if status & libc::TP_STATUS_COPY != 0 {
                    if self.large.len() <= k {
                        self.large.push(vec![0; MAX_FRAME]);
                    }
                    match sys::recv_one(&self.fd, &mut self.large[k]) {
                        Ok(Some(len)) => {
                            self.large_len[n] = len;
                            k += 1;
                        }
                        Ok(None) => stats.rx_dropped += 1,
                        Err(source) => {
                            return Err(IoError::Os {
                                name: name.to_string(),
                                op: "recv",
                                source,
                            });
                        }
                    }
                } else {
                    stats.rx_dropped += 1;
                }
            }
            n += 1;
        }
        Ok(n)
    }

    /// Hands what is waiting (up to a batch) to `deliver`; returns how many frames.
    fn recv(
        &mut self,
        batch: usize,
        name: &str,
        stats: &mut DriverStats,
        deliver: &mut dyn FnMut(&mut dyn Iterator<Item = &[u8]>),
    ) -> Result<usize, IoError> {
        let n = self.take(batch, name, stats)?;
        if n == 0 {
            return Ok(0);
        }
        let (ring, next, large, large_len) = (&self.ring, self.next, &self.large, &self.large_len);
        let mut k = 0;
        let mut delivered = 0;
        let mut frames = (0..n).filter_map(|j| {
            let slot = ring.slot((next + j) % ring.frames());
            let (range, whole) = Self::in_slot(slot);
            let frame = if whole {
                &slot[range]
            } else if large_len[j] > 0 {
                k += 1;
                &large[k - 1][..large_len[j]]
            } else {
                return None;
            };
            delivered += 1;
            Some(frame)
        });
        deliver(&mut frames);
        // What the pipeline did not take is dropped with the rest of the batch.
        frames.for_each(drop);
        for j in 0..n {
            self.ring.release((next + j) % self.ring.frames());
        }
        self.next = (next + n) % self.ring.frames();
        stats.rx_frames += delivered;
        Ok(delivered as usize)
    }
}

impl Tx {
    /// Sends frames; those the kernel does not take are counted as dropped.
    fn send(
        &mut self,
        fd: &OwnedFd,
        name: &str,
        stats: &mut DriverStats,
        frames: &[&[u8]],
    ) -> Result<(), IoError> {
        if frames.is_empty() {
            return Ok(());
        }
        let datagrams = self.datagrams;
        let mut plan = Vec::with_capacity(frames.len());
        let (mut i, mut buf) = (0, 0);
        while i < frames.len() {
            if self.joined.len() <= buf {
                self.joined.push(Joined::default());
            }
            let (rest, out) = (&frames[i..], &mut self.joined[buf]);
            let joined = offload::coalesce(rest, out)
                .or_else(|| datagrams.then(|| offload::coalesce_datagrams(rest, out))?);
            match joined {
                Some((h, n)) => {
                    let mut header = [0; VNET_HDR_LEN];
                    h.emit(&mut header);
                    plan.push(Message::Joined {
                        first: i,
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
        // Joined frames are gathered from the frames themselves: their payloads are not
        // copied in user space.
        let mut parts: Vec<&[u8]> = Vec::with_capacity(frames.len() * 2 + 2 * buf);
        let mut ends = Vec::with_capacity(plan.len());
        for m in &plan {
            match m {
                Message::Frame(i) => parts.extend([&PLAIN[..], frames[*i]]),
                Message::Joined {
                    first,
                    buf,
                    header,
                    segments,
                } => {
                    parts.push(&header[..]);
                    parts.extend(self.joined[*buf].parts(&frames[*first..*first + *segments]));
                }
            }
            ends.push(parts.len());
        }
        let sent = sys::send_batch(fd, &parts, &ends).map_err(|source| IoError::Os {
            name: name.to_string(),
            op: "sendmmsg",
            source,
        })?;
        // Counted in the frames the pipeline handed over, joined or not.
        let count = |m: &Message| match m {
            Message::Frame(_) => 1,
            Message::Joined { segments, .. } => *segments as u64,
        };
        let taken: u64 = plan[..sent].iter().map(count).sum();
        stats.tx_joined += plan[..sent]
            .iter()
            .filter(|m| matches!(m, Message::Joined { .. }))
            .count() as u64;
        stats.tx_frames += taken;
        stats.tx_dropped += frames.len() as u64 - taken;
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
        let mut n = 0;
        for rx in &mut self.rx {
            n += rx.recv(self.batch, &self.name, &mut self.stats, deliver)?;
        }
        Ok(n)
    }

    fn send(&mut self, frames: &[&[u8]]) -> Result<(), IoError> {
        self.tx
            .send(&self.rx[0].fd, &self.name, &mut self.stats, frames)
    }

    fn join_datagrams(&mut self) {
        self.tx.datagrams = true;
    }

    fn vnet_hdr(&self) -> bool {
        true
    }

    fn fds(&self) -> Vec<RawFd> {
        self.rx.iter().map(|rx| rx.fd.as_raw_fd()).collect()
    }

    fn stats(&mut self) -> DriverStats {
        // The kernel's count of frames its socket queues had no room for (reset on read).
        for rx in &self.rx {
            if let Ok(dropped) = sys::packet_drops(&rx.fd) {
                self.stats.rx_dropped += u64::from(dropped);
            }
        }
        if let Some(p) = &self.policer {
            (self.stats.rx_policed, self.stats.rx_policed_bytes) = p.dropped();
        }
        self.stats
    }

    fn police(&mut self, rate: Option<Rate>) -> Result<bool, IoError> {
        let err = |(op, message)| IoError::setup(&self.name, op, message);
        match &mut self.policer {
            Some(p) => p.set(rate).map_err(err)?,
            None if rate.is_none() => {}
            None => {
                let sockets: Vec<_> = self
                    .rx
                    .iter()
                    .map(|rx| (rx.fd.as_fd(), rx.what == sys::Receive::AllButIpv4))
                    .collect();
                self.policer = Some(SocketPolicer::attach(&sockets, rate).map_err(err)?);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame of EtherType `ethertype` whose payload says which (`i`).
    fn frame(ethertype: u16, i: u8) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        f.extend(ethertype.to_be_bytes());
        f.extend((0..46).map(|j| i.wrapping_add(j)));
        f
    }

    /// Twenty frames of each of three EtherTypes (IPv4, ARP, IPv6), all different.
    fn three_kinds() -> Vec<Vec<u8>> {
        [0x0800u16, 0x0806, 0x86dd]
            .iter()
            .flat_map(|&t| (0..20u8).map(move |i| frame(t, i)))
            .collect()
    }

    /// Sends `frames` on loopback and returns what `rx` received of them in `wait`.
    fn loop_through(
        rx: &mut AfPacket,
        frames: &[Vec<u8>],
        wait: std::time::Duration,
    ) -> Result<Vec<Vec<u8>>, String> {
        let mut tx = PacketSender::open("lo").map_err(|e| e.to_string())?;
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        tx.send(&refs).map_err(|e| e.to_string())?;
        let mut got: Vec<Vec<u8>> = Vec::new();
        let deadline = std::time::Instant::now() + wait;
        while std::time::Instant::now() < deadline {
            rx.recv(&mut |frames| {
                got.extend(frames.map(|f| f[VNET_HDR_LEN..].to_vec()));
            })
            .map_err(|e| e.to_string())?;
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(got)
    }

    /// Behind a TC program the interface is read by two sockets (IPv4 after TC, the
    /// rest before it): every frame sent on loopback, of three EtherTypes, is received
    /// exactly once, whole. (Without a program, TC lets everything through.)
    #[test]
    fn behind_tc_every_frame_is_received_once() {
        let run = || -> Result<(), String> {
            sys::private_netns().map_err(|e| e.to_string())?;
            let mut rx = AfPacket::open_behind_tc("lo", 64).map_err(|e| e.to_string())?;
            let sent = three_kinds();
            let got = loop_through(&mut rx, &sent, std::time::Duration::from_secs(2))?;
            let (mut want, mut have) = (sent.clone(), got.clone());
            want.sort();
            have.sort();
            if want != have {
                return Err(format!(
                    "sent {} frames, received {}",
                    sent.len(),
                    got.len()
                ));
            }
            Ok(())
        };
        let r = std::thread::spawn(run).join();
        assert!(matches!(r, Ok(Ok(()))), "{r:?}");
    }

    /// A policed socket (and, behind TC, both sockets, over one bucket) takes the burst
    /// of 60 frames sent at once and no more, each at most once; the kernel counts the
    /// rest. With the policer removed, everything passes again.
    #[test]
    fn the_kernel_polices_before_the_ring() {
        let run = |behind_tc: bool| -> Result<(), String> {
            sys::private_netns().map_err(|e| e.to_string())?;
            let mut rx = if behind_tc {
                AfPacket::open_behind_tc("lo", 64)
            } else {
                AfPacket::open("lo", 64)
            }
            .map_err(|e| e.to_string())?;
            let rate = Rate {
                packets_per_second: 1,
                burst: 10,
            };
            if !rx.police(Some(rate)).map_err(|e| e.to_string())? {
                return Err("no policer in the kernel".into());
            }
            let sent = three_kinds();
            let wait = std::time::Duration::from_millis(300);
            let got = loop_through(&mut rx, &sent, wait)?;
            let s = rx.stats();
            let mut once = got.clone();
            once.sort();
            once.dedup();
            let bytes = (sent.len() - 10) as u64 * sent[0].len() as u64;
            if got.len() != 10
                || once.len() != 10
                || s.rx_policed != 50
                || s.rx_policed_bytes != bytes
            {
                return Err(format!(
                    "received {} ({} different), policed {} ({} bytes)",
                    got.len(),
                    once.len(),
                    s.rx_policed,
                    s.rx_policed_bytes
                ));
            }
            rx.police(None).map_err(|e| e.to_string())?;
            let got = loop_through(&mut rx, &sent, wait)?;
            if got.len() != sent.len() || rx.stats().rx_policed != 50 {
                return Err(format!(
                    "unpoliced: received {} of {}",
                    got.len(),
                    sent.len()
                ));
            }
            Ok(())
        };
        for behind_tc in [false, true] {
            let r = std::thread::spawn(move || run(behind_tc)).join();
            assert!(matches!(r, Ok(Ok(()))), "behind TC: {behind_tc}: {r:?}");
        }
    }
}
