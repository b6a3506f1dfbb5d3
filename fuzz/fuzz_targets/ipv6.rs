#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_wire::ipv6::{Ipv6Packet, walk_extension_headers};

fuzz_target!(|data: &[u8]| {
    if let Some((nh, rest)) = data.split_first() {
        if let Ok(u) = walk_extension_headers(*nh, rest) {
            assert!(u.offset <= rest.len());
        }
    }
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        if let Ok(u) = p.upper_layer() {
            assert!(u.offset <= p.payload().len());
        }
    }
});
