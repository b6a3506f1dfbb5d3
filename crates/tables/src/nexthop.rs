//! Next hops: what to do with a packet once a route, label, bridge entry or flow has
//! chosen it (the vRouter's "nh" table).

use crate::ids::{InterfaceId, NextHopId, VrfId};
use core::net::IpAddr;
use ovr_wire::ethernet::MacAddr;

/// The overlay encapsulation of a tunnel next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encap {
    /// VXLAN (RFC 7348) with this VNI.
    Vxlan { vni: u32 },
    /// MPLS-over-UDP (RFC 7510) with this label.
    MplsOverUdp { label: u32 },
    /// MPLS-over-GRE (RFC 4023) with this label.
    MplsOverGre { label: u32 },
}

/// A tunnel to a remote VTEP across the underlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tunnel {
    pub encap: Encap,
    /// The underlay interface the encapsulated packet leaves by.
    pub underlay: InterfaceId,
    /// Outer source address: this host's VTEP address.
    pub src: IpAddr,
    /// Outer destination address: the remote VTEP.
    pub dst: IpAddr,
    /// Outer destination MAC: the underlay neighbour (router or the remote host).
    pub dst_mac: MacAddr,
    /// VXLAN only: a routed packet's inner destination MAC, where the remote host bridges
    /// it (a network function's port on that host); `None`: the remote gateway's MAC,
    /// where the remote host routes it.
    pub inner_dst: Option<MacAddr>,
}

/// One next hop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextHop {
    /// Discard (counted as a drop by route).
    Drop,
    /// Deliver to ovr itself (the virtual gateway's addresses).
    Receive,
    /// Send out of a local interface with this destination MAC (L2/L3 rewrite; the
    /// source MAC is the interface's).
    Interface {
        interface: InterfaceId,
        dst_mac: MacAddr,
    },
    /// Encapsulate towards a remote VTEP.
    Tunnel(Tunnel),
    /// Spread flows over members (ECMP).
    Composite(Ecmp),
    /// Look the (decapsulated) packet up again in a VRF: what an MPLS label names when it
    /// stands for a whole virtual network rather than one workload.
    Vrf { vrf: VrfId, inner: Inner },
}

/// What a tunnel carries after its label, which the label alone must tell (an MPLS
/// payload has no type field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Inner {
    /// An Ethernet frame, bridged in the VRF (L2 overlay).
    Ethernet,
    /// An IP packet, routed in the VRF (L3 overlay).
    Ip,
}

impl NextHop {
    /// The interfaces this next hop sends through (validation of references).
    pub fn interface(&self) -> Option<InterfaceId> {
        match self {
            NextHop::Interface { interface, .. } => Some(*interface),
            NextHop::Tunnel(t) => Some(t.underlay),
            _ => None,
        }
    }

    /// The VRF a next hop looks packets up in.
    pub fn vrf(&self) -> Option<VrfId> {
        match self {
            NextHop::Vrf { vrf, .. } => Some(*vrf),
            _ => None,
        }
    }

    /// The member next hops of a composite (empty otherwise).
    pub fn members(&self) -> &[NextHopId] {
        match self {
            NextHop::Composite(e) => e.members(),
            _ => &[],
        }
    }
}

/// Number of hash buckets of a composite next hop: each bucket names one member.
pub const ECMP_BUCKETS: usize = 256;

/// An ECMP group with consistent bucket assignment.
///
/// A flow picks bucket `hash % 256`. Changing the members moves as few buckets as
/// possible: when a member goes, only its buckets are handed to the others; when a member
/// comes, it takes buckets only from the members that have the most. So besides the flow
/// table's own affinity, even flows not yet cached keep their member across changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ecmp {
    members: Vec<NextHopId>,
    buckets: Box<[NextHopId]>,
}

impl Ecmp {
    /// A group spreading over `members` (which must be non-empty and distinct: the
    /// caller validates).
    pub fn new(members: &[NextHopId]) -> Self {
        let mut e = Ecmp {
            members: Vec::new(),
            buckets: Box::from([]),
        };
        e.set_members(members);
        e
    }

    pub fn members(&self) -> &[NextHopId] {
        &self.members
    }

    /// The member for a flow hash.
    #[inline]
    pub fn select(&self, hash: u32) -> NextHopId {
        self.buckets[hash as usize % ECMP_BUCKETS]
    }

    /// How many buckets `member` holds.
    pub fn share(&self, member: NextHopId) -> usize {
        self.buckets.iter().filter(|b| **b == member).count()
    }

    /// Changes the member set, moving only the buckets that must move.
    pub fn set_members(&mut self, members: &[NextHopId]) {
        if members.is_empty() {
            return;
        }
        if self.buckets.is_empty() {
            self.members = members.to_vec();
            self.buckets = (0..ECMP_BUCKETS)
                .map(|i| members[i % members.len()])
                .collect();
            return;
        }
        // Buckets of members that go become free; so do buckets above a fair share.
        let ceil = ECMP_BUCKETS.div_ceil(members.len());
        let mut counts: Vec<usize> = members.iter().map(|m| self.share(*m)).collect();
        let mut free = Vec::new();
        for i in (0..ECMP_BUCKETS).rev() {
            match members.iter().position(|m| *m == self.buckets[i]) {
                None => free.push(i),
                Some(mi) if counts[mi] > ceil => {
                    counts[mi] -= 1;
                    free.push(i);
                }
                Some(_) => {}
            }
        }
        // Free buckets go to whoever holds the fewest.
        for i in free.into_iter().rev() {
            let mi = argmin(&counts);
            self.buckets[i] = members[mi];
            counts[mi] += 1;
        }
        // Newcomers may still be short: move single buckets from the richest.
        loop {
            let (lo, hi) = (argmin(&counts), argmax(&counts));
            if counts[hi] - counts[lo] <= 1 {
                break;
            }
            if let Some(i) = (0..ECMP_BUCKETS)
                .rev()
                .find(|&i| self.buckets[i] == members[hi])
            {
                self.buckets[i] = members[lo];
            }
            counts[hi] -= 1;
            counts[lo] += 1;
        }
        self.members = members.to_vec();
    }
}

/// Index of the smallest count (the first on ties: deterministic).
fn argmin(counts: &[usize]) -> usize {
    (0..counts.len())
        .min_by_key(|&i| (counts[i], i))
        .unwrap_or(0)
}

/// Index of the largest count (the first on ties).
fn argmax(counts: &[usize]) -> usize {
    (0..counts.len())
        .max_by_key(|&i| (counts[i], usize::MAX - i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u32]) -> Vec<NextHopId> {
        v.iter().map(|i| NextHopId(*i)).collect()
    }

    fn balanced(e: &Ecmp) -> bool {
        let shares: Vec<usize> = e.members().iter().map(|m| e.share(*m)).collect();
        shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1
            && shares.iter().sum::<usize>() == ECMP_BUCKETS
    }

    #[test]
    fn spreads_evenly() {
        let e = Ecmp::new(&ids(&[1, 2, 3]));
        assert!(balanced(&e));
        assert_eq!(e.select(0), NextHopId(1));
        assert_eq!(e.select(1), NextHopId(2));
    }

    #[test]
    fn removing_a_member_moves_only_its_buckets() {
        let mut e = Ecmp::new(&ids(&[1, 2, 3, 4]));
        let before = e.buckets.clone();
        e.set_members(&ids(&[1, 2, 4]));
        assert!(balanced(&e));
        for i in 0..ECMP_BUCKETS {
            if before[i] != NextHopId(3) {
                assert_eq!(e.buckets[i], before[i], "bucket {i} moved");
            } else {
                assert_ne!(e.buckets[i], NextHopId(3));
            }
        }
    }

    #[test]
    fn adding_a_member_moves_only_buckets_to_it() {
        let mut e = Ecmp::new(&ids(&[1, 2, 3]));
        let before = e.buckets.clone();
        e.set_members(&ids(&[1, 2, 3, 9]));
        assert!(balanced(&e));
        let moved = (0..ECMP_BUCKETS)
            .filter(|&i| e.buckets[i] != before[i])
            .count();
        assert_eq!(moved, e.share(NextHopId(9)));
        assert_eq!(moved, ECMP_BUCKETS / 4);
    }

    proptest::proptest! {
        #[test]
        fn any_sequence_of_member_sets_stays_balanced_and_minimal(
            sets in proptest::collection::vec(proptest::sample::subsequence((1u32..12).collect::<Vec<_>>(), 1..11), 1..8)
        ) {
            let mut e = Ecmp::new(&ids(&sets[0]));
            for s in &sets[1..] {
                let before = e.buckets.clone();
                let m = ids(s);
                e.set_members(&m);
                proptest::prop_assert!(balanced(&e));
                // A bucket whose member stays only moves if that member had more than its share.
                for i in 0..ECMP_BUCKETS {
                    if m.contains(&before[i]) && e.buckets[i] != before[i] {
                        let share_before = before.iter().filter(|b| **b == before[i]).count();
                        proptest::prop_assert!(share_before > ECMP_BUCKETS / m.len());
                    }
                }
            }
        }
    }
}
