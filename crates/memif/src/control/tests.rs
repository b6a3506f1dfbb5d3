use super::*;

fn pending_with_region(size: u64, seal: bool) -> (Pending, OwnedFd) {
    let fd = if seal {
        sys::memfd("t", size).unwrap()
    } else {
        // An unsealed file: a plain temporary file.
        let f = tempfile(size);
        OwnedFd::from(f)
    };
    (Pending::default(), fd)
}

fn tempfile(size: u64) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("memif-test-{}-{size}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.set_len(size).unwrap();
    let _ = std::fs::remove_file(&path);
    f
}

#[test]
fn region_checks() {
    let (p, fd) = pending_with_region(8192, true);
    assert_eq!(
        check_region(&p, 1, 4096, &fd).unwrap_err().key,
        "bad_region_index"
    );
    assert_eq!(
        check_region(&p, 0, 0, &fd).unwrap_err().key,
        "bad_region_size"
    );
    assert_eq!(
        check_region(&p, 0, 1 << 40, &fd).unwrap_err().key,
        "bad_region_size"
    );
    assert_eq!(
        check_region(&p, 0, 8193, &fd).unwrap_err().key,
        "region_too_small"
    );
    assert!(check_region(&p, 0, 8192, &fd).is_ok());
    let (p, fd) = pending_with_region(8192, false);
    assert_eq!(
        check_region(&p, 0, 8192, &fd).unwrap_err().key,
        "region_not_sealed"
    );
}

#[test]
fn ring_checks() {
    let (mut p, fd) = pending_with_region(65536, true);
    p.regions.push(check_region(&p, 0, 65536, &fd).unwrap());
    let ok = AddRing {
        flags: 1,
        index: 0,
        region: 0,
        offset: 0,
        log2_size: 10,
        private_hdr_size: 0,
    };
    assert!(check_ring(&p, &ok, 10, 1).is_ok());
    let bad = |f: &dyn Fn(&mut AddRing)| {
        let mut r = ok;
        f(&mut r);
        check_ring(&p, &r, 10, 1).unwrap_err().key
    };
    assert_eq!(bad(&|r| r.index = 1), "bad_ring_index");
    assert_eq!(bad(&|r| r.region = 1), "bad_ring");
    assert_eq!(bad(&|r| r.offset = 65536 - 128), "bad_ring");
    assert_eq!(bad(&|r| r.log2_size = 11), "bad_ring");
    assert_eq!(bad(&|r| r.private_hdr_size = 8), "private_header");
}

#[test]
fn cookie_checked_on_connect() {
    let (mut p, fd) = pending_with_region(65536, true);
    p.regions.push(check_region(&p, 0, 65536, &fd).unwrap());
    let rr = RingRef {
        region: 0,
        offset: 0,
        log2: 4,
    };
    let rr2 = RingRef {
        region: 0,
        offset: 4096,
        log2: 4,
    };
    p.c2s.push(Some((rr, sys::eventfd().unwrap())));
    p.s2c.push(Some((rr2, sys::eventfd().unwrap())));
    assert_eq!(server_connect(&mut p).err().unwrap().key, "bad_cookie");
}

#[test]
fn missing_direction_refused() {
    let mut p = Pending::default();
    assert_eq!(server_connect(&mut p).err().unwrap().key, "missing_ring");
}
