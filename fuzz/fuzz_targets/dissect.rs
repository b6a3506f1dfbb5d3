//! Whole frames through every parser, tunnels included: the operators' dissector and the
//! workers' steering hash (each label read both ways).
#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_wire::steer::{MplsPayload, flow_hash};

fuzz_target!(|data: &[u8]| {
    let _ = ovr_wire::dissect::dissect(data).to_string();
    let _ = flow_hash(data, &|l| if l & 1 == 0 { MplsPayload::Ip } else { MplsPayload::Ethernet });
});
