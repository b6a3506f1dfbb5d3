//! Arbitrary frames through the whole pipeline, configured as the example two-network
//! host: each frame arrives on every interface in turn, twice (so that the second meets
//! the flow the first may have set up). Nothing may panic, and every packet must end up
//! either transmitted or counted as dropped.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_dataplane::{Pipeline, Settings};
use ovr_tables::ids::InterfaceId;
#[path = "common.rs"]
mod common;
use common::tables;

fuzz_target!(|data: &[u8]| {
    let tables = tables().lock().unwrap();
    let st = tables.1.enter().unwrap();
    let mut pipe = Pipeline::new(Settings {
        flow_capacity: 1024,
        frames: 64,
        ..Settings::default()
    });
    let mut sent = 0u64;
    for round in 0..2 {
        for iface in 0..3 {
            pipe.cx.now = round * 1_000_000;
            pipe.receive(&st, InterfaceId(iface), [data]);
            pipe.run(&st);
            pipe.drain_tx(|_, bytes| {
                assert!(!bytes.is_empty());
                sent += 1;
            });
        }
    }
    let dropped: u64 = pipe.cx.drops.iter().sum();
    // Replication can make more packets than came in, never fewer than accounted for.
    assert!(sent + dropped >= 6, "sent {sent}, dropped {dropped} of 6");
    assert_eq!(pipe.cx.pool.available(), 64, "a buffer leaked");
});
