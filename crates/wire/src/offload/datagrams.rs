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

use super::{F_NEEDS_CSUM, Joined, VnetHdr, gso};
use crate::checksum::{accumulate, fold, pseudo_header_v4, pseudo_header_v6};
use crate::ethernet::ethertype;
use crate::ip_proto;
use core::net::{Ipv4Addr, Ipv6Addr};

const L3: usize = 14;
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
        let et = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
        let (ipv4, l4, end) = match et {
            ethertype::IPV4 => {
                let ip = frame.get(L3..L3 + 20)?;
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                let frag = u16::from_be_bytes([ip[6], ip[7]]) & !0x4000;
                if ip[0] != 0x45 || frag != 0 || ip[9] != ip_proto::UDP {
                    return None;
                }
                (true, L3 + 20, L3 + total)
            }
            ethertype::IPV6 => {
                let ip = frame.get(L3..L3 + 40)?;
                if ip[6] != ip_proto::UDP {
                    return None;
                }
                let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
                (false, L3 + 40, L3 + 40 + plen)
            }
            _ => return None,
        };
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
        let ip_same = if self.ipv4 {
            // TOS, flags, TTL, protocol, addresses.
            a[L3 + 1] == b[L3 + 1]
                && a[L3 + 6] & 0xe0 == b[L3 + 6] & 0xe0
                && a[L3 + 8..L3 + 10] == b[L3 + 8..L3 + 10]
                && a[L3 + 12..L3 + 20] == b[L3 + 12..L3 + 20]
        } else {
            a[L3..L3 + 4] == b[L3..L3 + 4] && a[L3 + 6..L3 + 40] == b[L3 + 6..L3 + 40]
        };
        self.ipv4 == o.ipv4
            && a[..14] == b[..14]
            && ip_same
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
    let pseudo = if first.ipv4 {
        out[L3 + 2..L3 + 4].copy_from_slice(&(20 + udp_len).to_be_bytes());
        out[L3 + 10..L3 + 12].fill(0);
        let c = !fold(accumulate(0, &out[L3..L3 + 20]));
        out[L3 + 10..L3 + 12].copy_from_slice(&c.to_be_bytes());
        let a = |o: usize| Ipv4Addr::new(out[o], out[o + 1], out[o + 2], out[o + 3]);
        pseudo_header_v4(a(L3 + 12), a(L3 + 16), ip_proto::UDP, udp_len)
    } else {
        out[L3 + 4..L3 + 6].copy_from_slice(&udp_len.to_be_bytes());
        let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&out[o..o + 16]).unwrap_or([0; 16]));
        pseudo_header_v6(a(L3 + 8), a(L3 + 24), ip_proto::UDP, u32::from(udp_len))
    };
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
