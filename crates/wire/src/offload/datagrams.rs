//! Joining consecutive UDP datagrams of one flow into one frame with UDP segmentation
//! offload (`UDP_L4`): the kernel, or a NIC, cuts it back into the same datagrams.
//!
//! This is how tunnel packets can cross the host in one piece. A packet socket's
//! virtio-net header has no GSO type for a UDP tunnel (the kernel cannot be asked to cut
//! an encapsulated 64 KB TCP frame), but it can be asked to cut a UDP payload into
//! datagrams of `gso_size` bytes. When each of those already is a complete tunnel packet
//! (outer UDP payload: VXLAN or MPLS header and the inner segment, made by ovr), one
//! large frame carries a whole run of them: one system call, one socket buffer through
//! the kernel and, on a veth, one frame for the receiver — which reads it with its
//! virtio-net header and cuts it itself (`segment`). The datagrams on a wire are those
//! ovr made, except that they carry a UDP checksum (the kernel computes one per datagram
//! when it cuts; `UDP_L4` cannot be asked for without it, and RFC 7348 section 5 and
//! RFC 7510 section 3 allow it) and IPv4 identifications counted up from the first's.
//!
//! Joined: untagged UDP over IPv4 without options and not a fragment, or over IPv6
//! without extension headers; the same Ethernet header, IP fields but lengths,
//! identification and checksum, and ports; every datagram's payload as long as the
//! first's but the last, which may be shorter.

use super::coalesce::{same_ip, set_lengths, untagged_ip};
use super::{F_NEEDS_CSUM, Joined, VnetHdr, gso};
use crate::checksum::fold;
use crate::ip_proto;

/// The most datagrams one frame carries: the limit the kernel sets on its own UDP
/// segmentation (`UDP_MAX_SEGMENTS`).
pub const MAX_DATAGRAMS: usize = 64;

/// One datagram that may join: its bytes (without Ethernet padding) and where its
/// payload starts.
struct Dgram<'a> {
    frame: &'a [u8],
    ipv4: bool,
    l4: usize,
}

impl<'a> Dgram<'a> {
    fn parse(frame: &'a [u8]) -> Option<Self> {
        let (ipv4, l4, end) = untagged_ip(frame, ip_proto::UDP)?;
        let frame = frame.get(..end)?;
        let udp = frame.get(l4..l4 + 8)?;
        // The UDP length must be the IP payload's, and the payload not empty.
        if usize::from(u16::from_be_bytes([udp[4], udp[5]])) != end - l4 || end - l4 == 8 {
            return None;
        }
        Some(Self { frame, ipv4, l4 })
    }

    fn len(&self) -> usize {
        self.frame.len() - self.l4 - 8
    }

    /// Same Ethernet header, IP fields but lengths, identification and checksum, and
    /// ports.
    fn same_flow(&self, o: &Dgram) -> bool {
        let (a, b) = (self.frame, o.frame);
        self.ipv4 == o.ipv4
            && same_ip(a, b, self.ipv4)
            && a[self.l4..self.l4 + 4] == b[o.l4..o.l4 + 4]
    }
}

/// Joins the longest run of datagrams at the start of `frames` (at least two) into one
/// frame with UDP segmentation offload in `out`; returns its virtio-net header and how
/// many frames it took, or `None` when the first frame joins with nothing.
pub fn coalesce_datagrams(frames: &[&[u8]], out: &mut Joined) -> Option<(VnetHdr, usize)> {
    let first = Dgram::parse(frames.first()?)?;
    let size = first.len();
    // The IP length field bounds the joined frame.
    let room = 0xffff - 8 - if first.ipv4 { 20 } else { 0 };
    let (mut n, mut total) = (1, size);
    for f in frames[1..].iter().take(MAX_DATAGRAMS - 1) {
        let Some(d) = Dgram::parse(f) else { break };
        let len = d.len();
        if !first.same_flow(&d) || len > size || total + len > room {
            break;
        }
        n += 1;
        total += len;
        if len < size {
            break;
        }
    }
    if n < 2 {
        return None;
    }
    let data = first.l4 + 8;
    out.clear();
    out.headers.extend_from_slice(&first.frame[..data]);
    for f in &frames[..n] {
        // Parsed once already: this cannot fail, and is cheaper than keeping the run.
        let d = Dgram::parse(f)?;
        out.payloads.push(data..d.frame.len());
    }
    let (l4, out) = (first.l4, &mut out.headers);
    let udp_len = (8 + total) as u16;
    let pseudo = set_lengths(out, first.ipv4, l4, usize::from(udp_len), ip_proto::UDP);
    out[l4 + 4..l4 + 6].copy_from_slice(&udp_len.to_be_bytes());
    // What a sender leaves for checksum offload: the pseudo-header sum, not inverted.
    out[l4 + 6..l4 + 8].copy_from_slice(&fold(pseudo).to_be_bytes());
    let h = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: gso::UDP_L4,
        hdr_len: data as u16,
        gso_size: size as u16,
        csum_start: l4 as u16,
        csum_offset: 6,
    };
    Some((h, n))
}
