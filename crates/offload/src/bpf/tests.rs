//! The kernel backend against the kernel (needs root, as every test here is run).

use super::*;

/// An action that forwards unchanged to ifindex 1.
fn forward_to_1() -> Action {
    Action {
        egress: 1,
        strip: 0,
        push: 0,
        max_len: 1514,
        flags: 0,
        mac: [0; 12],
        template: [0; crate::layout::TPL_LEN],
        sender: [0; 4],
    }
}

/// The kernel's verifier accepts the program at both hooks and every map has the
/// type and sizes the Rust side expects (needs root, as every test here is run).
#[test]
fn program_loads_and_maps_match() {
    for hook in [Hook::Xdp, Hook::Tc] {
        let x = Bpf::load(hook, 1024).unwrap_or_else(|e| panic!("{hook:?}: {e}"));
        let mut x2 = x.clone();
        x2.set_generation(7).unwrap_or_else(|e| panic!("{e}"));
        let key = Key {
            ifindex: 1,
            ..Key::default()
        };
        let action = forward_to_1();
        x2.install(&key, &action, 7)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(x2.usage(&key).ok().flatten(), Some(Usage::default()));
        x2.remove(&key).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(x2.usage(&key).ok().flatten(), None);
        assert_eq!(x.counters().len(), COUNTER_NAMES.len());
    }
}

/// A flow's key on interface 1, told apart by its VNI.
fn flow_key(vni: u32) -> Key {
    Key {
        ifindex: 1,
        vni,
        ..Key::default()
    }
}

/// The flow map holds as many flows as it was loaded for, and refuses the next one
/// (the flow then stays in user space) without losing those it has.
#[test]
fn flow_map_is_sized_by_the_load() {
    let mut x = Bpf::load(Hook::Tc, 4).unwrap_or_else(|e| panic!("{e}"));
    let key = flow_key;
    for i in 0..4 {
        x.install(&key(i), &forward_to_1(), 1)
            .unwrap_or_else(|e| panic!("{i}: {e}"));
    }
    let full = x.install(&key(4), &forward_to_1(), 1);
    assert!(full.is_err(), "a fifth flow in a map of four");
    assert_eq!(x.entries().map(|e| e.len()).ok(), Some(4));
}

/// Flows into one tunnel name one copy of its outer headers (their UDP source ports
/// their own); a tunnel no flow uses any more makes room for another, a second
/// after it was found unused.
#[test]
fn tunnels_share_outer_headers_and_unused_ones_make_room() {
    // Room for two tunnels' headers.
    let mut x = Bpf::load(Hook::Tc, 8).unwrap_or_else(|e| panic!("{e}"));
    let key = flow_key;
    let into = |tunnel: u8, sport: u16| {
        let mut a = forward_to_1();
        a.push = crate::layout::VXLAN_HEAD;
        a.template[30..34].copy_from_slice(&[192, 168, 0, tunnel]);
        a.template[34..36].copy_from_slice(&sport.to_be_bytes());
        a
    };
    let named = |x: &Bpf, i: u32| {
        let g = x.lock();
        let v = g
            .flows
            .get(&key(i).encode(), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        let t = template_of(&v).expect("pushes");
        let h = g.tpls.get(&t, 0).unwrap_or_else(|e| panic!("{e}"));
        (t, h[33], [v[56], v[57]])
    };
    let ok = |r: Result<(), OffloadError>| r.unwrap_or_else(|e| panic!("{e}"));
    ok(x.install(&key(0), &into(1, 1000), 1));
    ok(x.install(&key(1), &into(1, 2000), 1));
    let (a, b) = (named(&x, 0), named(&x, 1));
    assert_eq!((a.0, a.1), (b.0, b.1), "one copy for tunnel 1");
    assert_eq!((a.2, b.2), (1000u16.to_be_bytes(), 2000u16.to_be_bytes()));
    ok(x.remove(&key(1)));
    ok(x.install(&key(1), &into(2, 3000), 1));
    let c = named(&x, 1);
    assert_ne!(c.0, a.0);
    assert_eq!(c.1, 2);
    // Both indexes taken; tunnel 1 is still used by flow 0, tunnel 2 by none.
    ok(x.remove(&key(1)));
    assert!(
        x.install(&key(1), &into(3, 4000), 1).is_err(),
        "quarantined"
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    ok(x.install(&key(1), &into(3, 4000), 1));
    let d = named(&x, 1);
    assert_eq!((d.0, d.1), (c.0, 3), "tunnel 2's index, now tunnel 3's");
    assert_eq!(named(&x, 0), a, "tunnel 1's flow untouched");
}

/// A batch read returns every entry once, whole keys, across several calls and to
/// the table's end; an empty table ends at once.
#[test]
fn scan_reads_the_table_in_batches() {
    let mut x = Bpf::load(Hook::Xdp, 1024).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    assert_eq!(x.scan(None, 64, &mut out).ok(), Some(None));
    assert!(out.is_empty());
    let keys: Vec<Key> = (0..300u16)
        .map(|i| Key {
            ifindex: 7,
            vni: 5000 + u32::from(i),
            src: [10, 0, 0, 1],
            dst: [10, 0, (i >> 8) as u8, i as u8],
            src_port: 1000 + i,
            dst_port: 80,
            dst_mac: [2, 0, 0, 0, 0, i as u8],
            protocol: 17,
        })
        .collect();
    let action = forward_to_1();
    for k in &keys {
        x.install(k, &action, 1).unwrap_or_else(|e| panic!("{e}"));
    }
    let (mut cursor, mut calls) = (None, 0);
    loop {
        calls += 1;
        cursor = x
            .scan(cursor, 64, &mut out)
            .unwrap_or_else(|e| panic!("{e}"));
        if cursor.is_none() {
            break;
        }
    }
    assert!(calls >= 300 / 64, "{calls} calls");
    let mut got: Vec<Key> = out
        .iter()
        .map(|(k, u)| {
            assert_eq!(*u, Usage::default());
            *k
        })
        .collect();
    got.sort_by_key(|k| k.encode());
    let mut want = keys.clone();
    want.sort_by_key(|k| k.encode());
    assert_eq!(got, want);
}

/// Pinned maps outlive the loader and are adopted by the next one (entries and
/// generation), at either hook; `remove_pins` leaves nothing. The bpffs is mounted by
/// the first load on the pin directory's parent (a directory of this test's own).
#[test]
fn pinned_maps_are_adopted_by_the_next_load() {
    let root = std::env::temp_dir().join(format!("ovr-pin-test-{}", std::process::id()));
    let dir = root.join("pins");
    let key = Key {
        ifindex: 1,
        ..Key::default()
    };
    let r = (|| -> Result<(), OffloadError> {
        let mut first = Bpf::load_pinned(Hook::Tc, &dir, 1024)?;
        assert_eq!(first.adopted(), None);
        assert!(
            Bpf::load_pinned(Hook::Tc, &dir, 1024).is_err(),
            "one ovrd per directory"
        );
        first.set_generation(7)?;
        first.install(&key, &forward_to_1(), 7)?;
        // A flow into a tunnel: its outer headers are adopted with it.
        let mut encap = forward_to_1();
        encap.push = crate::layout::VXLAN_HEAD;
        encap.template[30..34].copy_from_slice(&[192, 168, 0, 9]);
        let (k1, k2) = (Key { vni: 1, ..key }, Key { vni: 2, ..key });
        first.install(&k1, &encap, 7)?;
        let named = |x: &Bpf, k: &Key| {
            let v = x.lock().flows.get(&k.encode(), 0).ok();
            v.and_then(|v| template_of(&v))
        };
        let before = named(&first, &k1);
        drop(first);
        let mut second = Bpf::load_pinned(Hook::Xdp, &dir, 1024)?;
        assert_eq!(second.adopted(), Some(7));
        let entries = second.entries()?;
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().any(|e| e.0 == key));
        second.install(&k2, &encap, 7)?;
        assert!(before.is_some());
        assert_eq!(named(&second, &k2), before, "the adopted copy is shared");
        drop(second);
        // Sized for another number of flows: made again, empty.
        let third = Bpf::load_pinned(Hook::Xdp, &dir, 2048)?;
        assert_eq!(third.adopted(), None);
        assert!(third.entries()?.is_empty());
        third.remove_pins();
        assert!(!dir.exists());
        Ok(())
    })();
    let _ = rustix::mount::unmount(&root, rustix::mount::UnmountFlags::DETACH);
    let _ = std::fs::remove_dir(&root);
    r.unwrap_or_else(|e| panic!("{e}"));
}
