//! The packet trace: the path of chosen packets through the nodes, with each node's
//! decision. Off unless asked for; costs one branch per node per vector when off.

use std::fmt;

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

/// What is being traced and what was recorded.
#[derive(Debug, Default)]
pub struct Trace {
    /// How many more arriving packets to trace.
    pending: u32,
    next_id: u32,
    steps: Vec<TraceStep>,
    /// Recorded steps are capped so that a forgotten trace cannot eat memory.
    max_steps: usize,
}

impl Trace {
    /// Traces the next `n` packets that arrive (adds to any already asked for).
    pub fn add(&mut self, n: u32) {
        self.pending = self.pending.saturating_add(n);
        if self.max_steps == 0 {
            self.max_steps = 100_000;
        }
    }

    /// Called for every arriving packet: its trace id if it is to be traced, else 0.
    #[inline]
    pub fn pick(&mut self) -> u32 {
        if self.pending == 0 {
            return 0;
        }
        self.pending -= 1;
        self.next_id += 1;
        self.next_id
    }

    /// Whether nodes should look for traced packets: once a trace was asked for, until
    /// the record is full.
    #[inline]
    pub fn active(&self) -> bool {
        self.steps.len() < self.max_steps
    }

    pub(crate) fn record(&mut self, step: TraceStep) {
        if self.steps.len() < self.max_steps {
            self.steps.push(step);
        }
    }

    pub fn steps(&self) -> &[TraceStep] {
        &self.steps
    }

    /// Forgets what was recorded (keeps what is pending).
    pub fn clear(&mut self) {
        self.steps.clear();
    }
}

impl fmt::Display for Trace {
    /// One block per packet: its nodes in order, each with its decision.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids: Vec<u32> = self.steps.iter().map(|s| s.packet).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            writeln!(f, "packet {id}")?;
            for s in self.steps.iter().filter(|s| s.packet == id) {
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
