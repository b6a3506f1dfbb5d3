#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_wire::tcp::TcpPacket;
use ovr_wire::udp::UdpPacket;
use std::net::{Ipv4Addr, Ipv6Addr};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = UdpPacket::new_checked(data) {
        let _ = (p.payload(), p.verify_v4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST), p.verify_v6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST));
    }
    if let Ok(p) = TcpPacket::new_checked(data) {
        let _ = (p.options(), p.payload(), p.verify_v4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST));
    }
});
