//! Frames handed from the worker that read them to the worker that owns their flow.
//!
//! Each worker has a mailbox: a bounded queue of batches (frames of one interface, copied
//! into one buffer: one allocation and one queue operation per batch, not per frame)
//! and a wake-up socket in its poll set, written only when the owner is asleep. A full
//! mailbox drops the batch and counts it: a worker must never wait for another.

use ovr_tables::ids::InterfaceId;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// Batches a mailbox holds: enough for every other worker's full receive of a loop.
const MAILBOX_BATCHES: usize = 256;

/// Frames of one interface handed over together.
pub struct Batch {
    pub iface: InterfaceId,
    /// The frames begin with a virtio-net header.
    pub vnet: bool,
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Batch {
    fn new(iface: InterfaceId, vnet: bool) -> Self {
        Self {
            iface,
            vnet,
            data: Vec::new(),
            ends: Vec::new(),
        }
    }

    pub fn frames(&self) -> impl Iterator<Item = &[u8]> {
        let starts = core::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(a, b)| &self.data[a..*b])
    }

    fn len(&self) -> usize {
        self.ends.len()
    }
}

/// A worker's own end: batches for it, and its wake-up.
pub struct Mailbox {
    rx: Receiver<Batch>,
    wake: UnixDatagram,
    asleep: Arc<AtomicBool>,
    /// A batch taken while deciding whether to sleep.
    early: Option<Batch>,
}

/// A worker's way to every other worker's mailbox.
pub struct Outbox {
    to: Vec<Option<Peer>>,
    /// Per worker, the batch being filled.
    pending: Vec<Option<Batch>>,
    /// Frames handed to other workers.
    pub handed: u64,
    /// Frames dropped because a mailbox was full.
    pub dropped: u64,
}

struct Peer {
    tx: SyncSender<Batch>,
    wake: UnixDatagram,
    asleep: Arc<AtomicBool>,
}

/// A mailbox and an outbox for each of `n` workers.
pub fn mailboxes(n: usize) -> std::io::Result<Vec<(Mailbox, Outbox)>> {
    let mut boxes = Vec::with_capacity(n);
    let mut peers = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, rx) = sync_channel(MAILBOX_BATCHES);
        let (wake_tx, wake_rx) = UnixDatagram::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        let asleep = Arc::new(AtomicBool::new(false));
        peers.push((tx, wake_tx, Arc::clone(&asleep)));
        boxes.push(Mailbox {
            rx,
            wake: wake_rx,
            asleep,
            early: None,
        });
    }
    let mut out = Vec::with_capacity(n);
    for (me, mailbox) in boxes.into_iter().enumerate() {
        let mut to = Vec::with_capacity(n);
        for (w, (tx, wake, asleep)) in peers.iter().enumerate() {
            to.push(if w == me {
                None
            } else {
                Some(Peer {
                    tx: tx.clone(),
                    wake: wake.try_clone()?,
                    asleep: Arc::clone(asleep),
                })
            });
        }
        let pending = (0..n).map(|_| None).collect();
        out.push((
            mailbox,
            Outbox {
                to,
                pending,
                handed: 0,
                dropped: 0,
            },
        ));
    }
    Ok(out)
}

impl Mailbox {
    /// The descriptor that becomes readable when another worker wakes this one.
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Whether the worker may sleep: says it is asleep first, then looks once more, so
    /// that a batch sent meanwhile either is seen here or wakes it (each side stores,
    /// fences, then looks at the other's store).
    pub fn may_sleep(&mut self) -> bool {
        self.asleep.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.early.is_none() {
            self.early = self.rx.try_recv().ok();
        }
        let empty = self.early.is_none();
        if !empty {
            self.asleep.store(false, Ordering::Relaxed);
        }
        empty
    }

    /// Awake again: clears the flag and the wake-ups.
    pub fn awake(&mut self) {
        self.asleep.store(false, Ordering::Relaxed);
        let mut b = [0u8; 64];
        while self.wake.recv(&mut b).is_ok() {}
    }

    /// The next batch handed to this worker.
    pub fn take(&mut self) -> Option<Batch> {
        self.early.take().or_else(|| self.rx.try_recv().ok())
    }
}

impl Outbox {
    /// Queues a copy of `frame` (received on `iface`) for worker `to`.
    pub fn push(&mut self, to: usize, iface: InterfaceId, vnet: bool, frame: &[u8]) {
        if self.pending[to]
            .as_ref()
            .is_some_and(|b| b.iface != iface || b.vnet != vnet)
        {
            self.send(to);
        }
        let b = self.pending[to].get_or_insert_with(|| Batch::new(iface, vnet));
        b.data.extend_from_slice(frame);
        b.ends.push(b.data.len());
    }

    /// Sends every batch being filled.
    pub fn flush(&mut self) {
        for to in 0..self.pending.len() {
            self.send(to);
        }
    }

    fn send(&mut self, to: usize) {
        let (Some(b), Some(peer)) = (self.pending[to].take(), self.to[to].as_ref()) else {
            return;
        };
        let n = b.len() as u64;
        match peer.tx.try_send(b) {
            Ok(()) => {
                self.handed += n;
                fence(Ordering::SeqCst);
                if peer.asleep.load(Ordering::Relaxed) {
                    // A full wake-up socket already holds a wake-up: nothing lost.
                    let _ = peer.wake.send(&[1]);
                }
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.dropped += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_arrive_in_order_in_batches_per_interface() {
        let mut boxes = mailboxes(2).unwrap();
        let (mut mb1, _) = boxes.pop().unwrap();
        let (_, mut out0) = boxes.pop().unwrap();
        out0.push(1, InterfaceId(3), false, b"one");
        out0.push(1, InterfaceId(3), false, b"two");
        out0.push(1, InterfaceId(4), true, b"three");
        out0.flush();
        let a = mb1.take().unwrap();
        assert_eq!((a.iface, a.vnet), (InterfaceId(3), false));
        assert_eq!(a.frames().collect::<Vec<_>>(), [b"one".as_slice(), b"two"]);
        let b = mb1.take().unwrap();
        assert_eq!((b.iface, b.vnet), (InterfaceId(4), true));
        assert_eq!(b.frames().collect::<Vec<_>>(), [b"three".as_slice()]);
        assert!(mb1.take().is_none());
    }

    #[test]
    fn a_sleeping_worker_is_woken_and_a_full_mailbox_drops_and_counts() {
        let mut boxes = mailboxes(2).unwrap();
        let (mut mb1, _) = boxes.pop().unwrap();
        let (_, mut out0) = boxes.pop().unwrap();
        assert!(mb1.may_sleep());
        out0.push(1, InterfaceId(0), false, b"x");
        out0.flush();
        let fd = mb1.fd();
        let readable = move || ovr_io::Poller::new([fd]).wait(0).unwrap();
        assert!(readable(), "the wake-up socket is readable");
        mb1.awake();
        assert!(!readable(), "awake clears the wake-ups");
        for _ in 0..MAILBOX_BATCHES + 3 {
            out0.push(1, InterfaceId(0), false, b"y");
            out0.flush();
        }
        assert_eq!(out0.dropped, 4);
        assert!(!mb1.may_sleep(), "frames are waiting");
    }
}
