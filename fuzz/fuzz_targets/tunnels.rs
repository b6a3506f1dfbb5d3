#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_wire::gre::{GrePacket, GreRepr};
use ovr_wire::mpls::LabelStack;
use ovr_wire::vxlan::VxlanPacket;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = VxlanPacket::new_checked(data) {
        assert!(p.vni() < 1 << 24);
    }
    if let Ok(s) = LabelStack::parse(data) {
        assert!(s.buffer_len() <= data.len());
        assert!(s.entries().last().is_some_and(|e| e.bottom));
    }
    if let Ok(p) = GrePacket::new_checked(data) {
        if let Ok(r) = GreRepr::parse(&p) {
            assert_eq!(r.buffer_len(), p.header_len());
        }
    }
});
