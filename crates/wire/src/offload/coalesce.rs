//! Joining consecutive TCP segments of one connection into one large frame, for a
//! receiver that takes large frames (a packet socket or TAP with a virtio-net header):
//! the reverse of [`segment`](super::segment), as GRO does in a NIC driver. The
//! receiving stack then handles tens of segments as one, as it would from a local
//! sender. Only what `segment` would give back exactly is joined: untagged TCP over IPv4
//! without options or IPv6 without extension headers, ACK (and PSH on the last) only,
//! every header field but the sequence number, lengths, IPv4 identification and
//! checksums equal, sequence numbers contiguous, every segment but the last as long as
//! the first.

use super::{F_NEEDS_CSUM, Joined, VnetHdr, gso};
use crate::checksum::{accumulate, fold, pseudo_header_v4, pseudo_header_v6};
use crate::ethernet::ethertype;
use crate::ip_proto;
use core::net::{Ipv4Addr, Ipv6Addr};

const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const L3: usize = 14;

/// One segment that may join: its bytes (without Ethernet padding) and where things are.
struct Seg<'a> {
    frame: &'a [u8],
    ipv4: bool,
    l4: usize,
    /// Where the payload starts.
    data: usize,
    seq: u32,
    flags: u8,
}

impl<'a> Seg<'a> {
    fn parse(frame: &'a [u8]) -> Option<Self> {
        let (ipv4, l4, end) = untagged_ip(frame, ip_proto::TCP)?;
        let frame = frame.get(..end)?;
        let tcp = frame.get(l4..l4 + 20)?;
        let data = l4 + usize::from(tcp[12] >> 4) * 4;
        let flags = tcp[13];
        if data < l4 + 20 || data >= end || flags & ACK == 0 || flags & !(ACK | PSH) != 0 {
            return None;
        }
        Some(Self {
            frame,
            ipv4,
            l4,
            data,
            seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
            flags,
        })
    }

    fn len(&self) -> usize {
        self.frame.len() - self.data
    }

    /// Same addresses, IP fields, ports, acknowledgement, window, urgent pointer and
    /// options (everything but sequence number, flags and checksum).
    fn same_flow(&self, o: &Seg) -> bool {
        let (a, b) = (self.frame, o.frame);
        let t = self.l4;
        self.ipv4 == o.ipv4
            && self.data == o.data
            && same_ip(a, b, self.ipv4)
            && a[t..t + 4] == b[t..t + 4]
            && a[t + 8..t + 12] == b[t + 8..t + 12]
            && a[t + 14..t + 16] == b[t + 14..t + 16]
            && a[t + 18..self.data] == b[t + 18..o.data]
    }
}

/// Where an untagged IPv4 (no options, not a fragment: DF alone may be set) or IPv6 (no
/// extension header) packet of transport `proto` has its transport header, and where
/// the packet ends (Ethernet padding excluded): `(ipv4, l4, end)`.
pub(super) fn untagged_ip(frame: &[u8], proto: u8) -> Option<(bool, usize, usize)> {
    match u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]) {
        ethertype::IPV4 => {
            let ip = frame.get(L3..L3 + 20)?;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & !0x4000;
            (ip[0] == 0x45 && frag == 0 && ip[9] == proto).then_some((true, L3 + 20, L3 + total))
        }
        ethertype::IPV6 => {
            let ip = frame.get(L3..L3 + 40)?;
            let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            (ip[6] == proto).then_some((false, L3 + 40, L3 + 40 + plen))
        }
        _ => None,
    }
}

/// Whether two such packets have the same Ethernet header and IP fields but lengths,
/// IPv4 identification and checksum.
pub(super) fn same_ip(a: &[u8], b: &[u8], ipv4: bool) -> bool {
    a[..14] == b[..14]
        && if ipv4 {
            // TOS, flags, TTL, protocol, addresses.
            a[L3 + 1] == b[L3 + 1]
                && a[L3 + 6] & 0xe0 == b[L3 + 6] & 0xe0
                && a[L3 + 8..L3 + 10] == b[L3 + 8..L3 + 10]
                && a[L3 + 12..L3 + 20] == b[L3 + 12..L3 + 20]
        } else {
            // Traffic class and flow label, next header and hop limit, addresses.
            a[L3..L3 + 4] == b[L3..L3 + 4] && a[L3 + 6..L3 + 40] == b[L3 + 6..L3 + 40]
        }
}

/// Sets a joined frame's IP length (and IPv4 header checksum) for `l4_len` bytes of
/// transport; returns the pseudo-header sum for its transport checksum.
pub(super) fn set_lengths(out: &mut [u8], ipv4: bool, l4: usize, l4_len: usize, proto: u8) -> u64 {
    if ipv4 {
        out[L3 + 2..L3 + 4].copy_from_slice(&((l4 - L3 + l4_len) as u16).to_be_bytes());
        out[L3 + 10..L3 + 12].fill(0);
        let c = !fold(accumulate(0, &out[L3..l4]));
        out[L3 + 10..L3 + 12].copy_from_slice(&c.to_be_bytes());
        let a = |o: usize| Ipv4Addr::new(out[o], out[o + 1], out[o + 2], out[o + 3]);
        pseudo_header_v4(a(L3 + 12), a(L3 + 16), proto, l4_len as u16)
    } else {
        out[L3 + 4..L3 + 6].copy_from_slice(&((l4 - L3 - 40 + l4_len) as u16).to_be_bytes());
        let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&out[o..o + 16]).unwrap_or([0; 16]));
        pseudo_header_v6(a(L3 + 8), a(L3 + 24), proto, l4_len as u32)
    }
}

/// Joins the longest run of segments at the start of `frames` (at least two) into one
/// large frame in `out`, with the virtio-net header that asks the receiver to treat it
/// as those segments; returns the header and how many frames it took, or `None` when the
/// first frame joins with nothing (send it as it is).
pub fn coalesce(frames: &[&[u8]], out: &mut Joined) -> Option<(VnetHdr, usize)> {
    let first = Seg::parse(frames.first()?)?;
    if first.flags & PSH != 0 {
        return None;
    }
    let mss = first.len();
    // The IP length fields bound the joined frame.
    let room = 0xffff - (first.data - first.l4) - if first.ipv4 { 20 } else { 0 };
    let (mut n, mut total, mut psh) = (1, mss, false);
    for f in &frames[1..] {
        let Some(s) = Seg::parse(f) else { break };
        let len = s.len();
        if !first.same_flow(&s)
            || s.seq != first.seq.wrapping_add(total as u32)
            || len > mss
            || total + len > room
        {
            break;
        }
        n += 1;
        total += len;
        if s.flags & PSH != 0 || len < mss {
            psh = s.flags & PSH != 0;
            break;
        }
    }
    if n < 2 {
        return None;
    }
    out.clear();
    out.headers.extend_from_slice(&first.frame[..first.data]);
    for f in &frames[..n] {
        // Parsed once already: this cannot fail, and is cheaper than keeping the runs.
        let s = Seg::parse(f)?;
        out.payloads.push(s.data..s.frame.len());
    }
    Some((finish(&mut out.headers, &first, total, psh), n))
}

/// Sets the joined frame's lengths, flags and partial checksum; returns its header.
fn finish(out: &mut [u8], first: &Seg, total: usize, psh: bool) -> VnetHdr {
    let (l4, data) = (first.l4, first.data);
    let pseudo = set_lengths(out, first.ipv4, l4, data - l4 + total, ip_proto::TCP);
    if psh {
        out[l4 + 13] |= PSH;
    }
    // What a sender leaves for checksum offload: the pseudo-header sum, not inverted.
    out[l4 + 16..l4 + 18].copy_from_slice(&fold(pseudo).to_be_bytes());
    VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if first.ipv4 { gso::TCPV4 } else { gso::TCPV6 },
        hdr_len: data as u16,
        gso_size: (first.frame.len() - data) as u16,
        csum_start: l4 as u16,
        csum_offset: 16,
    }
}
