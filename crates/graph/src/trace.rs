//! The packet trace: the path of chosen packets through the nodes, with each node's
//! decision. Off unless asked for; costs one branch per node per vector when off, and
//! stays off for vectors run after every traced packet has left the graph.

use std::fmt;

/// Most packets waiting to be traced at once (asking for more adds up to this).
pub const MAX_PENDING: u32 = 10_000;

/// Most steps recorded: a forgotten trace cannot eat memory.
pub const MAX_STEPS: usize = 100_000;

/// One step of one traced packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceStep {
    /// The trace id of the packet (1, 2, ... in the order packets were picked).
    pub packet: u32,
    pub node: &'static str,
    /// The node the packet went to next (`None` from a sink).
    pub next: Option<&'static str>,
    pub detail: Option<String>,
}

/// A traced packet: its id and where it entered (the caller's tag: the receiving
/// interface in ovr's pipeline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracedPacket {
    pub packet: u32,
    pub origin: u32,
}

/// What is being traced and what was recorded.
#[derive(Debug, Default)]
pub struct Trace {
    /// How many more arriving packets to trace.
    pending: u32,
    next_id: u32,
    /// A packet was picked since the graph last ran: the next run must look.
    armed: bool,
    packets: Vec<TracedPacket>,
    steps: Vec<TraceStep>,
}

impl Trace {
    /// Traces the next `n` packets that arrive (adds to any already asked for, up to
    /// [`MAX_PENDING`]). Returns how many are now pending.
    pub fn add(&mut self, n: u32) -> u32 {
        self.pending = self.pending.saturating_add(n).min(MAX_PENDING);
        self.pending
    }

    /// How many arriving packets are still to be traced.
    pub fn pending(&self) -> u32 {
        self.pending
    }

    /// Called for every arriving packet, with where it entered: its trace id if it is
    /// to be traced, else 0.
    #[inline]
    pub fn pick(&mut self, origin: u32) -> u32 {
        if self.pending == 0 {
            return 0;
        }
        self.pick_cold(origin)
    }

    #[cold]
    fn pick_cold(&mut self, origin: u32) -> u32 {
        if self.steps.len() >= MAX_STEPS {
            // The record is full: nothing more could be written about this packet.
            return 0;
        }
        self.pending -= 1;
        self.next_id += 1;
        self.armed = true;
        self.packets.push(TracedPacket {
            packet: self.next_id,
            origin,
        });
        self.next_id
    }

    /// Whether nodes should look for traced packets in this run: only when one was
    /// picked since the last run (every packet leaves the graph within the run that
    /// follows its arrival, edges pointing forward) and the record has room.
    #[inline]
    pub(crate) fn begin_run(&mut self) -> bool {
        core::mem::take(&mut self.armed) && self.steps.len() < MAX_STEPS
    }

    pub(crate) fn record(&mut self, step: TraceStep) {
        if self.steps.len() < MAX_STEPS {
            self.steps.push(step);
        }
    }

    pub fn steps(&self) -> &[TraceStep] {
        &self.steps
    }

    /// The traced packets, in the order they arrived.
    pub fn packets(&self) -> &[TracedPacket] {
        &self.packets
    }

    /// Each traced packet with its steps in order, in one pass over the record: a dump
    /// that looked through every step for every packet ([`Trace::steps_of`]) would take
    /// 10^9 comparisons on a full record (10,000 packets, 100,000 steps), holding the
    /// forwarding worker that answers it for seconds (4.4 s on a 2-vCPU VM, against
    /// 11 ms grouped in one pass).
    pub fn by_packet(&self) -> impl Iterator<Item = (&TracedPacket, Vec<&TraceStep>)> {
        // Ids are given out one by one (from 1 again after `clear`).
        let first = self.packets.first().map_or(0, |p| p.packet);
        let mut of: Vec<Vec<&TraceStep>> = vec![Vec::new(); self.packets.len()];
        for s in &self.steps {
            if let Some(v) = s
                .packet
                .checked_sub(first)
                .and_then(|i| of.get_mut(i as usize))
            {
                v.push(s);
            }
        }
        self.packets.iter().zip(of)
    }

    /// The steps of one packet, in order (replicas' steps follow their original's).
    pub fn steps_of(&self, packet: u32) -> impl Iterator<Item = &TraceStep> {
        self.steps.iter().filter(move |s| s.packet == packet)
    }

    /// Forgets what was recorded and what is pending; ids start again at 1.
    pub fn clear(&mut self) {
        *self = Trace::default();
    }
}

impl fmt::Display for Trace {
    /// One block per packet: its nodes in order, each with its decision.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (p, steps) in self.by_packet() {
            writeln!(f, "packet {}", p.packet)?;
            for s in steps {
                write!(f, "  {:<16}", s.node)?;
                if let Some(d) = &s.detail {
                    write!(f, " {d}")?;
                }
                match s.next {
                    Some(n) => writeln!(f, " -> {n}")?,
                    None => writeln!(f)?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_only_what_was_asked_and_caps_it() {
        let mut t = Trace::default();
        assert_eq!(t.pick(7), 0);
        assert!(!t.begin_run());
        assert_eq!(t.add(2), 2);
        assert_eq!((t.pick(7), t.pick(8), t.pick(9)), (1, 2, 0));
        assert!(t.begin_run());
        // Armed once: the following run does not look.
        assert!(!t.begin_run());
        assert_eq!(
            t.packets(),
            &[
                TracedPacket {
                    packet: 1,
                    origin: 7
                },
                TracedPacket {
                    packet: 2,
                    origin: 8
                }
            ]
        );
        assert_eq!(t.add(u32::MAX), MAX_PENDING);
        t.clear();
        assert_eq!((t.pending(), t.packets().len()), (0, 0));
        t.add(1);
        assert_eq!(t.pick(0), 1);
    }

    #[test]
    fn steps_grouped_by_packet_in_one_pass_are_each_packets_own_in_order() {
        let mut t = Trace::default();
        t.add(3);
        let ids: Vec<u32> = (0..3).map(|o| t.pick(o)).collect();
        // Interleaved, as a vector's packets go through the nodes together.
        for (k, node) in ["a", "b", "c"].into_iter().enumerate() {
            for &packet in ids.iter().rev() {
                t.record(TraceStep {
                    packet,
                    node,
                    next: None,
                    detail: Some(format!("{packet}.{k}")),
                });
            }
        }
        let grouped: Vec<(u32, Vec<&TraceStep>)> =
            t.by_packet().map(|(p, s)| (p.packet, s)).collect();
        assert_eq!(grouped.len(), 3);
        for (packet, steps) in grouped {
            assert_eq!(steps, t.steps_of(packet).collect::<Vec<_>>());
            assert_eq!(steps.len(), 3);
        }
        // After `clear`, ids start at 1 again.
        t.clear();
        t.add(1);
        let id = t.pick(9);
        t.record(TraceStep {
            packet: id,
            node: "a",
            next: None,
            detail: None,
        });
        assert_eq!(t.by_packet().map(|(_, s)| s.len()).collect::<Vec<_>>(), [1]);
    }
}
