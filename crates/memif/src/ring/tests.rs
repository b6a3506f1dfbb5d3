use super::*;
use crate::sys;

fn region(size: usize) -> Mapping {
    let fd = sys::memfd("test", size as u64).unwrap();
    Mapping::map(&fd, size).unwrap()
}

#[test]
fn layout_checked_before_use() {
    let sizes = [ring_bytes(10) + 4096];
    assert!(check_layout(0, 0, 10, &sizes, 10).is_ok());
    assert!(check_layout(0, 4096, 10, &sizes, 10).is_ok());
    assert_eq!(
        check_layout(0, 4104, 10, &sizes, 10),
        Err(LayoutError::Bounds)
    );
    assert_eq!(
        check_layout(0, u32::MAX - 7, 10, &sizes, 10),
        Err(LayoutError::Bounds)
    );
    assert_eq!(
        check_layout(0, 4, 10, &sizes, 10),
        Err(LayoutError::Misaligned)
    );
    assert_eq!(check_layout(1, 0, 10, &sizes, 10), Err(LayoutError::Region));
    assert_eq!(check_layout(0, 0, 11, &sizes, 12), Err(LayoutError::Bounds));
    assert_eq!(
        check_layout(0, 0, 11, &sizes, 10),
        Err(LayoutError::TooLarge)
    );
    assert_eq!(
        check_layout(0, 0, 0, &sizes, 10),
        Err(LayoutError::TooSmall)
    );
}

/// A client and a server view of one C2S ring in one region: rings at 0, buffers of
/// 256 bytes after it.
fn setup(log2: u8) -> (Vec<Mapping>, Vec<usize>, RingRef) {
    let rb = ring_bytes(log2);
    let size = rb + (256 << log2);
    let regions = vec![region(size)];
    let sizes = vec![size];
    let r = check_layout(0, 0, log2, &sizes, 14).unwrap();
    Ring::new(&regions, r).unwrap().init();
    (regions, sizes, r)
}

/// `receive` as a C2S server reads it: buffers of 256 bytes, no prefix, every frame kept.
fn recv(
    ring: &Ring,
    regions: &[Mapping],
    sizes: &[usize],
    last: &mut u16,
    arena: &mut Arena,
    st: &mut DataStats,
) -> Result<usize, Violation> {
    receive(
        ring,
        regions,
        sizes,
        256,
        last,
        true,
        arena,
        0,
        &mut |_| true,
        st,
    )
}

/// `send` of `frames` with nothing stripped; how many were taken.
fn tx(
    ring: &Ring,
    regions: &[Mapping],
    sizes: &[usize],
    pos: &mut u16,
    bufs: &TxBuffers,
    frames: &[&[u8]],
    st: &mut DataStats,
) -> usize {
    send(
        ring,
        regions,
        sizes,
        pos,
        bufs,
        &mut frames.iter().copied(),
        0,
        st,
    )
    .unwrap()
}

#[test]
fn frames_cross_a_ring_and_chain() {
    let (regions, sizes, r) = setup(4);
    let ring = Ring::new(&regions, r).unwrap();
    let rb = ring_bytes(4) as u32;
    let buffer = move |s: u16| (0u16, rb + 256 * u32::from(s));
    let own = TxBuffers::Own {
        buffer: &buffer,
        len: 256,
    };
    let big: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    let small = [7u8; 60];
    let (mut head, mut st) = (0u16, DataStats::default());
    let frames: [&[u8]; 2] = [&big, &small];
    let n = tx(&ring, &regions, &sizes, &mut head, &own, &frames, &mut st);
    assert_eq!(
        (n, head),
        (2, 5),
        "1000 bytes take 4 buffers of 256, 60 one"
    );
    let mut arena = Arena::new(8, 4096);
    let (mut last, mut rs) = (0u16, DataStats::default());
    let got = recv(&ring, &regions, &sizes, &mut last, &mut arena, &mut rs).unwrap();
    assert_eq!(got, 2);
    let f: Vec<&[u8]> = arena.frames().collect();
    assert_eq!(f[0], &big[..]);
    assert_eq!(f[1], &small[..]);
    assert_eq!(ring.tail(), 5);
}

#[test]
fn hostile_head_is_a_violation() {
    let (regions, sizes, r) = setup(4);
    let ring = Ring::new(&regions, r).unwrap();
    ring.set_head(17);
    let mut arena = Arena::new(8, 4096);
    let (mut last, mut st) = (0u16, DataStats::default());
    assert_eq!(
        recv(&ring, &regions, &sizes, &mut last, &mut arena, &mut st),
        Err(Violation::Distance(17, 16))
    );
}

#[test]
fn bad_descriptors_dropped_and_counted() {
    let (regions, sizes, r) = setup(4);
    let ring = Ring::new(&regions, r).unwrap();
    let sz = sizes[0] as u32;
    let bad = [
        Desc {
            region: 1,
            length: 64,
            ..Desc::default()
        },
        Desc {
            offset: sz - 10,
            length: 64,
            ..Desc::default()
        },
        Desc {
            offset: 0,
            length: 300,
            ..Desc::default()
        },
        Desc {
            offset: 2048,
            length: 64,
            ..Desc::default()
        },
    ];
    for (i, d) in bad.iter().enumerate() {
        ring.set_desc(i as u16, *d);
    }
    ring.set_head(4);
    let mut arena = Arena::new(8, 4096);
    let (mut last, mut st) = (0u16, DataStats::default());
    let n = recv(&ring, &regions, &sizes, &mut last, &mut arena, &mut st).unwrap();
    assert_eq!(n, 1, "only the last descriptor is good");
    assert_eq!(st.bad[DescError::Region.index()], 1);
    assert_eq!(st.bad[DescError::Bounds.index()], 1);
    assert_eq!(st.bad[DescError::Length.index()], 1);
    assert_eq!(last, 4);
}

#[test]
fn endless_chain_dropped() {
    let (regions, sizes, r) = setup(4);
    let ring = Ring::new(&regions, r).unwrap();
    for i in 0..16 {
        ring.set_desc(
            i,
            Desc {
                flags: 1,
                length: 8,
                offset: 2048,
                ..Desc::default()
            },
        );
    }
    let mut arena = Arena::new(8, 4096);
    let (mut last, mut st) = (0u16, DataStats::default());
    // Half published: wait for the rest.
    ring.set_head(8);
    assert_eq!(
        recv(&ring, &regions, &sizes, &mut last, &mut arena, &mut st),
        Ok(0)
    );
    assert_eq!(last, 0);
    // The whole ring, never ending: dropped.
    ring.set_head(16);
    assert_eq!(
        recv(&ring, &regions, &sizes, &mut last, &mut arena, &mut st),
        Ok(0)
    );
    assert_eq!(last, 16);
    assert_eq!(st.bad[DescError::ChainTooLong.index()], 1);
}

#[test]
fn full_ring_drops_and_counts() {
    let (regions, sizes, r) = setup(2);
    let ring = Ring::new(&regions, r).unwrap();
    let rb = ring_bytes(2) as u32;
    let buffer = move |s: u16| (0u16, rb + 256 * u32::from(s));
    let own = TxBuffers::Own {
        buffer: &buffer,
        len: 256,
    };
    let f = [1u8; 64];
    let frames = [&f[..]; 6];
    let (mut head, mut st) = (0u16, DataStats::default());
    let n = tx(&ring, &regions, &sizes, &mut head, &own, &frames, &mut st);
    assert_eq!((n, st.dropped), (4, 2));
}

#[test]
fn offered_buffers_checked() {
    // The server fills what the client offered: an offer outside the region is
    // refused, not written.
    let (regions, sizes, r) = setup(2);
    let ring = Ring::new(&regions, r).unwrap();
    let sz = sizes[0] as u32;
    ring.set_desc(
        0,
        Desc {
            offset: sz - 8,
            length: 256,
            ..Desc::default()
        },
    );
    ring.set_desc(
        1,
        Desc {
            offset: sz - 256,
            length: 256,
            ..Desc::default()
        },
    );
    ring.set_head(2);
    let f = [9u8; 64];
    let (mut tail, mut st) = (0u16, DataStats::default());
    let n = tx(
        &ring,
        &regions,
        &sizes,
        &mut tail,
        &TxBuffers::Offered,
        &[&f[..]],
        &mut st,
    );
    assert_eq!((n, st.bad[DescError::Bounds.index()]), (0, 1));
    ring.set_desc(
        0,
        Desc {
            offset: sz - 256,
            length: 256,
            ..Desc::default()
        },
    );
    let n = tx(
        &ring,
        &regions,
        &sizes,
        &mut tail,
        &TxBuffers::Offered,
        &[&f[..]],
        &mut st,
    );
    assert_eq!((n, tail), (1, 1));
    assert_eq!(ring.desc(0).length, 64);
}
