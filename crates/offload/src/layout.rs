//! The structs shared with the kernel program (bpf/fast_path.c), as bytes in the C layout.
//! Encoded by hand rather than with `#[repr(C)]` and an `unsafe impl Pod`: the offsets
//! are written once here and pinned by the tests, and the crate needs no `unsafe`.

/// Interface kinds in `struct ovr_iface`.
pub const KIND_WORKLOAD: u32 = 1;
pub const KIND_UNDERLAY: u32 = 2;
/// `xsk_base` of an interface without AF_XDP sockets (read with AF_PACKET).
pub const NO_XSK: u32 = u32::MAX;
/// Underlay addresses the program checks an outer destination against.
pub const MAX_ADDRS: usize = 4;
/// Ethernet + IPv4 + UDP + VXLAN: the headers VXLAN over IPv4 adds.
pub const VXLAN_HEAD: u16 = 50;
pub const TPL_LEN: usize = 64;

/// Action flags (`OVR_F_*`).
pub mod flags {
    pub const SET_MAC: u16 = 1;
    pub const DEC_TTL: u16 = 2;
    pub const CHECK_L4: u16 = 4;
}

pub const KEY_LEN: usize = 28;
pub const ACTION_LEN: usize = 64;
pub const IFACE_LEN: usize = 32;

pub type KeyBytes = [u8; KEY_LEN];
pub type ActionBytes = [u8; ACTION_LEN];
pub type IfaceBytes = [u8; IFACE_LEN];

/// What a fast-path flow matches (`struct ovr_key`). Addresses and ports as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Key {
    /// The receiving interface (host ifindex).
    pub ifindex: u32,
    /// From the underlay: the VXLAN VNI; from a workload: 0.
    pub vni: u32,
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub src_port: u16,
    pub dst_port: u16,
    /// The inner frame's destination MAC.
    pub dst_mac: [u8; 6],
    pub protocol: u8,
}

impl Key {
    pub fn encode(&self) -> KeyBytes {
        let mut b = [0u8; KEY_LEN];
        b[0..4].copy_from_slice(&self.ifindex.to_ne_bytes());
        b[4..8].copy_from_slice(&self.vni.to_ne_bytes());
        b[8..12].copy_from_slice(&self.src);
        b[12..16].copy_from_slice(&self.dst);
        b[16..18].copy_from_slice(&self.src_port.to_be_bytes());
        b[18..20].copy_from_slice(&self.dst_port.to_be_bytes());
        b[20..26].copy_from_slice(&self.dst_mac);
        b[26] = self.protocol;
        b
    }

    /// The key [`Key::encode`] made `b` from (entries read back from the map).
    pub fn decode(b: &KeyBytes) -> Self {
        let at = |i: usize| -> [u8; 4] { [b[i], b[i + 1], b[i + 2], b[i + 3]] };
        Self {
            ifindex: u32::from_ne_bytes(at(0)),
            vni: u32::from_ne_bytes(at(4)),
            src: at(8),
            dst: at(12),
            src_port: u16::from_be_bytes([b[16], b[17]]),
            dst_port: u16::from_be_bytes([b[18], b[19]]),
            dst_mac: [b[20], b[21], b[22], b[23], b[24], b[25]],
            protocol: b[26],
        }
    }
}

/// What the fast path does to a matching frame (`struct ovr_action`, less counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    /// The egress interface (host ifindex).
    pub egress: u32,
    /// Bytes taken off the front (0, or [`VXLAN_HEAD`] to decapsulate).
    pub strip: u16,
    /// Bytes of `template` put in front (0, or [`VXLAN_HEAD`] to encapsulate).
    pub push: u16,
    /// The longest frame the egress interface takes (its MTU + Ethernet header).
    pub max_len: u16,
    pub flags: u16,
    /// Inner destination then source MAC, with [`flags::SET_MAC`].
    pub mac: [u8; 12],
    /// The outer headers; lengths and the IPv4 checksum are patched per frame. Kept
    /// once per tunnel in the kernel ([`Action::tunnel_headers`]), with the flow's UDP
    /// source port in its entry.
    pub template: [u8; TPL_LEN],
    /// For a flow from the underlay: the only outer IPv4 source whose frames it takes
    /// (`FlowEntry::sender`); zero: any.
    pub sender: [u8; 4],
}

/// Where the outer headers' fields that are not the tunnel's sit in a template: the IPv4
/// total length and checksum and the UDP length (the frame's), the UDP source port (the
/// flow's).
const PER_FRAME_OR_FLOW: [core::ops::Range<usize>; 4] = [16..18, 24..26, 34..36, 38..40];
const SPORT: core::ops::Range<usize> = 34..36;

impl Action {
    /// The value, in generation `generation`, with zero counters; with `push`, its outer
    /// headers are at `template` in `ovr_tpls`.
    pub fn encode(&self, generation: u32, template: u32) -> ActionBytes {
        let mut b = [0u8; ACTION_LEN];
        b[0..4].copy_from_slice(&generation.to_ne_bytes());
        b[4..8].copy_from_slice(&self.egress.to_ne_bytes());
        b[8..10].copy_from_slice(&self.strip.to_ne_bytes());
        b[10..12].copy_from_slice(&self.push.to_ne_bytes());
        b[12..14].copy_from_slice(&self.max_len.to_ne_bytes());
        b[14..16].copy_from_slice(&self.flags.to_ne_bytes());
        // 16..40: the counters (Usage), zero.
        b[40..52].copy_from_slice(&self.mac);
        if self.push > 0 {
            b[52..56].copy_from_slice(&template.to_ne_bytes());
            b[56..58].copy_from_slice(&self.template[SPORT]);
        }
        b[60..64].copy_from_slice(&self.sender);
        b
    }

    /// The outer headers as the flow's tunnel has them, whatever the flow and frame
    /// (`struct ovr_tpl`): what the flows of one tunnel share.
    pub fn tunnel_headers(&self) -> [u8; TPL_LEN] {
        let mut t = self.template;
        for r in PER_FRAME_OR_FLOW {
            t[r].fill(0);
        }
        t
    }

    /// Bytes the action adds to (or, negative, takes from) each frame.
    pub fn growth(&self) -> i64 {
        i64::from(self.push) - i64::from(self.strip)
    }
}

/// One CPU's counters of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub packets: u64,
    /// As received.
    pub bytes: u64,
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) of the last packet; 0: none.
    pub last_seen: u64,
}

impl Usage {
    pub fn decode(b: &ActionBytes) -> Self {
        let u = |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or_default());
        Self {
            packets: u(16),
            bytes: u(24),
            last_seen: u(32),
        }
    }

    /// Sums CPUs' counters (the latest last-seen).
    pub fn merge(self, o: Usage) -> Usage {
        Usage {
            packets: self.packets + o.packets,
            bytes: self.bytes + o.bytes,
            last_seen: self.last_seen.max(o.last_seen),
        }
    }
}

/// Of a value read back: whether it pushes outer headers, and their index in `ovr_tpls`.
pub fn template_of(b: &ActionBytes) -> Option<u32> {
    let push = u16::from_ne_bytes([b[10], b[11]]);
    (push > 0).then(|| u32::from_ne_bytes([b[52], b[53], b[54], b[55]]))
}

/// `struct ovr_iface`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iface {
    pub kind: u32,
    pub xsk_base: u32,
    pub addrs: [[u8; 4]; MAX_ADDRS],
    pub mac: [u8; 6],
}

impl Iface {
    pub fn encode(&self) -> IfaceBytes {
        let mut b = [0u8; IFACE_LEN];
        b[0..4].copy_from_slice(&self.kind.to_ne_bytes());
        b[4..8].copy_from_slice(&self.xsk_base.to_ne_bytes());
        for (i, a) in self.addrs.iter().enumerate() {
            b[8 + 4 * i..12 + 4 * i].copy_from_slice(a);
        }
        b[24..30].copy_from_slice(&self.mac);
        b
    }

    /// An entry read back (one an earlier ovrd left in a pinned map).
    pub fn decode(b: &IfaceBytes) -> Self {
        let u = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap_or_default());
        let mut addrs = [[0u8; 4]; MAX_ADDRS];
        for (i, a) in addrs.iter_mut().enumerate() {
            a.copy_from_slice(&b[8 + 4 * i..12 + 4 * i]);
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&b[24..30]);
        Self {
            kind: u(0),
            xsk_base: u(4),
            addrs,
            mac,
        }
    }
}

/// The program's counters (`enum` `OVR_C_*`), by index.
pub const COUNTER_NAMES: [&str; 13] = [
    "hit",
    "miss",
    "stale",
    "unparsed",
    "multi_buffer",
    "ttl",
    "checksum",
    "mtu",
    "no_egress",
    "redirect_error",
    "room",
    "sender",
    "template",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The C program's layout, read from its source: the structs' fields in order must
    /// be the ones encoded above, so a change on one side fails here.
    #[test]
    fn c_structs_match_the_encoding() {
        let src = include_str!("../bpf/fast_path.c");
        let fields = |name: &str| -> Vec<String> {
            let start = src.find(&format!("struct {name} {{")).expect("struct in C");
            let body = &src[start..start + src[start..].find("};").expect("end")];
            body.lines()
                .skip(1)
                .filter_map(|l| {
                    let l = l.split("//").next()?.trim();
                    (!l.is_empty()).then(|| l.to_string())
                })
                .collect()
        };
        assert_eq!(
            fields("ovr_key"),
            [
                "__u32 ifindex;",
                "__u32 vni;",
                "__u32 saddr;",
                "__u32 daddr;",
                "__u16 sport;",
                "__u16 dport;",
                "__u8 dmac[6];",
                "__u8 proto;",
                "__u8 pad;"
            ]
        );
        assert_eq!(
            fields("ovr_action"),
            [
                "__u32 generation;",
                "__u32 egress;",
                "__u16 strip;",
                "__u16 push;",
                "__u16 max_len;",
                "__u16 flags;",
                "__u64 packets;",
                "__u64 bytes;",
                "__u64 last_seen;",
                "__u8 mac[12];",
                "__u32 tpl;",
                "__u16 sport;",
                "__u16 pad;",
                "__u32 sender;"
            ]
        );
        assert_eq!(fields("ovr_tpl"), ["__u8 bytes[OVR_TPL_LEN];"]);
        assert_eq!(
            fields("ovr_iface"),
            [
                "__u32 kind;",
                "__u32 xsk_base;",
                "__u32 addrs[OVR_MAX_ADDRS];",
                "__u8 mac[6];",
                "__u16 pad;"
            ]
        );
        for (c, v) in [
            ("#define OVR_TPL_LEN 64", TPL_LEN as u32),
            ("#define OVR_VXLAN_HEAD 50", u32::from(VXLAN_HEAD)),
            ("#define OVR_MAX_ADDRS 4", MAX_ADDRS as u32),
            ("#define OVR_F_SET_MAC 1", u32::from(flags::SET_MAC)),
            ("#define OVR_F_DEC_TTL 2", u32::from(flags::DEC_TTL)),
            ("#define OVR_F_CHECK_L4 4", u32::from(flags::CHECK_L4)),
            ("#define OVR_KIND_WORKLOAD 1", KIND_WORKLOAD),
            ("#define OVR_KIND_UNDERLAY 2", KIND_UNDERLAY),
        ] {
            assert!(src.contains(c), "{c} ({v})");
        }
        // The counters' enum, in order.
        let start = src.find("OVR_C_HIT,").expect("counters");
        let names: Vec<&str> = src[start..src.find("OVR_C_MAX").expect("max")]
            .lines()
            .filter_map(|l| l.trim().split(',').next())
            .filter(|n| n.starts_with("OVR_C_"))
            .collect();
        let expect: Vec<String> = COUNTER_NAMES
            .iter()
            .map(|n| format!("OVR_C_{}", n.to_uppercase()))
            .collect();
        assert_eq!(names, expect);
    }

    #[test]
    fn offsets() {
        let k = Key {
            ifindex: 1,
            vni: 2,
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            src_port: 0x1234,
            dst_port: 0x5678,
            dst_mac: [1, 2, 3, 4, 5, 6],
            protocol: 17,
        }
        .encode();
        assert_eq!(&k[8..12], &[10, 0, 0, 1]);
        assert_eq!(&k[16..20], &[0x12, 0x34, 0x56, 0x78]);
        assert_eq!(&k[20..28], &[1, 2, 3, 4, 5, 6, 17, 0]);
        let mut template = [0u8; TPL_LEN];
        template[34..36].copy_from_slice(&[0xab, 0xcd]);
        template[26] = 192;
        let action = Action {
            egress: 3,
            strip: 0,
            push: VXLAN_HEAD,
            max_len: 1514,
            flags: flags::CHECK_L4,
            mac: [9; 12],
            template,
            sender: [10, 0, 0, 9],
        };
        let b = action.encode(5, 77);
        assert_eq!(&b[0..8], &[5, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(&b[52..58], &[77, 0, 0, 0, 0xab, 0xcd]);
        assert_eq!(&b[60..64], &[10, 0, 0, 9]);
        assert_eq!(template_of(&b), Some(77));
        let t = action.tunnel_headers();
        assert_eq!((t[26], &t[34..36]), (192, &[0, 0][..]));
        let decap = Action { push: 0, ..action };
        assert_eq!(template_of(&decap.encode(5, 77)), None);
        let mut a = [0u8; ACTION_LEN];
        a[16..24].copy_from_slice(&7u64.to_ne_bytes());
        a[24..32].copy_from_slice(&700u64.to_ne_bytes());
        a[32..40].copy_from_slice(&9u64.to_ne_bytes());
        assert_eq!(
            Usage::decode(&a),
            Usage {
                packets: 7,
                bytes: 700,
                last_seen: 9
            }
        );
    }
}
