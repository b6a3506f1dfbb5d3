//! The node interface: a node takes a whole vector and names each packet's next node.

/// The most packets a node is handed at once.
pub const VECTOR_SIZE: usize = 256;

/// A `next` value meaning "this node kept the packet" (transmitted or freed it).
pub const CONSUMED: u16 = u16::MAX;

/// The packets handed to a node and where it sends them.
pub struct Vector<'a> {
    pub pkts: &'a [u32],
    /// For every packet `pkts[i]`, the index of its next node in `next_nodes()` (or
    /// [`CONSUMED`]). The graph then moves the packets, so a node never enqueues one by one.
    pub next: &'a mut [u16],
    /// Packets the node created (replicas), each with its next index.
    pub(crate) extra: &'a mut Vec<(u32, u16)>,
}

impl Vector<'_> {
    /// Sets each packet's next node to what `f` says for it, given its index and
    /// packet: the loop most nodes are.
    #[inline]
    pub fn map<N: Into<u16>>(&mut self, mut f: impl FnMut(usize, u32) -> N) {
        for (i, (p, n)) in self.pkts.iter().zip(self.next.iter_mut()).enumerate() {
            *n = f(i, *p).into();
        }
    }

    /// Sends a packet this node created (a replica) to a next node.
    #[inline]
    pub fn emit(&mut self, pkt: u32, next: impl Into<u16>) {
        self.extra.push((pkt, next.into()));
    }
}

/// One step of the pipeline.
///
/// `C` is the worker's mutable context (buffers, flow table, counters) and `E` the shared
/// read-only environment (the forwarding tables of this vector).
pub trait Node<C, E: ?Sized> {
    /// The node's name, as counters and traces show it.
    fn name(&self) -> &'static str;

    /// Names of the nodes a packet may go to next, by next index. A node with none is
    /// a sink: it takes ownership of its packets (transmit, drop).
    fn next_nodes(&self) -> &'static [&'static str];

    /// Processes up to `VECTOR_SIZE` packets, setting every packet's next node.
    fn process(&mut self, cx: &mut C, env: &E, v: &mut Vector<'_>);

    /// What this node decided for a traced packet, after `process` (cold path), with
    /// the environment the vector ran against (to name what the decision refers to).
    fn trace(&self, _cx: &C, _env: &E, _pkt: u32) -> Option<String> {
        None
    }
}

/// Declares a node's next nodes once: an enum whose discriminants are next indices, and
/// the matching name list.
///
/// ```
/// ovr_graph::next_nodes! { pub enum Next { Forward = "ip-forward", Drop = "drop" } }
/// assert_eq!(Next::NAMES, &["ip-forward", "drop"]);
/// assert_eq!(Next::Drop as u16, 1);
/// ```
#[macro_export]
macro_rules! next_nodes {
    ($vis:vis enum $name:ident { $($variant:ident = $node:literal),+ $(,)? }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u16)]
        $vis enum $name { $($variant),+ }
        impl $name {
            $vis const NAMES: &'static [&'static str] = &[$($node),+];
        }
        impl From<$name> for u16 {
            fn from(n: $name) -> u16 {
                n as u16
            }
        }
    };
}
