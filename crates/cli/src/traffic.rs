//! `ovrctl bench gen` and `ovrctl bench sink`: a 64-byte UDP generator and a counter on
//! raw sockets, a batch per system call, for measuring forwarders between namespaces.
//! Flows differ by UDP source port (and source address beyond 64K flows).

use ovr_io::AfPacket;
use ovr_wire::ethernet::{EthernetRepr, MacAddr, ethertype};
use ovr_wire::ip_proto;
use ovr_wire::ipv4::Ipv4Repr;
use ovr_wire::udp::UdpRepr;
use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Gen {
    #[arg(long)]
    pub iface: String,
    #[arg(long)]
    pub src_mac: MacAddr,
    #[arg(long)]
    pub dst_mac: MacAddr,
    #[arg(long)]
    pub src: Ipv4Addr,
    #[arg(long)]
    pub dst: Ipv4Addr,
    #[arg(long, default_value_t = 9000)]
    pub port: u16,
    /// Distinct flows (UDP source ports, then source addresses).
    #[arg(long, default_value_t = 1)]
    pub flows: usize,
    /// Frame size in bytes, without the FCS.
    #[arg(long, default_value_t = 60)]
    pub size: usize,
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
}

const BATCH: usize = 256;

/// An Ethernet/IPv4/UDP frame of `size` bytes (at least 60, without FCS), with a zero
/// UDP checksum ("none", valid over IPv4).
pub fn udp_frame(
    (src_mac, dst_mac): (MacAddr, MacAddr),
    (src, dst): (Ipv4Addr, Ipv4Addr),
    (sport, dport): (u16, u16),
    size: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; size.max(60)];
    let payload = f.len() - 14 - 20 - 8;
    EthernetRepr {
        dst: dst_mac,
        src: src_mac,
        tags: [None, None],
        ethertype: ethertype::IPV4,
    }
    .emit(&mut f);
    Ipv4Repr {
        src,
        dst,
        protocol: ip_proto::UDP,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: true,
        payload_len: (8 + payload) as u16,
    }
    .emit(&mut f[14..]);
    UdpRepr {
        src_port: sport,
        dst_port: dport,
        payload_len: payload as u16,
    }
    .emit(&mut f[34..]);
    f
}

/// Frame of flow `i`: source port 1024 + i % 60000, source address + i / 60000.
fn frame(g: &Gen, i: usize) -> Vec<u8> {
    let src = Ipv4Addr::from(u32::from(g.src) + (i / 60_000) as u32);
    let sport = 1024 + (i % 60_000) as u16;
    udp_frame(
        (g.src_mac, g.dst_mac),
        (src, g.dst),
        (sport, g.port),
        g.size,
    )
}

pub fn generate(g: &Gen) -> Result<(), String> {
    let flows = g.flows.max(1);
    let frames: Vec<Vec<u8>> = (0..flows).map(|i| frame(g, i)).collect();
    let mut d = AfPacket::open(&g.iface, 1).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let limit = Duration::from_secs_f64(g.seconds);
    let mut at = 0;
    let mut batch: Vec<&[u8]> = Vec::with_capacity(BATCH);
    while t.elapsed() < limit {
        batch.clear();
        for _ in 0..BATCH {
            batch.push(&frames[at]);
            at = (at + 1) % flows;
        }
        d.send(&batch).map_err(|e| e.to_string())?;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{{\"sent\":{},\"refused\":{},\"seconds\":{secs:.3},\"mpps\":{:.4}}}",
        d.stats.tx_frames,
        d.stats.tx_dropped,
        d.stats.tx_frames as f64 / secs / 1e6
    );
    Ok(())
}

/// Counts UDP datagrams delivered to `port` for `seconds` (a real socket: what the
/// workload's stack received, not what reached its interface).
pub fn sink(port: u16, seconds: f64) -> Result<(), String> {
    let s = UdpSocket::bind(("0.0.0.0", port)).map_err(|e| format!("bind :{port}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 2048];
    let (mut n, mut first, mut last) = (0u64, None, Instant::now());
    let t = Instant::now();
    while t.elapsed().as_secs_f64() < seconds {
        if s.recv(&mut buf).is_ok() {
            n += 1;
            last = Instant::now();
            first.get_or_insert(last);
        }
    }
    let active = first.map_or(0.0, |f| (last - f).as_secs_f64());
    println!(
        "{{\"received\":{n},\"active_seconds\":{active:.3},\"mpps\":{:.4}}}",
        if active > 0.0 {
            n as f64 / active / 1e6
        } else {
            0.0
        }
    );
    Ok(())
}
