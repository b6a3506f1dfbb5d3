//! The pipeline end to end on tables built in code: ECMP affinity across member changes,
//! revalidation of cached flows after policy and route changes, aging. (Packet-exact
//! behaviour is checked against scapy in tests/golden; these check what a capture
//! replay cannot: changes to the tables while flows exist.)

mod common;

use ovr_dataplane::{Pipeline, Settings};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceKind, Police};
use ovr_tables::nexthop::{Ecmp, Encap, NextHop, Tunnel};
use ovr_tables::policy::{Policy, PolicyAction, PolicyRule};
use ovr_tables::state::{TableOp, TablesReader, TablesWriter, new_tables};
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::checksum;
use ovr_wire::ethernet::{EthernetRepr, MacAddr, ethertype};
use ovr_wire::ip_proto;
use ovr_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use ovr_wire::offload::{self, VNET_HDR_LEN, VnetHdr};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

const UPLINK: InterfaceId = InterfaceId(0);
const VM: InterfaceId = InterfaceId(1);
const VM_MAC: MacAddr = MacAddr([2, 0, 0, 0, 1, 5]);
const RED: VrfId = VrfId(1);

fn tunnel(id: u32, last: u8) -> TableOp {
    TableOp::UpsertNextHop(
        NextHopId(id),
        NextHop::Tunnel(Tunnel {
            encap: Encap::Vxlan { vni: 100 },
            underlay: UPLINK,
            src: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)),
            dst_mac: MacAddr([2, 0, 0, 0, 0, last]),
            inner_dst: None,
        }),
    )
}

fn ecmp(members: &[u32]) -> TableOp {
    let m: Vec<NextHopId> = members.iter().map(|i| NextHopId(*i)).collect();
    TableOp::UpsertNextHop(NextHopId(9), NextHop::Composite(Ecmp::new(&m)))
}

fn setup() -> (TablesWriter, TablesReader) {
    let (mut w, r) = new_tables();
    let iface = common::interface;
    w.commit(vec![
        TableOp::UpsertVrf {
            id: RED,
            name: "red".into(),
            vni: Some(100),
        },
        iface(
            UPLINK,
            "uplink",
            InterfaceKind::Underlay,
            None,
            MacAddr([2, 0, 0, 0, 0, 0x0a]),
            Some(Ipv4Addr::new(192, 0, 2, 1)),
        ),
        iface(
            VM,
            "vm1",
            InterfaceKind::Workload,
            Some(RED),
            DEFAULT_ROUTER_MAC,
            None,
        ),
        tunnel(2, 2),
        tunnel(3, 3),
        tunnel(4, 4),
        tunnel(5, 5),
        ecmp(&[2, 3, 4]),
        TableOp::AddRoute {
            vrf: RED,
            prefix: "10.4.0.0/16".parse().unwrap(),
            nh: NextHopId(9),
        },
    ])
    .unwrap();
    (w, r)
}

/// A routed UDP packet from the workload to 10.4.0.9, flow `i`.
fn packet(i: u16) -> Vec<u8> {
    common::udp_frame(
        (VM_MAC, DEFAULT_ROUTER_MAC),
        (Ipv4Addr::new(10, 1, 0, 5), Ipv4Addr::new(10, 4, 0, 9)),
        (1000 + i, 7),
        i,
    )
}

/// Sends flows `0..n` once each; returns each flow's outer destination (the VTEP's last
/// octet), or 0 if it was not sent out.
fn send(pipe: &mut Pipeline, r: &TablesReader, n: u16) -> Vec<u8> {
    let g = r.enter().unwrap();
    let frames: Vec<Vec<u8>> = (0..n).map(packet).collect();
    pipe.cx.now += 1_000_000_000;
    pipe.receive(&g, VM, frames.iter().map(|f| f.as_slice()));
    pipe.run(&g);
    let mut by_ident = HashMap::new();
    pipe.drain_tx(|iface, bytes| {
        assert_eq!(iface, UPLINK);
        let outer = Ipv4Packet::new_checked(&bytes[14..]).unwrap();
        let inner = Ipv4Packet::new_checked(&bytes[50 + 14..]).unwrap();
        by_ident.insert(inner.ident(), outer.dst().octets()[3]);
    });
    (0..n)
        .map(|i| by_ident.get(&i).copied().unwrap_or(0))
        .collect()
}

#[test]
fn flows_keep_their_member_and_only_a_removed_members_flows_move() {
    let (mut w, r) = setup();
    let mut pipe = Pipeline::new(Settings::default());
    let first = send(&mut pipe, &r, 300);
    for m in [2, 3, 4] {
        let n = first.iter().filter(|x| **x == m).count();
        assert!(n > 60, "member {m} got {n} of 300 flows");
    }
    // Affinity: the same flows again go the same way (now from the flow table).
    assert_eq!(send(&mut pipe, &r, 300), first);
    // A member joins: no existing flow moves to it.
    w.commit(vec![ecmp(&[2, 3, 4, 5])]).unwrap();
    assert_eq!(send(&mut pipe, &r, 300), first);
    assert!(pipe.cx.flow_counters.revalidated >= 300);
    // A member leaves: its flows move, and only they.
    w.commit(vec![ecmp(&[2, 4, 5])]).unwrap();
    let after = send(&mut pipe, &r, 300);
    for (b, a) in first.iter().zip(&after) {
        if *b == 3 {
            assert!(
                [2, 4, 5].contains(a),
                "a flow of the removed member went to {a}"
            );
        } else {
            assert_eq!(a, b, "a flow of a remaining member moved");
        }
    }
}

#[test]
fn a_policy_change_applies_to_established_flows_and_idle_flows_age_out() {
    let (mut w, r) = setup();
    let mut pipe = Pipeline::new(Settings {
        idle_timeout_ns: 5_000_000_000,
        // Small, so that a few aging passes sweep it all.
        flow_capacity: 1024,
        ..Settings::default()
    });
    assert!(send(&mut pipe, &r, 10).iter().all(|m| *m != 0));
    let deny_udp = PolicyRule {
        protocol: Some(ip_proto::UDP),
        ..PolicyRule::matching_all(PolicyAction::Deny)
    };
    w.commit(vec![TableOp::SetPolicy {
        vrf: RED,
        policy: Arc::new(Policy::new(vec![deny_udp]).unwrap()),
    }])
    .unwrap();
    assert!(send(&mut pipe, &r, 10).iter().all(|m| *m == 0));
    let snap = pipe.snapshot(|_| None);
    assert_eq!(snap.drops.get("policy_denied"), Some(&10));
    // Flows idle for longer than the timeout go (the aging pass runs with each vector).
    let g = r.enter().unwrap();
    for _ in 0..100 {
        pipe.cx.now += 10_000_000_000;
        pipe.run(&g);
    }
    assert_eq!(pipe.cx.flows.len(), 0);
}

#[test]
fn a_storm_of_new_flows_is_limited_and_established_flows_pass() {
    let (_w, r) = setup();
    let mut pipe = Pipeline::new(Settings {
        // A tenth of a second's worth, 100 flows, may come at once.
        setup_rate: Some(1000),
        ..Settings::default()
    });
    let first = send(&mut pipe, &r, 300);
    assert_eq!(first.iter().filter(|m| **m != 0).count(), 100);
    assert_eq!(
        pipe.snapshot(|_| None).drops.get("flow_setup_limited"),
        Some(&200)
    );
    // A second later: the 100 established flows pass, and 100 more are set up.
    let second = send(&mut pipe, &r, 300);
    assert_eq!(second.iter().filter(|m| **m != 0).count(), 200);
    for (a, b) in first.iter().zip(&second) {
        if *a != 0 {
            assert_eq!(a, b);
        }
    }
}

#[test]
fn a_policed_interface_lets_in_its_burst_then_its_rate_and_counts_the_rest() {
    let (mut w, r) = setup();
    let police = |w: &mut TablesWriter, p: Option<Police>| {
        let mut vm = r.enter().unwrap().interface(VM).unwrap().clone();
        vm.police = p;
        w.commit(vec![TableOp::UpsertInterface(vm)]).unwrap();
    };
    police(
        &mut w,
        Some(Police {
            packets_per_second: 150,
            burst: 100,
        }),
    );
    let mut pipe = Pipeline::new(Settings::default());
    // A full bucket: the burst, of 300 frames at once.
    assert_eq!(
        send(&mut pipe, &r, 300).iter().filter(|m| **m != 0).count(),
        100
    );
    let snap = pipe.snapshot(|_| None);
    assert_eq!(snap.drops.get("policed"), Some(&200));
    let vm = snap.interfaces.iter().find(|i| i.id == VM.0).unwrap();
    assert_eq!(
        vm.rx_packets, 300,
        "policed frames are received, then dropped"
    );
    // A second later, the bucket is full again (150 accrued, 100 kept).
    assert_eq!(
        send(&mut pipe, &r, 300).iter().filter(|m| **m != 0).count(),
        100
    );
    // Two workers split the interface's rate and burst, as they split its flows.
    let mut half = Pipeline::new(Settings {
        shards: 2,
        ..Settings::default()
    });
    assert_eq!(
        send(&mut half, &r, 300).iter().filter(|m| **m != 0).count(),
        50
    );
    // No policer: everything passes.
    police(&mut w, None);
    assert_eq!(
        send(&mut pipe, &r, 300).iter().filter(|m| **m != 0).count(),
        300
    );
}

#[test]
fn an_interface_policed_in_the_kernel_is_not_policed_again_and_its_drops_are_counted() {
    let (mut w, r) = setup();
    let mut vm = r.enter().unwrap().interface(VM).unwrap().clone();
    vm.police = Some(Police {
        packets_per_second: 150,
        burst: 100,
    });
    w.commit(vec![TableOp::UpsertInterface(vm)]).unwrap();
    let mut pipe = Pipeline::new(Settings::default());
    pipe.police_in_kernel([VM]);
    // What the kernel let through is all forwarded.
    assert_eq!(
        send(&mut pipe, &r, 300).iter().filter(|m| **m != 0).count(),
        300
    );
    // What it dropped is counted as received, and as policed.
    pipe.count_policed_in_kernel(VM, 50, 50 * 60);
    let snap = pipe.snapshot(|_| None);
    assert_eq!(snap.drops.get("policed"), Some(&50));
    let c = snap.interfaces.iter().find(|i| i.id == VM.0).unwrap();
    assert_eq!(c.rx_packets, 350);
    // The kernel no longer polices it: this pipeline does again.
    pipe.police_in_kernel([]);
    assert_eq!(
        send(&mut pipe, &r, 300).iter().filter(|m| **m != 0).count(),
        100
    );
}

#[test]
fn a_networks_flow_quota_follows_the_tables_and_is_split_between_workers() {
    let (mut w, r) = setup();
    // Two workers: this one holds half of red's quota of 10 flows (a flow towards a
    // tunnel is one entry until its reply comes).
    let mut pipe = Pipeline::new(Settings {
        shards: 2,
        setup_rate: None,
        ..Settings::default()
    });
    w.commit(vec![TableOp::SetFlowQuota {
        vrf: RED,
        max: Some(10),
    }])
    .unwrap();
    let sent = send(&mut pipe, &r, 8);
    assert_eq!(sent.iter().filter(|m| **m != 0).count(), 5);
    let snap = pipe.snapshot(|_| None);
    assert_eq!(snap.drops.get("flow_table_full"), Some(&3));
    assert_eq!(snap.flows.refused_quota, 3);
    // Raised: the others get their flows; removed: no limit (the default has none).
    w.commit(vec![TableOp::SetFlowQuota {
        vrf: RED,
        max: Some(16),
    }])
    .unwrap();
    assert_eq!(
        send(&mut pipe, &r, 8).iter().filter(|m| **m != 0).count(),
        8
    );
    w.commit(vec![TableOp::SetFlowQuota {
        vrf: RED,
        max: None,
    }])
    .unwrap();
    assert_eq!(
        send(&mut pipe, &r, 40).iter().filter(|m| **m != 0).count(),
        40
    );
}

/// A TCP frame from the workload as its stack leaves it for an offloading NIC: 3000
/// payload bytes behind one header, to be cut into segments of 1000, checksum unfinished.
fn gso_frame() -> Vec<u8> {
    let payload = 3000;
    let mut f = vec![0u8; VNET_HDR_LEN + 14 + 20 + 20 + payload];
    VnetHdr {
        flags: offload::F_NEEDS_CSUM,
        gso_type: offload::gso::TCPV4,
        hdr_len: 54,
        gso_size: 1000,
        csum_start: 34,
        csum_offset: 16,
    }
    .emit((&mut f[..VNET_HDR_LEN]).try_into().unwrap());
    let e = &mut f[VNET_HDR_LEN..];
    EthernetRepr {
        dst: DEFAULT_ROUTER_MAC,
        src: VM_MAC,
        tags: [None, None],
        ethertype: ethertype::IPV4,
    }
    .emit(e);
    Ipv4Repr {
        src: Ipv4Addr::new(10, 1, 0, 5),
        dst: Ipv4Addr::new(10, 4, 0, 9),
        protocol: ip_proto::TCP,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 7,
        dont_frag: true,
        payload_len: (20 + payload) as u16,
    }
    .emit(&mut e[14..]);
    let tcp = &mut e[34..];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // PSH, ACK
    for (i, b) in tcp[20..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

#[test]
fn offloaded_frames_are_finished_and_segmented_or_dropped_by_name() {
    let (_w, r) = setup();
    let g = r.enter().unwrap();
    let mut pipe = Pipeline::new(Settings::default());
    let good = gso_frame();
    let mut bad_offset = good[..VNET_HDR_LEN + 154].to_vec();
    bad_offset[1] = 0; // no GSO: only the checksum to finish...
    bad_offset[8..10].copy_from_slice(&60_000u16.to_le_bytes()); // ...beyond the frame
    let truncated = &good[..5];
    let mut too_large = good.clone();
    too_large[1] = 0; // 3054 bytes and nothing says to segment them
    pipe.receive_offloaded(
        &g,
        VM,
        [good.as_slice(), &bad_offset, truncated, &too_large],
    );
    pipe.run(&g);
    let mut segments = Vec::new();
    pipe.drain_tx(|iface, bytes| {
        assert_eq!(iface, UPLINK);
        // Outer Ethernet, IPv4, UDP and VXLAN (50 bytes), then the inner frame.
        segments.push(bytes[50..].to_vec());
    });
    assert_eq!(segments.len(), 3);
    let mut seqs = Vec::new();
    for s in &segments {
        let ip = Ipv4Packet::new_checked(&s[14..]).unwrap();
        let tcp = &s[34..];
        assert_eq!(tcp.len(), 20 + 1000);
        let pseudo = checksum::pseudo_header_v4(ip.src(), ip.dst(), ip_proto::TCP, 1020);
        assert!(checksum::verify_with(pseudo, tcp), "segment checksum");
        seqs.push(u32::from_be_bytes(tcp[4..8].try_into().unwrap()));
    }
    assert_eq!(seqs, [1, 1001, 2001]);
    let snap = pipe.snapshot(|_| None);
    assert_eq!(snap.drops.get("offload_bad_checksum_offsets"), Some(&1));
    assert_eq!(snap.drops.get("vnet_hdr_truncated"), Some(&1));
    assert_eq!(snap.drops.get("frame_too_large"), Some(&1));
}

#[test]
fn a_traced_packet_names_its_vrf_next_hop_and_tunnel_and_taps_see_both_ends() {
    use ovr_dataplane::capture::{Direction, Tap};
    use std::sync::mpsc::sync_channel;
    let (_w, r) = setup();
    let mut pipe = Pipeline::new(Settings::default());
    pipe.graph_mut().trace_mut().add(1);
    let mut tap = |id, interface: InterfaceId, direction| {
        let (queue, frames) = sync_channel(8);
        pipe.taps.add(Tap {
            id,
            interface: interface.0,
            direction,
            snaplen: 65_535,
            left: None,
            until: None,
            queue,
            counters: Arc::default(),
        });
        frames
    };
    let (rx, tx) = (tap(1, VM, Direction::Rx), tap(2, UPLINK, Direction::Tx));
    let vtep = send(&mut pipe, &r, 1)[0];
    assert!([2, 3, 4].contains(&vtep));

    let t = pipe.graph().trace();
    assert_eq!(t.packets().len(), 1);
    assert_eq!(t.packets()[0].origin, VM.0);
    let steps: Vec<_> = t.steps_of(1).collect();
    let nodes: Vec<&str> = steps.iter().map(|s| s.node).collect();
    assert_eq!(
        nodes,
        [
            "ethernet-input",
            "ip-input",
            "flow",
            "flow-setup",
            "ip-rewrite",
            "encap-vxlan",
            "interface-output"
        ]
    );
    let detail = |node: &str| {
        let s = steps.iter().find(|s| s.node == node).unwrap();
        s.detail.clone().unwrap()
    };
    assert!(detail("ethernet-input").starts_with("rx vm1, vrf red (1, vni 100)"));
    // No route back to the workload here: the flow is installed alone.
    let setup = detail("flow-setup");
    assert!(
        setup.starts_with("lookup in vrf red (1, vni 100): flow 0 created, next hop "),
        "{setup}"
    );
    assert!(detail("ip-rewrite").contains("ttl now 63"));
    let encap = detail("encap-vxlan");
    assert!(
        encap.contains(&format!(
            ": vxlan vni 100 192.0.2.1 -> 192.0.2.{vtep} via uplink, 96 bytes"
        )),
        "{encap}"
    );
    assert_eq!(detail("interface-output"), "sent on uplink, 96 bytes");
    assert_eq!(steps.last().unwrap().next, None);

    // The taps saw the frame as it came in and as it was handed to the uplink.
    let got: Vec<_> = rx.try_iter().collect();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].data.clone(), got[0].tx), (packet(0), false));
    let sent: Vec<_> = tx.try_iter().collect();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].tx && sent[0].orig_len == 96 && sent[0].data.len() == 96);
    let outer = Ipv4Packet::new_checked(&sent[0].data[14..]).unwrap();
    assert_eq!(outer.dst().octets()[3], vtep);
    assert_eq!(
        &sent[0].data[50 + 14 + 20..50 + 14 + 20 + 8][..2],
        &1000u16.to_be_bytes()
    );
}

/// A bridged flow follows the destination MAC of each frame, not only its 5-tuple: the
/// same UDP 5-tuple sent from one workload to another and then the other way (as two
/// sides of a bump in the wire or a re-addressed host send it) leaves by each frame's
/// own port, not by the port the flow was first set up for.
#[test]
fn a_bridged_flow_follows_each_frames_destination_mac() {
    let (mut w, r) = setup();
    const VM2: InterfaceId = InterfaceId(2);
    let mac = |last| MacAddr([2, 0, 0, 0, 2, last]);
    let port = |id, name: &str| {
        TableOp::UpsertInterface(Interface {
            id,
            name: name.into(),
            kind: InterfaceKind::Workload,
            vrf: Some(RED),
            mac: MacAddr([2, 0, 0, 0, 3, id.0 as u8]),
            addresses: vec![],
            mtu: 1500,
            policy: true,
            admin_up: true,
            memif: None,
            police: None,
        })
    };
    w.commit(vec![
        port(VM, "vm1"),
        port(VM2, "vm2"),
        TableOp::UpsertNextHop(
            NextHopId(20),
            NextHop::Interface {
                interface: VM,
                dst_mac: mac(1),
            },
        ),
        TableOp::UpsertNextHop(
            NextHopId(21),
            NextHop::Interface {
                interface: VM2,
                dst_mac: mac(2),
            },
        ),
        TableOp::AddBridge {
            vrf: RED,
            mac: mac(1),
            nh: NextHopId(20),
        },
        TableOp::AddBridge {
            vrf: RED,
            mac: mac(2),
            nh: NextHopId(21),
        },
    ])
    .unwrap();
    let mut pipe = Pipeline::new(Settings::default());
    let frame = |dst: MacAddr, src: MacAddr| {
        let mut f = packet(7);
        f[0..6].copy_from_slice(&dst.0);
        f[6..12].copy_from_slice(&src.0);
        f
    };
    let mut out = |rx: InterfaceId, f: Vec<u8>| {
        let g = r.enter().unwrap();
        pipe.cx.now += 1_000_000;
        pipe.receive(&g, rx, [f.as_slice()]);
        pipe.run(&g);
        let mut tx = Vec::new();
        pipe.drain_tx(|iface, bytes| tx.push((iface, bytes[0..6].to_vec())));
        tx
    };
    for _ in 0..3 {
        assert_eq!(out(VM, frame(mac(2), mac(1))), [(VM2, mac(2).0.to_vec())]);
        assert_eq!(out(VM2, frame(mac(1), mac(2))), [(VM, mac(1).0.to_vec())]);
    }
}
