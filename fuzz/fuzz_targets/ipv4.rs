#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_wire::ipv4::{Ipv4Packet, Ipv4Repr};

fuzz_target!(|data: &[u8]| {
    let mut owned = data.to_vec();
    if let Ok(mut p) = Ipv4Packet::new_checked(&mut owned[..]) {
        let _ = (p.payload().len(), p.is_first_fragment(), p.frag_offset());
        if Ipv4Repr::parse(&p).is_ok() && p.ttl() > 1 {
            p.decrement_ttl();
            assert!(p.verify_checksum(), "incremental TTL update broke the checksum");
        }
    }
});
