//! Kernel memory per fast-path flow: loads the program (TC hook, not attached anywhere),
//! installs N encapsulating flows over a handful of tunnels, and reports what the
//! kernel charges the flow map (`memlock` in the map's fdinfo: its element size times
//! the entries) and how much the kernel's slab grew (`/proc/meminfo`; meaningful on the
//! first run after boot only, since later runs reuse freed objects), per flow. Needs
//! root.
//!
//!     cargo run --release -p ovr-offload --example flow_map_memory -- 200000

use ovr_offload::Offload;
use ovr_offload::bpf::{Bpf, Hook};
use ovr_offload::layout::{Action, Key, TPL_LEN, VXLAN_HEAD};

fn slab_kib() -> u64 {
    let m = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    m.lines()
        .find_map(|l| l.strip_prefix("Slab:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The `memlock` of this process's BPF hash (1) or array (2) maps (fdinfo), largest
/// first.
fn maps_memlock(map_type: &str) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for e in std::fs::read_dir("/proc/self/fdinfo")
        .into_iter()
        .flatten()
        .flatten()
    {
        let info = std::fs::read_to_string(e.path()).unwrap_or_default();
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        if field("map_type:").as_deref() == Some(map_type)
            && let Some(m) = field("memlock:").and_then(|v| v.parse().ok())
        {
            out.push(m);
        }
    }
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let mut bpf = match Bpf::load(Hook::Tc, n as usize) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let before = slab_kib();
    for i in 0..n {
        let key = Key {
            ifindex: 1,
            vni: 0,
            src: [10, 0, (i >> 16) as u8, (i >> 8) as u8],
            dst: [10, 1, 0, i as u8],
            src_port: 1024 + (i % 50_000) as u16,
            dst_port: 80,
            dst_mac: [2, 0, 0, 0, 0, 1],
            protocol: 6,
        };
        // Eight tunnels; the UDP source port differs per flow, as ovr's encapsulation
        // makes it.
        let mut template = [0u8; TPL_LEN];
        template[..14].copy_from_slice(&[2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8, 8, 0]);
        template[14] = 0x45;
        template[23] = 17;
        template[26..30].copy_from_slice(&[192, 168, 0, 1]);
        template[30..34].copy_from_slice(&[192, 168, 0, 10 + (i % 8) as u8]);
        template[34..36].copy_from_slice(&((i % 60_000) as u16 + 1024).to_be_bytes());
        template[36..38].copy_from_slice(&4789u16.to_be_bytes());
        template[42] = 0x08;
        template[48] = 5;
        let action = Action {
            egress: 2,
            strip: 0,
            push: VXLAN_HEAD,
            max_len: 1514,
            flags: 0,
            mac: [0; 12],
            template,
            sender: [0; 4],
        };
        if let Err(e) = bpf.install(&key, &action, 1) {
            eprintln!("flow {i}: {e}");
            std::process::exit(1);
        }
    }
    // Frees go through RCU: let the slab settle.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = slab_kib();
    let grew = after.saturating_sub(before) * 1024;
    let flows = maps_memlock("1").first().copied().unwrap_or(0);
    // The outer headers' array, where there is one (the largest array).
    let arrays = maps_memlock("2").first().copied().unwrap_or(0);
    println!(
        "{{\"flows\": {n}, \"flow_map_bytes_per_flow\": {:.1}, \"largest_array_bytes\": {arrays}, \"slab_bytes_per_flow\": {:.1}}}",
        flows as f64 / f64::from(n),
        grew as f64 / f64::from(n)
    );
}
