//! Routes through GoBGP's messages and back, and what a peer could get wrong.

use super::decode::*;
use super::*;
use crate::evpn::RouteTarget;
use prost::Message;

fn rd() -> Rd {
    Rd::Ip {
        router: Ipv4Addr::new(192, 0, 2, 1),
        assigned: 7,
    }
}

pub(super) fn mac_ip() -> Route {
    Route {
        nlri: Nlri::MacIp {
            rd: rd(),
            tag: 0,
            mac: "02:00:00:00:01:0a".parse().unwrap(),
            ip: Some("10.1.0.10".parse().unwrap()),
            label: 100,
            routed: None,
        },
        next_hop: "192.0.2.1".parse().unwrap(),
        targets: vec![RouteTarget::auto(65000, 100)],
        encap: Encap::Vxlan,
        router_mac: None,
        pmsi: None,
        mobility: Some(3),
    }
}

pub(super) fn imet() -> Route {
    Route {
        nlri: Nlri::Imet {
            rd: rd(),
            tag: 0,
            originator: "192.0.2.1".parse().unwrap(),
        },
        pmsi: Some((100, Ipv4Addr::new(192, 0, 2, 1))),
        mobility: None,
        ..mac_ip()
    }
}

pub(super) fn prefix() -> Route {
    Route {
        nlri: Nlri::Prefix {
            rd: Rd::As2 {
                asn: 65000,
                assigned: 9,
            },
            tag: 0,
            addr: "10.9.0.0".parse().unwrap(),
            len: 24,
            gateway: "0.0.0.0".parse().unwrap(),
            label: 5000,
        },
        router_mac: Some("02:00:00:00:00:01".parse().unwrap()),
        encap: Encap::MplsOverUdp,
        mobility: None,
        ..mac_ip()
    }
}

#[test]
fn every_route_type_goes_through_gobgps_messages_unchanged() {
    for r in [mac_ip(), imet(), prefix()] {
        let p = encode(&r);
        assert_eq!(decode(&p), Ok(r.clone()), "{r:?}");
        // GoBGP dispatches on its own message names.
        assert!(
            p.nlri
                .as_ref()
                .unwrap()
                .type_url
                .starts_with("type.googleapis.com/apipb.EVPN")
        );
    }
    // A VNI fills the label field; an MPLS label its high 20 bits, bottom of stack set.
    let n = encode(&mac_ip()).nlri.unwrap();
    let n: api::EvpnmacipAdvertisementRoute = n.to_msg().unwrap();
    assert_eq!(n.labels, [100]);
    let n = encode(&prefix()).nlri.unwrap();
    let n: api::EvpnipPrefixRoute = n.to_msg().unwrap();
    assert_eq!(n.label, (5000 << 4) | 1);
    let p = encode(&imet());
    let pmsi = p
        .pattrs
        .iter()
        .find_map(|a| a.to_msg::<api::PmsiTunnelAttribute>().ok());
    assert_eq!(
        pmsi.map(|t| (t.r#type, t.label, t.id)),
        Some((6, 100, vec![192, 0, 2, 1]))
    );
    // MPLS over UDP and GRE: every route type with its community and labels, the PMSI
    // tunnel's label in the high 20 bits as the NLRI's.
    for encap in [Encap::MplsOverUdp, Encap::MplsOverGre] {
        let mut im = imet();
        im.encap = encap;
        im.pmsi = Some((100_000, Ipv4Addr::new(192, 0, 2, 1)));
        let mut mi = mac_ip();
        mi.encap = encap;
        if let Nlri::MacIp { routed, .. } = &mut mi.nlri {
            *routed = Some(100_001);
        }
        let n: api::EvpnmacipAdvertisementRoute = encode(&mi).nlri.unwrap().to_msg().unwrap();
        assert_eq!(n.labels, [(100 << 4) | 1, (100_001 << 4) | 1]);
        for r in [im.clone(), mi, Route { encap, ..prefix() }] {
            let p = encode(&r);
            assert_eq!(decode(&p), Ok(r.clone()), "{r:?}");
            assert_eq!(tunnel_type(&p), Some(encap.tunnel_type()));
        }
        let p = encode(&im);
        let pmsi = p
            .pattrs
            .iter()
            .find_map(|a| a.to_msg::<api::PmsiTunnelAttribute>().ok());
        assert_eq!(pmsi.unwrap().label, (100_000 << 4) | 1);
    }
    assert_eq!(tunnel_type(&encode(&mac_ip())), Some(8));
}

/// The tunnel type of `p`'s encapsulation community.
fn tunnel_type(p: &api::Path) -> Option<u32> {
    p.pattrs
        .iter()
        .filter_map(|a| a.to_msg::<api::ExtendedCommunitiesAttribute>().ok())
        .flat_map(|e| e.communities)
        .find_map(|c| c.to_msg::<api::EncapExtended>().ok())
        .map(|e| e.tunnel_type)
}

/// `p` with the attributes `f` leaves.
fn without(r: &Route, f: impl Fn(&Any) -> bool) -> api::Path {
    let mut p = encode(r);
    p.pattrs.retain(|a| f(a));
    p
}

fn reason(p: &api::Path) -> &'static str {
    decode(p).unwrap_err().reason
}

#[test]
fn what_a_peer_gets_wrong_is_refused_by_name() {
    // No route target: no network would import it.
    let mut r = mac_ip();
    r.targets.clear();
    assert_eq!(reason(&encode(&r)), "no_route_target");
    // No next hop.
    let p = without(&mac_ip(), |a| {
        a.to_msg::<api::MpReachNlriAttribute>().is_err()
    });
    assert_eq!(reason(&p), "no_next_hop");
    // A VNI over 24 bits; an MPLS label over 20.
    let mut r = mac_ip();
    r.nlri = match r.nlri {
        Nlri::MacIp {
            rd, tag, mac, ip, ..
        } => Nlri::MacIp {
            rd,
            tag,
            mac,
            ip,
            label: 1 << 24,
            routed: None,
        },
        n => n,
    };
    assert_eq!(reason(&encode(&r)), "bad_label");
    let mut r = prefix();
    r.nlri = match r.nlri {
        Nlri::Prefix {
            rd,
            tag,
            addr,
            len,
            gateway,
            ..
        } => Nlri::Prefix {
            rd,
            tag,
            addr,
            len,
            gateway,
            label: 3,
        },
        n => n,
    };
    assert_eq!(reason(&encode(&r)), "bad_label", "a reserved MPLS label");
    // An encapsulation ovr does not speak (NVGRE, 9).
    let mut p = encode(&mac_ip());
    for a in &mut p.pattrs {
        if let Ok(mut e) = a.to_msg::<api::ExtendedCommunitiesAttribute>() {
            e.communities
                .push(any(&api::EncapExtended { tunnel_type: 9 }));
            *a = any(&e);
        }
    }
    assert_eq!(reason(&p), "unknown_encap");
    // Another address family; a route type ovr does not use (type 4, ES).
    let mut p = encode(&mac_ip());
    p.family = Some(api::Family { afi: 1, safi: 1 });
    assert_eq!(reason(&p), "wrong_family");
    let mut p = encode(&mac_ip());
    p.nlri = Some(any(&api::EvpnEthernetSegmentRoute::default()));
    assert_eq!(reason(&p), "unknown_route_type");
    // A MAC that is not one; a prefix longer than its family; a PMSI that is not
    // ingress replication or whose id is not an IPv4 address.
    let mut p = encode(&mac_ip());
    let mut n: api::EvpnmacipAdvertisementRoute = p.nlri.as_ref().unwrap().to_msg().unwrap();
    n.mac_address = "02:00:00:00:01".into();
    p.nlri = Some(any(&n));
    assert_eq!(reason(&p), "bad_mac");
    let mut p = encode(&prefix());
    let mut n: api::EvpnipPrefixRoute = p.nlri.as_ref().unwrap().to_msg().unwrap();
    n.ip_prefix_len = 33;
    p.nlri = Some(any(&n));
    assert_eq!(reason(&p), "bad_prefix");
    for (ty, id) in [(3, vec![192, 0, 2, 1]), (6, vec![1, 2, 3])] {
        let mut p = encode(&imet());
        for a in &mut p.pattrs {
            if a.to_msg::<api::PmsiTunnelAttribute>().is_ok() {
                *a = any(&api::PmsiTunnelAttribute {
                    flags: 0,
                    r#type: ty,
                    label: 100,
                    id: id.clone(),
                });
            }
        }
        assert_eq!(reason(&p), "bad_pmsi");
    }
    // A PMSI label over 24 bits; over MPLS, a reserved one (the raw field 0x31: label 3).
    for (encap, label) in [(Encap::Vxlan, 1 << 24), (Encap::MplsOverUdp, 0x31)] {
        let mut p = encode(&Route { encap, ..imet() });
        for a in &mut p.pattrs {
            if let Ok(mut t) = a.to_msg::<api::PmsiTunnelAttribute>() {
                t.label = label;
                *a = any(&t);
            }
        }
        assert_eq!(reason(&p), "bad_label", "{encap:?} {label}");
    }
    // A second label: in a VXLAN route (one VNI bridges and routes), in an MPLS route
    // without an address; three labels.
    let mut mpls = mac_ip();
    mpls.encap = Encap::MplsOverUdp;
    for (r, labels) in [
        (mac_ip(), vec![100, 200]),
        (mpls.clone(), vec![0x641, 0x651, 0x661]),
    ] {
        let mut p = encode(&r);
        let mut n: api::EvpnmacipAdvertisementRoute = p.nlri.as_ref().unwrap().to_msg().unwrap();
        n.labels = labels;
        p.nlri = Some(any(&n));
        assert_eq!(reason(&p), "bad_label");
    }
    let mut p = encode(&mpls);
    let mut n: api::EvpnmacipAdvertisementRoute = p.nlri.as_ref().unwrap().to_msg().unwrap();
    n.labels = vec![0x641, 0x651];
    p.nlri = Some(any(&n));
    assert!(decode(&p).is_ok());
    n.ip_address = String::new();
    p.nlri = Some(any(&n));
    assert_eq!(reason(&p), "bad_label");
    // A route distinguisher that does not parse.
    let mut p = encode(&mac_ip());
    let mut n: api::EvpnmacipAdvertisementRoute = p.nlri.as_ref().unwrap().to_msg().unwrap();
    n.rd = Some(any(&api::RouteDistinguisherIpAddress {
        admin: "x".into(),
        assigned: 1,
    }));
    p.nlri = Some(any(&n));
    assert_eq!(reason(&p), "bad_rd");
}

#[test]
fn a_mac_only_route_as_gobgp_lists_it_has_no_address() {
    let mut r = mac_ip();
    r.nlri = match r.nlri {
        Nlri::MacIp {
            rd,
            tag,
            mac,
            label,
            ..
        } => Nlri::MacIp {
            rd,
            tag,
            mac,
            ip: None,
            label,
            routed: None,
        },
        n => n,
    };
    let mut p = encode(&r);
    let mut n: api::EvpnmacipAdvertisementRoute = p.nlri.as_ref().unwrap().to_msg().unwrap();
    n.ip_address = "<nil>".into();
    p.nlri = Some(any(&n));
    assert_eq!(decode(&p), Ok(r));
}

#[test]
fn vxlan_is_meant_without_an_encapsulation_community() {
    let p = without(&mac_ip(), |_| true);
    let mut p2 = p.clone();
    for a in &mut p2.pattrs {
        if let Ok(mut e) = a.to_msg::<api::ExtendedCommunitiesAttribute>() {
            e.communities
                .retain(|c| c.to_msg::<api::EncapExtended>().is_err());
            *a = any(&e);
        }
    }
    assert_eq!(decode(&p2).unwrap().encap, Encap::Vxlan);
}

proptest::proptest! {
    /// The partial messages `decode` reads read what GoBGP's whole ones carry, field by
    /// field, whatever the fields it skips hold.
    #[test]
    fn the_partial_messages_read_the_whole_ones_fields(
        admin: String,
        assigned: u32,
        esi: Vec<u8>,
        tag: u32,
        mac: String,
        ip: String,
        labels: Vec<u32>,
        next_hops: Vec<String>,
        nlris: Vec<(String, Vec<u8>)>,
    ) {
        let rd = any(&api::RouteDistinguisherIpAddress { admin: admin.clone(), assigned });
        let whole = api::EvpnmacipAdvertisementRoute {
            rd: Some(rd.clone()),
            esi: Some(api::EthernetSegmentIdentifier { r#type: 1, value: esi }),
            ethernet_tag: tag,
            mac_address: mac.clone(),
            ip_address: ip.clone(),
            labels: labels.clone(),
        };
        let whole = any(&whole);
        let part = MacIpRoute::of((&whole).into()).unwrap();
        proptest::prop_assert_eq!(part.rd, Some((&rd).into()));
        proptest::prop_assert_eq!(
            (part.ethernet_tag, part.mac_address, part.ip_address, &part.labels[..]),
            (tag, &mac[..], &ip[..], &labels[..])
        );
        proptest::prop_assert_eq!(ip_rd((&rd).into()), Some((&admin[..], assigned)));
        // Another message's name is not read as this one.
        proptest::prop_assert!(MacIpRoute::of((&rd).into()).is_none());
        let whole = api::MpReachNlriAttribute {
            family: Some(evpn_family()),
            next_hops: next_hops.clone(),
            nlris: nlris.into_iter().map(|(type_url, value)| Any { type_url, value }).collect(),
        };
        let part: MpReachNextHops = msg_as::<api::MpReachNlriAttribute, _>((&any(&whole)).into()).unwrap();
        proptest::prop_assert_eq!(part.next_hops, next_hops);
        // Another message's name is not read as this one.
        proptest::prop_assert!(msg_as::<api::NextHopAttribute, MpReachNextHops>((&any(&whole)).into()).is_none());
    }
}

#[test]
fn labels_are_read_packed_or_not_and_a_field_of_the_wrong_wire_type_refuses_the_route() {
    let route = api::EvpnmacipAdvertisementRoute {
        mac_address: "02:00:00:00:00:01".into(),
        ..Default::default()
    };
    let mut value = route.encode_to_vec();
    // Labels 100 and 200 as two unpacked fields 6 (varints).
    value.extend([0x30, 100, 0x30, 0xc8, 0x01]);
    let mut a = any(&route);
    a.value = value.clone();
    let r = MacIpRoute::of((&a).into()).unwrap();
    assert_eq!(
        (r.mac_address, &r.labels[..]),
        ("02:00:00:00:00:01", &[100, 200][..])
    );
    // prost reads them alike.
    assert_eq!(
        api::EvpnmacipAdvertisementRoute::decode(&value[..])
            .unwrap()
            .labels,
        [100, 200]
    );
    // The tag (field 3) as bytes: not a route prost would read either.
    value.extend([0x1a, 0x01, 0x00]);
    a.value = value.clone();
    assert!(MacIpRoute::of((&a).into()).is_none());
    assert!(api::EvpnmacipAdvertisementRoute::decode(&value[..]).is_err());
}
