//! A flow out of a tunnel is its sender's: the entry takes only that host's packets, and
//! when another host sends the session on, user space follows the move (the flow node)
//! and the flow is offloaded again with the new sender, its reverse's entry removed.

use super::*;

/// `frame` (VXLAN from the uplink) as another host sends it: outer source changed, the
/// outer IPv4 checksum made again and the outer UDP checksum left out (0).
fn from_another_host(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    f[29] = f[29].wrapping_add(1);
    f[24..26].copy_from_slice(&[0, 0]);
    let c = ovr_wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f[40..42].copy_from_slice(&[0, 0]);
    f
}

/// The reply to the inner frame of `frame` (VXLAN), as the local workload sends it:
/// MACs, addresses and ports swapped (the checksums hold).
fn reply(frame: &[u8]) -> Vec<u8> {
    let mut f = frame[usize::from(VXLAN_HEAD)..].to_vec();
    let swap = |f: &mut [u8], a: usize, b: usize, n: usize| {
        for k in 0..n {
            f.swap(a + k, b + k);
        }
    };
    swap(&mut f, 0, 6, 6);
    swap(&mut f, 26, 30, 4);
    swap(&mut f, 34, 36, 2);
    f
}

#[test]
fn another_host_sending_a_session_on_has_it_offloaded_again_and_its_reverse_redecided() {
    let c = cases()
        .into_iter()
        .find(|c| c.name == "decap-bridged")
        .expect("case");
    let mut r = rig();
    assert_eq!(r.run("uplink", &c.input, 1).len(), 1);
    let forward = r.key();
    let sender_of = |r: &Rig, k: &Key| r.fake.s.borrow().entries.get(k).map(|e| e.0.sender);
    assert_eq!(
        sender_of(&r, &forward),
        Some(c.input[26..30].try_into().unwrap())
    );
    // The reply: offloaded too, with no sender (it comes from a workload).
    let back = reply(&c.input);
    assert_eq!(r.run("vm1", &back, 2).len(), 1);
    assert_eq!(r.fake.s.borrow().entries.len(), 2);
    let reverse = *r
        .fake
        .s
        .borrow()
        .entries
        .keys()
        .find(|k| **k != forward)
        .unwrap();
    assert_eq!(sender_of(&r, &reverse), Some([0; 4]));

    // Another host sends the session on (the fast path handed it up): the forward
    // entry now takes that host's packets, the reverse's entry is gone.
    let moved = from_another_host(&c.input);
    assert_eq!(r.run("uplink", &moved, 3).len(), 1);
    assert_eq!(
        sender_of(&r, &forward),
        Some(moved[26..30].try_into().unwrap())
    );
    assert_eq!(sender_of(&r, &reverse), None);
    assert_eq!(r.fast.counters.removed, 1);
    // The reply comes to user space, is decided again and offloaded again.
    assert_eq!(r.run("vm1", &back, 4).len(), 1);
    assert_eq!(sender_of(&r, &reverse), Some([0; 4]));
    // Packets from the same host again change nothing.
    let installed = r.fast.counters.installed;
    r.run("uplink", &moved, 5);
    assert_eq!(r.fast.counters.installed, installed);
}
