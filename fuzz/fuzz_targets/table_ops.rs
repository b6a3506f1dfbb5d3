//! Arbitrary batches of table changes: validation must refuse what is inconsistent, and
//! nothing may panic, whatever the sequence.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceKind};
use ovr_tables::nexthop::{Ecmp, Encap, NextHop, Tunnel};
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::{TableOp, new_tables};
use ovr_wire::ethernet::MacAddr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Reads small numbers from the fuzzer's bytes, so that ids collide often.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes([self.u8()?, self.u8()?, self.u8()?, self.u8()?]))
    }
    fn small(&mut self) -> Option<u32> {
        Some(u32::from(self.u8()? % 8))
    }
    fn prefix(&mut self) -> Option<IpPrefix> {
        let len = self.u8()?;
        let addr = if len & 0x80 == 0 {
            IpAddr::V4(Ipv4Addr::from(self.u32()?))
        } else {
            IpAddr::V6(Ipv6Addr::from(u128::from(self.u32()?) << 96))
        };
        let max = if addr.is_ipv4() { 33 } else { 129 };
        let len = (len & 0x7f) % max;
        // Mask host bits: the parser refusing them is tested in the prefix module.
        let masked = match addr {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0))),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) & u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0))),
        };
        IpPrefix::new(masked, len).ok()
    }

    fn op(&mut self) -> Option<TableOp> {
        let nh = |b: &mut Self| b.small().map(NextHopId);
        Some(match self.u8()? % 13 {
            0 => TableOp::UpsertVrf { id: VrfId(self.small()?), name: "v".into(), vni: Some(self.small()?) },
            1 => TableOp::RemoveVrf(VrfId(self.small()?)),
            2 => {
                let id = self.small()?;
                let vrf = self.small()?;
                TableOp::UpsertInterface(Interface {
                    id: InterfaceId(id),
                    name: format!("if{}", self.small()?),
                    kind: if vrf == 0 { InterfaceKind::Underlay } else { InterfaceKind::Workload },
                    vrf: (vrf != 0).then_some(VrfId(vrf)),
                    mac: MacAddr([2, 0, 0, 0, 0, id as u8]),
                    addresses: vec![],
                    mtu: 1500,
                    policy: true,
                    admin_up: true,
                    memif: None,
                    police: None,
                })
            }
            3 => TableOp::RemoveInterface(InterfaceId(self.small()?)),
            4 => TableOp::UpsertNextHop(
                nh(self)?,
                NextHop::Interface { interface: InterfaceId(self.small()?), dst_mac: MacAddr([2, 0, 0, 0, 0, 1]) },
            ),
            5 => TableOp::UpsertNextHop(
                nh(self)?,
                NextHop::Tunnel(Tunnel {
                    encap: Encap::MplsOverUdp { label: self.u32()? % (1 << 21) },
                    underlay: InterfaceId(self.small()?),
                    src: "192.0.2.1".parse().ok()?,
                    dst: "192.0.2.2".parse().ok()?,
                    dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                    inner_dst: (self.u8()? & 1 == 1).then_some(MacAddr([2, 0, 0, 0, 0, 3])),
                }),
            ),
            6 => {
                let id = nh(self)?;
                let members: Vec<NextHopId> = (0..self.u8()? % 4).filter_map(|_| nh(self)).collect();
                TableOp::UpsertNextHop(id, NextHop::Composite(Ecmp::new(&members)))
            }
            7 => TableOp::RemoveNextHop(nh(self)?),
            8 => TableOp::AddRoute { vrf: VrfId(self.small()?), prefix: self.prefix()?, nh: nh(self)? },
            9 => TableOp::RemoveRoute { vrf: VrfId(self.small()?), prefix: self.prefix()? },
            10 => TableOp::AddLabel { label: self.u32()? % (1 << 21), nh: nh(self)? },
            11 => TableOp::SetFlowQuota { vrf: VrfId(self.small()?), max: Some(self.u32()?).filter(|m| m % 2 == 0) },
            _ => TableOp::RemoveLabel(self.u32()? % (1 << 21)),
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let (mut w, r) = new_tables();
    let mut b = Bytes(data);
    while let Some(n) = b.u8() {
        let batch: Vec<TableOp> = (0..n % 5).map_while(|_| b.op()).collect();
        let _ = w.commit(batch);
    }
    let t = r.enter().expect("writer alive");
    for (_, h) in t.nexthops() {
        for m in h.members() {
            assert!(t.nexthop(*m).is_some(), "dangling composite member");
        }
    }
});
