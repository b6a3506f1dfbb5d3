//! Against scapy: frames as a sender leaves them for an offloading NIC
//! (`fixtures/gen_offload.py`), and the frames scapy builds for the wire.

use super::*;

macro_rules! case {
    ($name:literal, [$($i:literal),+]) => {
        (
            include_bytes!(concat!("../../fixtures/offload/", $name, ".in.bin")).as_slice(),
            vec![$(include_bytes!(concat!("../../fixtures/offload/", $name, ".out", $i, ".bin")).as_slice()),+],
        )
    };
}

fn finished(input: &[u8]) -> Vec<Vec<u8>> {
    let h = VnetHdr::parse(input).unwrap();
    let mut frame = input[VNET_HDR_LEN..].to_vec();
    if h.is_gso() {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        let n = segment(&frame, &h, &mut scratch, |hdr, payload| {
            out.push([hdr, payload].concat());
        })
        .unwrap();
        assert_eq!(n, out.len());
        out
    } else {
        assert_eq!(h.flags, F_NEEDS_CSUM);
        finish_checksum(&mut frame, h.csum_start.into(), h.csum_offset.into()).unwrap();
        vec![frame]
    }
}

#[test]
fn checksums_and_segments_are_what_scapy_puts_on_the_wire() {
    let cases = [
        case!("csum_tcp4", ["0"]),
        case!("csum_udp6", ["0"]),
        case!("gso_tcp4", ["0", "1", "2"]),
        case!("gso_tcp4_vlan", ["0", "1", "2"]),
        case!("gso_tcp6_ecn", ["0", "1"]),
        case!("gso_udp4", ["0", "1", "2"]),
        case!("gso_vxlan_tcp4", ["0", "1", "2"]),
        case!("gso_mplsudp6_tcp4", ["0", "1", "2"]),
    ];
    for (i, (input, want)) in cases.iter().enumerate() {
        let got = finished(input);
        assert_eq!(got.len(), want.len(), "case {i}: segment count");
        for (j, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g.as_slice(), *w, "case {i}, segment {j}");
        }
    }
}

#[test]
fn a_tunnel_frame_cut_for_ovr_itself_keeps_no_outer_udp_checksum_over_ipv4() {
    let (input, want) = case!("gso_vxlan_tcp4", ["0", "1", "2"]);
    let h = VnetHdr::parse(input).unwrap();
    let mut got = Vec::new();
    segment_with(
        &input[VNET_HDR_LEN..],
        &h,
        false,
        &mut Vec::new(),
        |hdr, p| got.push([hdr, p].concat()),
    )
    .unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        // Outer UDP checksum (bytes 40..42) zero: "none"; everything else as scapy has it.
        assert_eq!(g[40..42], [0, 0]);
        assert_eq!((&g[..40], &g[42..]), (&w[..40], &w[42..]));
    }
}

#[test]
fn tunnels_ovr_does_not_know_are_refused() {
    let input = include_bytes!("../../fixtures/offload/gso_vxlan_tcp4.in.bin");
    let h = VnetHdr::parse(input).unwrap();
    let mut frame = input[VNET_HDR_LEN..].to_vec();
    // Another UDP port: not a tunnel ovr can read the inner headers of.
    frame[36..38].copy_from_slice(&8472u16.to_be_bytes());
    let seg = |f: &[u8]| segment(f, &h, &mut Vec::new(), |_, _| {});
    assert_eq!(seg(&frame), Err(WireError::OffloadUnsupportedGso));
    // Truncated anywhere in the tunnel's headers: an error, never a panic.
    let frame = &input[VNET_HDR_LEN..];
    for n in 0..116 {
        assert!(seg(&frame[..n]).is_err(), "{n}");
    }
}

#[test]
fn the_header_round_trips() {
    let h = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: gso::TCPV6 | gso::ECN,
        hdr_len: 74,
        gso_size: 1000,
        csum_start: 54,
        csum_offset: 16,
    };
    let mut b = [0u8; VNET_HDR_LEN];
    h.emit(&mut b);
    assert_eq!(VnetHdr::parse(&b), Ok(h));
    assert!(h.is_gso());
    assert_eq!(VnetHdr::parse(&b[..9]), Err(WireError::VnetHdrTruncated));
}

#[test]
fn inconsistent_headers_are_refused_not_trusted() {
    let input = include_bytes!("../../fixtures/offload/gso_tcp4.in.bin");
    let good = VnetHdr::parse(input).unwrap();
    let frame = &input[VNET_HDR_LEN..];
    let mut scratch = Vec::new();
    let seg = |h: VnetHdr, f: &[u8]| segment(f, &h, &mut Vec::new(), |_, _| {});
    // UDP fragmentation offload is not done; a TCPv6 type on an IPv4 frame is a lie.
    for gso_type in [gso::UDP, gso::TCPV6, 9] {
        let h = VnetHdr { gso_type, ..good };
        assert_eq!(seg(h, frame), Err(WireError::OffloadUnsupportedGso));
    }
    // The transport header must start where the IPv4 header ends; a segment size of 0
    // would never end.
    for h in [
        VnetHdr {
            csum_start: 30,
            ..good
        },
        VnetHdr {
            csum_start: 60_000,
            ..good
        },
        VnetHdr {
            gso_size: 0,
            ..good
        },
    ] {
        assert_eq!(seg(h, frame), Err(WireError::OffloadBadSegmentation));
    }
    // Truncated anywhere in the headers: an error, never a panic.
    for len in 0..66 {
        assert!(segment(&frame[..len], &good, &mut scratch, |_, _| {}).is_err());
    }
    let mut f = frame.to_vec();
    assert_eq!(
        finish_checksum(&mut f, 34, 60_000),
        Err(WireError::OffloadBadChecksumOffsets)
    );
    assert_eq!(
        finish_checksum(&mut f, usize::MAX, 16),
        Err(WireError::OffloadBadChecksumOffsets)
    );
}

/// `coalesce` or `coalesce_datagrams`.
type Join = fn(&[&[u8]], &mut Joined) -> Option<(VnetHdr, usize)>;

/// All of `frames` joined by `join` (which must take them all), as a packet socket is
/// handed the result: virtio-net header, then the frame gathered from its parts.
fn joined_whole(join: Join, frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Joined::default();
    let (h, n) = join(frames, &mut out).unwrap();
    assert_eq!(n, frames.len());
    let mut joined = vec![0u8; VNET_HDR_LEN];
    h.emit((&mut joined[..]).try_into().unwrap());
    joined.extend(out.parts(frames).flatten());
    joined
}

#[test]
fn segments_join_into_the_large_frame_scapy_makes_and_cut_back_into_them() {
    let cases = [
        case!("coalesce_tcp4", ["0", "1", "2"]),
        case!("coalesce_tcp6", ["0", "1"]),
    ];
    for (input, segs) in &cases {
        let joined = joined_whole(coalesce, segs);
        assert_eq!(joined.as_slice(), *input);
        assert_eq!(
            finished(&joined),
            segs.iter().map(|s| s.to_vec()).collect::<Vec<_>>()
        );
    }
}

#[test]
fn tunnel_datagrams_join_into_the_frame_scapy_makes_and_cut_back_into_them() {
    let cases = [
        case!("coalesce_udp4", ["0", "1", "2", "3"]),
        case!("coalesce_udp6", ["0", "1", "2", "3"]),
    ];
    for (input, dgrams) in &cases {
        let joined = joined_whole(coalesce_datagrams, dgrams);
        assert_eq!(joined.as_slice(), *input);
        // Cut back, each with its checksum summed, as the kernel does.
        assert_eq!(
            finished(&joined),
            dgrams.iter().map(|s| s.to_vec()).collect::<Vec<_>>()
        );
        // Cut for ovr's own decapsulation: the same datagrams without a UDP checksum.
        let h = VnetHdr::parse(&joined).unwrap();
        let mut cut = Vec::new();
        segment_with(
            &joined[VNET_HDR_LEN..],
            &h,
            false,
            &mut Vec::new(),
            |hdr, p| {
                cut.push([hdr, p].concat());
            },
        )
        .unwrap();
        let udp = if dgrams[0][12..14] == [0x08, 0x00] {
            34
        } else {
            54
        };
        for (c, d) in cut.iter().zip(dgrams.iter()) {
            assert_eq!(c[udp + 6..udp + 8], [0, 0]);
            assert_eq!(c[..udp + 6], d[..udp + 6]);
            assert_eq!(c[udp + 8..], d[udp + 8..]);
        }
    }
}

#[test]
fn only_datagrams_of_one_flow_and_one_size_join() {
    let (_, d) = case!("coalesce_udp4", ["0", "1", "2", "3"]);
    let mut out = Joined::default();
    let join = |frames: &[&[u8]], out: &mut Joined| coalesce_datagrams(frames, out).map(|(_, n)| n);
    // The shorter datagram ends a run; it cannot start one.
    assert_eq!(join(&[d[0], d[3], d[1]], &mut out), Some(2));
    assert_eq!(join(&[d[3], d[0]], &mut out), None);
    // Another port, a longer datagram, a TCP segment: the run stops there.
    let mut other_port = d[1].to_vec();
    other_port[34 + 1] ^= 1;
    assert_eq!(join(&[d[0], &other_port], &mut out), None);
    let (_, tcp) = case!("coalesce_tcp4", ["0", "1"]);
    assert_eq!(join(&[d[0], tcp[0]], &mut out), None);
    // At most MAX_DATAGRAMS per frame, and no more than an IP length can say.
    assert_eq!(
        join(&vec![d[3]; MAX_DATAGRAMS + 5], &mut out),
        Some(MAX_DATAGRAMS)
    );
    let fit = (0xffff - 20 - 8) / (d[0].len() - 42);
    assert_eq!(join(&vec![d[0]; MAX_DATAGRAMS], &mut out), Some(fit));
    // Cut short anywhere: never a panic.
    for len in 0..d[0].len() {
        let _ = join(&[&d[0][..len], d[1]], &mut out);
        let _ = join(&[d[0], &d[1][..len]], &mut out);
    }
}

#[test]
fn only_contiguous_segments_of_one_connection_join() {
    let (_, segs) = case!("coalesce_tcp4", ["0", "1", "2"]);
    let mut out = Joined::default();
    let join = |frames: &[&[u8]], out: &mut Joined| coalesce(frames, out).map(|(_, n)| n);
    // A run stops at a segment that does not follow, or belongs to another connection.
    assert_eq!(join(&[segs[0], segs[2]], &mut out), None);
    let mut other_port = segs[1].to_vec();
    other_port[34 + 1] ^= 1;
    assert_eq!(join(&[segs[0], &other_port, segs[2]], &mut out), None);
    assert_eq!(join(&[segs[0], segs[1], segs[0]], &mut out), Some(2));
    // The segment with PSH ends a run; it cannot start one.
    assert_eq!(join(&[segs[2], segs[0]], &mut out), None);
    // Other flags (here FIN), IP options or another protocol: not joined, sent as they are.
    let mut fin = segs[1].to_vec();
    fin[34 + 13] |= 0x01;
    assert_eq!(join(&[segs[0], &fin], &mut out), None);
    let (_, udp) = case!("gso_udp4", ["0", "1"]);
    assert_eq!(join(&[udp[0], udp[1]], &mut out), None);
    // Cut short anywhere: never a panic.
    for len in 0..segs[0].len() {
        let _ = join(&[&segs[0][..len], segs[1]], &mut out);
        let _ = join(&[segs[0], &segs[1][..len]], &mut out);
    }
}
