#![no_main]
//! A hostile memif peer: control messages as received, and rings whose header and
//! descriptors the peer wrote (head, descriptor regions, offsets, lengths, chains), read
//! by ovr as server (C2S) and as client (S2C), and filled by ovr as server (the peer's
//! offered buffers). Nothing may panic, and every frame delivered lies within what a
//! descriptor could describe.
use libfuzzer_sys::fuzz_target;
use ovr_memif::Mapping;
use ovr_memif::desc::{self, Desc};
use ovr_memif::msg::{MSG_LEN, Msg};
use ovr_memif::ring::{self, Arena, DataStats, Ring, RingRef, TxBuffers};
use std::sync::OnceLock;

const LOG2: u8 = 4;
const SIZE: usize = 16384;

fn regions() -> &'static [Mapping] {
    static R: OnceLock<Vec<Mapping>> = OnceLock::new();
    R.get_or_init(|| {
        vec![
            Mapping::memfd("fuzz0", SIZE).unwrap(),
            Mapping::memfd("fuzz1", 4096).unwrap(),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    // Control messages: any bytes, any length.
    if let Ok(m) = Msg::parse(data) {
        let again = Msg::parse(&m.emit()).unwrap();
        assert_eq!(again.msg_type(), m.msg_type());
        assert_eq!(data.len(), MSG_LEN);
    }
    if data.len() < 4 {
        return;
    }
    let regions = regions();
    let sizes: Vec<usize> = regions.iter().map(|m| m.len()).collect();
    let r = RingRef {
        region: 0,
        offset: 0,
        log2: LOG2,
    };
    let ring = Ring::new(regions, r).unwrap();
    ring.init();
    // The peer's descriptors and counter.
    for (i, c) in data[4..].chunks(16).take(1 << LOG2).enumerate() {
        let mut b = [0u8; 16];
        b[..c.len()].copy_from_slice(c);
        ring.set_desc(i as u16, Desc::from_bytes(b));
    }
    let published = u16::from_le_bytes([data[0], data[1]]);
    let start = u16::from_le_bytes([data[2], data[3]]) & 0x1f;
    for peer_is_head in [true, false] {
        if peer_is_head {
            ring.set_head(published);
        } else {
            ring.set_tail(published);
        }
        let mut arena = Arena::new(32, 32 * 2048);
        let (mut last, mut st) = (start, DataStats::default());
        if let Ok(n) = ring::receive(
            &ring,
            regions,
            &sizes,
            2048,
            &mut last,
            peer_is_head,
            &mut arena,
            0,
            &mut |_| true,
            &mut st,
        ) {
            assert_eq!(n, arena.len());
            for f in arena.frames() {
                assert!(f.len() <= desc::MAX_CHAIN * 2048);
            }
            assert!(last.wrapping_sub(start) <= 1 << LOG2);
        }
    }
    // Server filling the buffers the peer offered.
    ring.set_head(published);
    let frame = [0xabu8; 3000];
    let mut pos = start;
    let mut st = DataStats::default();
    let _ = ring::send(
        &ring,
        regions,
        &sizes,
        &mut pos,
        &TxBuffers::Offered,
        &mut [&frame[..64], &frame[..]].into_iter(),
        0,
        &mut st,
    );
    // The pure descriptor check agrees with the bounds it promises.
    for c in data[4..].chunks_exact(16) {
        let mut b = [0u8; 16];
        b.copy_from_slice(c);
        let d = Desc::from_bytes(b);
        if let Ok((reg, off, len)) = desc::check(&d, &sizes, 2048) {
            assert!(off + len <= sizes[reg] && len <= 2048);
        }
    }
});
