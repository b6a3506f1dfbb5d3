//! Reading capture files: the one reader behind every ovrctl verb that takes a pcap
//! (`decode`, `replay --pcap`).
//!
//! It reads classic pcap (microsecond or nanosecond, either byte order) and pcapng (every
//! section and interface; each interface's own link type and timestamp resolution), and
//! hands out every record in order, numbered from 1 as Wireshark numbers frames, each
//! either an Ethernet frame or the named reason it was left out:
//!
//! - `capture_snaplen_truncated`: the capture kept fewer bytes than the packet had
//!   (`incl_len < orig_len`, e.g. `tcpdump -s 60`); the packet is not whole, so it is not
//!   given to the dataplane, and the rest of the file is read on.
//! - `capture_bad_record_length`: more bytes kept than the packet had.
//! - `capture_link_unsupported`: a pcapng interface of a link type ovr does not read, or
//!   a Linux cooked header whose protocol is not an Ethertype (802.2 LLC, CAN, ...).
//! - `capture_link_header_truncated`: too short for its own link header.
//! - `capture_not_ip`: a raw-IP record that is neither IPv4 nor IPv6.
//!
//! Link types: Ethernet (1) as it is. Frames without an Ethernet header are given one,
//! because the dataplane's interfaces receive Ethernet frames:
//! - raw IP (101, and 228 IPv4 / 229 IPv6): the packet as if routed to the receiving
//!   interface: destination the interface's own MAC (`local`), source 00:00:00:00:00:00,
//!   Ethertype from the IP version;
//! - Linux cooked (113 SLL, 276 SLL2): the cooked header's protocol is the Ethertype and
//!   its link-layer address (if 6 bytes) the source; the destination follows its packet
//!   type: broadcast, multicast (mapped from the IP destination), or the interface's own
//!   MAC (to this host, and sent by it); "to another host" gets 00:00:00:00:00:00.
//!
//! A file that ends inside a record loses that record only, with a warning; so does one
//! whose next record claims an impossible length (the file is corrupt from there on: the
//! records before it are kept). A file that is not a capture at all, or classic pcap of
//! a link type ovr does not read, is an error.

use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::time::Duration;

/// The longest record read (libpcap's largest snapshot length); a longer one means the
/// file is corrupt from there on.
pub const MAX_RECORD: u32 = 262_144;

/// An Ethernet frame taken from a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub data: Vec<u8>,
    /// What the record's own link header was when it was not Ethernet ("raw ip",
    /// "linux sll in from 02:..., proto 0x0800"), its Ethernet header being made up.
    pub link: Option<String>,
}

/// Why a record is not handed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub reason: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// From 1, as Wireshark numbers frames.
    pub number: usize,
    pub time: Duration,
    pub frame: Result<Frame, Skip>,
}

/// The link types read, by their LINKTYPE_ number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Ethernet,
    /// 101: IPv4 or IPv6, by the version field.
    Raw,
    /// 228
    Ipv4,
    /// 229
    Ipv6,
    /// 113
    LinuxSll,
    /// 276
    LinuxSll2,
}

impl Link {
    pub fn from_linktype(n: u32) -> Option<Link> {
        Some(match n {
            1 => Link::Ethernet,
            101 => Link::Raw,
            228 => Link::Ipv4,
            229 => Link::Ipv6,
            113 => Link::LinuxSll,
            276 => Link::LinuxSll2,
            _ => return None,
        })
    }
}

const SUPPORTED: &str =
    "ovr reads Ethernet (1), raw IP (101, 228, 229) and Linux cooked (113, 276)";

enum Inner {
    Pcap {
        r: BufReader<File>,
        big_endian: bool,
        nanos: bool,
        link: Link,
    },
    Ng {
        r: Box<PcapNgReader<File>>,
    },
    Done,
}

pub struct Reader {
    inner: Inner,
    path: String,
    /// The receiving interface's MAC: the destination of frames given an Ethernet header.
    local: [u8; 6],
    number: usize,
    /// "pcap" or "pcapng".
    pub format: &'static str,
    /// What went wrong that lost more than a record's worth: a cut-off last record, a
    /// corrupt tail. Each names the file.
    pub warnings: Vec<String>,
}

const PCAPNG_MAGIC: u32 = 0x0A0D_0D0A;

/// Opens a capture; `local` is the MAC frames without an Ethernet header are sent to.
pub fn open(path: &Path, local: [u8; 6]) -> Result<Reader, String> {
    let name = path.display().to_string();
    let mut file = File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let mut head = [0u8; 24];
    let n = read_full(&mut file, &mut head).map_err(|e| format!("{name}: {e}"))?;
    if n == 0 {
        return Err(format!("{name}: empty file, not a capture"));
    }
    let magic_le = u32::from_le_bytes(head[..4].try_into().unwrap());
    let magic_be = u32::from_be_bytes(head[..4].try_into().unwrap());
    if magic_le == PCAPNG_MAGIC {
        use std::io::Seek;
        file.rewind().map_err(|e| format!("{name}: {e}"))?;
        let r = PcapNgReader::new(file)
            .map_err(|e| format!("{name}: not a readable pcapng file: {e}"))?;
        return Ok(Reader {
            inner: Inner::Ng { r: Box::new(r) },
            path: name,
            local,
            number: 0,
            format: "pcapng",
            warnings: Vec::new(),
        });
    }
    let (big_endian, nanos) = match (magic_le, magic_be) {
        (0xA1B2_C3D4, _) => (false, false),
        (0xA1B2_3C4D, _) => (false, true),
        (_, 0xA1B2_C3D4) => (true, false),
        (_, 0xA1B2_3C4D) => (true, true),
        _ => {
            return Err(format!(
                "{name}: not a pcap or pcapng file (it begins with {})",
                hex(&head[..n.min(4)])
            ));
        }
    };
    if n < 24 {
        return Err(format!(
            "{name}: a pcap file cut off in its header ({n} of 24 bytes)"
        ));
    }
    let u32_at = |at: usize| {
        let b: [u8; 4] = head[at..at + 4].try_into().unwrap();
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    // The low 16 bits are the link type; the upper ones say whether frames carry an FCS.
    let linktype = u32_at(20) & 0xFFFF;
    let link = Link::from_linktype(linktype)
        .ok_or_else(|| format!("{name}: link type {linktype} is not read: {SUPPORTED}"))?;
    Ok(Reader {
        inner: Inner::Pcap {
            r: BufReader::new(file),
            big_endian,
            nanos,
            link,
        },
        path: name,
        local,
        number: 0,
        format: "pcap",
        warnings: Vec::new(),
    })
}

/// Reads until `buf` is full or the input ends; how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

impl Iterator for Reader {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        let r = match &mut self.inner {
            Inner::Done => return None,
            Inner::Pcap { .. } => self.next_pcap(),
            Inner::Ng { .. } => self.next_ng(),
        };
        if r.is_none() {
            self.inner = Inner::Done;
        }
        r
    }
}

impl Reader {
    fn warn(&mut self, what: String) {
        self.warnings.push(format!("{}: {what}", self.path));
    }

    fn next_pcap(&mut self) -> Option<Record> {
        let Inner::Pcap {
            r,
            big_endian,
            nanos,
            link,
        } = &mut self.inner
        else {
            return None;
        };
        let (big_endian, nanos, link) = (*big_endian, *nanos, *link);
        let number = self.number + 1;
        let mut h = [0u8; 16];
        let n = match read_full(r, &mut h) {
            Ok(n) => n,
            Err(e) => {
                self.warn(format!("record {number}: {e}; the rest is not read"));
                return None;
            }
        };
        if n == 0 {
            return None;
        }
        if n < 16 {
            self.warn(format!(
                "record {number} is cut off at the end of the file ({n} of its 16 header bytes): it is left out"
            ));
            return None;
        }
        let f = |i: usize| {
            let b: [u8; 4] = h[i * 4..i * 4 + 4].try_into().unwrap();
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (sec, frac, incl, orig) = (f(0), f(1), f(2), f(3));
        if incl > MAX_RECORD {
            self.warn(format!(
                "record {number} claims {incl} bytes (more than {MAX_RECORD}): the file is corrupt from there on, and the rest is not read"
            ));
            return None;
        }
        let mut data = vec![0u8; incl as usize];
        let got = match read_full(r, &mut data) {
            Ok(n) => n,
            Err(e) => {
                self.warn(format!("record {number}: {e}; the rest is not read"));
                return None;
            }
        };
        if got < data.len() {
            self.warn(format!(
                "record {number} is cut off at the end of the file ({got} of its {incl} bytes): it is left out"
            ));
            return None;
        }
        self.number = number;
        let time = Duration::from_secs(u64::from(sec))
            + Duration::from_nanos(u64::from(frac) * if nanos { 1 } else { 1000 });
        Some(Record {
            number,
            time,
            frame: frame(link, data, orig, self.local),
        })
    }

    fn next_ng(&mut self) -> Option<Record> {
        loop {
            let Inner::Ng { r } = &mut self.inner else {
                return None;
            };
            let number = self.number + 1;
            let block = match r.next_block()? {
                Ok(b) => b,
                Err(pcap_file::PcapError::IoError(e))
                    if e.kind() == std::io::ErrorKind::UnexpectedEof =>
                {
                    self.warn(format!(
                        "the block after record {} is cut off at the end of the file: it is left out",
                        number - 1
                    ));
                    return None;
                }
                Err(e) => {
                    self.warn(format!(
                        "the block after record {}: {e}; the rest is not read",
                        number - 1
                    ));
                    return None;
                }
            };
            // (interface, raw timestamp, original length, data)
            let (iface, ts, orig, data) = match block {
                Block::EnhancedPacket(p) => (
                    p.interface_id,
                    p.timestamp.as_nanos() as u64,
                    p.original_len,
                    p.data.into_owned(),
                ),
                Block::SimplePacket(p) => {
                    // Its data runs to the end of the block, padding included.
                    let mut d = p.data.into_owned();
                    d.truncate(p.original_len as usize);
                    (0, 0, p.original_len, d)
                }
                Block::Packet(p) => (
                    u32::from(p.interface_id),
                    p.timestamp,
                    p.original_len,
                    p.data.into_owned(),
                ),
                _ => continue,
            };
            self.number = number;
            let Some(idb) = r.interfaces().get(iface as usize) else {
                return Some(Record {
                    number,
                    time: Duration::ZERO,
                    frame: Err(Skip {
                        reason: "capture_link_unsupported",
                        detail: format!("interface {iface} is not described in the file"),
                    }),
                });
            };
            let (mut resol, mut offset) = (6u8, 0u64);
            for o in &idb.options {
                match o {
                    InterfaceDescriptionOption::IfTsResol(r) => resol = *r,
                    InterfaceDescriptionOption::IfTsOffset(s) => offset = *s,
                    _ => {}
                }
            }
            let time = ng_time(ts, resol) + Duration::from_secs(offset);
            let linktype = u32::from(idb.linktype);
            let frame = match Link::from_linktype(linktype) {
                Some(link) => frame(link, data, orig, self.local),
                None => Err(Skip {
                    reason: "capture_link_unsupported",
                    detail: format!("interface {iface} has link type {linktype}: {SUPPORTED}"),
                }),
            };
            return Some(Record {
                number,
                time,
                frame,
            });
        }
    }
}

/// A pcapng timestamp in units of `if_tsresol` (10^-n s, or 2^-n s with the top bit).
fn ng_time(ts: u64, resol: u8) -> Duration {
    let n = u32::from(resol & 0x7F);
    if resol & 0x80 != 0 {
        let n = n.min(63);
        let secs = ts >> n;
        let frac = ts & ((1u64 << n) - 1);
        Duration::from_secs(secs)
            + Duration::from_nanos(((u128::from(frac) * 1_000_000_000) >> n) as u64)
    } else if n <= 9 {
        Duration::from_nanos(ts.saturating_mul(10u64.pow(9 - n)))
    } else {
        let unit = 10u64.pow(n.min(19));
        Duration::from_secs(ts / unit)
            + Duration::from_nanos(
                (u128::from(ts % unit) * 1_000_000_000 / u128::from(unit)) as u64,
            )
    }
}

fn skip(reason: &'static str, detail: String) -> Result<Frame, Skip> {
    Err(Skip { reason, detail })
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A record's bytes as an Ethernet frame, or why it is left out.
fn frame(link: Link, data: Vec<u8>, orig_len: u32, local: [u8; 6]) -> Result<Frame, Skip> {
    let incl = data.len();
    if (incl as u64) < u64::from(orig_len) {
        return skip(
            "capture_snaplen_truncated",
            format!("{incl} of {orig_len} bytes captured"),
        );
    }
    if incl as u64 > u64::from(orig_len) {
        return skip(
            "capture_bad_record_length",
            format!("{incl} bytes captured of a {orig_len}-byte packet"),
        );
    }
    match link {
        Link::Ethernet => Ok(Frame { data, link: None }),
        Link::Raw | Link::Ipv4 | Link::Ipv6 => {
            let version = data.first().map(|b| b >> 4);
            let ethertype = match (link, version) {
                (_, None) => {
                    return skip("capture_link_header_truncated", "an empty record".into());
                }
                (Link::Ipv4, _) | (Link::Raw, Some(4)) => 0x0800u16,
                (Link::Ipv6, _) | (Link::Raw, Some(6)) => 0x86DD,
                (_, Some(v)) => {
                    return skip(
                        "capture_not_ip",
                        format!("raw IP with version {v}, neither 4 nor 6"),
                    );
                }
            };
            Ok(Frame {
                data: ethernet(local, [0; 6], ethertype, &data),
                link: Some("raw ip".into()),
            })
        }
        Link::LinuxSll | Link::LinuxSll2 => {
            let sll2 = link == Link::LinuxSll2;
            let len = if sll2 { 20 } else { 16 };
            if data.len() < len {
                return skip(
                    "capture_link_header_truncated",
                    format!(
                        "{} bytes, shorter than its {len}-byte cooked header",
                        data.len()
                    ),
                );
            }
            let be16 = |at: usize| u16::from_be_bytes([data[at], data[at + 1]]);
            let (pkttype, addr_len, addr_at, proto) = if sll2 {
                (u16::from(data[10]), usize::from(data[11]), 12, be16(0))
            } else {
                (be16(0), usize::from(be16(4)), 6, be16(14))
            };
            let payload = &data[len..];
            if proto < 0x0600 {
                return skip(
                    "capture_link_unsupported",
                    format!("Linux cooked protocol {proto:#06x} is not an Ethertype"),
                );
            }
            let src = if addr_len == 6 {
                data[addr_at..addr_at + 6].try_into().unwrap()
            } else {
                [0; 6]
            };
            let (dst, dir) = match pkttype {
                1 => ([0xff; 6], "broadcast"),
                2 => (multicast_mac(proto, payload), "multicast"),
                3 => ([0; 6], "to another host"),
                4 => (local, "out"),
                _ => (local, "in"),
            };
            Ok(Frame {
                data: ethernet(dst, src, proto, payload),
                link: Some(format!(
                    "linux {} {dir} from {} proto {proto:#06x}",
                    if sll2 { "sll2" } else { "sll" },
                    mac(src)
                )),
            })
        }
    }
}

/// The group MAC of an IP multicast destination (RFC 1112, RFC 2464); broadcast otherwise.
fn multicast_mac(ethertype: u16, ip: &[u8]) -> [u8; 6] {
    match ethertype {
        0x0800 if ip.len() >= 20 => [0x01, 0x00, 0x5e, ip[17] & 0x7f, ip[18], ip[19]],
        0x86DD if ip.len() >= 40 => [0x33, 0x33, ip[36], ip[37], ip[38], ip[39]],
        _ => [0xff; 6],
    }
}

fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[cfg(test)]
mod tests {
    //! On captures made by scapy and editcap (testdata/make_captures.py), not by ovr.
    use super::*;

    const ETH: &[u8] = include_bytes!("../testdata/eth.pcap");
    const LOCAL: [u8; 6] = [2, 0, 0, 0, 0, 0x99];
    const A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];

    /// Writes `bytes` to a file of its own and reads it all.
    fn read(name: &str, bytes: &[u8]) -> Result<(Vec<Record>, Vec<String>), String> {
        // Tests run in parallel: each file its own name.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ovr-capfile-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let r = open(&path, LOCAL).map(|mut r| {
            let records: Vec<Record> = r.by_ref().collect();
            (records, r.warnings)
        });
        std::fs::remove_dir_all(&dir).unwrap();
        r
    }

    fn frames(records: &[Record]) -> Vec<Vec<u8>> {
        records
            .iter()
            .map(|r| r.frame.as_ref().unwrap().data.clone())
            .collect()
    }

    fn eth_frames() -> Vec<Vec<u8>> {
        frames(&read("eth.pcap", ETH).unwrap().0)
    }

    #[test]
    fn ethernet_pcap_is_read_whole() {
        let (r, w) = read("eth.pcap", ETH).unwrap();
        assert!(w.is_empty(), "{w:?}");
        let lens: Vec<usize> = frames(&r).iter().map(Vec::len).collect();
        assert_eq!(lens, [42, 142, 98]);
        assert_eq!(r[1].number, 2);
        assert_eq!(r[2].time, Duration::from_millis(1_700_000_000_002));
    }

    #[test]
    fn records_cut_by_the_snapshot_length_are_left_out_by_name_and_the_rest_read() {
        let (r, w) = read("snap.pcap", include_bytes!("../testdata/eth-snap60.pcap")).unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].frame.as_ref().unwrap().data, eth_frames()[0]);
        for (rec, orig) in r[1..].iter().zip([142, 98]) {
            let s = rec.frame.as_ref().unwrap_err();
            assert_eq!(s.reason, "capture_snaplen_truncated");
            assert_eq!(s.detail, format!("60 of {orig} bytes captured"));
        }
    }

    #[test]
    fn pcapng_from_editcap_and_from_scapy_reads_as_the_pcap_does() {
        let want = read("eth.pcap", ETH).unwrap().0;
        for (name, bytes) in [
            ("eth.pcapng", &include_bytes!("../testdata/eth.pcapng")[..]),
            (
                "eth-scapy.pcapng",
                &include_bytes!("../testdata/eth-scapy.pcapng")[..],
            ),
        ] {
            let (r, w) = read(name, bytes).unwrap();
            assert!(w.is_empty(), "{name}: {w:?}");
            assert_eq!(r, want, "{name}");
        }
    }

    fn ethernet_of(f: &[u8]) -> ([u8; 6], [u8; 6], u16, &[u8]) {
        (
            f[..6].try_into().unwrap(),
            f[6..12].try_into().unwrap(),
            u16::from_be_bytes([f[12], f[13]]),
            &f[14..],
        )
    }

    #[test]
    fn raw_ip_is_given_an_ethernet_header_to_the_local_mac() {
        let (r, _) = read("raw.pcap", include_bytes!("../testdata/raw.pcap")).unwrap();
        let f = frames(&r);
        let (dst, src, ty, ip) = ethernet_of(&f[0]);
        assert_eq!(
            (dst, src, ty, ip.len(), ip[0] >> 4),
            (LOCAL, [0; 6], 0x0800, 30, 4)
        );
        let (dst, _, ty, ip) = ethernet_of(&f[1]);
        assert_eq!((dst, ty, ip.len(), ip[0] >> 4), (LOCAL, 0x86DD, 50, 6));
        // The IPv6 packet's source address, where scapy put it.
        assert_eq!(
            &ip[8..24],
            &[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11]
        );
        assert_eq!(r[0].frame.as_ref().unwrap().link.as_deref(), Some("raw ip"));
    }

    #[test]
    fn linux_cooked_headers_give_their_protocol_and_source() {
        for (name, bytes, what) in [
            (
                "sll.pcap",
                &include_bytes!("../testdata/sll.pcap")[..],
                "sll",
            ),
            (
                "sll2.pcap",
                &include_bytes!("../testdata/sll2.pcap")[..],
                "sll2",
            ),
        ] {
            let (r, w) = read(name, bytes).unwrap();
            assert!(w.is_empty());
            let f = r[0].frame.as_ref().unwrap();
            let (dst, src, ty, ip) = ethernet_of(&f.data);
            assert_eq!((dst, src, ty, ip.len()), (LOCAL, A, 0x0800, 30), "{name}");
            assert_eq!(&ip[12..20], &[10, 1, 0, 11, 10, 1, 0, 21]);
            assert_eq!(
                f.link.as_deref(),
                Some(&*format!(
                    "linux {what} in from 02:00:00:00:00:0a proto 0x0800"
                ))
            );
        }
    }

    #[test]
    fn a_cut_off_last_record_loses_only_that_record() {
        // Inside the last record's data, and inside its header.
        for cut in [10, 98 + 8] {
            let (r, w) = read("cut.pcap", &ETH[..ETH.len() - cut]).unwrap();
            assert_eq!(frames(&r), eth_frames()[..2], "cut {cut}");
            assert_eq!(w.len(), 1);
            assert!(w[0].contains("record 3 is cut off"), "{w:?}");
        }
        let ng = include_bytes!("../testdata/eth.pcapng");
        let (r, w) = read("cut.pcapng", &ng[..ng.len() - 10]).unwrap();
        // eth.pcapng (editcap) ends with the third packet's block.
        assert_eq!(frames(&r), eth_frames()[..2]);
        assert!(w[0].contains("cut off"), "{w:?}");
    }

    #[test]
    fn a_corrupt_record_length_keeps_what_came_before() {
        let mut b = ETH.to_vec();
        // Record 2's incl_len (little-endian), after the file header and record 1.
        let at = 24 + 16 + 42 + 8;
        b[at..at + 4].copy_from_slice(&0x4000_0000u32.to_le_bytes());
        let (r, w) = read("corrupt.pcap", &b).unwrap();
        assert_eq!(frames(&r), eth_frames()[..1]);
        assert!(w[0].contains("record 2 claims 1073741824 bytes"), "{w:?}");
    }

    #[test]
    fn files_that_are_not_captures_are_refused_with_what_they_are() {
        let e = read("empty.pcap", b"").err().unwrap();
        assert!(e.ends_with("empty.pcap: empty file, not a capture"), "{e}");
        let e = read("text.pcap", b"hello, world\n").err().unwrap();
        assert!(
            e.contains("not a pcap or pcapng file (it begins with 68656c6c)"),
            "{e}"
        );
        let e = read("short.pcap", &ETH[..20]).err().unwrap();
        assert!(e.contains("cut off in its header (20 of 24 bytes)"), "{e}");
        let mut wifi = ETH.to_vec();
        wifi[20] = 105;
        let e = read("wifi.pcap", &wifi).err().unwrap();
        assert!(e.contains("link type 105 is not read"), "{e}");
    }

    #[test]
    fn odd_records_are_left_out_by_name() {
        let skip = |link, data: &[u8]| frame(link, data.to_vec(), data.len() as u32, LOCAL);
        assert_eq!(
            skip(Link::Raw, &[0x50; 20]).unwrap_err().reason,
            "capture_not_ip"
        );
        assert_eq!(
            skip(Link::Raw, &[]).unwrap_err().reason,
            "capture_link_header_truncated"
        );
        assert_eq!(
            skip(Link::LinuxSll, &[0; 10]).unwrap_err().reason,
            "capture_link_header_truncated"
        );
        // 802.2 LLC in a cooked header: protocol 4, not an Ethertype.
        let mut llc = [0u8; 20];
        llc[15] = 4;
        assert_eq!(
            skip(Link::LinuxSll, &llc).unwrap_err().reason,
            "capture_link_unsupported"
        );
        assert_eq!(
            frame(Link::Ethernet, vec![0; 20], 10, LOCAL)
                .unwrap_err()
                .reason,
            "capture_bad_record_length"
        );
    }

    #[test]
    fn damaged_files_never_panic() {
        // Every fixture, with bytes changed and cut at places a simple generator picks.
        let fixtures: [&[u8]; 4] = [
            ETH,
            include_bytes!("../testdata/eth.pcapng"),
            include_bytes!("../testdata/sll2.pcap"),
            include_bytes!("../testdata/eth-scapy.pcapng"),
        ];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        for f in fixtures {
            for _ in 0..100 {
                let mut b = f.to_vec();
                for _ in 0..1 + next(4) {
                    let at = next(b.len());
                    b[at] = next(256) as u8;
                }
                b.truncate(next(b.len() + 1).max(next(b.len() + 1)));
                let _ = read("damaged", &b);
            }
        }
    }

    #[test]
    fn pcapng_timestamps_follow_the_interface_resolution() {
        assert_eq!(ng_time(1_500_000, 6), Duration::from_millis(1500));
        assert_eq!(ng_time(1_500_000_000, 9), Duration::from_millis(1500));
        assert_eq!(
            ng_time(3 << 20 | 1 << 19, 0x80 | 20),
            Duration::from_millis(3500)
        );
        assert_eq!(ng_time(15, 1), Duration::from_millis(1500));
    }
}
