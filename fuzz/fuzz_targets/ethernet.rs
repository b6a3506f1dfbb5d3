#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_wire::ethernet::{EthernetRepr, parse_l2};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_l2(data) {
        assert!(h.payload_offset <= data.len());
        let r = EthernetRepr::parse(data).expect("parsed once already");
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf);
        assert_eq!(EthernetRepr::parse(&buf), Ok(r));
    }
});
