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
}
