//! The flow descriptions against scapy-made frames (fixtures/gen_cases.py), through the
//! real pipeline on the example configuration; and the fast path's owner against a fake
//! backend.

use super::*;
use crate::layout::{TPL_LEN, VXLAN_HEAD, flags};
use ovr_dataplane::Pipeline;
use ovr_tables::flow::flags as flow_flags;
use ovr_tables::state::TablesReader;
use std::cell::RefCell;
use std::rc::Rc;

mod recheck;
mod sender;
mod sync;

const CASES: &str = include_str!("../fixtures/cases.txt");

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

struct Case {
    name: String,
    iface: String,
    input: Vec<u8>,
    expected: Vec<u8>,
}

fn cases() -> Vec<Case> {
    CASES
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Case {
                name: f[0].into(),
                iface: f[1].into(),
                input: hex(f[2]),
                expected: hex(f[3]),
            }
        })
        .collect()
}

/// What the XDP program does to a frame, written again from the C (the system tests
/// check the program itself against ovr's user-space output).
fn apply(a: &Action, frame: &[u8]) -> Vec<u8> {
    let mut f = frame[usize::from(a.strip)..].to_vec();
    if a.flags & flags::SET_MAC != 0 {
        f[..12].copy_from_slice(&a.mac);
    }
    if a.flags & flags::DEC_TTL != 0 {
        f[22] -= 1;
        f[24..26].copy_from_slice(&[0, 0]);
        let c = ovr_wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
    let mut out = a.template[..usize::from(a.push)].to_vec();
    out.extend_from_slice(&f);
    if a.push > 0 {
        let n = out.len();
        out[16..18].copy_from_slice(&((n - 14) as u16).to_be_bytes());
        out[24..26].copy_from_slice(&[0, 0]);
        let c = ovr_wire::checksum::checksum(&out[14..34]);
        out[24..26].copy_from_slice(&c.to_be_bytes());
        out[38..40].copy_from_slice(&((n - 34) as u16).to_be_bytes());
    }
    out
}

/// A backend that records, with counters the test sets.
#[derive(Default, Clone)]
struct Fake {
    s: Rc<RefCell<FakeState>>,
}

#[derive(Default)]
struct FakeState {
    entries: HashMap<Key, (Action, u32, Usage)>,
    generation: u32,
    changed: bool,
    refreshed: usize,
    rx_dropped: Vec<(InterfaceId, u64)>,
    /// Entries' counters read (one by one or in a scan), and the calls that read them.
    reads: usize,
    calls: usize,
    /// The backend's clock (the rigs set it to the pipeline's time).
    clock: u64,
}

impl Fake {
    /// Sets the packets the fast path carried on entry `key`, the last one now.
    fn set_packets(&self, key: &Key, packets: u64) {
        let mut s = self.s.borrow_mut();
        let clock = s.clock;
        let u = &mut s.entries.get_mut(key).expect("entry").2;
        u.packets = packets;
        u.last_seen = clock;
    }
}

impl Offload for Fake {
    fn ifindex(&self, id: InterfaceId) -> Option<u32> {
        Some(100 + id.0)
    }
    fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.s.borrow_mut().changed)
    }
    fn refresh(&mut self, _: &ForwardingState) -> Result<(), OffloadError> {
        self.s.borrow_mut().refreshed += 1;
        Ok(())
    }
    fn set_generation(&mut self, g: u32) -> Result<(), OffloadError> {
        self.s.borrow_mut().generation = g;
        Ok(())
    }
    fn install(&mut self, k: &Key, a: &Action, g: u32) -> Result<(), OffloadError> {
        self.s
            .borrow_mut()
            .entries
            .insert(*k, (*a, g, Usage::default()));
        Ok(())
    }
    fn remove(&mut self, k: &Key) -> Result<(), OffloadError> {
        self.s.borrow_mut().entries.remove(k);
        Ok(())
    }
    fn usage(&self, k: &Key) -> Result<Option<Usage>, OffloadError> {
        self.s.borrow_mut().reads += 1;
        self.s.borrow_mut().calls += 1;
        Ok(self.s.borrow().entries.get(k).map(|e| e.2))
    }
    fn clock_ns(&self) -> u64 {
        self.s.borrow().clock
    }
    fn scan(
        &self,
        cursor: Option<u32>,
        max: usize,
        out: &mut Vec<(Key, Usage)>,
    ) -> Result<Option<u32>, OffloadError> {
        let mut s = self.s.borrow_mut();
        let mut keys: Vec<Key> = s.entries.keys().copied().collect();
        keys.sort_by_key(|k| k.encode());
        let from = (cursor.unwrap_or(0) as usize).min(keys.len());
        let to = (from + max).min(keys.len());
        out.extend(keys[from..to].iter().map(|k| (*k, s.entries[k].2)));
        s.reads += to - from;
        s.calls += 1;
        Ok((to < keys.len()).then_some(to as u32))
    }
    fn rx_dropped(&self) -> Vec<(InterfaceId, u64)> {
        self.s.borrow().rx_dropped.clone()
    }
}

struct Rig {
    pipe: Pipeline,
    reader: TablesReader,
    _writer: ovr_tables::state::TablesWriter,
    names: ovr_config::Names,
    fast: FastPath<Fake>,
    fake: Fake,
}

fn rig() -> Rig {
    let fake = Fake::default();
    rig_with(FastPath::new(fake.clone()), fake)
}

/// One of several workers' owners over the same backend and `shared` record, each with
/// its own pipeline (its own flows) and its own copy of the tables.
fn worker_rig(fake: &Fake, shared: &Shared) -> Rig {
    rig_with(
        FastPath::sharing(fake.clone(), shared.clone()),
        fake.clone(),
    )
}

fn rig_with(fast: FastPath<Fake>, fake: Fake) -> Rig {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/examples/two-networks.yaml"
    );
    let l = ovr_config::load_tables(std::path::Path::new(path)).expect("example config");
    Rig {
        pipe: Pipeline::new(l.translation.flows.dataplane()),
        reader: l.reader,
        _writer: l.writer,
        names: l.translation.names,
        fast,
        fake,
    }
}

impl Rig {
    /// Publishes a change to this rig's tables (a new epoch).
    fn change_tables(&mut self) {
        self._writer
            .commit(vec![ovr_tables::state::TableOp::UpsertVrf {
                id: ovr_tables::ids::VrfId(50),
                name: "changed".into(),
                vni: None,
            }])
            .expect("change");
    }

    fn epoch(&self) -> u32 {
        self.reader.enter().expect("tables").epoch()
    }

    /// The key of the entry this rig's flows installed (one).
    fn key(&self) -> Key {
        let mut mine = self.fast.installed.values().map(|r| r.key);
        let k = mine.next().expect("an entry");
        assert!(mine.next().is_none());
        k
    }

    /// A loop iteration without frames at `now` (user-space aging and the sweep).
    fn idle(&mut self, now: u64) {
        let guard = self.reader.enter().expect("tables");
        self.pipe.cx.now = now;
        self.fake.s.borrow_mut().clock = now;
        self.fast.begin(&guard, &mut self.pipe.cx);
        self.pipe.run(&guard);
        self.fast.maintain(&mut self.pipe.cx);
    }

    /// Runs one frame through the pipeline and the fast path's owner; returns what was
    /// sent (interface, bytes).
    fn run(&mut self, iface: &str, frame: &[u8], now: u64) -> Vec<(String, Vec<u8>)> {
        let guard = self.reader.enter().expect("tables");
        let st = &*guard;
        let id = self.names.interfaces[iface];
        self.pipe.cx.now = now;
        self.fake.s.borrow_mut().clock = now;
        self.fast.begin(st, &mut self.pipe.cx);
        self.pipe.receive(st, id, [frame]);
        self.pipe.run(st);
        let fast = &mut self.fast;
        self.pipe
            .for_each_flow_tx(|cx, meta, head| fast.observe(st, cx, meta, head));
        self.fast.maintain(&mut self.pipe.cx);
        let mut out = Vec::new();
        let names = &self.names;
        self.pipe.drain_tx(|i, b| {
            let n = names.interface_name(i).unwrap_or("?").to_string();
            out.push((n, b.to_vec()));
        });
        out
    }
}

#[test]
fn descriptions_reproduce_the_pipeline_on_scapy_frames() {
    let cases = cases();
    assert_eq!(cases.len(), 4);
    for c in cases {
        let mut r = rig();
        let sent = r.run(&c.iface, &c.input, 1);
        assert_eq!(sent.len(), 1, "{}", c.name);
        let out = &sent[0].1;
        // The pipeline did what scapy says (the outer source port is ovr's hash).
        let mut expected = c.expected.clone();
        if c.name.starts_with("encap") {
            assert!(
                u16::from_be_bytes([out[34], out[35]]) >= 49152,
                "{}",
                c.name
            );
            expected[34..36].copy_from_slice(&out[34..36]);
        }
        assert_eq!(out, &expected, "{}: pipeline output", c.name);
        // One entry, whose action gives the same bytes from the frame as it arrived.
        let st = r.fake.s.borrow();
        assert_eq!(st.entries.len(), 1, "{}", c.name);
        let (key, (action, generation, _)) = st.entries.iter().next().expect("entry");
        assert_eq!(*generation, st.generation);
        assert_eq!(
            &apply(action, &c.input),
            out,
            "{}: fast path output",
            c.name
        );
        // The key is the arriving frame's, read at the offsets scapy put them.
        let inner = if c.iface == "uplink" { 50 } else { 0 };
        let i = &c.input[inner..];
        assert_eq!(key.dst_mac, i[0..6], "{}", c.name);
        assert_eq!(
            (key.src, key.dst),
            (i[26..30].try_into().unwrap(), i[30..34].try_into().unwrap())
        );
        assert_eq!(key.src_port, u16::from_be_bytes([i[34], i[35]]));
        assert_eq!(key.dst_port, u16::from_be_bytes([i[36], i[37]]));
        assert_eq!(key.protocol, i[23]);
        let rx = r.names.interfaces[&c.iface].0;
        assert_eq!(key.ifindex, 100 + rx);
        assert_eq!(key.vni, if inner > 0 { 100 } else { 0 }, "{}", c.name);
        // Workloads' checksums are checked; what comes from a tunnel is not touched.
        assert_eq!(
            action.flags & flags::CHECK_L4 != 0,
            inner == 0,
            "{}",
            c.name
        );
        assert_eq!(action.strip, if inner > 0 { VXLAN_HEAD } else { 0 });
        assert!(usize::from(action.push) <= TPL_LEN);
    }
}

#[test]
fn a_policed_interfaces_flows_stay_in_user_space_where_its_policer_is() {
    let c = &cases()[0];
    let mut r = rig();
    r.run("vm1", &c.input, 1);
    assert_eq!(
        r.fake.s.borrow().entries.len(),
        1,
        "offloaded without a policer"
    );
    // vm1 gets a policer: its entry no longer counts, and none is installed again.
    let mut vm1 = r
        .reader
        .enter()
        .expect("tables")
        .interfaces()
        .by_name("vm1")
        .cloned()
        .expect("vm1");
    vm1.police = Some(ovr_tables::interface::Police {
        packets_per_second: 1000,
        burst: 100,
    });
    r._writer
        .commit(vec![ovr_tables::state::TableOp::UpsertInterface(vm1)])
        .expect("police vm1");
    for now in 2..5 {
        assert_eq!(
            r.run("vm1", &c.input, now).len(),
            1,
            "forwarded in user space"
        );
    }
    let st = r.fake.s.borrow();
    let live = st.entries.values().filter(|e| e.1 == st.generation).count();
    assert_eq!(live, 0, "an entry of the policed interface is in force");
    assert!(r.fast.counters.refused > 0);
}

#[test]
fn what_the_fast_path_cannot_reproduce_stays_in_user_space() {
    let c = &cases()[0];
    // An ICMP packet, an IPv4 header with options, a frame flooded to an unknown MAC.
    let mut icmp = c.input.clone();
    icmp[23] = 1;
    let mut options = c.input.clone();
    options[14] = 0x46;
    let mut unknown = c.input.clone();
    unknown[5] = 0x77;
    for f in [icmp, options, unknown] {
        let mut r = rig();
        r.run("vm1", &f, 1);
        assert!(r.fake.s.borrow().entries.is_empty());
    }
}

#[test]
fn owner_reinstalls_after_table_changes_merges_counters_and_removes_gone_flows() {
    let c = &cases()[0];
    let mut r = rig();
    r.run("vm1", &c.input, 1);
    let key = *r.fake.s.borrow().entries.keys().next().expect("entry");
    // Later packets of the flow in the same generation: not installed again.
    assert_eq!(r.run("vm1", &c.input, 2).len(), 1);
    assert_eq!(r.fast.counters.installed, 1);
    // The fast path carried 10 packets: merged into the flow and the interfaces.
    let len = c.input.len() as u64;
    r.fake
        .s
        .borrow_mut()
        .entries
        .get_mut(&key)
        .expect("entry")
        .2 = Usage {
        packets: 10,
        bytes: 10 * len,
        last_seen: 5,
    };
    let uplink = r.names.interfaces["uplink"].0;
    let vm1 = r.names.interfaces["vm1"].0;
    let before = r.pipe.cx.interfaces[uplink as usize];
    let id = r
        .pipe
        .cx
        .flows
        .iter()
        .find(|(_, e)| e.packets > 0)
        .expect("flow")
        .0;
    let f0 = r.pipe.cx.flows.get(id).expect("flow");
    r.pipe.cx.now = 1_000_000_000;
    r.fast.sync_all(&mut r.pipe.cx);
    let e = r.pipe.cx.flows.get(id).expect("flow");
    assert_eq!((e.packets - f0.packets, e.bytes - f0.bytes), (10, 10 * len));
    assert_eq!(e.last_seen, 1_000_000_000);
    let after = r.pipe.cx.interfaces[uplink as usize];
    assert_eq!(after.tx_packets - before.tx_packets, 10);
    assert_eq!(after.tx_bytes - before.tx_bytes, 10 * (len + 50));
    assert_eq!(r.pipe.cx.interfaces[vm1 as usize].rx_packets, 12);
    // Interfaces changed: a new generation, and the flow is offered again.
    r.fake.s.borrow_mut().changed = true;
    r.run("vm1", &c.input, 3);
    assert_eq!(r.fast.counters.installed, 2);
    let generation = r.fake.s.borrow().generation;
    assert_eq!(r.fake.s.borrow().entries[&key].1, generation);
    // The flow deleted in user space (the API): its entry goes at the next sweep, and
    // what it carried since the last merge still counts for the interfaces.
    r.fake.set_packets(&key, 7);
    let before = (
        r.fast.counters.packets,
        r.pipe.cx.interfaces[uplink as usize].tx_packets,
    );
    r.pipe.cx.flows.remove(id);
    r.fast.sync_all(&mut r.pipe.cx);
    assert!(r.fake.s.borrow().entries.is_empty());
    assert_eq!(r.fast.counters.removed, 1);
    let after = (
        r.fast.counters.packets,
        r.pipe.cx.interfaces[uplink as usize].tx_packets,
    );
    assert_eq!((after.0 - before.0, after.1 - before.1), (7, 7));
}

#[test]
fn receive_drops_while_redirecting_leave_the_egress_to_user_space() {
    let c = &cases()[0];
    let mut r = rig();
    let vm1 = r.names.interfaces["vm1"];
    r.fake.s.borrow_mut().rx_dropped = vec![(vm1, 0)];
    r.run("vm1", &c.input, 1);
    let key = *r.fake.s.borrow().entries.keys().next().expect("entry");
    // The fast path redirected 5 frames and the receiving interface dropped 5.
    r.fake.set_packets(&key, 5);
    r.fake.s.borrow_mut().rx_dropped = vec![(vm1, 5)];
    r.run("vm1", &c.input, 1_000_000_000);
    assert_eq!(r.fast.counters.redirect_failed, 5);
    assert!(r.fake.s.borrow().entries.is_empty());
    // The flow's packets now stay in user space.
    r.run("vm1", &c.input, 1_200_000_000);
    r.fake.s.borrow_mut().changed = true;
    r.run("vm1", &c.input, 1_300_000_000);
    assert!(r.fake.s.borrow().entries.is_empty());
}

#[test]
fn a_redirect_loss_is_counted_when_the_sweep_merged_the_packets_first() {
    let c = &cases()[0];
    let mut r = rig();
    let vm1 = r.names.interfaces["vm1"];
    r.fake.s.borrow_mut().rx_dropped = vec![(vm1, 0)];
    r.run("vm1", &c.input, 1);
    let key = r.key();
    r.fake.set_packets(&key, 5);
    // Merged between two checks (the API's read or the sweep), then vm1's drops seen
    // at the next check, 100 ms after the first.
    r.pipe.cx.now = 50_000_000;
    r.fast.sync_all(&mut r.pipe.cx);
    assert_eq!(r.fast.counters.packets, 5);
    r.fake.s.borrow_mut().rx_dropped = vec![(vm1, 5)];
    r.idle(110_000_000);
    assert_eq!(r.fast.counters.redirect_failed, 5);
    assert!(r.fake.s.borrow().entries.is_empty());
}

/// The same workload frame on another flow (another source port; the pipeline does not
/// check transport checksums, the fast path's description does not depend on them).
fn other_flow(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    f[35] ^= 0x55;
    f
}

/// The first case's frame (UDP) as flow `k`: from source port `k` (checksum none),
/// with IPv4 options (four NOPs: the fast path leaves such packets to user space) or not.
fn flow_k(frame: &[u8], k: u8, options: bool) -> Vec<u8> {
    let mut f = frame.to_vec();
    f[35] = k;
    f[40..42].fill(0);
    if options {
        f.splice(34..34, [1u8; 4]);
        f[14] = 0x46;
        let total = u16::from_be_bytes([f[16], f[17]]) + 4;
        f[16..18].copy_from_slice(&total.to_be_bytes());
    }
    let end = 14 + usize::from(f[14] & 0x0f) * 4;
    f[24..26].fill(0);
    let c = ovr_wire::checksum::checksum(&f[14..end]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn merging_everything_reads_the_table_in_batches() {
    let c = &cases()[0];
    let mut r = rig();
    for k in 0..40 {
        r.run("vm1", &flow_k(&c.input, k, false), 1);
    }
    let keys: Vec<Key> = r.fake.s.borrow().entries.keys().copied().collect();
    assert_eq!(keys.len(), 40);
    for k in &keys {
        r.fake.set_packets(k, 3);
    }
    let (calls, packets) = (r.fake.s.borrow().calls, r.fast.counters.packets);
    r.fast.sync_all(&mut r.pipe.cx);
    // One read for the 40 entries (it was one per entry), every entry's packets merged.
    assert_eq!(r.fake.s.borrow().calls - calls, 1);
    assert_eq!(r.fast.counters.packets - packets, 3 * 40);
    // An entry the read does not return (gone from the table) is still looked at.
    r.fake.s.borrow_mut().entries.remove(&keys[0]);
    r.fast.sync_all(&mut r.pipe.cx);
    assert_eq!(r.fake.s.borrow().calls - calls, 3);
}

#[test]
fn a_new_flow_on_the_id_of_a_gone_one_is_offered() {
    let c = &cases()[0];
    // Flows installed, and flows refused (IPv4 options, which the fast path leaves), in
    // the same generation: then all deleted in user space (`ovrctl flows --delete`).
    for refused in [false, true] {
        let mut r = rig();
        for k in 0..8 {
            r.run("vm1", &flow_k(&c.input, k, refused), 1);
        }
        let forward = |r: &Rig| -> Vec<FlowId> {
            let f = r.pipe.cx.flows.iter().filter(|(_, e)| e.packets > 0);
            f.map(|(id, _)| id).collect()
        };
        let old = forward(&r);
        assert_eq!((old.len(), r.pipe.cx.flows.len()), (8, 16));
        assert_eq!(r.fast.counters.installed, if refused { 0 } else { 8 });
        // Reverses first: the table then hands the forward flows' ids out first again.
        let all: Vec<FlowId> = r.pipe.cx.flows.iter().map(|(id, _)| id).collect();
        for id in all.iter().rev() {
            r.pipe.cx.flows.remove(*id);
        }
        r.idle(2);
        assert!(r.fake.s.borrow().entries.is_empty());
        // New flows on the ids of the gone ones, which had been offered: offloaded.
        for k in 100..108 {
            r.run("vm1", &flow_k(&c.input, k, false), 3);
        }
        let new = forward(&r);
        assert!(new.iter().all(|id| old.contains(id)), "{old:?} {new:?}");
        let n = r.fake.s.borrow().entries.len();
        assert_eq!(n, 8, "refused before: {refused}");
    }
}

#[test]
fn workers_share_one_generation_whoever_sees_the_change() {
    let c = &cases()[0];
    let (fake, shared) = (Fake::default(), Shared::default());
    let (mut a, mut b) = (worker_rig(&fake, &shared), worker_rig(&fake, &shared));
    let (fa, fb) = (c.input.clone(), other_flow(&c.input));
    // b's tables are one change ahead of a's (a has not entered the new ones yet).
    b.change_tables();
    assert!(later(b.epoch(), a.epoch()));
    a.run("vm1", &fa, 1);
    let g1 = fake.s.borrow().generation;
    b.run("vm1", &fb, 1);
    let g2 = fake.s.borrow().generation;
    assert_ne!(g1, g2);
    let (ka, kb) = (a.key(), b.key());
    assert_ne!(ka, kb);
    assert_eq!(fake.s.borrow().entries[&kb].1, g2);
    // a, behind the generation, installs nothing and starts nothing.
    a.run("vm1", &fa, 2);
    assert_eq!(fake.s.borrow().entries[&ka].1, g1);
    assert_eq!(a.fast.counters.installed, 1);
    // a catches up: it takes up b's generation and offers its flow again.
    a.change_tables();
    a.run("vm1", &fa, 3);
    assert_eq!(fake.s.borrow().generation, g2);
    assert_eq!(fake.s.borrow().entries[&ka].1, g2);
    assert_eq!(fake.s.borrow().refreshed, 2);
    // An interface change, taken by one worker: one new generation for both.
    fake.s.borrow_mut().changed = true;
    b.run("vm1", &fb, 4);
    a.run("vm1", &fa, 4);
    let g3 = fake.s.borrow().generation;
    assert_ne!(g3, g2);
    assert_eq!(fake.s.borrow().entries[&ka].1, g3);
    assert_eq!(fake.s.borrow().entries[&kb].1, g3);
    // Each generation was started once, by one of them.
    let started = a.fast.counters.invalidations + b.fast.counters.invalidations;
    assert_eq!((started, fake.s.borrow().refreshed), (3, 3));
    assert_eq!(a.fast.counters.installed + b.fast.counters.installed, 5);
}

#[test]
fn workers_count_a_redirect_loss_once_and_all_avoid_the_egress() {
    let c = &cases()[0];
    let (fake, shared) = (Fake::default(), Shared::default());
    let (mut a, mut b, mut d) = (
        worker_rig(&fake, &shared),
        worker_rig(&fake, &shared),
        worker_rig(&fake, &shared),
    );
    let (fa, fb) = (c.input.clone(), other_flow(&c.input));
    let mut fd = other_flow(&c.input);
    fd[34] ^= 0x55;
    let vm1 = a.names.interfaces["vm1"];
    fake.s.borrow_mut().rx_dropped = vec![(vm1, 0)];
    a.run("vm1", &fa, 1);
    b.run("vm1", &fb, 1);
    d.run("vm1", &fd, 1);
    // a's and b's flows were redirected from vm1 (5 frames each), d's carried nothing;
    // vm1 dropped 5.
    for k in [a.key(), b.key()] {
        fake.set_packets(&k, 5);
    }
    fake.s.borrow_mut().rx_dropped = vec![(vm1, 5)];
    a.run("vm1", &fa, 1_000_000_000);
    b.run("vm1", &fb, 1_000_000_000);
    d.run("vm1", &fd, 1_000_000_000);
    let failed: Vec<u64> = [&a, &b, &d]
        .iter()
        .map(|r| r.fast.counters.redirect_failed)
        .collect();
    assert_eq!(failed, [5, 0, 0]);
    // Every worker's entries towards that egress went, d's too (it learnt of the egress
    // from the others), and none is offered again while it is avoided.
    assert!(fake.s.borrow().entries.is_empty());
    d.run("vm1", &fd, 1_100_000_000);
    assert!(fake.s.borrow().entries.is_empty());
    assert!(d.fast.counters.refused > 0);
}

#[test]
fn the_sweep_reads_entries_at_a_pace_and_keeps_fast_path_flows_alive() {
    let c = &cases()[0];
    let mut r = rig();
    const FLOWS: u64 = 200;
    for i in 0..FLOWS {
        let mut f = c.input.clone();
        f[35] = i as u8;
        r.run("vm1", &f, 1);
    }
    assert_eq!(r.fast.len(), FLOWS as usize);
    let idle = r.pipe.cx.settings.idle_timeout_ns;
    let pass = sweep_pass_ns(idle);
    assert_eq!(pass, 15_000_000_000, "default 60 s idle timeout");
    let reads = |r: &Rig| r.fake.s.borrow().reads;
    // A tenth of a pass later: 20 entries owed, saved up for a batch of 64 or more.
    let before = reads(&r);
    r.idle(1 + pass / 10);
    assert_eq!(reads(&r), before);
    // Half a pass: half the entries, in one batch.
    r.idle(1 + pass / 2);
    assert_eq!(reads(&r) - before, FLOWS as usize / 2);
    // Several passes without a wakeup (less than the idle timeout) owe one pass, not
    // several: the rest of this one (a step ends at the table's end), then the next.
    let t0 = 1 + pass / 2 + 20_000_000_000;
    let before = reads(&r);
    r.idle(t0);
    assert_eq!(reads(&r) - before, FLOWS as usize / 2);
    for _ in 0..3 {
        r.idle(t0);
    }
    assert_eq!(reads(&r) - before, FLOWS as usize);
    // Traffic that only the fast path carries, for three idle timeouts, with wakeups
    // every 10 ms: no flow ages in user space, every packet is merged.
    let mut carried = 0;
    for step in 1..=3 * idle / 10_000_000 {
        let t = t0 + step * 10_000_000;
        if step % 100 == 0 {
            carried += 1;
            for e in r.fake.s.borrow_mut().entries.values_mut() {
                e.2.packets = carried;
                e.2.last_seen = t;
            }
        }
        r.idle(t);
    }
    assert_eq!(carried, 180);
    r.fast.sync_all(&mut r.pipe.cx);
    assert_eq!(r.fast.len(), FLOWS as usize);
    assert_eq!(r.fake.s.borrow().entries.len(), FLOWS as usize);
    assert_eq!(r.pipe.cx.flow_counters.aged, 0);
    assert_eq!(r.fast.counters.packets, FLOWS * carried);
    assert_eq!(r.fast.counters.removed, 0);
    // The traffic stops: the flows age in user space and their entries go with them
    // (the flow table tells the fast path; the sweep skips entries without new packets).
    let t1 = t0 + 3 * idle;
    for step in 1..=3 * idle / 10_000_000 {
        r.idle(t1 + step * 10_000_000);
    }
    assert_eq!(r.pipe.cx.flow_counters.aged, 2 * FLOWS);
    assert_eq!(r.fast.counters.removed, FLOWS);
    assert!(r.fast.is_empty());
    assert!(r.fake.s.borrow().entries.is_empty());
}

/// A fast path adopted from an earlier ovrd (its maps pinned). With the tables it left,
/// its generation stays in force (nothing flushed, nothing refreshed) and its entries keep
/// forwarding: merged into the totals, removed once idle for the idle timeout, taken over
/// when user space offers the flow again. With tables new to it, the generation goes on
/// from the adopted one (never back to 1).
#[test]
fn adopted_entries_keep_their_generation_age_and_are_taken_over() {
    let c = &cases()[0];
    let mut earlier = rig();
    earlier.run("vm1", &c.input, 1);
    let key = earlier.key();
    let left = |generation: u32| {
        let fake = Fake::default();
        {
            let mut s = fake.s.borrow_mut();
            let (action, _, usage) = earlier.fake.s.borrow().entries[&key];
            s.entries.insert(key, (action, generation, usage));
            s.generation = generation;
        }
        fake
    };
    let second = 1_000_000_000;

    // Resumed: generation 7 stays; the entry carries packets, then goes idle and ages.
    let fake = left(7);
    let shared = Shared::adopting(7, vec![(key, Usage::default())], true);
    let mut r = rig_with(
        FastPath::sharing(fake.clone(), shared.clone()),
        fake.clone(),
    );
    r.idle(second);
    assert_eq!(fake.s.borrow().generation, 7);
    assert_eq!(fake.s.borrow().refreshed, 0);
    assert_eq!(shared.adopted(), 1);
    assert_eq!(r.fast.wake_within_ms(), Some(SWEEP_WAKE_MS));
    fake.set_packets(&key, 5);
    r.idle(20 * second);
    assert_eq!(r.fast.counters.packets, 5);
    assert_eq!(shared.adopted(), 1);
    assert!(fake.s.borrow().entries.contains_key(&key));
    r.idle(90 * second);
    assert_eq!(shared.adopted(), 0);
    assert!(fake.s.borrow().entries.is_empty());
    assert_eq!(r.fast.counters.removed, 1);

    // Resumed, and the flow comes through user space: this ovrd's entry from then on.
    let fake = left(7);
    let shared = Shared::adopting(7, vec![(key, Usage::default())], true);
    let mut r = rig_with(
        FastPath::sharing(fake.clone(), shared.clone()),
        fake.clone(),
    );
    r.run("vm1", &c.input, second);
    assert_eq!(shared.adopted(), 0);
    assert_eq!(r.key(), key);
    assert_eq!(fake.s.borrow().entries[&key].1, 7);

    // New tables: generation 8; the adopted entry is stale and ages all the same.
    let fake = left(7);
    let shared = Shared::adopting(7, vec![(key, Usage::default())], false);
    let mut r = rig_with(
        FastPath::sharing(fake.clone(), shared.clone()),
        fake.clone(),
    );
    r.idle(second);
    assert_eq!(fake.s.borrow().generation, 8);
    r.idle(90 * second);
    assert_eq!(shared.adopted(), 0);
    assert!(fake.s.borrow().entries.is_empty());
}
