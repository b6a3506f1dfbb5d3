//! IP prefixes as the control plane writes them ("10.1.0.0/16", "2001:db8::/32").

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::str::FromStr;

/// Why a prefix was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("'{0}' is not ADDRESS/LENGTH")]
    Syntax(String),
    #[error("prefix length {len} is longer than {max} bits")]
    Length { len: u8, max: u8 },
    #[error("{addr}/{len} has bits set past the prefix length (did you mean {masked}/{len}?)")]
    HostBits {
        addr: IpAddr,
        len: u8,
        masked: IpAddr,
    },
}

/// An IPv4 or IPv6 prefix with no bits set past its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

impl IpPrefix {
    /// A prefix; refuses a length past the address width and host bits set.
    pub fn new(addr: IpAddr, len: u8) -> Result<Self, PrefixError> {
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        if len > max {
            return Err(PrefixError::Length { len, max });
        }
        let masked = mask(addr, len);
        if masked != addr {
            return Err(PrefixError::HostBits { addr, len, masked });
        }
        Ok(Self { addr, len })
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// True for the default route (/0), which has no bits to compare.
    pub fn is_default(&self) -> bool {
        self.len == 0
    }

    /// True when `ip` is inside this prefix (always false across address families).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                mask(ip, self.len) == self.addr
            }
            _ => false,
        }
    }
}

/// `addr` with the bits past `len` cleared (the network of `addr/len`).
pub fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

impl FromStr for IpPrefix {
    type Err = PrefixError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || PrefixError::Syntax(s.to_owned());
        let (addr, len) = s.split_once('/').ok_or_else(syntax)?;
        let addr: IpAddr = addr.parse().map_err(|_| syntax())?;
        let len: u8 = len.parse().map_err(|_| syntax())?;
        Self::new(addr, len)
    }
}

impl core::fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let p: IpPrefix = "10.1.0.0/16".parse().unwrap();
        assert_eq!(p.to_string(), "10.1.0.0/16");
        assert!(p.contains("10.1.255.3".parse().unwrap()));
        assert!(!p.contains("10.2.0.0".parse().unwrap()));
        assert!(!p.contains("::1".parse().unwrap()));
        let d: IpPrefix = "::/0".parse().unwrap();
        assert!(d.is_default() && d.contains("2001:db8::1".parse().unwrap()));
        assert!(
            "0.0.0.0/0"
                .parse::<IpPrefix>()
                .unwrap()
                .contains("1.2.3.4".parse().unwrap())
        );
    }

    #[test]
    fn refuses_what_is_wrong() {
        assert!(matches!(
            "10.0.0.1/8".parse::<IpPrefix>(),
            Err(PrefixError::HostBits { .. })
        ));
        assert!(matches!(
            "10.0.0.0/33".parse::<IpPrefix>(),
            Err(PrefixError::Length { .. })
        ));
        assert!(matches!(
            "10.0.0.0".parse::<IpPrefix>(),
            Err(PrefixError::Syntax(_))
        ));
        assert!(matches!(
            "x/8".parse::<IpPrefix>(),
            Err(PrefixError::Syntax(_))
        ));
        let e = "10.0.0.1/8".parse::<IpPrefix>().unwrap_err().to_string();
        assert!(e.contains("did you mean 10.0.0.0/8"), "{e}");
    }
}
