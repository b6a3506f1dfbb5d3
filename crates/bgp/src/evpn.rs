//! EVPN routes as ovr advertises and learns them (RFC 7432, RFC 8365 for VXLAN and the
//! other encapsulations, RFC 9136 for IP prefixes): plain values, independent of the
//! speaker that carries them. `gobgp` turns them into GoBGP's API messages and back.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr};
use ovr_config::model::EncapConfig;
use ovr_wire::ethernet::MacAddr;

/// A MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mac(pub [u8; 6]);

/// The bytes' order, as `MacAddr`'s (one word compared: the derived order called
/// `memcmp` at every step of the searches the install path makes by MAC).
impl Ord for Mac {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        MacAddr(self.0).cmp(&MacAddr(other.0))
    }
}

impl PartialOrd for Mac {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl core::str::FromStr for Mac {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut b = [0u8; 6];
        let mut parts = s.split(':');
        for x in &mut b {
            let p = parts.next().ok_or_else(|| format!("'{s}' is not a MAC"))?;
            if p.len() != 2 {
                return Err(format!("'{s}' is not a MAC"));
            }
            *x = u8::from_str_radix(p, 16).map_err(|_| format!("'{s}' is not a MAC"))?;
        }
        if parts.next().is_some() {
            return Err(format!("'{s}' is not a MAC"));
        }
        Ok(Mac(b))
    }
}

/// A route distinguisher (RFC 4364). ovr advertises type 1, its router id and a number
/// per network, so that two hosts' routes for one MAC stay two routes; it learns any type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rd {
    Ip { router: Ipv4Addr, assigned: u16 },
    As2 { asn: u16, assigned: u32 },
    As4 { asn: u32, assigned: u16 },
}

impl fmt::Display for Rd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rd::Ip { router, assigned } => write!(f, "{router}:{assigned}"),
            Rd::As2 { asn, assigned } => write!(f, "{asn}:{assigned}"),
            Rd::As4 { asn, assigned } => write!(f, "{asn}L:{assigned}"),
        }
    }
}

/// A route target (two-octet AS specific, RFC 4360): which networks import a route.
/// The automatic one of a network is ASN:VNI (RFC 8365 section 5.1.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteTarget {
    pub asn: u16,
    pub value: u32,
}

impl RouteTarget {
    pub fn auto(asn: u16, vni: u32) -> Self {
        Self { asn, value: vni }
    }
}

impl fmt::Display for RouteTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.asn, self.value)
    }
}

/// How the advertiser wants to be sent to (the encapsulation extended community, RFC
/// 9012's tunnel types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Encap {
    /// The label fields carry the VNI (RFC 8365).
    Vxlan,
    MplsOverGre,
    MplsOverUdp,
}

impl Encap {
    /// The IANA BGP tunnel type.
    pub fn tunnel_type(self) -> u32 {
        match self {
            Encap::Vxlan => 8,
            Encap::MplsOverGre => 11,
            Encap::MplsOverUdp => 13,
        }
    }

    pub fn of_tunnel_type(t: u32) -> Option<Self> {
        match t {
            8 => Some(Encap::Vxlan),
            11 => Some(Encap::MplsOverGre),
            13 => Some(Encap::MplsOverUdp),
            _ => None,
        }
    }

    /// The largest value a label field may carry: a 24-bit VNI, or a 20-bit MPLS label.
    pub fn max_label(self) -> u32 {
        match self {
            Encap::Vxlan => (1 << 24) - 1,
            Encap::MplsOverGre | Encap::MplsOverUdp => (1 << 20) - 1,
        }
    }

    /// The 3-octet label field of a route for `label`: a VNI fills all 24 bits (RFC
    /// 8365 section 5.1.3); an MPLS label takes the high 20, with the bottom-of-stack
    /// bit set (RFC 7432 section 7.2). GoBGP writes the field as it is given.
    pub fn label_field(self, label: u32) -> u32 {
        match self {
            Encap::Vxlan => label,
            Encap::MplsOverGre | Encap::MplsOverUdp => (label << 4) | 1,
        }
    }

    /// The VNI or label a route's label field carries.
    pub fn label_of(self, field: u32) -> u32 {
        match self {
            Encap::Vxlan => field,
            Encap::MplsOverGre | Encap::MplsOverUdp => field >> 4,
        }
    }
}

/// A network's or a next hop's encapsulation, as the configuration names it.
impl From<EncapConfig> for Encap {
    fn from(e: EncapConfig) -> Self {
        match e {
            EncapConfig::Vxlan => Encap::Vxlan,
            EncapConfig::MplsUdp => Encap::MplsOverUdp,
            EncapConfig::MplsGre => Encap::MplsOverGre,
        }
    }
}

impl From<Encap> for EncapConfig {
    fn from(e: Encap) -> Self {
        match e {
            Encap::Vxlan => EncapConfig::Vxlan,
            Encap::MplsOverUdp => EncapConfig::MplsUdp,
            Encap::MplsOverGre => EncapConfig::MplsGre,
        }
    }
}

/// The three route types ovr uses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Nlri {
    /// Type 3, inclusive multicast Ethernet tag: "flood this network's BUM traffic to
    /// me" (ingress replication, with the PMSI tunnel attribute).
    Imet {
        rd: Rd,
        tag: u32,
        originator: IpAddr,
    },
    /// Type 2, MAC/IP advertisement: a workload's MAC, with one of its addresses or none.
    MacIp {
        rd: Rd,
        tag: u32,
        mac: Mac,
        ip: Option<IpAddr>,
        /// The VNI (VXLAN) or the MPLS label the advertiser bridges frames with.
        label: u32,
        /// MPLS, with an address: the label the advertiser routes packets to it with
        /// (the second label, RFC 7432 section 7.2, RFC 9135): bridged frames and routed
        /// packets travel under different labels, as Ethernet and as bare IP.
        routed: Option<u32>,
    },
    /// Type 5, IP prefix: a routed subnet or an external prefix.
    Prefix {
        rd: Rd,
        tag: u32,
        addr: IpAddr,
        len: u8,
        gateway: IpAddr,
        /// The VNI or label the advertiser routes packets with.
        label: u32,
    },
}

impl Nlri {
    pub fn rd(&self) -> Rd {
        match self {
            Nlri::Imet { rd, .. } | Nlri::MacIp { rd, .. } | Nlri::Prefix { rd, .. } => *rd,
        }
    }

    /// Which route this is, as BGP compares routes (its labels and gateway aside).
    pub fn key(&self) -> RouteKey {
        match *self {
            Nlri::Imet {
                rd,
                tag,
                originator,
            } => RouteKey::Imet {
                rd,
                tag,
                originator,
            },
            Nlri::MacIp {
                rd, tag, mac, ip, ..
            } => RouteKey::MacIp { rd, tag, mac, ip },
            Nlri::Prefix {
                rd, tag, addr, len, ..
            } => RouteKey::Prefix { rd, tag, addr, len },
        }
    }
}

/// A route's key: the fields of its NLRI that say which route it is. The labels (RFC
/// 7432 section 7.2) and a prefix route's gateway (RFC 9136 section 3.1) are attributes:
/// a route announced again with other ones replaces the one before (GoBGP keys its
/// table so too), and a withdrawal names a route by its key alone. Ordered as the NLRIs
/// it comes from (a MAC-only route before the MAC/IP ones of its MAC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteKey {
    Imet {
        rd: Rd,
        tag: u32,
        originator: IpAddr,
    },
    MacIp {
        rd: Rd,
        tag: u32,
        mac: Mac,
        ip: Option<IpAddr>,
    },
    Prefix {
        rd: Rd,
        tag: u32,
        addr: IpAddr,
        len: u8,
    },
}

/// A route with the attributes ovr reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Route {
    pub nlri: Nlri,
    /// Where to send: the advertiser's VTEP.
    pub next_hop: IpAddr,
    pub targets: Vec<RouteTarget>,
    pub encap: Encap,
    /// Type 5: the advertiser's router MAC (the inner destination MAC, RFC 9136).
    pub router_mac: Option<Mac>,
    /// Type 3: the ingress replication tunnel (PMSI tunnel type 6): its label (the VNI)
    /// and endpoint.
    pub pmsi: Option<(u32, Ipv4Addr)>,
    /// Type 2: MAC mobility's sequence number (a MAC that moved: the highest wins).
    pub mobility: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn macs_order_as_their_bytes(a: [u8; 6], b: [u8; 6]) {
            prop_assert_eq!(Mac(a).cmp(&Mac(b)), a.cmp(&b));
        }
    }
}
