//! `ovrctl bench gen` and `ovrctl bench sink`: a UDP generator and a receiver on raw
//! sockets, a batch per system call, for measuring forwarders between namespaces.
//!
//! The generator sends Ethernet/IPv4/UDP frames of one size (60..=1514 bytes without the
//! FCS) or an IMIX, over `--flows` distinct flows (UDP source ports, then source
//! addresses), as fast as the interface takes them or paced to `--rate` packets per
//! second. Every frame carries a marker, a sequence number and the time it was sent
//! (CLOCK_MONOTONIC, which every namespace of the machine shares), so the sink reports
//! how many arrived and their one-way latency percentiles. Both print one JSON line.

use ovr_io::{DriverKind, IoError, Poller, Preference};
use ovr_wire::ethernet::{EthernetRepr, MacAddr, ethertype};
use ovr_wire::ip_proto;
use ovr_wire::ipv4::Ipv4Repr;
use ovr_wire::udp::UdpRepr;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, UdpSocket};
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Frame sizes, without the FCS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sizes {
    Fixed(usize),
    /// The simple IMIX: 7 frames of 64 bytes, 4 of 594, 1 of 1518 (with the FCS).
    Imix,
}

impl Sizes {
    /// The sizes of one repeating pattern.
    pub fn pattern(&self) -> Vec<usize> {
        match self {
            Sizes::Fixed(n) => vec![*n],
            Sizes::Imix => [vec![60; 7], vec![590; 4], vec![1514]].concat(),
        }
    }
}

impl FromStr for Sizes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(Sizes::Imix);
        }
        match s.parse::<usize>() {
            Ok(n) if (MIN_FRAME..=1514).contains(&n) => Ok(Sizes::Fixed(n)),
            _ => Err(format!(
                "'{s}': a frame size from {MIN_FRAME} to 1514 bytes (without FCS) or 'imix'"
            )),
        }
    }
}

/// A duration in seconds or a rate: a number from 0 to 10^9 (a usage error otherwise,
/// not a panic when it becomes a `Duration`).
pub fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1e9).contains(&x) => Ok(x),
        _ => Err(format!("'{s}': a number from 0 to 1e9")),
    }
}

/// How the generator and the sink reach the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Driver {
    /// A raw AF_PACKET socket, `sendmmsg`/`recvmmsg` per batch.
    AfPacket,
    /// An AF_XDP socket (copy mode on veth); the sink's interface hands every frame to
    /// it, so nothing else on that interface reaches the stack while it runs.
    AfXdp,
}

impl Driver {
    fn open(self, iface: &str, batch: usize) -> Result<Box<dyn ovr_io::Driver>, String> {
        let kind = match self {
            Driver::AfPacket => DriverKind::AfPacket,
            Driver::AfXdp => DriverKind::AfXdp,
        };
        // The generator's frames are complete (checksums, sizes): no offload to honour.
        ovr_io::open(iface, Preference::Only(kind), false, batch)
            .map(|(d, _)| d)
            .map_err(|e| e.to_string())
    }
}

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
    /// UDP destination port.
    #[arg(long, default_value_t = 9000)]
    pub port: u16,
    /// Distinct flows (UDP source ports, then source addresses).
    #[arg(long, default_value_t = 1)]
    pub flows: usize,
    /// Frame size in bytes without the FCS (60..=1514), or `imix` (7:4:1 of 60, 590 and
    /// 1514).
    #[arg(long, default_value = "60")]
    pub size: Sizes,
    /// How long to send.
    #[arg(long, default_value_t = 3.0, value_parser = non_negative)]
    pub seconds: f64,
    /// Packets per second to offer, paced in small batches; 0: as fast as possible.
    #[arg(long, default_value_t = 0.0, value_parser = non_negative)]
    pub rate: f64,
    /// Stop after this many packets (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
    #[arg(long, value_enum, default_value_t = Driver::AfPacket)]
    pub driver: Driver,
}

/// The largest batch handed to the driver at once.
const BATCH: usize = 256;
/// The smallest Ethernet frame without its FCS.
const MIN_FRAME: usize = 60;
/// Ethernet + IPv4 + UDP headers.
const HEADERS: usize = 14 + 20 + 8;
/// Marks the payload of our frames: [magic u16][sequence u64][sent at, ns u64], big endian.
const MAGIC: u16 = 0x0b5e;
const STAMP: usize = 2 + 8 + 8;

/// Nanoseconds of CLOCK_MONOTONIC: the same clock in every namespace of the machine.
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// An Ethernet/IPv4/UDP frame of `size` bytes (at least 60, without FCS), with a zero
/// UDP checksum ("none", valid over IPv4).
pub fn udp_frame(
    (src_mac, dst_mac): (MacAddr, MacAddr),
    (src, dst): (Ipv4Addr, Ipv4Addr),
    (sport, dport): (u16, u16),
    size: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; size.max(MIN_FRAME)];
    let payload = f.len() - HEADERS;
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

/// Flow `i`'s source: port 1024 + i % 60000, address + i / 60000.
fn flow_source(g: &Gen, i: usize) -> (Ipv4Addr, u16) {
    (
        Ipv4Addr::from(u32::from(g.src) + (i / 60_000) as u32),
        1024 + (i % 60_000) as u16,
    )
}

/// Writes the marker, sequence number and send time into a frame built by `udp_frame`.
pub fn stamp(frame: &mut [u8], seq: u64, sent_ns: u64) {
    let p = &mut frame[HEADERS..HEADERS + STAMP];
    p[..2].copy_from_slice(&MAGIC.to_be_bytes());
    p[2..10].copy_from_slice(&seq.to_be_bytes());
    p[10..18].copy_from_slice(&sent_ns.to_be_bytes());
}

/// The sequence number and send time of one of our frames to UDP port `port`, if it is
/// one (IPv4, any header length, not a fragment).
pub fn read_stamp(frame: &[u8], port: u16) -> Option<(u64, u64)> {
    if frame.len() < 14 + 20 || frame[12..14] != [0x08, 0x00] || frame[14 + 9] != 17 {
        return None;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    if ihl < 20 || u16::from_be_bytes([frame[20], frame[21]]) & 0x3fff != 0 {
        return None;
    }
    let udp = 14 + ihl;
    let p = frame.get(udp + 8..udp + 8 + STAMP)?;
    if u16::from_be_bytes([frame[udp + 2], frame[udp + 3]]) != port || p[..2] != MAGIC.to_be_bytes()
    {
        return None;
    }
    let word = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or([0; 8]));
    Some((word(&p[2..10]), word(&p[10..18])))
}

/// Offers a batch to the driver. What it could not take shows in its counters; a full
/// queue at the peer (veth: the receiving backlog, ENOBUFS) is a refusal, not an error.
fn offer(tx: &mut dyn ovr_io::Driver, frames: &[&[u8]]) -> Result<(), String> {
    match tx.send(frames) {
        Ok(()) => Ok(()),
        Err(IoError::Os { source, .. })
            if source.raw_os_error() == Some(rustix::io::Errno::NOBUFS.raw_os_error()) =>
        {
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

pub fn generate(g: &Gen) -> Result<(), String> {
    let flows = g.flows.max(1);
    let pattern = g.size.pattern();
    // Per flow and size, the 42 header bytes (addresses, lengths, IPv4 checksum); the
    // payload is zeros but for the stamp.
    let headers: Vec<Vec<[u8; HEADERS]>> = pattern
        .iter()
        .map(|&size| {
            (0..flows)
                .map(|i| {
                    let (src, sport) = flow_source(g, i);
                    let f = udp_frame((g.src_mac, g.dst_mac), (src, g.dst), (sport, g.port), size);
                    let mut h = [0u8; HEADERS];
                    h.copy_from_slice(&f[..HEADERS]);
                    h
                })
                .collect()
        })
        .collect();
    let mut bufs = vec![vec![0u8; 1514]; BATCH];
    let mut lens = vec![0usize; BATCH];
    let mut tx = g.driver.open(&g.iface, BATCH)?;
    let limit = Duration::from_secs_f64(g.seconds);
    let count = if g.count == 0 { u64::MAX } else { g.count };
    let (mut offered, mut bytes) = (0u64, 0u64);
    let (mut flow, mut slot) = (0usize, 0usize);
    let t = Instant::now();
    loop {
        let elapsed = t.elapsed();
        if elapsed >= limit || offered >= count {
            break;
        }
        // Paced: send what is due by now (at most a batch), else wait for the next one.
        let due = if g.rate > 0.0 {
            (g.rate * elapsed.as_secs_f64()) as u64 + 1
        } else {
            u64::MAX
        };
        let n = due
            .saturating_sub(offered)
            .min(count - offered)
            .min(BATCH as u64) as usize;
        if n == 0 {
            // Sleep, never spin: on two shared cores a spinning generator would take the
            // forwarder's CPU. A sleep overshoots by tens of µs (timer slack); what falls
            // due meanwhile goes out as one batch.
            let next = Duration::from_secs_f64((offered + 1) as f64 / g.rate);
            std::thread::sleep(next.saturating_sub(elapsed).max(Duration::from_micros(1)));
            continue;
        }
        let now = now_ns();
        for i in 0..n {
            let size = pattern[slot];
            let b = &mut bufs[i];
            b[..HEADERS].copy_from_slice(&headers[slot][flow]);
            stamp(b, offered + i as u64, now);
            lens[i] = size;
            bytes += size as u64;
            flow = (flow + 1) % flows;
            slot = (slot + 1) % pattern.len();
        }
        let frames: Vec<&[u8]> = bufs[..n]
            .iter()
            .zip(&lens[..n])
            .map(|(b, l)| &b[..*l])
            .collect();
        offer(tx.as_mut(), &frames)?;
        offered += n as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    let sent = tx.stats().tx_frames.min(offered);
    outln!(
        "{{\"offered\":{offered},\"sent\":{sent},\"refused\":{},\"bytes\":{bytes},\
         \"seconds\":{secs:.4},\"target_pps\":{:.0},\"offered_pps\":{:.0},\"mpps\":{:.4}}}",
        offered - sent,
        g.rate,
        offered as f64 / secs,
        sent as f64 / secs / 1e6
    );
    Ok(())
}

#[derive(clap::Args)]
pub struct Sink {
    /// The interface to receive on (a raw socket: counts what reaches the interface).
    #[arg(long, default_value = "eth0")]
    pub iface: String,
    /// UDP destination port of the generator's frames.
    #[arg(long, default_value_t = 9000)]
    pub port: u16,
    /// Stop after this long at the latest.
    #[arg(long, default_value_t = 4.0, value_parser = non_negative)]
    pub seconds: f64,
    /// Stop once no frame has arrived for this long after the first one (0: never).
    #[arg(long, default_value_t = 0.5, value_parser = non_negative)]
    pub idle: f64,
    #[arg(long, value_enum, default_value_t = Driver::AfPacket)]
    pub driver: Driver,
}

/// A latency histogram: exact below 64 ns, then 32 buckets per power of two (≤ 3% error).
struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Histogram {
    const SUB: u32 = 5;

    fn new() -> Self {
        Self {
            counts: vec![0; 64 + (64 - 6) * 32],
            n: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    fn index(v: u64) -> usize {
        if v < 64 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros();
        let m = (v >> (e - Self::SUB)) & 31;
        64 + (e as usize - 6) * 32 + m as usize
    }

    /// The highest value that falls into bucket `i`.
    fn upper(i: usize) -> u64 {
        if i < 64 {
            return i as u64;
        }
        let e = (i - 64) / 32 + 6;
        let m = ((i - 64) % 32) as u64;
        ((32 + m + 1) << (e - Self::SUB as usize)) - 1
    }

    fn add(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.n += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    fn percentile(&self, p: f64) -> u64 {
        let rank = ((p / 100.0) * self.n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::upper(i).min(self.max);
            }
        }
        self.max
    }
}

/// Receives the generator's frames on an interface for `seconds` (or until idle) and
/// prints what arrived: count, rate, sequence range and one-way latency percentiles.
pub fn sink(a: &Sink) -> Result<(), String> {
    let mut rx = a.driver.open(&a.iface, BATCH)?;
    // A bound socket keeps the stack from answering each datagram with an ICMP error.
    let _quiet = UdpSocket::bind(("0.0.0.0", a.port)).ok();
    let mut poller = Poller::new(rx.fds());
    let mut lat = Histogram::new();
    let (mut received, mut bytes, mut other) = (0u64, 0u64, 0u64);
    let (mut seq_min, mut seq_max) = (u64::MAX, 0u64);
    let (mut first, mut last) = (None::<Instant>, Instant::now());
    let t = Instant::now();
    eprintln!("sink ready on {}", a.iface);
    while t.elapsed().as_secs_f64() < a.seconds {
        if first.is_some() && a.idle > 0.0 && last.elapsed().as_secs_f64() > a.idle {
            break;
        }
        if !poller.wait(20).map_err(|e| e.to_string())? {
            continue;
        }
        let mut got = 0;
        rx.recv(&mut |frames| {
            let now = now_ns();
            for f in frames {
                match read_stamp(f, a.port) {
                    Some((seq, sent)) => {
                        got += 1;
                        bytes += f.len() as u64;
                        seq_min = seq_min.min(seq);
                        seq_max = seq_max.max(seq);
                        lat.add(now.saturating_sub(sent));
                    }
                    None => other += 1,
                }
            }
        })
        .map_err(|e| e.to_string())?;
        if got > 0 {
            received += got;
            last = Instant::now();
            first.get_or_insert(last);
        }
    }
    let active = first.map_or(0.0, |f| (last - f).as_secs_f64());
    let mut hist = String::new();
    for (i, c) in lat.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
        let _ = write!(
            hist,
            "{}[{},{c}]",
            if hist.is_empty() { "" } else { "," },
            Histogram::upper(i)
        );
    }
    let (p50, p99, p999) = if received > 0 {
        (
            lat.percentile(50.0),
            lat.percentile(99.0),
            lat.percentile(99.9),
        )
    } else {
        (0, 0, 0)
    };
    outln!(
        "{{\"received\":{received},\"bytes\":{bytes},\"other\":{other},\
         \"seq_first\":{},\"seq_last\":{},\"active_seconds\":{active:.4},\"mpps\":{:.4},\
         \"lat_ns\":{{\"min\":{},\"p50\":{p50},\"p99\":{p99},\"p999\":{p999},\"max\":{},\"mean\":{:.0}}},\
         \"lat_hist\":[{hist}]}}",
        if received > 0 { seq_min } else { 0 },
        seq_max,
        if active > 0.0 {
            received as f64 / active / 1e6
        } else {
            0.0
        },
        if received > 0 { lat.min } else { 0 },
        lat.max,
        if received > 0 {
            lat.sum as f64 / received as f64
        } else {
            0.0
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trips_and_foreign_frames_are_ignored() {
        let macs = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]));
        let ips = (Ipv4Addr::new(10, 1, 0, 11), Ipv4Addr::new(10, 1, 0, 21));
        let mut f = udp_frame(macs, ips, (1024, 9000), 60);
        assert_eq!(read_stamp(&f, 9000), None, "no marker yet");
        stamp(&mut f, 77, 123_456_789);
        assert_eq!(read_stamp(&f, 9000), Some((77, 123_456_789)));
        assert_eq!(read_stamp(&f, 9001), None, "other port");
        f[12] = 0x86;
        assert_eq!(read_stamp(&f, 9000), None, "not IPv4");
    }

    #[test]
    fn sizes_parse() {
        assert_eq!("imix".parse::<Sizes>(), Ok(Sizes::Imix));
        assert_eq!("1514".parse::<Sizes>(), Ok(Sizes::Fixed(1514)));
        assert!("59".parse::<Sizes>().is_err());
        assert!("1515".parse::<Sizes>().is_err());
        let p = Sizes::Imix.pattern();
        assert_eq!(p.len(), 12);
        assert_eq!(p.iter().filter(|s| **s == 60).count(), 7);
    }

    #[test]
    fn histogram_percentiles_within_three_percent() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.add(v * 10);
        }
        for (p, want) in [(50.0, 500_000.0), (99.0, 990_000.0), (99.9, 999_000.0)] {
            let got = h.percentile(p) as f64;
            assert!((got - want).abs() / want < 0.035, "p{p}: {got} vs {want}");
        }
        assert_eq!(h.percentile(100.0), 1_000_000);
        for v in [0u64, 63, 64, 65, 1000, 123_456_789] {
            let i = Histogram::index(v);
            assert!(Histogram::upper(i) >= v, "{v}");
            assert!(i == 0 || Histogram::upper(i - 1) < v, "{v}");
        }
    }
}
