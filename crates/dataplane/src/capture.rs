//! Packet capture taps at the pipeline's boundary: frames received on an interface, and
//! frames handed to an interface for transmission, whatever the driver.
//!
//! The worker never touches a file: a tap copies a matching frame (up to its snap
//! length, with the time and the original length) into a bounded queue and goes on. A
//! writer elsewhere drains the queue into the file; when the queue is full the frame is
//! counted as dropped, never waited for. The copy is one allocation per captured frame:
//! captures are a diagnostic, and with no tap the cost is one branch per frame batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Which frames of the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Rx,
    Tx,
    Both,
}

impl Direction {
    fn takes(self, tx: bool) -> bool {
        match self {
            Direction::Rx => !tx,
            Direction::Tx => tx,
            Direction::Both => true,
        }
    }
}

/// One captured frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Wall-clock time of the capture (since the Unix epoch).
    pub time: Duration,
    /// The frame's length on the wire (`data` may be shorter: the snap length).
    pub orig_len: u32,
    pub tx: bool,
    pub data: Vec<u8>,
}

/// Why a tap ended (its writer sees the queue close).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Ended {
    Running = 0,
    /// The requested number of packets was captured.
    Count = 1,
    /// The requested time passed.
    Time = 2,
    /// Stopped through the API.
    Stopped = 3,
    /// The writer went away (a write error).
    WriterGone = 4,
}

impl Ended {
    pub fn name(self) -> &'static str {
        match self {
            Ended::Running => "running",
            Ended::Count => "packet count reached",
            Ended::Time => "time limit reached",
            Ended::Stopped => "stopped",
            Ended::WriterGone => "the writer stopped",
        }
    }
}

/// Counters a tap shares with its writer and the API.
#[derive(Debug, Default)]
pub struct TapCounters {
    /// Frames queued for the writer.
    pub queued: AtomicU64,
    /// Frames lost because the writer's queue was full.
    pub dropped: AtomicU64,
    /// Frames the writer has written (it counts these).
    pub written: AtomicU64,
    ended: AtomicU8,
}

impl TapCounters {
    pub fn ended(&self) -> Ended {
        match self.ended.load(Ordering::Relaxed) {
            1 => Ended::Count,
            2 => Ended::Time,
            3 => Ended::Stopped,
            4 => Ended::WriterGone,
            _ => Ended::Running,
        }
    }

    /// Records why the tap ended (the first reason stays).
    pub fn end(&self, why: Ended) {
        let _ = self.ended.compare_exchange(
            Ended::Running as u8,
            why as u8,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

/// One capture's tap. With several workers each has a copy (cloned), sharing the
/// queue, the counters and the frame budget.
#[derive(Clone)]
pub struct Tap {
    pub id: u32,
    pub interface: u32,
    pub direction: Direction,
    /// Most bytes kept of each frame.
    pub snaplen: usize,
    /// Frames still to capture, shared by the tap's copies (`None`: until stopped).
    pub left: Option<Arc<AtomicU64>>,
    /// When to stop (`None`: until stopped).
    pub until: Option<Instant>,
    pub queue: SyncSender<Frame>,
    pub counters: Arc<TapCounters>,
}

/// The taps of a pipeline.
#[derive(Default)]
pub struct Taps {
    taps: Vec<Tap>,
}

impl Taps {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.taps.is_empty()
    }

    pub fn len(&self) -> usize {
        self.taps.len()
    }

    pub fn add(&mut self, tap: Tap) {
        self.taps.push(tap);
    }

    /// Removes a tap (its writer then flushes and finishes); false if there is none.
    pub fn remove(&mut self, id: u32, why: Ended) -> bool {
        let before = self.taps.len();
        self.taps.retain(|t| {
            if t.id == id {
                t.counters.end(why);
                false
            } else {
                true
            }
        });
        self.taps.len() != before
    }

    /// Removes the taps whose time is up, and those whose frame budget another
    /// worker's copy used up (each copy must let go of the queue for the writer to
    /// finish).
    pub fn expire(&mut self, now: Instant) {
        self.taps.retain(|t| {
            let over = t.until.is_some_and(|u| now >= u);
            if over {
                t.counters.end(Ended::Time);
            }
            !over && !t.spent()
        });
    }

    /// Offers frames seen on `interface` to the taps (`tx`: handed to it for sending).
    #[cold]
    pub fn offer<'a>(
        &mut self,
        interface: u32,
        tx: bool,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) {
        let mut time = None;
        for f in frames {
            for t in &mut self.taps {
                if t.interface != interface || !t.direction.takes(tx) || t.spent() {
                    continue;
                }
                // One frame of the budget, taken before copying (another worker may be
                // taking the last one).
                if let Some(l) = &t.left
                    && l.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                        .is_err()
                {
                    continue;
                }
                // One clock read per batch of frames.
                let time = *time.get_or_insert_with(|| {
                    SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default()
                });
                let frame = Frame {
                    time,
                    orig_len: f.len() as u32,
                    tx,
                    data: f[..f.len().min(t.snaplen)].to_vec(),
                };
                match t.queue.try_send(frame) {
                    Ok(()) => {
                        t.counters.queued.fetch_add(1, Ordering::Relaxed);
                        if t.spent() {
                            t.counters.end(Ended::Count);
                        }
                    }
                    Err(TrySendError::Full(_)) => {
                        t.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(TrySendError::Disconnected(_)) => {
                        t.counters.end(Ended::WriterGone);
                        t.left = Some(Arc::new(AtomicU64::new(0)));
                    }
                }
            }
        }
        // Taps that are done let go of their queue: the writer flushes and finishes.
        self.taps.retain(|t| !t.spent());
    }
}

impl Tap {
    /// Whether its frame budget is used up (by any of its copies).
    fn spent(&self) -> bool {
        self.left
            .as_ref()
            .is_some_and(|l| l.load(Ordering::Relaxed) == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    fn tap(
        id: u32,
        direction: Direction,
        left: Option<u64>,
        depth: usize,
    ) -> (Tap, std::sync::mpsc::Receiver<Frame>) {
        let (queue, rx) = sync_channel(depth);
        let t = Tap {
            id,
            interface: 2,
            direction,
            snaplen: 4,
            left: left.map(|n| Arc::new(AtomicU64::new(n))),
            until: None,
            queue,
            counters: Arc::default(),
        };
        (t, rx)
    }

    #[test]
    fn taps_copy_matching_frames_up_to_the_snap_length() {
        let mut taps = Taps::default();
        let (t, rx) = tap(1, Direction::Rx, Some(2), 8);
        let c = Arc::clone(&t.counters);
        taps.add(t);
        let f: &[u8] = &[1, 2, 3, 4, 5, 6];
        taps.offer(3, false, [f]); // another interface
        taps.offer(2, true, [f]); // the other direction
        taps.offer(2, false, [f, &[9][..], &[7, 7][..]]);
        let got: Vec<Frame> = rx.try_iter().collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].data.as_slice(), got[0].orig_len),
            (&[1, 2, 3, 4][..], 6)
        );
        assert_eq!((got[1].data.as_slice(), got[1].orig_len), (&[9][..], 1));
        assert!(got[0].time > Duration::from_secs(1_600_000_000));
        // The count is reached: the tap is gone and its queue closed.
        assert!(taps.is_empty());
        assert_eq!(c.ended(), Ended::Count);
        assert!(rx.recv().is_err());
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let mut taps = Taps::default();
        let (t, rx) = tap(1, Direction::Both, None, 2);
        let c = Arc::clone(&t.counters);
        taps.add(t);
        let f: &[u8] = &[1; 60];
        taps.offer(2, true, [f; 5]);
        assert_eq!(c.queued.load(Ordering::Relaxed), 2);
        assert_eq!(c.dropped.load(Ordering::Relaxed), 3);
        assert_eq!(rx.try_iter().count(), 2);
        assert!(taps.remove(1, Ended::Stopped));
        assert!(!taps.remove(1, Ended::Stopped));
        assert_eq!(c.ended(), Ended::Stopped);
    }

    #[test]
    fn a_copy_lets_go_once_another_copy_spent_the_budget() {
        let (t, rx) = tap(1, Direction::Rx, Some(1), 8);
        let (mut mine, mut other) = (Taps::default(), Taps::default());
        mine.add(t.clone());
        other.add(t);
        other.offer(2, false, [&[1u8, 2][..]]);
        assert!(other.is_empty());
        mine.offer(2, false, [&[3u8][..]]);
        assert!(mine.is_empty(), "the budget is shared");
        assert_eq!(rx.try_iter().count(), 1);
        let (t, _rx) = tap(2, Direction::Rx, Some(1), 8);
        let (mut mine, mut other) = (Taps::default(), Taps::default());
        mine.add(t.clone());
        other.add(t);
        other.offer(2, false, [&[1u8][..]]);
        mine.expire(Instant::now());
        assert!(
            mine.is_empty(),
            "a copy seeing no frame lets go at its next expiry"
        );
    }

    #[test]
    fn taps_expire_and_notice_a_gone_writer() {
        let mut taps = Taps::default();
        let (mut t, _rx) = tap(1, Direction::Rx, None, 2);
        let now = Instant::now();
        t.until = Some(now + Duration::from_secs(5));
        let c1 = Arc::clone(&t.counters);
        taps.add(t);
        let (t, rx) = tap(2, Direction::Rx, None, 2);
        let c2 = Arc::clone(&t.counters);
        taps.add(t);
        taps.expire(now);
        assert_eq!(taps.len(), 2);
        taps.expire(now + Duration::from_secs(5));
        assert_eq!((taps.len(), c1.ended()), (1, Ended::Time));
        drop(rx);
        taps.offer(2, false, [&[1u8][..]]);
        assert!(taps.is_empty());
        assert_eq!(c2.ended(), Ended::WriterGone);
    }
}
