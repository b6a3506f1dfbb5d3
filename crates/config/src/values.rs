//! Values with a syntax of their own (MACs, prefixes, interface addresses, port ranges,
//! protocols), parsed while the document is read so that a mistake is reported with its
//! path and position. Each serializes back to the text it was read from (canonicalised).

use core::fmt;
use core::net::IpAddr;
use ovr_tables::interface::InterfaceAddress;
use ovr_tables::policy::PortRange;
use ovr_tables::prefix::IpPrefix;
use ovr_wire::ethernet::MacAddr;
use ovr_wire::ip_proto;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Reads a value from a string (and, for some, from an integer), writes it back as one.
trait TextValue: Sized {
    /// What the value looks like, for "invalid type" errors.
    const EXPECTING: &'static str;
    fn parse(s: &str) -> Result<Self, String>;
    fn from_number(n: u64) -> Result<Self, String> {
        Self::parse(&n.to_string())
    }
    /// `Some` for values best written as a number.
    fn as_number(&self) -> Option<u64> {
        None
    }
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

struct TextVisitor<T>(core::marker::PhantomData<T>);

impl<T: TextValue> Visitor<'_> for TextVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
        T::parse(s).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<T, E> {
        T::from_number(n).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<T, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::custom(format!("{n} is negative"))),
        }
    }
}

macro_rules! text_value {
    ($t:ident) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(TextVisitor(core::marker::PhantomData))
            }
        }

        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self.as_number() {
                    Some(n) => s.serialize_u64(n),
                    None => s.collect_str(self),
                }
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.write(f)
            }
        }

        impl core::str::FromStr for $t {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                Self::parse(s)
            }
        }
    };
}

/// A MAC address, "02:00:00:00:00:01".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mac(pub MacAddr);

impl TextValue for Mac {
    const EXPECTING: &'static str = "a MAC address like \"02:00:00:00:00:01\"";

    fn parse(s: &str) -> Result<Self, String> {
        s.parse()
            .map(Mac)
            .map_err(|_| format!("'{s}' is not a MAC address (like 02:00:00:00:00:01)"))
    }

    fn from_number(n: u64) -> Result<Self, String> {
        Err(format!(
            "{n} is not a MAC address (like \"02:00:00:00:00:01\", quoted)"
        ))
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
text_value!(Mac);

/// A prefix with no host bits set, "10.1.0.0/16".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix(pub IpPrefix);

impl TextValue for Prefix {
    const EXPECTING: &'static str = "a prefix like 10.1.0.0/16";

    fn parse(s: &str) -> Result<Self, String> {
        s.parse().map(Prefix).map_err(|e| format!("{e}"))
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}
text_value!(Prefix);

/// An address on a subnet, "10.1.0.1/24" (host bits are the point).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Address(pub InterfaceAddress);

impl TextValue for Address {
    const EXPECTING: &'static str = "an address with its prefix length, like 10.1.0.1/24";

    fn parse(s: &str) -> Result<Self, String> {
        let Some((a, l)) = s.split_once('/') else {
            return Err(format!("'{s}' needs a prefix length, like 10.1.0.1/24"));
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("'{a}' is not an IPv4 or IPv6 address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        match l.parse::<u8>() {
            Ok(prefix_len) if prefix_len <= max => {
                Ok(Address(InterfaceAddress { addr, prefix_len }))
            }
            _ => Err(format!("'{l}' is not a prefix length (0-{max})")),
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.0.addr, self.0.prefix_len)
    }
}
text_value!(Address);

/// A port or an inclusive range of ports: 80, "80" or "1000-2000".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ports(pub PortRange);

impl TextValue for Ports {
    const EXPECTING: &'static str = "a port (80) or a range of ports (\"1000-2000\")";

    fn parse(s: &str) -> Result<Self, String> {
        let port = |p: &str| {
            p.trim()
                .parse::<u16>()
                .map_err(|_| format!("'{p}' is not a port (0-65535)"))
        };
        let (first, last) = match s.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => {
                let p = port(s)?;
                (p, p)
            }
        };
        Ok(Ports(PortRange { first, last }))
    }

    fn from_number(n: u64) -> Result<Self, String> {
        let p = u16::try_from(n).map_err(|_| format!("port {n} is above 65535"))?;
        Ok(Ports(PortRange { first: p, last: p }))
    }

    fn as_number(&self) -> Option<u64> {
        (self.0.first == self.0.last).then_some(u64::from(self.0.first))
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_number() {
            Some(p) => write!(f, "{p}"),
            None => write!(f, "{}-{}", self.0.first, self.0.last),
        }
    }
}
text_value!(Ports);

const PROTOCOLS: [(&str, u8); 5] = [
    ("tcp", ip_proto::TCP),
    ("udp", ip_proto::UDP),
    ("icmp", ip_proto::ICMP),
    ("icmpv6", ip_proto::ICMPV6),
    ("gre", ip_proto::GRE),
];

/// An IP protocol: tcp, udp, icmp, icmpv6, gre or a number 0-255.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Protocol(pub u8);

impl TextValue for Protocol {
    const EXPECTING: &'static str = "a protocol (tcp, udp, icmp, icmpv6, gre or a number)";

    fn parse(s: &str) -> Result<Self, String> {
        let lower = s.to_ascii_lowercase();
        if let Some((_, p)) = PROTOCOLS.iter().find(|(n, _)| *n == lower) {
            return Ok(Protocol(*p));
        }
        match s.parse::<u64>() {
            Ok(n) => Self::from_number(n),
            Err(_) => Err(format!(
                "'{s}' is not a protocol (tcp, udp, icmp, icmpv6, gre or a number)"
            )),
        }
    }

    fn from_number(n: u64) -> Result<Self, String> {
        u8::try_from(n)
            .map(Protocol)
            .map_err(|_| format!("protocol {n} is above 255"))
    }

    fn as_number(&self) -> Option<u64> {
        match PROTOCOLS.iter().find(|(_, p)| *p == self.0) {
            Some(_) => None,
            None => Some(u64::from(self.0)),
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match PROTOCOLS.iter().find(|(_, p)| *p == self.0) {
            Some((n, _)) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}
text_value!(Protocol);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_write_back() {
        for s in ["02:00:00:00:00:0a", "00:00:5e:00:01:00"] {
            assert_eq!(s.parse::<Mac>().unwrap().to_string(), s);
        }
        for s in ["10.1.0.0/16", "fd00:1::/64", "0.0.0.0/0"] {
            assert_eq!(s.parse::<Prefix>().unwrap().to_string(), s);
        }
        for s in ["10.1.0.1/24", "fd00:1::1/64", "192.0.2.1/32"] {
            assert_eq!(s.parse::<Address>().unwrap().to_string(), s);
        }
        for s in ["80", "1000-2000", "0-65535"] {
            assert_eq!(s.parse::<Ports>().unwrap().to_string(), s);
        }
        for s in ["tcp", "udp", "icmpv6", "132"] {
            assert_eq!(s.parse::<Protocol>().unwrap().to_string(), s);
        }
        assert_eq!("TCP".parse::<Protocol>().unwrap(), Protocol(6));
        assert_eq!("6".parse::<Protocol>().unwrap(), Protocol(6));
        assert!("10.1.0.1/33".parse::<Address>().is_err());
        assert!("10.1.0.1".parse::<Address>().is_err());
        assert!("fd00::1/129".parse::<Address>().is_err());
        assert!("10.1.0.1/24".parse::<Prefix>().is_err());
        assert!("70000".parse::<Ports>().is_err());
        assert!("1-x".parse::<Ports>().is_err());
        assert!("256".parse::<Protocol>().is_err());
        assert!("sctp".parse::<Protocol>().is_err());
        assert!("02:00:00:00:00".parse::<Mac>().is_err());
    }
}

/// OpenAPI schemas: each value is written as text (ports and protocols also as numbers).
#[cfg(feature = "openapi")]
mod schema {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};

    fn text(description: &str, example: &str) -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(description))
            .examples([example])
            .into()
    }

    fn text_or_number(description: &str, example: &str) -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::String))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0)),
            )
            .description(Some(description))
            .examples([example])
            .into()
    }

    macro_rules! schema {
        ($t:ident, $f:ident, $d:expr, $e:expr) => {
            impl utoipa::PartialSchema for super::$t {
                fn schema() -> RefOr<Schema> {
                    $f($d, $e)
                }
            }
            impl utoipa::ToSchema for super::$t {}
        };
    }

    schema!(
        Mac,
        text,
        "a unicast or group MAC address",
        "02:00:00:00:00:01"
    );
    schema!(
        Prefix,
        text,
        "an IPv4 or IPv6 prefix, no host bits set",
        "10.1.0.0/16"
    );
    schema!(
        Address,
        text,
        "an address with its prefix length",
        "10.1.0.1/24"
    );
    schema!(
        Ports,
        text_or_number,
        "a port or a range first-last",
        "80-81"
    );
    schema!(
        Protocol,
        text_or_number,
        "tcp, udp, icmp, icmpv6, gre or a number 0-255",
        "tcp"
    );
}

/// A BGP EVPN route target: `auto` (the network's ASN:VNI, RFC 8365 section 5.1.2.1,
/// with the speaker's ASN) or a two-octet AS specific one, "65000:4242" (RFC 4360).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteTarget {
    Auto,
    As2 { asn: u16, value: u32 },
}

impl TextValue for RouteTarget {
    const EXPECTING: &'static str = "a route target: auto, or ASN:NUMBER like 65000:4242";

    fn parse(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(RouteTarget::Auto);
        }
        let wrong = || {
            format!(
                "'{s}' is not a route target: auto, or ASN:NUMBER with ASN up to 65535 and NUMBER up to 4294967295"
            )
        };
        let (asn, value) = s.split_once(':').ok_or_else(wrong)?;
        Ok(RouteTarget::As2 {
            asn: asn.parse().map_err(|_| wrong())?,
            value: value.parse().map_err(|_| wrong())?,
        })
    }

    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteTarget::Auto => f.write_str("auto"),
            RouteTarget::As2 { asn, value } => write!(f, "{asn}:{value}"),
        }
    }
}
text_value!(RouteTarget);
