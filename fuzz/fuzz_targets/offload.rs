//! Arbitrary frames behind arbitrary virtio-net headers, as an offloading workload's
//! interface hands them over: finishing checksums and cutting segments must never panic
//! nor make a segment larger than its headers plus the segment size; through the whole
//! pipeline, every buffer must come back.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ovr_dataplane::{Pipeline, Settings};
use ovr_tables::ids::InterfaceId;
use ovr_wire::offload::{self, Joined, VNET_HDR_LEN, VnetHdr};

#[path = "common.rs"]
mod common;
use common::tables;

fuzz_target!(|data: &[u8]| {
    // The same bytes as a run of frames to join (TCP segments, or datagrams): a joined
    // frame cuts back into as many segments as it took.
    let frames: Vec<&[u8]> = data.chunks(data.len().div_ceil(3).max(1)).collect();
    let mut joined = Joined::default();
    for join in [offload::coalesce, offload::coalesce_datagrams] {
        if let Some((h, n)) = join(&frames, &mut joined) {
            assert!(n >= 2 && n <= frames.len());
            let frame: Vec<u8> = joined.parts(&frames[..n]).flatten().copied().collect();
            let cut = offload::segment(&frame, &h, &mut Vec::new(), |_, _| {});
            assert_eq!(cut, Ok(n));
        }
    }
    if let Ok(h) = VnetHdr::parse(data) {
        let frame = &data[VNET_HDR_LEN..];
        let mut scratch = Vec::new();
        let _ = offload::segment(frame, &h, &mut scratch, |hdr, payload| {
            assert!(hdr.len() <= frame.len());
            assert!(payload.len() <= usize::from(h.gso_size));
        });
        let mut f = frame.to_vec();
        let _ = offload::finish_checksum(&mut f, h.csum_start.into(), h.csum_offset.into());
        assert_eq!(f.len(), frame.len());
    }
    let tables = tables().lock().unwrap();
    let st = tables.1.enter().unwrap();
    let mut pipe = Pipeline::new(Settings {
        flow_capacity: 1024,
        frames: 64,
        ..Settings::default()
    });
    for iface in 0..3 {
        pipe.receive_offloaded(&st, InterfaceId(iface), [data]);
        pipe.run(&st);
        pipe.drain_tx(|_, bytes| assert!(!bytes.is_empty()));
    }
    assert_eq!(pipe.cx.pool.available(), 64, "a buffer leaked");
});
