//! The kernel side, over rtnetlink: the veth pair (one end in ovrd's namespace, the
//! other in the container's), the container end's addresses and routes, and what CHECK
//! reads back. Each namespace gets its own netlink socket, opened inside it.

use crate::error::{self, CniError};
use crate::netns;
use core::net::IpAddr;
use futures_util::TryStreamExt;
use netlink_packet_route::address::{AddressAttribute, AddressFlags};
use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth, LinkAttribute};
use rtnetlink::{Handle, LinkMessageBuilder, LinkUnspec, LinkVeth, RouteMessageBuilder};
use std::fs::File;
use std::os::fd::AsRawFd;

/// A netlink handle working in namespace `ns` (its connection runs on the current
/// tokio runtime).
pub fn handle_in(ns: &File) -> Result<Handle, CniError> {
    // The socket registers with the runtime as it is made: the thread enters it.
    let rt = tokio::runtime::Handle::current();
    let (conn, handle, _) = netns::run_in(ns, move || {
        let _in = rt.enter();
        rtnetlink::new_connection()
    })?
    .map_err(|e| error::link("netlink socket", e))?;
    tokio::spawn(conn);
    Ok(handle)
}

fn enodev(e: &rtnetlink::Error) -> bool {
    matches!(e, rtnetlink::Error::NetlinkError(m) if m.raw_code() == -19)
}

/// The index of interface `name`, if there is one.
pub async fn index(h: &Handle, name: &str) -> Result<Option<u32>, CniError> {
    let mut s = h.link().get().match_name(name.to_string()).execute();
    match s.try_next().await {
        Ok(Some(m)) => Ok(Some(m.header.index)),
        Ok(None) => Ok(None),
        Err(e) if enodev(&e) => Ok(None),
        Err(e) => Err(error::link(&format!("looking up {name}"), e)),
    }
}

/// What CHECK compares: the MAC, the MTU and the addresses of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub mac: Vec<u8>,
    pub mtu: u32,
    pub addresses: Vec<(IpAddr, u8)>,
}

pub async fn inspect(h: &Handle, name: &str) -> Result<Option<Seen>, CniError> {
    let mut s = h.link().get().match_name(name.to_string()).execute();
    let m = match s.try_next().await {
        Ok(Some(m)) => m,
        Ok(None) => return Ok(None),
        Err(e) if enodev(&e) => return Ok(None),
        Err(e) => return Err(error::link(&format!("looking up {name}"), e)),
    };
    let mut seen = Seen {
        mac: Vec::new(),
        mtu: 0,
        addresses: Vec::new(),
    };
    for a in &m.attributes {
        match a {
            LinkAttribute::Address(mac) => seen.mac = mac.clone(),
            LinkAttribute::Mtu(mtu) => seen.mtu = *mtu,
            _ => {}
        }
    }
    let mut addrs = h
        .address()
        .get()
        .set_link_index_filter(m.header.index)
        .execute();
    while let Some(a) = addrs
        .try_next()
        .await
        .map_err(|e| error::link("listing addresses", e))?
    {
        for attr in &a.attributes {
            if let AddressAttribute::Address(ip) = attr {
                seen.addresses.push((*ip, a.header.prefix_len));
            }
        }
    }
    Ok(Some(seen))
}

/// Makes the veth pair from ovrd's namespace (`h`): `host` stays there, `ifname` goes
/// into `container` with `mac` and `mtu`, in one request (both ends or neither).
pub async fn create_pair(
    h: &Handle,
    host: &str,
    ifname: &str,
    container: &File,
    mac: [u8; 6],
    mtu: u32,
) -> Result<(), CniError> {
    let peer = LinkMessageBuilder::<LinkUnspec>::new()
        .name(ifname.to_string())
        .address(mac.to_vec())
        .mtu(mtu)
        .setns_by_fd(container.as_raw_fd())
        // One queue each way: ovrd's AF_XDP sockets are per queue (docs/io.md).
        .append_extra_attribute(LinkAttribute::NumRxQueues(1))
        .append_extra_attribute(LinkAttribute::NumTxQueues(1))
        .build();
    let msg = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
        .name(host.to_string())
        .mtu(mtu)
        .append_extra_attribute(LinkAttribute::NumRxQueues(1))
        .append_extra_attribute(LinkAttribute::NumTxQueues(1))
        .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
        .build();
    h.link()
        .add(msg)
        .execute()
        .await
        .map_err(|e| error::link(&format!("creating veth {host} / {ifname}"), e))
}

pub async fn up(h: &Handle, index: u32) -> Result<(), CniError> {
    h.link()
        .set(LinkUnspec::new_with_index(index).up().build())
        .execute()
        .await
        .map_err(|e| error::link("setting the link up", e))
}

pub async fn add_address(h: &Handle, index: u32, ip: IpAddr, len: u8) -> Result<(), CniError> {
    let mut req = h.address().add(index, ip, len);
    if ip.is_ipv6() {
        // No duplicate address detection: the address is unique by its IPAM, and DAD
        // would keep it tentative (unusable) for a second or more after ADD returns.
        req.message_mut()
            .attributes
            .push(AddressAttribute::Flags(AddressFlags::Nodad));
    }
    req.execute()
        .await
        .map_err(|e| error::link(&format!("adding {ip}/{len}"), e))
}

pub async fn add_route(
    h: &Handle,
    index: u32,
    dst: (IpAddr, u8),
    gw: Option<IpAddr>,
) -> Result<(), CniError> {
    let bad = |e| error::link(&format!("route to {}/{}", dst.0, dst.1), e);
    let mut b = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(dst.0, dst.1)
        .map_err(bad)?
        .output_interface(index);
    if let Some(gw) = gw {
        b = b.gateway(gw).map_err(bad)?;
    }
    h.route()
        .add(b.build())
        .execute()
        .await
        .map_err(|e| error::link(&format!("route to {}/{}", dst.0, dst.1), e))
}

/// Deletes interface `name` (its veth peer goes with it); gone already is fine.
pub async fn delete(h: &Handle, name: &str) -> Result<bool, CniError> {
    let Some(i) = index(h, name).await? else {
        return Ok(false);
    };
    match h.link().del(i).execute().await {
        Ok(()) => Ok(true),
        Err(e) if enodev(&e) => Ok(false),
        Err(e) => Err(error::link(&format!("deleting {name}"), e)),
    }
}
