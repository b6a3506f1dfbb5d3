//! Flow keys and their hashes.

use crate::ids::VrfId;
use core::net::IpAddr;

/// (VRF, 5-tuple). Addresses are stored as 16 bytes (IPv4 as the IPv4-mapped IPv6
/// address, RFC 4291 section 2.5.5.2) so that one key type and one compare serve both
/// families. For ICMP echo, the identifier stands in for both ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct FlowKey {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub vrf: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub protocol: u8,
    /// A bridged (L2) flow: the same 5-tuple routed is another flow.
    pub bridged: bool,
    _pad: [u8; 2],
}

/// An IPv4 address as the IPv4-mapped IPv6 address flow keys and packet metadata hold,
/// in one whole-word write (`Ipv4Addr::to_ipv6_mapped` puts the sixteen bytes together
/// one at a time: tens of instructions on a per-packet path).
#[inline]
pub fn ipv4_mapped(a: [u8; 4]) -> [u8; 16] {
    (0xffff_0000_0000 | u128::from(u32::from_be_bytes(a))).to_be_bytes()
}

impl FlowKey {
    pub fn new(
        vrf: VrfId,
        src: IpAddr,
        dst: IpAddr,
        protocol: u8,
        src_port: u16,
        dst_port: u16,
    ) -> Self {
        if let (IpAddr::V4(s), IpAddr::V4(d)) = (src, dst) {
            return Self::v4(vrf, s.octets(), d.octets(), protocol, src_port, dst_port);
        }
        let v6 = |a: IpAddr| match a {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        Self::mapped(vrf, v6(src), v6(dst), protocol, src_port, dst_port)
    }

    /// The key of addresses already in their 16-byte (IPv4-mapped) form.
    #[inline]
    fn mapped(
        vrf: VrfId,
        src: [u8; 16],
        dst: [u8; 16],
        protocol: u8,
        src_port: u16,
        dst_port: u16,
    ) -> Self {
        Self {
            src,
            dst,
            vrf: vrf.0,
            src_port,
            dst_port,
            protocol,
            bridged: false,
            _pad: [0; 2],
        }
    }

    /// An IPv4 flow's key from the addresses as they are in the header: each stored
    /// IPv4-mapped with whole-word writes (built through `IpAddr`, the compiler put the
    /// sixteen bytes together one at a time: 80 of ip-input's 500 instructions).
    #[inline]
    pub fn v4(
        vrf: VrfId,
        src: [u8; 4],
        dst: [u8; 4],
        protocol: u8,
        src_port: u16,
        dst_port: u16,
    ) -> Self {
        Self::mapped(
            vrf,
            ipv4_mapped(src),
            ipv4_mapped(dst),
            protocol,
            src_port,
            dst_port,
        )
    }

    /// The same key for a bridged flow.
    pub fn into_bridged(self) -> Self {
        Self {
            bridged: true,
            ..self
        }
    }

    pub fn vrf(&self) -> VrfId {
        VrfId(self.vrf)
    }

    pub fn src_ip(&self) -> IpAddr {
        to_ip(self.src)
    }

    pub fn dst_ip(&self) -> IpAddr {
        to_ip(self.dst)
    }

    /// The key of the reply direction.
    pub fn reverse(&self) -> Self {
        Self {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            ..*self
        }
    }

    fn words(&self) -> [u64; 5] {
        let w =
            |b: &[u8; 16], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let tail = u64::from(self.vrf)
            | (u64::from(self.protocol) << 32)
            | (u64::from(self.bridged) << 40);
        let ports = u64::from(self.src_port) | (u64::from(self.dst_port) << 16);
        [
            w(&self.src, 0) ^ w(&self.src, 8).rotate_left(17),
            w(&self.dst, 0) ^ w(&self.dst, 8).rotate_left(17),
            tail,
            ports,
            0,
        ]
    }

    /// The table hash: a multiply-xorshift mix of the key's words. Hand-written because
    /// it runs once per packet: SipHash (std's default) costs several times more, and the
    /// table bounds its probes, so a crafted collision costs a refusal, not a slowdown.
    #[inline]
    pub fn hash(&self) -> u64 {
        let w = self.words();
        let mut h = 0x243f_6a88_85a3_08d3u64;
        for x in &w[..4] {
            h = (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h ^= h >> 31;
        }
        // A final avalanche (MurmurHash3's fmix64 step): without it, keys that differ
        // only in a port and an address's low bits crowd the low bits that pick the
        // bucket (a fifth of such keys overflowed their primary bucket).
        h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }

    /// A hash equal for a key and its reverse: picks the worker that owns a flow (both
    /// directions on one worker) and the ECMP member. Deterministic across restarts.
    #[inline]
    pub fn symmetric_hash(&self) -> u32 {
        let w = self.words();
        let (a, b) = (w[0], w[1]);
        let ports = u64::from(self.src_port ^ self.dst_port)
            | (u64::from(self.src_port.min(self.dst_port)) << 16);
        let mut h = (a ^ b).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ a.wrapping_add(b);
        h = (h ^ w[2] ^ (ports << 24)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h as u32
    }
}

fn to_ip(b: [u8; 16]) -> IpAddr {
    let v6 = core::net::Ipv6Addr::from(b);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_key_holds_the_mapped_addresses() {
        for (s, d) in [([10, 1, 0, 5], [192, 0, 2, 255]), ([0; 4], [255; 4])] {
            let k = FlowKey::v4(VrfId(7), s, d, 17, 1, 2);
            assert_eq!(
                k.src,
                core::net::Ipv4Addr::from(s).to_ipv6_mapped().octets()
            );
            assert_eq!(
                k.dst,
                core::net::Ipv4Addr::from(d).to_ipv6_mapped().octets()
            );
            assert_eq!((k.vrf, k.protocol, k.src_port, k.dst_port), (7, 17, 1, 2));
            assert_eq!(
                k,
                FlowKey::new(VrfId(7), IpAddr::from(s), IpAddr::from(d), 17, 1, 2)
            );
            assert_eq!((k.src_ip(), k.dst_ip()), (IpAddr::from(s), IpAddr::from(d)));
        }
    }

    fn key(i: u32) -> FlowKey {
        FlowKey::new(
            VrfId(i % 7),
            IpAddr::V4((0x0a00_0000 + i).into()),
            IpAddr::V4((0x0b00_0000 + i * 3).into()),
            6,
            (i * 13) as u16,
            80,
        )
    }

    #[test]
    fn symmetric_hash_is_symmetric_and_addresses_round_trip() {
        for i in 0..1000 {
            let k = key(i);
            assert_eq!(k.symmetric_hash(), k.reverse().symmetric_hash());
            assert_eq!(k.reverse().reverse(), k);
        }
        let k = key(5);
        assert_eq!(k.src_ip(), IpAddr::V4((0x0a00_0005).into()));
        let v6 = FlowKey::new(
            VrfId(1),
            "2001:db8::1".parse().unwrap(),
            "::1".parse().unwrap(),
            17,
            1,
            2,
        );
        assert_eq!(v6.src_ip(), "2001:db8::1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn hashes_spread_over_buckets() {
        for bits in [8u32, 12] {
            let buckets = 1usize << bits;
            let mut n = vec![0u32; buckets];
            let mut s = vec![0u32; buckets];
            let keys = buckets * 16;
            for i in 0..keys as u32 {
                n[(key(i).hash() as usize) & (buckets - 1)] += 1;
                s[(key(i).symmetric_hash() as usize) & (buckets - 1)] += 1;
            }
            // With 16 keys per bucket on average, no bucket should hold 3x that.
            assert!(
                n.iter().all(|c| *c < 48),
                "table hash max {}",
                n.iter().max().unwrap()
            );
            assert!(
                s.iter().all(|c| *c < 48),
                "symmetric hash max {}",
                s.iter().max().unwrap()
            );
        }
    }
}
