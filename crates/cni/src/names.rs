//! Names derived from the container id and interface name, the same on every call so
//! that DEL, CHECK and GC find what ADD made without a store of their own.

use crate::conf::valid_name;

/// FNV-1a, 64 bits: small, stable across builds and platforms (unlike std's hasher).
fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0xff;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        for b in p.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The port's name in the cluster: `CONTAINERID-IFNAME` when that is a valid name (1 to
/// 63 of `A-Za-z0-9._-`), else the id's first 46 characters (those allowed), a dash and
/// 16 hex digits of a hash of both.
pub fn port_name(container_id: &str, ifname: &str) -> String {
    let plain = format!("{container_id}-{ifname}");
    if valid_name(&plain) {
        return plain;
    }
    let head: String = container_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(46)
        .collect();
    format!("{head}-{:016x}", fnv(&[container_id, ifname]))
}

/// The host end of the veth pair: `ovr` and 12 hex digits (15 characters, the kernel's
/// limit).
pub fn host_ifname(container_id: &str, ifname: &str) -> String {
    format!(
        "ovr{:012x}",
        fnv(&["if", container_id, ifname]) & 0xffff_ffff_ffff
    )
}

/// A MAC for the container's interface when the runtime gives none: locally
/// administered, unicast (`02:` and five bytes of a hash).
pub fn mac(container_id: &str, ifname: &str) -> [u8; 6] {
    let h = fnv(&["mac", container_id, ifname]).to_be_bytes();
    [0x02, h[0], h[1], h[2], h[3], h[4]]
}

pub fn format_mac(m: &[u8]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `02:00:00:00:00:01` as bytes: a unicast MAC, not all zeros.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    (parts.next().is_none() && m[0] & 1 == 0 && m != [0; 6]).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PODMAN: &str = "4f7c2a1b9e0d3c5a6b7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c";

    #[test]
    fn names_are_valid_deterministic_and_distinct() {
        assert_eq!(port_name("c1", "eth0"), "c1-eth0");
        let long = port_name(PODMAN, "eth0");
        assert_eq!(long.len(), 63);
        assert!(valid_name(&long), "{long}");
        assert!(long.starts_with(&PODMAN[..46]));
        assert_eq!(long, port_name(PODMAN, "eth0"));
        assert_ne!(long, port_name(PODMAN, "eth1"));
        // An interface name with characters a port name may not have.
        let odd = port_name("c1", "eth0@x");
        assert!(valid_name(&odd), "{odd}");
        assert_ne!(odd, port_name("c1", "eth0_x"));

        let h = host_ifname(PODMAN, "eth0");
        assert_eq!(h.len(), 15);
        assert!(h.starts_with("ovr"));
        assert_eq!(h, host_ifname(PODMAN, "eth0"));
        assert_ne!(h, host_ifname(PODMAN, "eth1"));
        // The parts are separated: ("ab", "c") is not ("a", "bc").
        assert_ne!(host_ifname("ab", "c"), host_ifname("a", "bc"));
    }

    #[test]
    fn macs_are_unicast_and_local() {
        let m = mac(PODMAN, "eth0");
        assert_eq!(m[0], 0x02);
        assert_ne!(m, mac(PODMAN, "eth1"));
        let s = format_mac(&m);
        assert_eq!(parse_mac(&s), Some(m));
        assert_eq!(parse_mac("01:00:5e:00:00:01"), None);
        assert_eq!(parse_mac("00:00:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:01:02"), None);
    }
}
