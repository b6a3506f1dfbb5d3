//! Frames as a host's stack hands them to a virtual NIC that offers offloads. A
//! virtio-net header (virtio 1.x, section 5.1.6 "struct virtio_net_hdr"; what AF_PACKET
//! sockets with PACKET_VNET_HDR and TAP devices with IFF_VNET_HDR carry before each
//! frame) says that the transport checksum is still to be finished (`NEEDS_CSUM`: the
//! field holds only the pseudo-header sum; sum from `csum_start` to the end and store
//! at `csum_start + csum_offset`) and that a frame larger than the MTU is to be cut into
//! segments of `gso_size` payload bytes (TCP over IPv4 or IPv6, UDP). ovr finishes and
//! cuts such frames when it receives them, so that everything after sees only ordinary
//! frames, each with complete checksums.

use crate::WireError;
use crate::checksum::{accumulate, fold, pseudo_header_v4, pseudo_header_v6};
use crate::ethernet::ethertype;
use crate::ip_proto;
use core::net::{Ipv4Addr, Ipv6Addr};

/// The header's size (without the `num_buffers` field of mergeable receive buffers).
pub const VNET_HDR_LEN: usize = 10;

/// `flags`: the checksum at `csum_start + csum_offset` is to be finished.
pub const F_NEEDS_CSUM: u8 = 1;

/// `gso_type` values (the ECN bit aside).
pub mod gso {
    pub const NONE: u8 = 0;
    pub const TCPV4: u8 = 1;
    /// UDP fragmentation offload: IP fragments, which ovr does not make.
    pub const UDP: u8 = 3;
    pub const TCPV6: u8 = 4;
    /// UDP segmentation: one datagram per segment.
    pub const UDP_L4: u8 = 5;
    /// The sender has ECN set; segments keep the TCP flags as the first segment has them.
    pub const ECN: u8 = 0x80;
}

/// A virtio-net header. Packet sockets and TAPs write it in the host's byte order, which
/// is little-endian on every host ovr runs on (virtio 1.x is little-endian too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    /// Length of the headers before the payload (a hint; ovr derives it itself).
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        let b: &[u8; VNET_HDR_LEN] = b
            .get(..VNET_HDR_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(WireError::VnetHdrTruncated)?;
        let le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Ok(Self {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        })
    }

    pub fn emit(&self, b: &mut [u8; VNET_HDR_LEN]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    /// Whether the frame is to be cut into segments.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !gso::ECN != gso::NONE
    }
}

/// Finishes a transport checksum the sender left to the NIC: sums `frame[start..]` (the
/// field already holds the pseudo-header sum) and stores the result at `start + offset`.
pub fn finish_checksum(frame: &mut [u8], start: usize, offset: usize) -> Result<(), WireError> {
    let at = start
        .checked_add(offset)
        .filter(|at| at + 2 <= frame.len())
        .ok_or(WireError::OffloadBadChecksumOffsets)?;
    let sum = !fold(accumulate(0, &frame[start..]));
    // A UDP checksum of zero means "none"; its one's-complement twin says the same sum.
    let sum = if sum == 0 && offset == 6 { 0xffff } else { sum };
    frame[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    Ok(())
}

/// Where the headers of a frame to segment are.
struct Layout {
    /// The tunnel around the packet to segment, if any.
    outer: Option<Outer>,
    /// Start of the IP header.
    l3: usize,
    ipv4: bool,
    /// Start of the TCP or UDP header.
    l4: usize,
    /// End of the transport header: the payload starts here.
    payload: usize,
    tcp: bool,
}

/// The outer headers of a tunnel packet whose inner packet is to be segmented: a peer's
/// fast path at TC (ovr's, or the kernel's own VXLAN device) sends a VXLAN or MPLS-in-UDP
/// packet as one large frame, and a packet socket reports it as the inner packet's
/// segmentation (`csum_start` at the inner transport header) without saying that it is
/// tunnelled. Every segment gets its own copy of these headers with its own lengths.
#[derive(Clone, Copy)]
struct Outer {
    l3: usize,
    ipv4: bool,
    /// The UDP header.
    l4: usize,
}

/// The EtherType after an Ethernet header at `at` and up to two VLAN tags, and where
/// that header ends.
fn ethernet(frame: &[u8], at: usize) -> Result<(usize, u16), WireError> {
    let bad = WireError::OffloadBadSegmentation;
    let word = |o: usize| -> Result<u16, WireError> {
        Ok(u16::from_be_bytes([
            *frame.get(o).ok_or(bad)?,
            *frame.get(o + 1).ok_or(bad)?,
        ]))
    };
    let mut l3 = at + 14;
    let mut et = word(at + 12)?;
    for _ in 0..2 {
        if et != ethertype::VLAN && et != ethertype::QINQ {
            break;
        }
        et = word(l3 + 2)?;
        l3 += 4;
    }
    Ok((l3, et))
}

/// The tunnel whose inner transport header is at `l4` (`csum_start`), if the IP header
/// at `l3` is a UDP tunnel's: VXLAN or MPLS-in-UDP, as ovr and the kernel send them.
/// Returns the outer headers, and the inner IP header's start and EtherType.
fn tunnel(
    frame: &[u8],
    l3: usize,
    et: u16,
    l4: usize,
) -> Result<Option<(Outer, usize, u16)>, WireError> {
    let bad = WireError::OffloadBadSegmentation;
    let (ipv4, udp) = match et {
        ethertype::IPV4 => {
            let ihl = usize::from(frame.get(l3).ok_or(bad)? & 0x0f) * 4;
            if ihl < 20 || *frame.get(l3 + 9).ok_or(bad)? != ip_proto::UDP {
                return Ok(None);
            }
            (true, l3 + ihl)
        }
        ethertype::IPV6 if *frame.get(l3 + 6).ok_or(bad)? == ip_proto::UDP => (false, l3 + 40),
        _ => return Ok(None),
    };
    // The inner transport header lies beyond the UDP header and a tunnel header at least.
    if l4 < udp + 16 {
        return Ok(None);
    }
    let port = u16::from_be_bytes([
        *frame.get(udp + 2).ok_or(bad)?,
        *frame.get(udp + 3).ok_or(bad)?,
    ]);
    let outer = Outer { l3, ipv4, l4: udp };
    match port {
        crate::udp_port::VXLAN => {
            let (inner, et) = ethernet(frame, udp + 16)?;
            Ok(Some((outer, inner, et)))
        }
        crate::udp_port::MPLS_IN_UDP => {
            // The label stack up to its bottom, then the IP version says which.
            let mut at = udp + 8;
            for _ in 0..MAX_LABELS {
                let bottom = frame.get(at + 2).ok_or(bad)? & 1 == 1;
                at += 4;
                if bottom {
                    let et = match frame.get(at).ok_or(bad)? >> 4 {
                        4 => ethertype::IPV4,
                        6 => ethertype::IPV6,
                        _ => return Err(WireError::OffloadUnsupportedGso),
                    };
                    return Ok(Some((outer, at, et)));
                }
            }
            Err(bad)
        }
        _ => Err(WireError::OffloadUnsupportedGso),
    }
}

/// Labels read before giving up on finding the bottom of an MPLS stack.
const MAX_LABELS: usize = 8;

fn layout(frame: &[u8], h: &VnetHdr) -> Result<Layout, WireError> {
    let bad = WireError::OffloadBadSegmentation;
    let l4 = usize::from(h.csum_start);
    let (l3, et) = ethernet(frame, 0)?;
    let (outer, l3, et) = match tunnel(frame, l3, et, l4)? {
        Some((outer, inner, et)) => (Some(outer), inner, et),
        None => (None, l3, et),
    };
    let (ipv4, tcp) = match (h.gso_type & !gso::ECN, et) {
        (gso::TCPV4, ethertype::IPV4) => (true, true),
        (gso::TCPV6, ethertype::IPV6) => (false, true),
        (gso::UDP_L4, ethertype::IPV4) => (true, false),
        (gso::UDP_L4, ethertype::IPV6) => (false, false),
        _ => return Err(WireError::OffloadUnsupportedGso),
    };
    let proto = if ipv4 {
        let ihl = usize::from(frame.get(l3).ok_or(bad)? & 0x0f) * 4;
        if ihl < 20 || l3 + ihl != l4 {
            return Err(bad);
        }
        *frame.get(l3 + 9).ok_or(bad)?
    } else {
        // Extension headers may sit between; the transport header is where the sender
        // said. Only the IPv6 header's own length field is rewritten.
        if l4 < l3 + 40 {
            return Err(bad);
        }
        if l4 == l3 + 40 {
            *frame.get(l3 + 6).ok_or(bad)?
        } else if tcp {
            ip_proto::TCP
        } else {
            ip_proto::UDP
        }
    };
    if proto != if tcp { ip_proto::TCP } else { ip_proto::UDP } {
        return Err(bad);
    }
    let payload = if tcp {
        l4 + usize::from(frame.get(l4 + 12).ok_or(bad)? >> 4) * 4
    } else {
        l4 + 8
    };
    if payload > frame.len() || (tcp && payload < l4 + 20) {
        return Err(bad);
    }
    // The outer UDP checksum sums the inner headers and each payload piece apart: the
    // pieces must start at even offsets from it (tunnel headers are whole words).
    if outer.is_some_and(|o| (payload - o.l4) % 2 != 0) {
        return Err(bad);
    }
    Ok(Layout {
        outer,
        l3,
        ipv4,
        l4,
        payload,
        tcp,
    })
}

/// Cuts a GSO frame into segments of at most `h.gso_size` payload bytes, each with its
/// own IP length (and IPv4 identification and header checksum), TCP sequence number
/// and flags or UDP length, and a complete transport checksum. Each segment is handed
/// to `out` as its headers and its payload, so that the caller copies it once, into
/// its own buffer. `scratch` holds the headers (kept between calls to save allocating).
/// Returns the number of segments.
pub fn segment(
    frame: &[u8],
    h: &VnetHdr,
    scratch: &mut Vec<u8>,
    out: impl FnMut(&[u8], &[u8]),
) -> Result<usize, WireError> {
    segment_with(frame, h, true, scratch, out)
}

/// Like [`segment`]; with `udp_checksums` false, UDP datagrams are left with a zero
/// checksum ("none") instead of a summed one. Only for datagrams that their receiver
/// consumes without looking at it: tunnel packets ovr decapsulates itself, whose frame
/// the local kernel handed over as already trusted (`NEEDS_CSUM`). That covers the
/// outer UDP header of a large tunnel frame too (over IPv4; IPv6 always has one).
pub fn segment_with(
    frame: &[u8],
    h: &VnetHdr,
    udp_checksums: bool,
    scratch: &mut Vec<u8>,
    mut out: impl FnMut(&[u8], &[u8]),
) -> Result<usize, WireError> {
    let l = layout(frame, h)?;
    let mss = usize::from(h.gso_size);
    if mss == 0 {
        return Err(WireError::OffloadBadSegmentation);
    }
    let payload = &frame[l.payload..];
    let hdr = &frame[..l.payload];
    let outer_id = match l.outer {
        Some(o) if o.ipv4 => u16::from_be_bytes([hdr[o.l3 + 4], hdr[o.l3 + 5]]),
        _ => 0,
    };
    let (id, seq, flags) = (
        if l.ipv4 {
            u16::from_be_bytes([hdr[l.l3 + 4], hdr[l.l3 + 5]])
        } else {
            0
        },
        if l.tcp {
            u32::from_be_bytes([hdr[l.l4 + 4], hdr[l.l4 + 5], hdr[l.l4 + 6], hdr[l.l4 + 7]])
        } else {
            0
        },
        if l.tcp { hdr[l.l4 + 13] } else { 0 },
    );
    let count = payload.len().div_ceil(mss).max(1);
    for (i, chunk) in payload
        .chunks(mss)
        .chain(payload.is_empty().then_some(&[][..]))
        .enumerate()
    {
        scratch.clear();
        scratch.extend_from_slice(hdr);
        let s = &mut scratch[..];
        let l4_len = l.payload - l.l4 + chunk.len();
        let pseudo = if l.ipv4 {
            let total = (l.payload - l.l3 + chunk.len()) as u16;
            s[l.l3 + 2..l.l3 + 4].copy_from_slice(&total.to_be_bytes());
            s[l.l3 + 4..l.l3 + 6].copy_from_slice(&id.wrapping_add(i as u16).to_be_bytes());
            s[l.l3 + 10..l.l3 + 12].fill(0);
            let c = !fold(accumulate(0, &s[l.l3..l.l4]));
            s[l.l3 + 10..l.l3 + 12].copy_from_slice(&c.to_be_bytes());
            let a = |o: usize| Ipv4Addr::new(s[o], s[o + 1], s[o + 2], s[o + 3]);
            let proto = if l.tcp { ip_proto::TCP } else { ip_proto::UDP };
            pseudo_header_v4(a(l.l3 + 12), a(l.l3 + 16), proto, l4_len as u16)
        } else {
            let plen = (l.payload - l.l3 - 40 + chunk.len()) as u16;
            s[l.l3 + 4..l.l3 + 6].copy_from_slice(&plen.to_be_bytes());
            let a = |o: usize| {
                let b: [u8; 16] = s[o..o + 16].try_into().unwrap_or([0; 16]);
                Ipv6Addr::from(b)
            };
            let proto = if l.tcp { ip_proto::TCP } else { ip_proto::UDP };
            pseudo_header_v6(a(l.l3 + 8), a(l.l3 + 24), proto, l4_len as u32)
        };
        let csum_at = if l.tcp {
            let seq = seq.wrapping_add((i * mss) as u32);
            s[l.l4 + 4..l.l4 + 8].copy_from_slice(&seq.to_be_bytes());
            let mut f = flags;
            if i + 1 < count {
                f &= !(0x01 | 0x08); // FIN and PSH only on the last segment
            }
            if i > 0 {
                f &= !0x80; // CWR only on the first
            }
            s[l.l4 + 13] = f;
            l.l4 + 16
        } else {
            s[l.l4 + 4..l.l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            l.l4 + 6
        };
        s[csum_at..csum_at + 2].fill(0);
        // A datagram inside a tunnel goes on to a workload: its checksum is always summed.
        if l.tcp || udp_checksums || l.outer.is_some() {
            // Each piece starts at an even offset from the transport header (its header
            // is a multiple of four bytes long), so their sums add.
            let c = !fold(accumulate(accumulate(pseudo, &s[l.l4..]), chunk));
            let c = if c == 0 && !l.tcp { 0xffff } else { c };
            s[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
        }
        if let Some(o) = l.outer {
            outer_headers(s, o, outer_id.wrapping_add(i as u16), chunk, udp_checksums);
        }
        out(scratch, chunk);
    }
    Ok(count)
}

/// A tunnel segment's outer lengths, IPv4 identification and header checksum, and UDP
/// checksum: summed where asked for and always over IPv6 (RFC 8200 section 8.1), else
/// zero ("none", as the kernel's VXLAN sends by default without `udpcsum`).
fn outer_headers(s: &mut [u8], o: Outer, id: u16, chunk: &[u8], udp_checksums: bool) {
    let udp_len = s.len() - o.l4 + chunk.len();
    let pseudo = if o.ipv4 {
        let total = (s.len() - o.l3 + chunk.len()) as u16;
        s[o.l3 + 2..o.l3 + 4].copy_from_slice(&total.to_be_bytes());
        s[o.l3 + 4..o.l3 + 6].copy_from_slice(&id.to_be_bytes());
        s[o.l3 + 10..o.l3 + 12].fill(0);
        let c = !fold(accumulate(0, &s[o.l3..o.l4]));
        s[o.l3 + 10..o.l3 + 12].copy_from_slice(&c.to_be_bytes());
        let a = |at: usize| Ipv4Addr::new(s[at], s[at + 1], s[at + 2], s[at + 3]);
        pseudo_header_v4(a(o.l3 + 12), a(o.l3 + 16), ip_proto::UDP, udp_len as u16)
    } else {
        let plen = (s.len() - o.l3 - 40 + chunk.len()) as u16;
        s[o.l3 + 4..o.l3 + 6].copy_from_slice(&plen.to_be_bytes());
        let a = |at: usize| {
            let b: [u8; 16] = s[at..at + 16].try_into().unwrap_or([0; 16]);
            Ipv6Addr::from(b)
        };
        pseudo_header_v6(a(o.l3 + 8), a(o.l3 + 24), ip_proto::UDP, udp_len as u32)
    };
    s[o.l4 + 4..o.l4 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    s[o.l4 + 6..o.l4 + 8].fill(0);
    if udp_checksums || !o.ipv4 {
        let c = !fold(accumulate(accumulate(pseudo, &s[o.l4..]), chunk));
        let c = if c == 0 { 0xffff } else { c };
        s[o.l4 + 6..o.l4 + 8].copy_from_slice(&c.to_be_bytes());
    }
}

/// A large frame joined from a run of frames without copying their payloads (`coalesce`,
/// `coalesce_datagrams`): its headers — the first frame's, with the whole run's lengths
/// and a partial checksum — then each frame's payload, `frames[k][payloads[k]]`.
#[derive(Debug, Default)]
pub struct Joined {
    pub headers: Vec<u8>,
    pub payloads: Vec<core::ops::Range<usize>>,
}

impl Joined {
    /// The joined frame's pieces in order, for a gathering send.
    pub fn parts<'a>(&'a self, frames: &[&'a [u8]]) -> impl Iterator<Item = &'a [u8]> {
        core::iter::once(&self.headers[..]).chain(
            self.payloads
                .iter()
                .zip(frames)
                .map(|(r, f)| f.get(r.clone()).unwrap_or_default()),
        )
    }

    fn clear(&mut self) {
        self.headers.clear();
        self.payloads.clear();
    }
}

mod coalesce;
mod datagrams;
pub use coalesce::coalesce;
pub use datagrams::{MAX_DATAGRAMS, coalesce_datagrams};

#[cfg(test)]
mod tests;
