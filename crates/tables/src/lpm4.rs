//! TEMPORARY stand-in until the real table lands.
use crate::ids::NextHopId;
use core::net::Ipv4Addr;
use std::collections::BTreeMap;
#[derive(Debug, Clone, Default)]
pub struct Lpm4 { routes: BTreeMap<(Ipv4Addr, u8), NextHopId> }
#[derive(Debug, thiserror::Error)]
#[error("lpm")]
pub struct LpmError;
impl Lpm4 {
    pub fn new() -> Self { Self::default() }
    pub fn insert(&mut self, a: Ipv4Addr, l: u8, nh: NextHopId) -> Result<Option<NextHopId>, LpmError> { Ok(self.routes.insert((a, l), nh)) }
    pub fn remove(&mut self, a: Ipv4Addr, l: u8) -> Option<NextHopId> { self.routes.remove(&(a, l)) }
    pub fn exact(&self, a: Ipv4Addr, l: u8) -> Option<NextHopId> { self.routes.get(&(a, l)).copied() }
    pub fn len(&self) -> usize { self.routes.len() }
    pub fn is_empty(&self) -> bool { self.routes.is_empty() }
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [Option<NextHopId>]) {
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.routes.iter().filter(|((p, l), _)| u32::from(*p) == a & u32::MAX.checked_shl(32 - u32::from(*l)).unwrap_or(0)).max_by_key(|((_, l), _)| *l).map(|(_, n)| *n);
        }
    }
}
