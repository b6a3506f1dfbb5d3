//! What is learnt, kept installed as it changes: the speaker's changes (`learn`, a batch
//! as a WatchEvent brings them) go into the `Rib`, and `take` says what to install — the
//! changes to the tables' entries that the batch makes, or, when it cannot be done entry
//! by entry, the whole configuration again (`install::layer`).
//!
//! Entry by entry: a type 2 route changes the MAC and the address it names, in the
//! networks that import it, and the host routes of that MAC; each is decided again alone,
//! as `layer` decides it, from the routes for that MAC or address alone. The whole way:
//! the first time, after the intent, the VTEPs' MACs or the context change, and for a
//! change that needs a tunnel or next hop that is not there, removes the last use of one,
//! adds or removes a VTEP, or touches a type 3 or type 5 route (few: per VTEP and network).

use crate::evpn::{Mac as EvpnMac, Nlri, Route, RouteKey, RouteTarget};
use crate::gobgp::{Change, Learnt};
use crate::install::{self, Layered, State};
use crate::learnt::{Reach, Remote, Rib};
use crate::pernet::{ByNet, PerNetSet};
use core::net::IpAddr;
use ovr_agent::learnt::LearntChange;
use ovr_config::Config;
use ovr_config::values::Mac;
use std::collections::{BTreeMap, BTreeSet};

/// What the intent says about learning: the networks it imports and the host's VTEP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub imports: BTreeMap<RouteTarget, String>,
    pub own: IpAddr,
}

/// What to install next.
#[derive(Debug)]
pub enum Install {
    /// Nothing changed (or there is no intent yet).
    Nothing,
    /// The whole configuration, the intent with what is learnt, and the learnt entries.
    Whole(Box<Layered>),
    /// Changes to learnt bridge entries and host routes, to apply as one batch.
    Changes(Vec<LearntChange>),
}

impl Install {
    /// Installs it through the agent: `None` when nothing changed (or the whole
    /// configuration is the one in force).
    pub fn apply(
        self,
        agent: &mut ovr_agent::Agent,
    ) -> Result<Option<ovr_agent::Applied>, ovr_agent::error::ApiError> {
        match self {
            Install::Nothing => Ok(None),
            Install::Whole(l) if l.config == *agent.config() && l.learnt == *agent.learnt() => {
                Ok(None)
            }
            Install::Whole(l) => agent.replace_layered(l.config, l.learnt).map(Some),
            Install::Changes(cs) => agent.apply_learnt(cs).map(Some),
        }
    }
}

/// The learnt routes, what they mean, and what of it is installed.
#[derive(Debug, Default)]
pub struct Installer {
    rib: Rib,
    intent: Option<Config>,
    context: Option<Context>,
    neighbours: BTreeMap<IpAddr, Mac>,
    /// The reachability the next whole layering is made of (`refresh`), empty once made:
    /// entry by entry, `state` keeps each MAC's remote.
    reach: Reach,
    state: Option<State>,
    /// How many MACs, flood list entries and prefixes each VTEP is used by (VXLAN).
    vteps: BTreeMap<IpAddr, usize>,
    /// Routes not ours that no network imports.
    unimported: u64,
    /// The whole layering is to be done again.
    whole: bool,
    /// `reach` and `vteps` were made again for it already (`refresh`).
    fresh: bool,
    changes: Vec<LearntChange>,
}

impl Installer {
    pub fn rib(&self) -> &Rib {
        &self.rib
    }

    /// The VTEPs what is learnt goes through (VXLAN ones), to resolve (after `refresh`).
    pub fn vteps(&self) -> BTreeSet<IpAddr> {
        self.vteps.keys().copied().collect()
    }

    /// What the layering made: counts, reasons, unresolved VTEPs (no configuration).
    pub fn report(&self) -> Layered {
        self.state
            .as_ref()
            .map(|s| s.out.clone())
            .unwrap_or_default()
    }

    /// A new intent (the whole way follows).
    pub fn set_intent(&mut self, intent: Config, context: Context) {
        self.intent = Some(intent);
        self.context = Some(context);
        self.whole = true;
        self.fresh = false;
    }

    pub fn intent(&self) -> Option<&Config> {
        self.intent.as_ref()
    }

    pub fn context(&self) -> Option<&Context> {
        self.context.as_ref()
    }

    /// The VTEPs' underlay MACs resolved so far (the whole way follows a change).
    pub fn set_neighbours(&mut self, neighbours: BTreeMap<IpAddr, Mac>) {
        if neighbours != self.neighbours {
            self.neighbours = neighbours;
            self.whole = true;
        }
    }

    /// The speaker's table, listed: what is not in it any more is withdrawn, the rest
    /// taken as changes, except the routes in `newer` (the watch changed them while the
    /// listing was under way, so the listing may predate what they are now). Refusals
    /// are counted again from this listing.
    pub fn resync(&mut self, listed: &[Learnt], newer: &Newer) {
        self.rib.refused.retain(|k, _| *k == "unknown_route_target");
        let present: BTreeSet<(&str, RouteKey)> = listed
            .iter()
            .filter_map(|l| Some((l.neighbor.as_str(), l.key()?)))
            .collect();
        let gone: Vec<Learnt> = self
            .rib
            .entries()
            .filter(|(n, key, _)| !present.contains(&(*n, **key)) && !newer.has(n, key))
            .map(|(n, key, _)| Learnt {
                change: Ok(Change::Withdrawn(*key)),
                neighbor: n.to_string(),
            })
            .collect();
        self.learn(&gone);
        if newer.is_empty() {
            self.learn(listed);
        } else {
            let kept: Vec<Learnt> = listed.iter().filter(|l| !newer.of(l)).cloned().collect();
            self.learn(&kept);
        }
    }

    /// Forgets what came from `neighbor`.
    pub fn drop_neighbor(&mut self, neighbor: &str) -> usize {
        let n = self.rib.drop_neighbor(neighbor);
        if n > 0 {
            self.whole = true;
            self.fresh = false;
        }
        n
    }

    /// Takes a batch of changes from the speaker.
    pub fn learn(&mut self, batch: &[Learnt]) {
        let mut macs: ByNet<EvpnMac, ()> = ByNet::default();
        let mut hosts: ByNet<IpAddr, ()> = ByNet::default();
        for l in batch {
            let Some(old) = self.rib.change(l) else {
                continue;
            };
            let new = l.route();
            self.fresh = false;
            if self.whole {
                continue;
            }
            let Some(ctx) = &self.context else {
                self.whole = true;
                continue;
            };
            for (r, add) in [(old.as_ref(), false), (new, true)] {
                let Some(r) = r else { continue };
                let Nlri::MacIp { mac, ip, .. } = &r.nlri else {
                    self.whole = true;
                    break;
                };
                if r.next_hop == ctx.own {
                    continue;
                }
                // A network named by two of its targets comes twice: the sets keep it once.
                let mut imported = false;
                for net in r.targets.iter().filter_map(|t| ctx.imports.get(t)) {
                    imported = true;
                    macs.insert(net, *mac, ());
                    if let Some(ip) = ip {
                        hosts.insert(net, *ip, ());
                    }
                }
                if !imported {
                    if add {
                        self.unimported += 1;
                    } else {
                        self.unimported = self.unimported.saturating_sub(1);
                    }
                }
            }
        }
        if self.whole {
            return;
        }
        if self.unimported > 0 {
            self.rib
                .refused
                .insert("unknown_route_target", self.unimported);
        } else {
            self.rib.refused.remove("unknown_route_target");
        }
        if self.entries(&macs, hosts).is_err() {
            self.whole = true;
        }
    }

    /// Decides the touched MACs and addresses again, entry by entry.
    fn entries(
        &mut self,
        macs: &ByNet<EvpnMac, ()>,
        mut hosts: ByNet<IpAddr, ()>,
    ) -> Result<(), install::Whole> {
        let (Some(ctx), Some(state)) = (&self.context, &mut self.state) else {
            return Err(install::Whole);
        };
        for (net, mac, ()) in macs.iter() {
            let new = self.rib.mac_reach(&ctx.imports, ctx.own, net, *mac);
            let old = state.remote(net, *mac);
            if new == old {
                continue;
            }
            let vtep = |r: Option<Remote>| r.map(|r| r.vtep);
            if let Some(v) = vtep(new) {
                // A VTEP not used yet needs resolving and a tunnel: the whole way.
                *self.vteps.get_mut(&v).ok_or(install::Whole)? += 1;
            }
            if let Some(v) = vtep(old) {
                let n = self.vteps.get_mut(&v).ok_or(install::Whole)?;
                *n -= 1;
                if *n == 0 {
                    return Err(install::Whole);
                }
            }
            state.mac(net, *mac, new.as_ref(), &mut self.changes)?;
            // Its host routes go through it.
            for ip in self.rib.ips_of(*mac) {
                hosts.insert(net, ip, ());
            }
        }
        for (net, &ip, ()) in hosts.iter() {
            let remote = self
                .rib
                .host_reach(&ctx.imports, ctx.own, net, ip)
                .and_then(|m| state.remote(net, m));
            state.host(net, ip, remote.as_ref(), &mut self.changes)?;
        }
        Ok(())
    }

    /// Makes the reachability again if the whole way is next (else it is not needed).
    pub fn refresh(&mut self) {
        let Some(ctx) = &self.context else {
            return;
        };
        if !self.whole || self.fresh {
            return;
        }
        self.rib.refused.remove("unknown_route_target");
        self.reach = self.rib.reach(&ctx.imports, ctx.own);
        self.unimported = self
            .rib
            .refused
            .get("unknown_route_target")
            .copied()
            .unwrap_or(0);
        self.vteps = BTreeMap::new();
        for r in self.reach.remotes() {
            *self.vteps.entry(r.vtep).or_default() += 1;
        }
        self.fresh = true;
    }

    /// What to install now: the changes learnt since the last call, or the whole
    /// configuration.
    pub fn take(&mut self) -> Install {
        if self.whole {
            self.refresh();
            let Some(intent) = &self.intent else {
                return Install::Nothing;
            };
            self.whole = false;
            self.fresh = false;
            self.changes.clear();
            let reach = core::mem::take(&mut self.reach);
            let (l, state) = install::layer_kept(intent, &reach, &self.neighbours);
            self.state = Some(state);
            return Install::Whole(Box::new(l));
        }
        if self.intent.is_none() || self.changes.is_empty() {
            return Install::Nothing;
        }
        Install::Changes(core::mem::take(&mut self.changes))
    }

    /// The whole way next time (what was installed is not what this made).
    pub fn again(&mut self) {
        self.whole = true;
        self.fresh = false;
    }
}

/// The routes the watch changed since a listing was asked for, by neighbor: newer than
/// what the listing will say of them.
#[derive(Debug, Default)]
pub struct Newer(PerNetSet<RouteKey>);

impl Newer {
    /// Notes the routes of a batch the watch brought.
    pub fn saw(&mut self, batch: &[Learnt]) {
        for l in batch {
            if let Some(key) = l.key() {
                self.0.insert(&l.neighbor, key, ());
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many routes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    fn has(&self, neighbor: &str, key: &RouteKey) -> bool {
        self.0.contains(neighbor, key)
    }

    fn of(&self, l: &Learnt) -> bool {
        l.key().is_some_and(|k| self.has(&l.neighbor, &k))
    }
}

/// A route, for tests and benchmarks: `Learnt` of `route` from `neighbor`.
pub fn learnt(neighbor: &str, route: Route, withdrawn: bool) -> Learnt {
    let change = if withdrawn {
        Change::Withdrawn(route.nlri.key())
    } else {
        Change::Announced(route)
    };
    Learnt {
        change: Ok(change),
        neighbor: neighbor.into(),
    }
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;
