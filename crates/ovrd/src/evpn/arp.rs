//! The underlay MACs of VTEPs learnt through BGP. An ovr host publishes its underlay MAC
//! in the cluster; a kernel host or a switch does not, and a tunnel needs the MAC of the
//! next hop on the underlay. ovrd asks as any router would: an ARP request from its own
//! VTEP address and MAC, sent on the underlay interface (a short-lived AF_PACKET socket
//! of its own beside the workers'), and the answer read there. The host kernel's
//! neighbour table is not used: the underlay interface and the VTEP address are ovrd's,
//! and the kernel may not be on that segment at all.
//!
//! A VTEP must be on one of the underlay's subnets (there is no underlay gateway in the
//! configuration yet). One not answered is retried (100 ms doubling to 5 s) and shown as
//! unresolved; a resolved one is asked again every 30 s (a MAC that changed is followed;
//! one not answered keeps its MAC).

use ovr_config::model::{Config, InterfaceKindConfig};
use ovr_io::Driver;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

/// How long one round waits for answers.
pub const WAIT: Duration = Duration::from_millis(200);
const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(5);
const REFRESH: Duration = Duration::from_secs(30);

/// The underlay as ARP needs it: the interface, its MAC, its IPv4 subnets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Underlay {
    pub name: String,
    pub mac: [u8; 6],
    /// (address, prefix length); the first is the VTEP.
    pub addresses: Vec<(Ipv4Addr, u8)>,
}

impl Underlay {
    /// From the configuration's underlay interface (its MAC there, else the kernel's).
    pub fn of(c: &Config) -> Option<Self> {
        let i = c
            .interfaces
            .iter()
            .find(|i| i.kind == InterfaceKindConfig::Underlay)?;
        let mac = match i.mac {
            Some(m) => m.0.0,
            None => kernel_mac(&i.name)?,
        };
        let addresses: Vec<(Ipv4Addr, u8)> = i
            .addresses
            .iter()
            .filter_map(|a| match a.0.addr {
                IpAddr::V4(v) => Some((v, a.0.prefix_len)),
                IpAddr::V6(_) => None,
            })
            .collect();
        (!addresses.is_empty()).then(|| Underlay {
            name: i.name.clone(),
            mac,
            addresses,
        })
    }

    fn on_link(&self, ip: Ipv4Addr) -> bool {
        self.addresses.iter().any(|(a, len)| {
            let m = if *len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(*len).min(32))
            };
            u32::from(*a) & m == u32::from(ip) & m
        })
    }
}

fn kernel_mac(name: &str) -> Option<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{name}/address")).ok()?;
    let m: ovr_bgp::evpn::Mac = s.trim().parse().ok()?;
    Some(m.0)
}

#[derive(Debug, Clone)]
struct Resolved {
    mac: [u8; 6],
    asked: Instant,
}

#[derive(Debug, Clone)]
struct Waiting {
    tries: u32,
    next: Instant,
    reason: String,
}

/// The VTEPs' underlay MACs: resolved, or waiting with the reason.
#[derive(Debug, Default)]
pub struct Neighbours {
    resolved: BTreeMap<IpAddr, Resolved>,
    waiting: BTreeMap<IpAddr, Waiting>,
}

impl Neighbours {
    pub fn macs(&self) -> BTreeMap<IpAddr, ovr_config::values::Mac> {
        self.resolved
            .iter()
            .map(|(ip, r)| {
                (
                    *ip,
                    ovr_config::values::Mac(ovr_wire::ethernet::MacAddr(r.mac)),
                )
            })
            .collect()
    }

    /// Forgets VTEPs no longer wanted and says which to ask now.
    pub fn due(
        &mut self,
        wanted: &BTreeSet<IpAddr>,
        underlay: Option<&Underlay>,
        now: Instant,
    ) -> Vec<Ipv4Addr> {
        self.resolved.retain(|ip, _| wanted.contains(ip));
        self.waiting.retain(|ip, _| wanted.contains(ip));
        let mut ask = Vec::new();
        for ip in wanted {
            if let Some(r) = self.resolved.get(ip) {
                if let IpAddr::V4(v) = ip
                    && now.duration_since(r.asked) >= REFRESH
                {
                    ask.push(*v);
                }
                continue;
            }
            let w = self.waiting.entry(*ip).or_insert(Waiting {
                tries: 0,
                next: now,
                reason: "not asked yet".into(),
            });
            let why = match (ip, underlay) {
                (IpAddr::V6(_), _) => Some("IPv6 VTEP: neighbour discovery is not done yet"),
                (_, None) => Some("no IPv4 underlay interface"),
                (IpAddr::V4(v), Some(u)) if !u.on_link(*v) => {
                    Some("not on the underlay's subnets (no underlay gateway configured)")
                }
                _ => None,
            };
            match (why, ip) {
                (Some(why), _) => w.reason = why.into(),
                (None, IpAddr::V4(v)) if w.next <= now => ask.push(*v),
                _ => {}
            }
        }
        ask
    }

    /// Takes a round's answers for what was `asked`.
    pub fn answered(
        &mut self,
        asked: &[Ipv4Addr],
        answers: &BTreeMap<Ipv4Addr, [u8; 6]>,
        error: Option<&str>,
        now: Instant,
    ) {
        for v in asked {
            let ip = IpAddr::V4(*v);
            if let Some(mac) = answers.get(v) {
                self.waiting.remove(&ip);
                self.resolved.insert(
                    ip,
                    Resolved {
                        mac: *mac,
                        asked: now,
                    },
                );
            } else if let Some(r) = self.resolved.get_mut(&ip) {
                // A refresh not answered: the MAC stays (a peer may limit its ARP rate).
                r.asked = now;
            } else if let Some(w) = self.waiting.get_mut(&ip) {
                w.tries += 1;
                let wait = FIRST_RETRY.saturating_mul(1 << w.tries.min(6)) / 2;
                w.next = now + wait.min(LAST_RETRY);
                w.reason = match error {
                    Some(e) => format!("ARP could not be sent: {e}"),
                    None => format!("no ARP answer ({} tries)", w.tries),
                };
            }
        }
    }

    /// The VTEPs as the API shows them.
    pub fn report(&self) -> Vec<Value> {
        let resolved = self.resolved.iter().map(|(ip, r)| {
            json!({ "vtep": ip, "state": "resolved",
                    "mac": ovr_bgp::evpn::Mac(r.mac).to_string() })
        });
        let waiting = self
            .waiting
            .iter()
            .map(|(ip, w)| json!({ "vtep": ip, "state": "unresolved", "reason": w.reason }));
        resolved.chain(waiting).collect()
    }
}

/// An ARP request for `target` from `u`'s VTEP.
fn request(u: &Underlay, target: Ipv4Addr) -> [u8; 42] {
    let mut f = [0u8; 42];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&u.mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    // Ethernet, IPv4, 6 and 4 byte addresses, request.
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&u.mac);
    f[28..32].copy_from_slice(&u.addresses[0].0.octets());
    f[38..42].copy_from_slice(&target.octets());
    f
}

/// The sender of an ARP frame (a reply, or a request that tells its sender's MAC too).
pub fn sender(frame: &[u8]) -> Option<(Ipv4Addr, [u8; 6])> {
    let arp = frame.get(14..42)?;
    if frame.get(12..14)? != [0x08, 0x06] || arp[0..6] != [0, 1, 8, 0, 6, 4] {
        return None;
    }
    let mac: [u8; 6] = arp[8..14].try_into().ok()?;
    let ip: [u8; 4] = arp[14..18].try_into().ok()?;
    let ip = Ipv4Addr::from(ip);
    let bad = mac == [0; 6] || mac[0] & 1 == 1 || ip.is_unspecified();
    (!bad).then_some((ip, mac))
}

/// A socket for ARP on the underlay, kept between questions (opening and closing one
/// costs tens of milliseconds: `AfPacket::open_arp`).
#[derive(Default)]
pub struct Asker {
    socket: Option<(String, ovr_io::AfPacket)>,
}

impl Asker {
    /// Asks for `targets` on the underlay and collects the answers for up to `wait`
    /// (blocking). The socket is opened on first use, again when the underlay is another
    /// interface, and after an error.
    pub fn ask(
        &mut self,
        u: &Underlay,
        targets: &[Ipv4Addr],
        wait: Duration,
    ) -> Result<BTreeMap<Ipv4Addr, [u8; 6]>, String> {
        let mut socket = match self.socket.take() {
            Some((name, s)) if name == u.name => s,
            _ => ovr_io::AfPacket::open_arp(&u.name, 64).map_err(|e| e.to_string())?,
        };
        let r = ask(&mut socket, u, targets, wait);
        if r.is_ok() {
            self.socket = Some((u.name.clone(), socket));
        }
        r
    }
}

/// Asks for `targets` through `socket` and collects the answers for up to `wait`.
fn ask(
    socket: &mut ovr_io::AfPacket,
    u: &Underlay,
    targets: &[Ipv4Addr],
    wait: Duration,
) -> Result<BTreeMap<Ipv4Addr, [u8; 6]>, String> {
    let frames: Vec<[u8; 42]> = targets.iter().map(|t| request(u, *t)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    socket.send(&refs).map_err(|e| e.to_string())?;
    let skip = if socket.vnet_hdr() {
        ovr_wire::offload::VNET_HDR_LEN
    } else {
        0
    };
    let wanted: BTreeSet<Ipv4Addr> = targets.iter().copied().collect();
    let mut answers = BTreeMap::new();
    let mut poller = ovr_io::Poller::new(socket.fds());
    let deadline = Instant::now() + wait;
    while answers.len() < wanted.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let _ = poller.wait(i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1));
        socket
            .recv(&mut |frames| {
                for f in frames {
                    if let Some((ip, mac)) = f.get(skip..).and_then(sender)
                        && wanted.contains(&ip)
                    {
                        answers.insert(ip, mac);
                    }
                }
            })
            .map_err(|e| e.to_string())?;
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn underlay() -> Underlay {
        Underlay {
            name: "uplink".into(),
            mac: [2, 0, 0, 0, 0, 1],
            addresses: vec![(Ipv4Addr::new(192, 0, 2, 1), 24)],
        }
    }

    #[test]
    fn a_request_and_its_answer() {
        let u = underlay();
        let q = request(&u, Ipv4Addr::new(192, 0, 2, 9));
        // A request names its sender: our own VTEP and MAC.
        assert_eq!(sender(&q), Some((Ipv4Addr::new(192, 0, 2, 1), u.mac)));
        let mut reply = q;
        reply[21] = 2;
        reply[22..28].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        reply[28..32].copy_from_slice(&[192, 0, 2, 9]);
        assert_eq!(
            sender(&reply),
            Some((Ipv4Addr::new(192, 0, 2, 9), [2, 0, 0, 0, 0, 9]))
        );
        // Truncated, not ARP, a multicast sender MAC: nothing.
        assert_eq!(sender(&reply[..30]), None);
        let mut ip = reply;
        ip[13] = 0;
        assert_eq!(sender(&ip), None);
        let mut multicast = reply;
        multicast[22] = 1;
        assert_eq!(sender(&multicast), None);
    }

    #[test]
    fn unanswered_vteps_are_retried_later_and_off_link_ones_are_explained() {
        let u = underlay();
        let mut n = Neighbours::default();
        let (a, b, far) = (
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 3)),
            IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1)),
        );
        let wanted: BTreeSet<IpAddr> = [a, b, far].into();
        let t0 = Instant::now();
        let ask = n.due(&wanted, Some(&u), t0);
        assert_eq!(ask.len(), 2);
        let answers = [(Ipv4Addr::new(192, 0, 2, 2), [2, 0, 0, 0, 0, 2])].into();
        n.answered(&ask, &answers, None, t0);
        assert_eq!(n.macs().len(), 1);
        // b waits for its retry; then it is asked again.
        assert!(n.due(&wanted, Some(&u), t0).is_empty());
        let later = t0 + Duration::from_millis(150);
        assert_eq!(
            n.due(&wanted, Some(&u), later),
            [Ipv4Addr::new(192, 0, 2, 3)]
        );
        let r = n.report();
        assert_eq!(r.len(), 3);
        assert!(r.iter().any(|v| {
            v["reason"]
                .as_str()
                .is_some_and(|s| s.contains("underlay's subnets"))
        }));
        assert!(r.iter().any(|v| v["reason"] == "no ARP answer (1 tries)"));
        // A VTEP no longer wanted is forgotten; a resolved one is refreshed after 30 s.
        let only_a: BTreeSet<IpAddr> = [a].into();
        assert!(n.due(&only_a, Some(&u), later).is_empty());
        assert_eq!(n.report().len(), 1);
        assert_eq!(
            n.due(&only_a, Some(&u), t0 + REFRESH),
            [Ipv4Addr::new(192, 0, 2, 2)]
        );
    }
}
