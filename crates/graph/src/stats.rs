//! Per-node counters, bumped once per vector.

use std::time::Duration;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    pub vectors: u64,
    pub packets: u64,
    pub nanos: u64,
}

impl NodeStats {
    pub(crate) fn add(&mut self, packets: usize, took: Duration) {
        self.vectors += 1;
        self.packets += packets as u64;
        self.nanos += took.as_nanos() as u64;
    }

    /// Packets per call: how well the node amortises its per-vector costs.
    pub fn average_vector(&self) -> f64 {
        if self.vectors == 0 {
            0.0
        } else {
            self.packets as f64 / self.vectors as f64
        }
    }

    pub fn nanos_per_packet(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.nanos as f64 / self.packets as f64
        }
    }

    /// Adds another worker's counters (counters are per worker, summed on read).
    pub fn merge(&mut self, o: &NodeStats) {
        self.vectors += o.vectors;
        self.packets += o.packets;
        self.nanos += o.nanos;
    }
}
