#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use ovr_wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use std::net::Ipv6Addr;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Icmpv4Packet::new_checked(data) {
        let _ = Icmpv4Repr::parse(&p);
    }
    // Give ICMPv6 a valid checksum so that the message parsers behind it are reached.
    let mut owned = data.to_vec();
    let (s, d) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
    if let Ok(mut p) = Icmpv6Packet::new_checked(&mut owned[..]) {
        p.fill_checksum(s, d);
    }
    if let Ok(p) = Icmpv6Packet::new_checked(&owned[..]) {
        let _ = Icmpv6Repr::parse(&p, s, d);
    }
});
