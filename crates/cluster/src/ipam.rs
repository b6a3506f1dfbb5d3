//! Addresses handed out cluster-wide (the CNI plugin's `ovr` IPAM type, through any
//! ovrd's API): one key per address, `/ovr/ipam/v1/NETWORK/ADDRESS`, whose value says
//! who holds it (a [`Lease`]). A key is created only if absent (an etcd transaction), so
//! two hosts allocating at once never get the same address: the loser of the race moves
//! on to the next free one. The keys live outside `/ovr/v1/` on purpose: agents watch
//! that prefix and refuse keys they do not know.
//!
//! An address is free when no lease holds it, it is not the subnet's network or
//! broadcast address, no gateway of the network has it, and no port of the network
//! (written by hand, with its own addresses) claims it.

use crate::etcd::Etcd;
use crate::keys::{Key, PREFIX as INTENT};
use crate::model::{self, Network, Port};
use crate::store::{Store, StoreError};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Where the leases are.
pub const PREFIX: &str = "/ovr/ipam/v1/";

/// Who holds an address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lease {
    /// The holder: for the CNI plugin, the port's name (container id and interface).
    pub owner: String,
    /// The host it was allocated for.
    #[serde(default)]
    pub host: String,
    /// Which configuration allocated it (a CNI network's name): garbage collection only
    /// looks at its own.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tag: String,
}

/// An address handed out, with what a workload needs to use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub address: IpAddr,
    /// The subnet's prefix length.
    pub prefix_len: u8,
    /// The network's gateway in that subnet, if it has one.
    pub gateway: Option<IpAddr>,
    #[serde(flatten)]
    pub lease: Lease,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpamError {
    #[error("network '{0}' does not exist")]
    NoNetwork(String),
    #[error("network '{0}' has no IPv{1} subnet to allocate from")]
    NoSubnet(String, u8),
    #[error("network '{0}': every address is taken")]
    Exhausted(String),
    #[error("{0}")]
    Invalid(String),
    /// Asked for a given address that someone else holds.
    #[error("{address} in network '{network}' is held by '{owner}'")]
    Taken {
        network: String,
        address: IpAddr,
        owner: String,
    },
    #[error("etcd: {0}")]
    Unavailable(String),
}

impl From<StoreError> for IpamError {
    fn from(e: StoreError) -> Self {
        IpamError::Unavailable(e.to_string())
    }
}

fn network_prefix(network: &str) -> String {
    format!("{PREFIX}{network}/")
}

/// The key of one address.
pub fn key(network: &str, address: IpAddr) -> String {
    format!("{PREFIX}{network}/{address}")
}

/// The host addresses of a subnet as integers: IPv4 without the network and broadcast
/// addresses (except in /31 and /32), IPv6 without the subnet-router anycast address
/// (all host bits zero, RFC 4291 2.6.1; except in /127 and /128).
fn hosts(subnet: IpAddr, len: u8) -> (u128, u128) {
    let (base, bits) = match subnet {
        IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    };
    let host_bits = bits - u32::from(len).min(bits);
    let last_off = if host_bits == 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    };
    let base = base & !last_off;
    match (subnet, host_bits) {
        (_, 0 | 1) => (base, base + last_off),
        (IpAddr::V4(_), _) => (base + 1, base + last_off - 1),
        (IpAddr::V6(_), _) => (base + 1, base + last_off),
    }
}

fn address(like: IpAddr, a: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(a as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(a)),
    }
}

/// The next free host address of `subnet` (an address and prefix length, IPv4 or IPv6)
/// at or after `from`, wrapping around, skipping everything in `taken` ([`hosts`] says
/// which addresses are hosts).
pub fn pick(
    subnet: IpAddr,
    len: u8,
    taken: &BTreeSet<IpAddr>,
    from: Option<IpAddr>,
) -> Option<IpAddr> {
    let (first, last) = hosts(subnet, len);
    let start = match from {
        Some(IpAddr::V4(f)) if subnet.is_ipv4() => u128::from(u32::from(f)),
        Some(IpAddr::V6(f)) if subnet.is_ipv6() => u128::from(f),
        _ => first,
    }
    .clamp(first, last);
    // Lazy: in a /64 the first free address is found after as many steps as are taken.
    (start..=last)
        .chain(first..start)
        .map(|a| address(subnet, a))
        .find(|a| !taken.contains(a))
}

/// Where in `subnet` the search for `owner` starts: a hash of the owner (FNV-1a), so
/// that an address just released is not handed straight to the next owner.
pub fn spread(subnet: IpAddr, len: u8, owner: &str) -> IpAddr {
    let h = owner.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let (first, last) = hosts(subnet, len);
    let span = last - first;
    let off = if span == u128::MAX {
        u128::from(h)
    } else {
        u128::from(h) % (span + 1)
    };
    address(subnet, first + off)
}

/// Which address an allocation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Any free address of the network's first subnet of this family (4 or 6).
    Family(u8),
    /// This one, if free.
    Address(IpAddr),
}

impl Want {
    fn fits(self, a: IpAddr) -> bool {
        match self {
            Want::Family(4) => a.is_ipv4(),
            Want::Family(_) => a.is_ipv6(),
            Want::Address(w) => w == a,
        }
    }
}

/// The cluster's address allocator, on etcd.
#[derive(Clone)]
pub struct Ipam {
    db: Etcd,
}

impl Ipam {
    pub fn new(db: Etcd) -> Self {
        Self { db }
    }

    async fn network(&self, name: &str) -> Result<Network, IpamError> {
        let k = Key::Network(name.to_string());
        let text = k.to_string();
        let snap = self.db.list(&text).await?;
        let kv = snap
            .kvs
            .iter()
            .find(|kv| kv.key == text)
            .ok_or_else(|| IpamError::NoNetwork(name.to_string()))?;
        match model::parse(&k, &kv.value) {
            Ok(model::Value::Network(n)) => Ok(n),
            Ok(_) => Err(IpamError::NoNetwork(name.to_string())),
            Err(e) => Err(IpamError::Invalid(format!("network '{name}': {e}"))),
        }
    }

    /// Every lease of a network, by address.
    pub async fn list(&self, network: &str) -> Result<Vec<(IpAddr, Lease)>, IpamError> {
        let p = network_prefix(network);
        let snap = self.db.list(&p).await?;
        Ok(snap
            .kvs
            .iter()
            .filter_map(|kv| {
                let a = kv.key.strip_prefix(&p)?.parse().ok()?;
                let l = serde_json::from_slice(&kv.value).ok()?;
                Some((a, l))
            })
            .collect())
    }

    /// An address of `network` for `lease.owner`: the one of that family (or that very
    /// address) it holds already if any (allocating twice for one owner gives one
    /// address), else the address wanted if free, else the first free one of the
    /// network's first subnet of the family, from a place that depends on the owner
    /// ([`spread`]).
    pub async fn allocate(
        &self,
        network: &str,
        lease: Lease,
        want: Want,
    ) -> Result<Allocation, IpamError> {
        let net = self.network(network).await?;
        let subnet = net
            .subnets
            .iter()
            .map(|s| s.0)
            .find(|s| match want {
                Want::Address(w) => s.contains(w),
                Want::Family(4) => s.addr().is_ipv4(),
                Want::Family(_) => s.addr().is_ipv6(),
            })
            .ok_or_else(|| match want {
                Want::Address(w) => {
                    IpamError::Invalid(format!("{w} is in no subnet of network '{network}'"))
                }
                Want::Family(f) => IpamError::NoSubnet(network.to_string(), f),
            })?;
        let gateway = net
            .gateways
            .iter()
            .map(|g| g.0.addr)
            .find(|g| subnet.contains(*g));
        let done = |address| Allocation {
            address,
            prefix_len: subnet.prefix_len(),
            gateway,
            lease: lease.clone(),
        };
        let held = self.list(network).await?;
        if let Some((a, _)) = held
            .iter()
            .find(|(a, l)| l.owner == lease.owner && want.fits(*a))
        {
            return Ok(done(*a));
        }
        let mut taken: BTreeSet<IpAddr> = held.iter().map(|(a, _)| *a).collect();
        taken.extend(net.gateways.iter().map(|g| g.0.addr));
        taken.extend(self.port_addresses(network).await?);
        let value = serde_json::to_vec(&lease).map_err(|e| IpamError::Invalid(e.to_string()))?;
        if let Want::Address(w) = want {
            if let Some((_, l)) = held.iter().find(|(a, _)| *a == w) {
                return Err(IpamError::Taken {
                    network: network.to_string(),
                    address: w,
                    owner: l.owner.clone(),
                });
            }
            return match self.db.create(&key(network, w), value).await? {
                Some(_) => Ok(done(w)),
                None => Err(IpamError::Taken {
                    network: network.to_string(),
                    address: w,
                    owner: "another owner".into(),
                }),
            };
        }
        let (base, len) = (subnet.addr(), subnet.prefix_len());
        // Each owner starts looking at a place of its own in the subnet: an address just
        // released is not handed straight to the next container, whose MAC differs
        // (neighbours would keep the old one in their caches for a while).
        let mut from = spread(base, len, &lease.owner);
        loop {
            let ip = pick(base, len, &taken, Some(from))
                .ok_or_else(|| IpamError::Exhausted(network.to_string()))?;
            if self
                .db
                .create(&key(network, ip), value.clone())
                .await?
                .is_some()
            {
                return Ok(done(ip));
            }
            // Someone else took it meanwhile: on to the next.
            taken.insert(ip);
            from = ip;
        }
    }

    /// The addresses ports of `network` claim (a port written by hand has its own).
    async fn port_addresses(&self, network: &str) -> Result<Vec<IpAddr>, IpamError> {
        let snap = self.db.list(&format!("{INTENT}ports/")).await?;
        Ok(snap
            .kvs
            .iter()
            .filter_map(|kv| serde_json::from_slice::<Port>(&kv.value).ok())
            .filter(|p| p.network == network)
            .flat_map(|p| p.ips)
            .collect())
    }

    /// Releases what `owner` holds in `network` (every address, or only `address`): the
    /// addresses released; none is not an error (releasing twice is fine).
    pub async fn release(
        &self,
        network: &str,
        owner: &str,
        address: Option<IpAddr>,
    ) -> Result<Vec<IpAddr>, IpamError> {
        let mut gone = Vec::new();
        for (a, l) in self.list(network).await? {
            if l.owner == owner && address.is_none_or(|w| w == a) {
                self.db.remove(&key(network, a)).await?;
                gone.push(a);
            }
        }
        Ok(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<IpAddr> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn picks_the_lowest_free_host_address() {
        let net = ip("10.1.0.0");
        assert_eq!(
            pick(net, 24, &set(&["10.1.0.1"]), None),
            Some(ip("10.1.0.2"))
        );
        // After a given address, wrapping around; never the network or broadcast.
        assert_eq!(
            pick(net, 24, &set(&["10.1.0.1"]), Some(ip("10.1.0.254"))),
            Some(ip("10.1.0.254"))
        );
        let all: Vec<String> = (1..=253).map(|i| format!("10.1.0.{i}")).collect();
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        assert_eq!(
            pick(net, 24, &set(&refs), Some(ip("10.1.0.100"))),
            Some(ip("10.1.0.254"))
        );
        let mut full = refs.clone();
        full.push("10.1.0.254");
        assert_eq!(pick(net, 24, &set(&full), None), None);
        // A /30 has two host addresses; a /32 its one.
        let n30 = ip("10.9.0.4");
        assert_eq!(
            pick(n30, 30, &set(&["10.9.0.5"]), None),
            Some(ip("10.9.0.6"))
        );
        assert_eq!(pick(n30, 30, &set(&["10.9.0.5", "10.9.0.6"]), None), None);
        assert_eq!(pick(n30, 32, &set(&[]), None), Some(n30));
        // An address of the other family is no place to start from.
        assert_eq!(
            pick(net, 24, &set(&[]), Some(ip("fd00::9"))),
            Some(ip("10.1.0.1"))
        );
    }

    #[test]
    fn ipv6_skips_only_the_subnet_router_anycast_address() {
        let net = ip("fd00:1::");
        assert_eq!(
            pick(net, 64, &set(&["fd00:1::1"]), None),
            Some(ip("fd00:1::2"))
        );
        // The last address of the subnet is a host (IPv6 has no broadcast).
        let last = ip("fd00:1::ffff:ffff:ffff:ffff");
        assert_eq!(pick(net, 64, &set(&[]), Some(last)), Some(last));
        assert_eq!(
            pick(net, 64, &set(&["fd00:1::ffff:ffff:ffff:ffff"]), Some(last)),
            Some(ip("fd00:1::1"))
        );
        let n126 = ip("fd00:1::4");
        assert_eq!(
            pick(n126, 126, &set(&["fd00:1::5", "fd00:1::6"]), None),
            Some(ip("fd00:1::7"))
        );
        assert_eq!(pick(n126, 128, &set(&[]), None), Some(n126));
        // Host bits given in the subnet are ignored; a /0 does not overflow.
        assert_eq!(
            pick(ip("fd00:1::77"), 64, &set(&[]), None),
            Some(ip("fd00:1::1"))
        );
        assert_eq!(pick(ip("::"), 0, &set(&[]), None), Some(ip("::1")));
        assert_eq!(spread(ip("::"), 0, "x"), spread(ip("::"), 0, "x"));
    }

    #[test]
    fn owners_start_at_different_places_inside_the_subnet() {
        let net = ip("10.1.0.0");
        let starts: BTreeSet<IpAddr> = (0..20)
            .map(|i| spread(net, 24, &format!("c{i}-eth0")))
            .collect();
        assert!(starts.len() > 15, "{starts:?}");
        let inside = |a: &IpAddr| matches!(a, IpAddr::V4(v) if v.octets()[..3] == [10, 1, 0]);
        assert!(starts.iter().all(inside));
        assert!(!starts.contains(&ip("10.1.0.0")) && !starts.contains(&ip("10.1.0.255")));
        assert_eq!(spread(net, 24, "c1-eth0"), spread(net, 24, "c1-eth0"));
        assert_eq!(spread(net, 32, "x"), net);
        let v6: BTreeSet<IpAddr> = (0..20)
            .map(|i| spread(ip("fd00:1::"), 64, &format!("c{i}-eth0")))
            .collect();
        assert_eq!(v6.len(), 20);
        let prefix =
            |a: &IpAddr| matches!(a, IpAddr::V6(v) if v.segments()[..4] == [0xfd00, 1, 0, 0]);
        assert!(v6.iter().all(prefix), "{v6:?}");
    }

    #[test]
    fn a_lease_reads_back_and_keys_are_outside_the_agents_prefix() {
        let l = Lease {
            owner: "c1-eth0".into(),
            host: "h1".into(),
            tag: String::new(),
        };
        let t = serde_json::to_string(&l).unwrap();
        assert_eq!(t, r#"{"owner":"c1-eth0","host":"h1"}"#);
        assert_eq!(serde_json::from_str::<Lease>(&t).unwrap(), l);
        let k = key("red", "10.1.0.5".parse().unwrap());
        assert_eq!(k, "/ovr/ipam/v1/red/10.1.0.5");
        assert!(!k.starts_with(INTENT));
    }
}
