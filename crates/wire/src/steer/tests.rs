//! Against frames scapy built (`fixtures/gen_steer.py`): a flow hashes alike both ways
//! and inside every tunnel; another flow does not; frames with no flow have none.

use super::{MplsPayload, flow_hash};

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../fixtures/steer/", $name, ".bin")).as_slice()
    };
}

/// The label table of the fixtures: 100 carries IP, 200 Ethernet.
fn labels(l: u32) -> MplsPayload {
    match l {
        100 => MplsPayload::Ip,
        200 => MplsPayload::Ethernet,
        _ => MplsPayload::Unknown,
    }
}

fn hash(frame: &[u8]) -> Option<u32> {
    flow_hash(frame, &labels)
}

#[test]
fn a_flow_hashes_alike_both_ways_bare_and_in_every_tunnel() {
    let fwd = hash(fixture!("tcp_fwd")).expect("a TCP flow");
    for (name, f) in [
        ("tcp_rev", fixture!("tcp_rev")),
        ("tcp_rev_vxlan", fixture!("tcp_rev_vxlan")),
        ("tcp_rev_vxlan_v6", fixture!("tcp_rev_vxlan_v6")),
        ("tcp_rev_mpls_udp", fixture!("tcp_rev_mpls_udp")),
        ("tcp_rev_mpls_gre_l2", fixture!("tcp_rev_mpls_gre_l2")),
    ] {
        assert_eq!(hash(f), Some(fwd), "{name}");
    }
    let v6 = hash(fixture!("udp6_fwd")).expect("an IPv6 UDP flow");
    assert_eq!(hash(fixture!("udp6_rev_vxlan")), Some(v6));
    assert_ne!(v6, fwd);
}

#[test]
fn another_port_is_another_flow() {
    assert_ne!(hash(fixture!("tcp_other")), hash(fixture!("tcp_fwd")));
}

#[test]
fn fragments_of_a_datagram_hash_alike() {
    let first = hash(fixture!("frag_first")).expect("IP");
    assert_eq!(hash(fixture!("frag_later")), Some(first));
    assert!(hash(fixture!("frag6_first")).is_some());
}

#[test]
fn frames_without_an_ip_flow_have_none() {
    assert_eq!(hash(fixture!("arp")), None);
    assert_eq!(hash(fixture!("vxlan_arp")), None);
    // A label ovr does not know: nothing to steer by.
    assert_eq!(
        flow_hash(fixture!("tcp_rev_mpls_udp"), &|_| MplsPayload::Unknown),
        None
    );
}

#[test]
fn a_tunnel_is_never_steered_by_its_outer_header() {
    // A label read as Ethernet when it carries IP: no inner flow, and not the outer one
    // either (all tunnels between two hosts would fall to one worker).
    assert_eq!(
        flow_hash(fixture!("tcp_rev_mpls_udp"), &|_| MplsPayload::Ethernet),
        None
    );
}

#[test]
fn every_truncation_of_every_fixture_is_handled() {
    for f in [
        fixture!("tcp_rev_vxlan"),
        fixture!("tcp_rev_mpls_gre_l2"),
        fixture!("tcp_rev_vxlan_v6"),
        fixture!("frag6_first"),
    ] {
        for n in 0..f.len() {
            let _ = hash(&f[..n]);
        }
    }
}
