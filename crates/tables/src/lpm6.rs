//! TEMPORARY stand-in until the real table lands.
use crate::ids::NextHopId;
use core::net::Ipv6Addr;
use std::collections::BTreeMap;
#[derive(Debug, Clone, Default)]
pub struct Lpm6 { routes: BTreeMap<(Ipv6Addr, u8), NextHopId> }
#[derive(Debug, thiserror::Error)]
#[error("lpm")]
pub struct LpmError;
impl Lpm6 {
    pub fn new() -> Self { Self::default() }
    pub fn insert(&mut self, a: Ipv6Addr, l: u8, nh: NextHopId) -> Result<Option<NextHopId>, LpmError> { Ok(self.routes.insert((a, l), nh)) }
    pub fn remove(&mut self, a: Ipv6Addr, l: u8) -> Option<NextHopId> { self.routes.remove(&(a, l)) }
    pub fn exact(&self, a: Ipv6Addr, l: u8) -> Option<NextHopId> { self.routes.get(&(a, l)).copied() }
    pub fn len(&self) -> usize { self.routes.len() }
    pub fn is_empty(&self) -> bool { self.routes.is_empty() }
}
