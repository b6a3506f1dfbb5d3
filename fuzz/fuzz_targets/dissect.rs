//! Whole frames through every parser, tunnels included.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ovr_wire::dissect::dissect(data).to_string();
});
