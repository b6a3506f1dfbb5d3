#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_wire::arp::{ArpPacket, ArpRepr};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = ArpPacket::new_checked(data) {
        let r = ArpRepr::parse(&p);
        let mut buf = [0u8; 28];
        r.emit(&mut buf);
        assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap()), r);
    }
});
