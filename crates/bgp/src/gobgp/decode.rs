//! GoBGP's paths as ovr's routes: what a peer could get wrong (an unknown route type or
//! encapsulation, a label out of range, a missing next hop or route target, an address
//! of the wrong family) refuses the route with a named reason, never used in part. The
//! messages on the hot path (a path's NLRI, its RD) are read in place (`fields`); the
//! small leaf messages through prost.

use super::fields::{AnyRef, Malformed, Value, anys, fields};
use super::{Change, Refusal, api, evpn_family, refuse};
use crate::evpn::{Encap, Mac, Nlri, Rd, Route, RouteTarget};
use core::net::{IpAddr, Ipv4Addr};
use prost::Name;
use prost::encoding::decode_varint;
use smallvec::SmallVec;

/// `a` as an `M`, if that is the type it names. The name is compared before decoding,
/// without allocating: `Any::to_msg` parses the URL and builds an error (a formatted
/// string) for each type a value is not, and each path gobgpd sends has several
/// attributes and communities tried against several types (they were the largest items
/// of ovrd's profile while it learnt 100,000 routes).
fn msg<M: Name + Default>(a: AnyRef) -> Option<M> {
    msg_as::<M, M>(a)
}

/// `a` decoded as `M` if it is an `N`: `M` names only the fields of `N` that ovr reads
/// (prost skips the others without allocating for them).
pub(super) fn msg_as<N: Name, M: prost::Message + Default>(a: AnyRef) -> Option<M> {
    if !is::<N>(a) {
        return None;
    }
    M::decode(a.value).ok()
}

/// Whether `a` holds an `N`.
fn is<N: Name>(a: AnyRef) -> bool {
    a.type_url
        .strip_suffix(N::NAME)
        .and_then(|u| u.strip_suffix('.'))
        .and_then(|u| u.strip_suffix(N::PACKAGE))
        .is_some_and(|u| u.ends_with('/'))
}

/// What ovr reads of an `api::MpReachNlriAttribute`: its next hops. The whole message
/// also lists its NLRIs, each an `Any` (a type URL and a buffer, copied), the route the
/// path's own NLRI gives already: a third of the allocations `decode` made per path.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct MpReachNextHops {
    #[prost(string, repeated, tag = "2")]
    pub(super) next_hops: Vec<String>,
}

/// What ovr reads of an `api::EvpnmacipAdvertisementRoute` (all but the ESI), borrowed
/// from its buffer: prost would allocate its RD's `Any`, its strings and its labels, six
/// allocations for every route learnt or withdrawn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct MacIpRoute<'a> {
    pub(super) rd: Option<AnyRef<'a>>,
    pub(super) ethernet_tag: u32,
    pub(super) mac_address: &'a str,
    pub(super) ip_address: &'a str,
    pub(super) labels: SmallVec<[u32; 2]>,
}

impl<'a> MacIpRoute<'a> {
    /// `a` read as one if it is one; None if it is not, or not valid protobuf (as prost
    /// would refuse it: a string not UTF-8, a field of the wrong wire type).
    pub(super) fn of(a: AnyRef<'a>) -> Option<Self> {
        if !is::<api::EvpnmacipAdvertisementRoute>(a) {
            return None;
        }
        let text = |b| core::str::from_utf8(b).ok();
        let mut r = Self::default();
        for f in fields(a.value) {
            match f.ok()? {
                (1, Value::Bytes(b)) => r.rd = Some(AnyRef::parse(b).ok()?),
                // uint32 fields keep a varint's low 32 bits, as prost does.
                (3, Value::Varint(v)) => r.ethernet_tag = v as u32,
                (4, Value::Bytes(b)) => r.mac_address = text(b)?,
                (5, Value::Bytes(b)) => r.ip_address = text(b)?,
                (6, Value::Varint(v)) => r.labels.push(v as u32),
                // Packed, as proto3 writes repeated numbers.
                (6, Value::Bytes(mut b)) => {
                    while !b.is_empty() {
                        r.labels.push(decode_varint(&mut b).ok()? as u32);
                    }
                }
                (1 | 3..=6, _) => return None,
                _ => {}
            }
        }
        Some(r)
    }
}

/// An `api::RouteDistinguisherIpAddress`'s admin and assigned number, read in place
/// like `MacIpRoute` (most routes' RD: prost would allocate the address's string).
pub(super) fn ip_rd(a: AnyRef<'_>) -> Option<(&str, u32)> {
    if !is::<api::RouteDistinguisherIpAddress>(a) {
        return None;
    }
    let (mut admin, mut assigned) = ("", 0);
    for f in fields(a.value) {
        match f.ok()? {
            (1, Value::Bytes(b)) => admin = core::str::from_utf8(b).ok()?,
            (2, Value::Varint(v)) => assigned = v as u32,
            (1 | 2, _) => return None,
            _ => {}
        }
    }
    Some((admin, assigned))
}

fn decode_rd(a: Option<AnyRef>) -> Result<Rd, Refusal> {
    let Some(a) = a else {
        return refuse("bad_rd", "no route distinguisher");
    };
    if let Some((admin, assigned)) = ip_rd(a) {
        let router = admin
            .parse()
            .or_else(|_| refuse("bad_rd", format!("'{admin}' is not an IPv4 address")))?;
        let assigned = u16::try_from(assigned)
            .or_else(|_| refuse("bad_rd", format!("{assigned} is over 16 bits")))?;
        return Ok(Rd::Ip { router, assigned });
    }
    if let Some(r) = msg::<api::RouteDistinguisherTwoOctetAsn>(a) {
        let asn = u16::try_from(r.admin)
            .or_else(|_| refuse("bad_rd", format!("AS {} is over 16 bits", r.admin)))?;
        return Ok(Rd::As2 {
            asn,
            assigned: r.assigned,
        });
    }
    if let Some(r) = msg::<api::RouteDistinguisherFourOctetAsn>(a) {
        let assigned = u16::try_from(r.assigned)
            .or_else(|_| refuse("bad_rd", format!("{} is over 16 bits", r.assigned)))?;
        return Ok(Rd::As4 {
            asn: r.admin,
            assigned,
        });
    }
    refuse("bad_rd", format!("unknown kind {}", a.type_url))
}

fn address(field: &str, s: &str) -> Result<IpAddr, Refusal> {
    s.parse()
        .or_else(|_| refuse("bad_address", format!("{field}: '{s}' is not an address")))
}

fn decode_nlri(a: AnyRef) -> Result<Nlri, Refusal> {
    if let Some(r) = MacIpRoute::of(a) {
        let (label, routed) = match r.labels[..] {
            [label] => (label, None),
            [label, routed] => (label, Some(routed)),
            _ => {
                return refuse(
                    "bad_label",
                    format!("a MAC/IP route with {} labels", r.labels.len()),
                );
            }
        };
        let mac: Mac = r
            .mac_address
            .parse()
            .or_else(|e: String| refuse("bad_mac", e))?;
        // GoBGP lists a MAC-only route's address as "<nil>".
        let ip = match r.ip_address {
            "" | "<nil>" | "0.0.0.0" | "::" => None,
            s => Some(address("ip_address", s)?),
        };
        return Ok(Nlri::MacIp {
            rd: decode_rd(r.rd)?,
            tag: r.ethernet_tag,
            mac,
            ip,
            label,
            routed,
        });
    }
    if let Some(r) = msg::<api::EvpnInclusiveMulticastEthernetTagRoute>(a) {
        return Ok(Nlri::Imet {
            rd: decode_rd(r.rd.as_ref().map(AnyRef::from))?,
            tag: r.ethernet_tag,
            originator: address("ip_address", &r.ip_address)?,
        });
    }
    if let Some(r) = msg::<api::EvpnipPrefixRoute>(a) {
        let addr = address("ip_prefix", &r.ip_prefix)?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = u8::try_from(r.ip_prefix_len)
            .ok()
            .filter(|l| *l <= max)
            .map_or_else(
                || {
                    refuse(
                        "bad_prefix",
                        format!("length {} for {addr}", r.ip_prefix_len),
                    )
                },
                Ok,
            )?;
        let gateway = match r.gw_address.as_str() {
            "" => addr_unspecified(addr),
            s => address("gw_address", s)?,
        };
        return Ok(Nlri::Prefix {
            rd: decode_rd(r.rd.as_ref().map(AnyRef::from))?,
            tag: r.ethernet_tag,
            addr,
            len,
            gateway,
            label: r.label,
        });
    }
    refuse("unknown_route_type", a.type_url)
}

fn addr_unspecified(like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED),
    }
}

/// What GoBGP says it has, as ovr's route, or why ovr does not use it.
pub fn decode(p: &api::Path) -> Result<Route, Refusal> {
    decode_parts(evpn_nlri(p)?, p.pattrs.iter().map(|a| Ok(a.into())))
}

/// A path's NLRI, if it is an EVPN one.
pub(super) fn evpn_nlri(p: &api::Path) -> Result<AnyRef<'_>, Refusal> {
    if p.family.as_ref() != Some(&evpn_family()) {
        return refuse("wrong_family", format!("{:?}", p.family));
    }
    let Some(nlri) = &p.nlri else {
        return refuse("unknown_route_type", "no NLRI");
    };
    Ok(nlri.into())
}

/// The key of a withdrawn route: its NLRI alone is read.
pub(super) fn decode_withdrawn(nlri: AnyRef) -> Result<Change, Refusal> {
    decode_nlri(nlri).map(|n| Change::Withdrawn(n.key()))
}

/// A malformed message inside a path is refused like any other bad route.
pub(super) fn malformed(e: Malformed) -> Refusal {
    Refusal {
        reason: "malformed",
        detail: e.to_string(),
    }
}

/// [`decode`] of an EVPN path's NLRI and attributes, borrowed from wherever they were
/// read (prost's `Path`, or the watch stream's buffer: `watch`).
pub(super) fn decode_parts<'a>(
    nlri: AnyRef<'a>,
    pattrs: impl Iterator<Item = Result<AnyRef<'a>, Malformed>>,
) -> Result<Route, Refusal> {
    let nlri = decode_nlri(nlri)?;
    let mut next_hop = None;
    let mut targets = Vec::new();
    let mut encap = None;
    let mut router_mac = None;
    let mut pmsi = None;
    let mut mobility = None;
    for a in pattrs {
        let a = a.map_err(malformed)?;
        if let Some(m) = msg_as::<api::MpReachNlriAttribute, MpReachNextHops>(a) {
            next_hop = m.next_hops.into_iter().next();
        } else if let Some(m) = msg::<api::NextHopAttribute>(a) {
            next_hop = next_hop.or(Some(m.next_hop));
        } else if is::<api::ExtendedCommunitiesAttribute>(a) {
            // Its communities borrowed, not a `Vec<Any>` of copies.
            for c in anys(a.value, 1) {
                let c = c.map_err(malformed)?;
                if let Some(t) = msg::<api::TwoOctetAsSpecificExtended>(c) {
                    // Sub-type 2: a route target (others, such as origins, are not ovr's).
                    if t.sub_type == 2 {
                        let asn = u16::try_from(t.asn).or_else(|_| {
                            refuse(
                                "bad_route_target",
                                format!("AS {} in a two-octet RT", t.asn),
                            )
                        })?;
                        targets.push(RouteTarget {
                            asn,
                            value: t.local_admin,
                        });
                    }
                } else if let Some(e) = msg::<api::EncapExtended>(c) {
                    encap = Some(Encap::of_tunnel_type(e.tunnel_type).map_or_else(
                        || refuse("unknown_encap", format!("tunnel type {}", e.tunnel_type)),
                        Ok,
                    )?);
                } else if let Some(m) = msg::<api::RouterMacExtended>(c) {
                    router_mac = Some(m.mac.parse().or_else(|e: String| refuse("bad_mac", e))?);
                } else if let Some(m) = msg::<api::MacMobilityExtended>(c) {
                    mobility = Some(m.sequence_num);
                }
            }
        } else if let Some(t) = msg::<api::PmsiTunnelAttribute>(a) {
            let Ok(id) = <[u8; 4]>::try_from(t.id.as_slice()) else {
                return refuse("bad_pmsi", format!("tunnel id of {} bytes", t.id.len()));
            };
            if t.r#type != 6 {
                return refuse(
                    "bad_pmsi",
                    format!(
                        "tunnel type {} (ovr replicates by ingress replication, 6)",
                        t.r#type
                    ),
                );
            }
            pmsi = Some((t.label, Ipv4Addr::from(id)));
        }
    }
    let next_hop = match next_hop {
        Some(n) => address("next_hop", &n)?,
        None => return refuse("no_next_hop", "no next hop"),
    };
    if targets.is_empty() {
        return refuse("no_route_target", "no route target: no network imports it");
    }
    // RFC 8365 section 5.1.3: without the community, VXLAN is what is meant.
    let encap = encap.unwrap_or(Encap::Vxlan);
    let mut nlri = nlri;
    // The route's label fields (and the PMSI tunnel's) hold the raw 3 octets until the
    // encapsulation says how to read them.
    let [first, second] = match &mut nlri {
        Nlri::MacIp {
            ip, label, routed, ..
        } => {
            // ovr's VXLAN networks route and bridge with one VNI (a symmetric IRB's
            // layer 3 VNI is not ovr's); MPLS's second label is an address's.
            if routed.is_some() && (encap == Encap::Vxlan || ip.is_none()) {
                return refuse(
                    "bad_label",
                    format!("a second label in a {encap:?} MAC/IP route of {ip:?}"),
                );
            }
            [Some(label), routed.as_mut()]
        }
        Nlri::Prefix { label, .. } => [Some(label), None],
        Nlri::Imet { .. } => [None, None],
    };
    let tunnel = pmsi.as_mut().map(|(l, _)| l);
    for label in [first, second, tunnel].into_iter().flatten() {
        if *label > 0xff_ffff {
            return refuse("bad_label", format!("{label} is over 24 bits"));
        }
        *label = encap.label_of(*label);
        if encap != Encap::Vxlan && *label < 16 {
            return refuse("bad_label", format!("MPLS label {label} is reserved"));
        }
    }
    Ok(Route {
        nlri,
        next_hop,
        targets,
        encap,
        router_mac,
        pmsi,
        mobility,
    })
}
