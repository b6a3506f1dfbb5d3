//! The Internet checksum (RFC 1071), pseudo-headers for UDP/TCP/ICMPv6, and incremental
//! updates (RFC 1624) so that a TTL decrement or an address rewrite does not re-sum the
//! whole header.

use core::net::{Ipv4Addr, Ipv6Addr};

/// Adds `data` as big-endian 16-bit words to `acc` (one's-complement sum, not yet folded).
/// An odd trailing byte is padded with zero, as RFC 1071 section 4.1 does.
///
/// Hand-written because it runs over every byte ovr checksums (whole TCP segments when
/// it finishes or cuts offloaded frames). It sums 8 bytes at a time in the host's byte
/// order into a 128-bit accumulator (the carries are kept, no byte swap per word) and
/// swaps the folded 16 bits once at the end: the one's-complement sum of byte-swapped
/// words is the byte-swapped sum (RFC 1071 section 2(B)).
pub fn accumulate(acc: u64, data: &[u8]) -> u64 {
    let mut wide: u128 = 0;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let w: [u8; 8] = w.try_into().unwrap_or_default();
        wide += u128::from(u64::from_le_bytes(w));
    }
    let mut rest = words.remainder().chunks_exact(2);
    for w in &mut rest {
        wide += u128::from(u16::from_le_bytes([w[0], w[1]]));
    }
    if let [last] = rest.remainder() {
        // The padded word is (last, 0): in little-endian order, `last` is its low byte.
        wide += u128::from(*last);
    }
    let mut folded = (wide as u64 as u128) + (wide >> 64);
    while folded > 0xffff {
        folded = (folded & 0xffff) + (folded >> 16);
    }
    acc + u64::from((folded as u16).swap_bytes())
}

/// True when an IPv4 header without options (20 bytes, checksum field included) sums to
/// all ones: [`verify`] for the header every tenant packet has, as five 32-bit words in
/// one register (a few instructions instead of the general loop's hundred). All ones
/// reads the same in either byte order, so the words are summed as the host holds them.
#[inline]
pub fn verify_ipv4_header(h: &[u8; 20]) -> bool {
    let word = |i: usize| u64::from(u32::from_ne_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    // Below 2^35; folded without a loop: < 2^33, < 2^17 + 2^16, <= 0xffff + 2, <= 0xffff.
    let s = word(0) + word(4) + word(8) + word(12) + word(16);
    let s = (s & 0xffff_ffff) + (s >> 32);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s == 0xffff
}

/// Folds a one's-complement sum to 16 bits (not inverted).
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum field value for `data` (whose checksum field must be zero).
pub fn checksum(data: &[u8]) -> u16 {
    !fold(accumulate(0, data))
}

/// True when `data`, including its checksum field, sums to all ones.
pub fn verify(data: &[u8]) -> bool {
    fold(accumulate(0, data)) == 0xffff
}

/// The IPv4 pseudo-header sum for UDP and TCP (RFC 768, RFC 9293 section 3.1).
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u64 {
    let mut acc = accumulate(0, &src.octets());
    acc = accumulate(acc, &dst.octets());
    acc + u64::from(protocol) + u64::from(length)
}

/// The IPv6 pseudo-header sum for UDP, TCP and ICMPv6 (RFC 8200 section 8.1).
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u64 {
    let mut acc = accumulate(0, &src.octets());
    acc = accumulate(acc, &dst.octets());
    acc + u64::from(length) + u64::from(next_header)
}

/// The checksum of `data` under a pseudo-header sum (`data`'s checksum field zero).
pub fn checksum_with(pseudo: u64, data: &[u8]) -> u16 {
    !fold(accumulate(pseudo, data))
}

/// True when `data` (checksum field included) verifies under a pseudo-header sum.
pub fn verify_with(pseudo: u64, data: &[u8]) -> bool {
    fold(accumulate(pseudo, data)) == 0xffff
}

/// RFC 1624 equation 3: the new checksum after one 16-bit word of the covered data
/// changes from `old` to `new`: `HC' = ~(~HC + ~m + m')`.
pub fn update16(checksum: u16, old: u16, new: u16) -> u16 {
    let acc = u64::from(!checksum) + u64::from(!old) + u64::from(new);
    !fold(acc)
}

/// [`update16`] for a 32-bit field (an IPv4 address), as two 16-bit words.
pub fn update32(checksum: u16, old: u32, new: u32) -> u16 {
    let c = update16(checksum, (old >> 16) as u16, (new >> 16) as u16);
    update16(c, old as u16, new as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_ipv4_header_check_agrees_with_the_general_one(h in proptest::array::uniform20(any::<u8>())) {
            prop_assert_eq!(verify_ipv4_header(&h), verify(&h));
        }

        /// A header with its checksum filled in verifies (the property above rarely meets one).
        #[test]
        fn an_ipv4_header_with_its_checksum_verifies(mut h in proptest::array::uniform20(any::<u8>()), flip in 0usize..160) {
            h[10] = 0;
            h[11] = 0;
            let c = checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            prop_assert!(verify_ipv4_header(&h));
            // One bit changed (not one making another all-ones sum) no longer verifies.
            let mut bad = h;
            bad[flip / 8] ^= 1 << (flip % 8);
            prop_assert_eq!(verify_ipv4_header(&bad), verify(&bad));
        }
    }

    /// RFC 1071 section 3 example: the words 0001 f203 f4f5 f6f7 sum to ddf2.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(accumulate(0, &data)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(accumulate(0, &[0xab])), 0xab00);
        assert_eq!(fold(accumulate(0, &[0x12, 0x34, 0xab])), 0x1234 + 0xab00);
    }

    /// A known IPv4 header (from scapy: IP(src="192.168.0.1", dst="192.168.0.199", ttl=64,
    /// id=1)/UDP()), checksum 0xf8b7.
    #[test]
    fn ipv4_header_checksum_matches_scapy() {
        let hdr = hex("4500001c000100004011f8b7c0a80001c0a800c7");
        assert!(verify(&hdr));
        let mut zeroed = hdr.clone();
        zeroed[10] = 0;
        zeroed[11] = 0;
        assert_eq!(checksum(&zeroed), 0xf8b7);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    proptest! {
        #[test]
        fn incremental_update_equals_full_recompute(
            mut data in proptest::collection::vec(any::<u8>(), 2..64),
            word in 0usize..32,
            new in any::<u16>(),
        ) {
            if data.len() % 2 == 1 { data.push(0); }
            let word = word % (data.len() / 2);
            let before = checksum(&data);
            let old = u16::from_be_bytes([data[2 * word], data[2 * word + 1]]);
            data[2 * word..2 * word + 2].copy_from_slice(&new.to_be_bytes());
            let after = checksum(&data);
            let incr = update16(before, old, new);
            // 0x0000 and 0xffff are the same one's-complement value (RFC 1624 section 3).
            prop_assert!(incr == after || (incr == 0 && after == 0xffff) || (incr == 0xffff && after == 0));
        }

        #[test]
        fn the_sum_is_the_sum_of_big_endian_words(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            acc in 0u64..1 << 40,
        ) {
            let mut want = acc;
            for w in data.chunks(2) {
                want += u64::from(w[0]) << 8 | u64::from(*w.get(1).unwrap_or(&0));
            }
            prop_assert_eq!(fold(accumulate(acc, &data)), fold(want));
        }

        #[test]
        fn a_summed_buffer_verifies(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            let mut data = data;
            if data.len() % 2 == 1 { data.push(0); }
            data.extend_from_slice(&[0, 0]);
            let n = data.len();
            let c = checksum(&data);
            data[n - 2..].copy_from_slice(&c.to_be_bytes());
            prop_assert!(verify(&data));
        }
    }
}
