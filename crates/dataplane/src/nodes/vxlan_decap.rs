//! vxlan-decap: the VNI names the VRF; the inner frame continues from ethernet-input,
//! or first from the one-pass path for established flows (`established`) where that is
//! on and the packet is not traced.

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use crate::meta::flags;
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::state::ForwardingState;
use ovr_wire::vxlan::{HEADER_LEN, VxlanPacket};

next_nodes! {
    pub enum Next {
        Established = "established",
        Ethernet = "ethernet-input",
        Drop = "drop",
    }
}

pub struct VxlanDecap;

impl Node<Cx, ForwardingState> for VxlanDecap {
    fn name(&self) -> &'static str {
        "vxlan-decap"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        let one_pass = cx.settings.established_path;
        v.map(|_, p| {
            let (meta, data) = cx.pool.split_mut(p);
            let at = usize::from(meta.l4);
            let vni = match VxlanPacket::new_checked(&data[at..]) {
                Ok(x) => x.vni(),
                Err(e) => return drop(meta, e, Next::Drop),
            };
            let Some(vrf) = st.vrf_by_vni(vni) else {
                return drop(meta, Reason::UnknownVni, Next::Drop);
            };
            meta.vrf = vrf.id.0;
            meta.flags |= flags::FROM_TUNNEL;
            let traced = meta.trace != 0;
            cx.pool.pull_front(p, at + HEADER_LEN);
            if one_pass && !traced {
                Next::Established
            } else {
                Next::Ethernet
            }
        });
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        Some(format!(
            "into {}",
            crate::describe::vrf(st, cx.pool.meta(pkt).vrf)
        ))
    }
}
