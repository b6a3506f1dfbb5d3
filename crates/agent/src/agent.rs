//! The agent proper: the desired configuration, what is installed in the tables, and the
//! one way to change them.
//!
//! Two ways to apply a change, with the same outcome (the property tests compare them):
//! - A batch of nothing but routes, bridge entries and labels (what churns: thousands a
//!   second) is applied to the model in place and only the entries it touched are
//!   translated and compared with what is installed; the state file gets one record
//!   appended. Cost: the size of the batch, not of the model.
//! - Anything else (interfaces, networks, tunnels, next hops, policies, or an entry that
//!   collides with one a workload's `peer_mac` makes) builds the new model, translates it
//!   whole (keeping ids), commits the difference and rewrites the state file.
//!
//! Either way a failure at any step leaves the model, the tables and the state file as
//! they were.
//!
//! Beside the configuration, the entries learnt from peers (`learnt`: EVPN's MACs and
//! host routes) go to the tables directly, neither in the model nor in the state file;
//! every install adds them where the configuration has no entry of its own.

use crate::change::{Change, Key, Object, Placed};
use crate::error::ApiError;
use crate::learnt::{Learnt, LearntChange, LearntKey};
use crate::model::Model;
use crate::reconcile::{Desired, Entry, diff};
use crate::store::{SavedIds, Source, Start, Store, StoreError};
use ovr_config::model::Config;
use ovr_config::{ConfigError, Names};
use ovr_tables::fasthash::FastHasher;
use ovr_tables::ids::{InterfaceId, NextHopId};
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::TablesWriter;
use std::collections::{BTreeMap, HashSet};
use std::hash::BuildHasherDefault;
use std::sync::Arc;
use std::time::Instant;

pub struct Agent {
    model: Model,
    /// The configuration file the state started from (saved with it).
    base: Option<Config>,
    /// Names and their ids, as installed (shared: the API reads them without taking the
    /// agent's lock, which a long change holds).
    names: Arc<Names>,
    /// What the tables hold, by table key.
    installed: Desired,
    /// What was learnt from peers, by name (installed where `names` has its network and
    /// next hop and the configuration no entry of its own).
    learnt: Learnt,
    /// Every interface name that was ever given an id, with it: a name that comes back
    /// gets its id back, and an id is never handed to another name. ovrd's drivers are
    /// bound to interface ids at start, so an id must not change meaning under them.
    interface_ids: BTreeMap<String, InterfaceId>,
    writer: TablesWriter,
    store: Option<Store>,
    /// Where to keep the state before the first save, when the configuration file
    /// replaced it at start.
    previous_state: Option<std::path::PathBuf>,
    /// How many changes were accepted since the start (`generation`).
    generation: u64,
}

/// What an accepted change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Applied {
    /// Table changes committed (0: the configuration already was so).
    pub table_changes: usize,
    /// Only the entries the change touched were translated (routes, bridge entries and
    /// labels); otherwise the whole configuration was.
    pub incremental: bool,
    /// Where the time went.
    pub spent_us: Spent,
}

/// Microseconds spent in each step of applying a change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Spent {
    /// Applying the changes to the model (and checking keys and references).
    pub model: u64,
    /// Translating names to table entries.
    pub translate: u64,
    /// Comparing with what is installed.
    pub diff: u64,
    /// Validating and publishing the table changes.
    pub commit: u64,
    /// Writing the state file.
    pub save: u64,
}

/// Microseconds since `t`; restarts `t`.
fn lap(t: &mut Instant) -> u64 {
    let now = Instant::now();
    let us = now.duration_since(*t).as_micros() as u64;
    *t = now;
    us
}

type FastSet<T> = HashSet<T, BuildHasherDefault<FastHasher>>;

/// The next hop an entry should have, and the document path that says so (`None`: no
/// entry).
type Wanted = Option<(NextHopId, ovr_config::Origin)>;

/// A change to a route, bridge entry or label and nothing else.
fn entry_change(c: &Change) -> bool {
    match c {
        Change::Create(o) | Change::Replace(o) => {
            matches!(o, Object::Route(_) | Object::Bridge(_) | Object::Label(_))
        }
        Change::Delete(k) => matches!(
            k,
            Key::Route { .. } | Key::Bridge { .. } | Key::Label { .. }
        ),
        Change::SetPolicy(_) => false,
    }
}

/// `prefix.name`, or `name` alone for a single change.
fn field(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

impl Agent {
    /// Installs the starting configuration in (empty) tables and saves the state.
    pub fn start(
        start: Start,
        writer: TablesWriter,
        store: Option<Store>,
    ) -> Result<Self, StoreError> {
        let mut agent = Self::start_unsaved(start, writer, store)?;
        agent.started()?;
        Ok(agent)
    }

    /// Installs the starting configuration in (empty) tables, without saving anything:
    /// a daemon calls `started` once it forwards with it, so that a start that fails
    /// (an interface that cannot be opened, a socket in use) leaves the state file, and
    /// the configuration file's effect on it, as they were.
    pub fn start_unsaved(
        start: Start,
        mut writer: TablesWriter,
        store: Option<Store>,
    ) -> Result<Self, StoreError> {
        let t = start.config.translate_keeping(&start.ids)?;
        t.apply(&mut writer)?;
        let mut interface_ids = start.ids.interfaces.clone();
        interface_ids.extend(t.names.interfaces.clone());
        let installed = Desired::of(&t);
        let previous_state = match start.source {
            Source::ConfigFileChanged { previous_state } => Some(previous_state),
            Source::ConfigFile | Source::State => None,
        };
        Ok(Self {
            model: Model::new(start.config),
            base: start.base,
            names: Arc::new(t.names),
            installed,
            learnt: Learnt::default(),
            interface_ids,
            writer,
            store,
            previous_state,
            generation: 0,
        })
    }

    /// The start went well: keeps the previous state if the configuration file replaced
    /// it, and saves the state.
    pub fn started(&mut self) -> Result<(), StoreError> {
        if let (Some(to), Some(store)) = (self.previous_state.take(), &self.store) {
            store.back_up(&to)?;
        }
        self.save()
    }

    pub fn config(&self) -> &Config {
        self.model.config()
    }

    /// The entries learnt from peers.
    pub fn learnt(&self) -> &Learnt {
        &self.learnt
    }

    /// Whether the tables hold learnt entry `key` of `network` as learnt (not shadowed by
    /// a configured entry, its network and next hop there).
    pub fn learnt_installed(&self, network: &str, key: LearntKey) -> bool {
        self.names.networks.get(network).is_some_and(|&vrf| {
            let at = self.installed.get(Entry::learnt(vrf, key));
            at.is_some_and(|(_, o)| *o == ovr_config::Origin::Learnt)
        })
    }

    /// Changes once per accepted change to the configuration: a caller that saw
    /// generation `g` knows that the configuration is still the one it saw while it is
    /// `g`, without comparing it.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Where the object with this key is in its section of `config()`.
    pub fn find(&self, key: &Key) -> Option<usize> {
        self.model.find(key)
    }

    /// Names and the ids they have in the tables.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The names, to be read after the agent's lock is let go (they are replaced, never
    /// changed in place).
    pub fn shared_names(&self) -> Arc<Names> {
        Arc::clone(&self.names)
    }

    pub fn writer(&self) -> &TablesWriter {
        &self.writer
    }

    /// Commits what ovrd sees of the host (service ports' links): state of the tables
    /// that is not configuration, so neither the model nor the state file change.
    pub fn report_health(
        &mut self,
        ops: Vec<ovr_tables::state::TableOp>,
    ) -> Result<(), ovr_tables::state::BatchError> {
        self.writer.commit(ops)
    }

    /// Rewrites the state file whole.
    fn save(&mut self) -> Result<(), StoreError> {
        match &mut self.store {
            Some(s) => s.save(
                self.base.as_ref(),
                self.model.config(),
                &SavedIds::of(&self.interface_ids, &self.names),
            ),
            None => Ok(()),
        }
    }

    /// Applies changes all-or-nothing. `batch`: errors name the change
    /// ("changes[2].create.route.nexthop"); otherwise the field of the one object.
    pub fn apply(&mut self, changes: Vec<Change>, batch: bool) -> Result<Applied, ApiError> {
        // Nothing to change, nothing to save: no record, no fsync.
        if changes.is_empty() {
            return Ok(Applied {
                table_changes: 0,
                incremental: true,
                spent_us: Spent::default(),
            });
        }
        if changes.iter().all(entry_change) && !self.collides_with_peers(&changes) {
            return self.apply_entries(changes, batch);
        }
        let mut t = Instant::now();
        let mut new = self.model.clone();
        let mut placed = Vec::with_capacity(changes.len());
        let mut log = Vec::new();
        for (k, c) in changes.into_iter().enumerate() {
            let prefix = prefix(&c, k, batch);
            let at = new
                .apply(c, &mut log)
                .map_err(|e| if batch { e.under(&prefix) } else { e })?;
            log.clear();
            placed.push((at, prefix));
        }
        let spent = Spent {
            model: lap(&mut t),
            ..Spent::default()
        };
        self.install(new, None, &placed, spent)
    }

    /// Replaces the whole desired configuration (flow settings excepted: they are the
    /// dataplane's, set at start). The learnt entries stay.
    pub fn replace(&mut self, new: Config) -> Result<Applied, ApiError> {
        self.replace_with(new, None)
    }

    /// Replaces the configuration and the learnt entries together (how the learning
    /// installs when it cannot go entry by entry: a new intent, a new VTEP).
    pub fn replace_layered(&mut self, new: Config, learnt: Learnt) -> Result<Applied, ApiError> {
        self.replace_with(new, Some(learnt))
    }

    fn replace_with(&mut self, new: Config, learnt: Option<Learnt>) -> Result<Applied, ApiError> {
        if new.flows != self.config().flows {
            return Err(ApiError::invalid(
                "flows",
                "flow settings apply when ovrd starts: change them in the configuration file",
            ));
        }
        self.install(Model::new(new), learnt, &[], Spent::default())
    }

    /// Applies changes to the learnt entries as one batch, all or nothing. A change to
    /// an entry the configuration has (or whose network it has not) changes the learnt
    /// set only. Not saved: peers give these again after a restart.
    pub fn apply_learnt(&mut self, changes: Vec<LearntChange>) -> Result<Applied, ApiError> {
        let mut t = Instant::now();
        let mut spent = Spent::default();
        let mut undo = Vec::with_capacity(changes.len());
        for c in changes {
            let old = self.learnt.set(&c.network, c.key, c.nexthop);
            undo.push((c.network, c.key, old));
        }
        spent.model = lap(&mut t);
        let mut ops = Vec::new();
        let mut installs = Vec::new();
        let mut seen: FastSet<Entry> = FastSet::default();
        seen.reserve(undo.len());
        let mut failed = None;
        for (network, key, _) in &undo {
            let Some(&vrf) = self.names.networks.get(&**network) else {
                continue;
            };
            let entry = Entry::learnt(vrf, *key);
            if !seen.insert(entry) {
                continue;
            }
            let old = match self.installed.get(entry) {
                Some((_, o)) if *o != ovr_config::Origin::Learnt => continue,
                at => at.map(|x| x.0),
            };
            let new = match self.learnt.get(network, *key) {
                None => None,
                Some(nh) => match self.names.nexthops.get(&**nh) {
                    Some(&id) => Some(id),
                    None => {
                        failed = Some(format!("no next hop named '{nh}'"));
                        break;
                    }
                },
            };
            if old != new {
                ops.push(entry.op(new));
                installs.push((entry, new));
            }
        }
        spent.translate = lap(&mut t);
        let n = ops.len();
        let committed = match failed {
            Some(message) => Err(ApiError::invalid("nexthop", message)),
            None if n == 0 => Ok(()),
            None => self
                .writer
                .commit(ops)
                .map_err(|e| ApiError::invalid("(learnt)", e.error.to_string())),
        };
        if let Err(e) = committed {
            for (network, key, old) in undo.into_iter().rev() {
                self.learnt.set(&network, key, old);
            }
            return Err(e);
        }
        spent.commit = lap(&mut t);
        for (entry, new) in installs {
            self.installed
                .set_entry(entry, new.map(|nh| (nh, ovr_config::Origin::Learnt)));
        }
        Ok(Applied {
            table_changes: n,
            incremental: true,
            spent_us: spent,
        })
    }

    /// Whether a change touches a route or bridge entry that a workload's `peer_mac`
    /// also makes: which of the two the tables hold depends on the whole translation's
    /// order, so such a change takes the whole way.
    fn collides_with_peers(&self, changes: &[Change]) -> bool {
        let c = self.config();
        let peers: Vec<_> = c
            .interfaces
            .iter()
            .filter(|f| f.peer_mac.is_some() && f.network.is_some())
            .collect();
        if peers.is_empty() {
            return false;
        }
        let mut routes = HashSet::new();
        let mut macs = HashSet::new();
        for f in peers {
            let net = f.network.as_deref().unwrap_or_default();
            for a in &f.peer_addresses {
                let len = if a.is_ipv4() { 32 } else { 128 };
                if let Ok(p) = IpPrefix::new(*a, len) {
                    routes.insert((net, p));
                }
            }
            if let Some(m) = f.peer_mac {
                macs.insert((net, m.0));
            }
        }
        changes.iter().any(|ch| {
            let key = match ch {
                Change::Create(o) | Change::Replace(o) => o.key(),
                Change::Delete(k) => k.clone(),
                Change::SetPolicy(_) => return false,
            };
            match &key {
                Key::Route { network, prefix } => routes.contains(&(network.as_str(), prefix.0)),
                Key::Bridge { network, mac } => macs.contains(&(network.as_str(), mac.0)),
                _ => false,
            }
        })
    }

    /// The table entry a route, bridge or label key stands for, and the next hop the
    /// model now wants there (`None`: none, or the entry's network does not exist).
    fn translate_entry(
        &self,
        key: &Key,
        origin: Origin,
    ) -> Result<Option<(Entry, Wanted)>, ApiError> {
        let network = |name: &str| self.names.networks.get(name).copied();
        let nexthop = |name: &str| {
            self.names.nexthops.get(name).copied().ok_or_else(|| {
                ApiError::invalid(
                    field(&origin.prefix(), "nexthop"),
                    format!("no next hop named '{name}'"),
                )
            })
        };
        let no_network = |name: &str| {
            ApiError::invalid(
                field(&origin.prefix(), "network"),
                format!("no network named '{name}'"),
            )
        };
        // The entry's place and next hop in the model, if it is there; else a learnt
        // one's (`learnt`: its network and key; installed if its next hop is there).
        let found = self.model.entry_nexthop(key);
        let want = |section, learnt: Option<(&str, LearntKey)>| -> Result<Wanted, ApiError> {
            let Some((i, nh)) = found else {
                let learnt_nh = learnt.and_then(|(n, k)| self.learnt.get(n, k));
                let id = learnt_nh.and_then(|nh| self.names.nexthops.get(&**nh));
                return Ok(id.map(|id| (*id, ovr_config::Origin::Learnt)));
            };
            Ok(Some((nexthop(nh)?, ovr_config::Origin::Entry(section, i))))
        };
        let vrf = |n: &str| match (network(n), found) {
            (Some(v), _) => Ok(Some(v)),
            (None, None) => Ok(None),
            (None, Some(_)) => Err(no_network(n)),
        };
        Ok(match key {
            Key::Route {
                network: n,
                prefix: p,
            } => match vrf(n)? {
                Some(v) => {
                    let l = Some((n.as_str(), LearntKey::Route(p.0)));
                    Some((Entry::Route(v, p.0), want(ovr_config::Section::Routes, l)?))
                }
                None => None,
            },
            Key::Bridge { network: n, mac } => match vrf(n)? {
                Some(v) => {
                    let l = Some((n.as_str(), LearntKey::Bridge(mac.0)));
                    Some((
                        Entry::Bridge(v, mac.0),
                        want(ovr_config::Section::Bridge, l)?,
                    ))
                }
                None => None,
            },
            Key::Label { label } => Some((
                Entry::Label(*label),
                want(ovr_config::Section::Labels, None)?,
            )),
            _ => None,
        })
    }

    /// The incremental way (see the module's documentation).
    fn apply_entries(&mut self, changes: Vec<Change>, batch: bool) -> Result<Applied, ApiError> {
        let mut t = Instant::now();
        let mut spent = Spent::default();
        let record = self.store.as_ref().map(|s| s.record(&changes));
        let mut log = Vec::new();
        let mut touched = Vec::with_capacity(changes.len());
        for (k, c) in changes.into_iter().enumerate() {
            let origin = Origin::of(&c, k, batch);
            let key = match &c {
                Change::Create(o) | Change::Replace(o) => o.key(),
                Change::Delete(k) => k.clone(),
                Change::SetPolicy(_) => unreachable!("not an entry change"),
            };
            if let Err(e) = self.model.apply(c, &mut log) {
                self.model.undo(log);
                return Err(if batch { e.under(&origin.prefix()) } else { e });
            }
            touched.push((key, origin));
        }
        spent.model = lap(&mut t);
        // Each entry once, as the last change to it left it.
        let mut seen: FastSet<&Key> = FastSet::default();
        seen.reserve(touched.len());
        let mut wanted = Vec::with_capacity(touched.len());
        for (key, origin) in touched.iter().rev() {
            if !seen.insert(key) {
                continue;
            }
            match self.translate_entry(key, *origin) {
                Ok(Some((entry, want))) => wanted.push((entry, want, *origin)),
                Ok(None) => {}
                Err(e) => {
                    self.model.undo(log);
                    return Err(e);
                }
            }
        }
        spent.translate = lap(&mut t);
        let (mut ops, mut back, mut origins) = (Vec::new(), Vec::new(), Vec::new());
        let mut installs = Vec::new();
        for (entry, want, origin) in wanted {
            let old = self.installed.entry(entry);
            let new = want.as_ref().map(|w| w.0);
            if old != new {
                ops.push(entry.op(new));
                back.push(entry.op(old));
                origins.push(origin);
                installs.push((entry, want));
            }
        }
        spent.diff = lap(&mut t);
        let n = ops.len();
        if n > 0
            && let Err(e) = self.writer.commit(ops)
        {
            self.model.undo(log);
            // Each origin is an object of the request (or its body).
            let origin = origins.get(e.index).map(Origin::prefix);
            let origin = match origin.as_deref() {
                Some("") => "(body)",
                o => o.unwrap_or(""),
            };
            let path = ovr_config::refused_at(origin, true, &e.error);
            return Err(ApiError::invalid(path, e.error.to_string()));
        }
        spent.commit = lap(&mut t);
        if let (Some(record), Some(store)) = (record, &mut self.store) {
            let saved = match record.and_then(|line| store.append(&line)) {
                Ok(true) => Ok(()),
                // Not appended: the file is rewritten whole, with the change in it.
                Ok(false) | Err(_) => store.save(
                    self.base.as_ref(),
                    self.model.config(),
                    &SavedIds::of(&self.interface_ids, &self.names),
                ),
            };
            if let Err(e) = saved {
                let undone = if back.is_empty() {
                    Ok(())
                } else {
                    self.writer.commit(back)
                };
                self.model.undo(log);
                return Err(not_saved(e, undone.err()));
            }
        }
        spent.save = lap(&mut t);
        for (entry, want) in installs {
            self.installed.set_entry(entry, want);
        }
        self.generation += 1;
        Ok(Applied {
            table_changes: n,
            incremental: true,
            spent_us: spent,
        })
    }

    /// The whole way (see the module's documentation).
    fn install(
        &mut self,
        new: Model,
        learnt: Option<Learnt>,
        placed: &[(Placed, String)],
        mut spent: Spent,
    ) -> Result<Applied, ApiError> {
        let mut t = Instant::now();
        let keep = Names {
            interfaces: self.interface_ids.clone(),
            ..Names::clone(&self.names)
        };
        let tr = new
            .config()
            .translate_keeping(&keep)
            .map_err(|e| config_error(&e, placed))?;
        spent.translate = lap(&mut t);
        let mut desired = Desired::of(&tr);
        desired.add_learnt(learnt.as_ref().unwrap_or(&self.learnt), &tr.names);
        let d = diff(&self.installed, &desired);
        let n = d.ops.len();
        spent.diff = lap(&mut t);
        if n > 0 {
            self.writer.commit(d.ops).map_err(|e| {
                let origin = d.origins.get(e.index).map(ToString::to_string);
                let origin = origin.unwrap_or_default();
                let path = ovr_config::refused_at(&origin, origin.ends_with(']'), &e.error);
                config_error(
                    &ConfigError::Invalid {
                        path,
                        message: e.error.to_string(),
                    },
                    placed,
                )
            })?;
        }
        spent.commit = lap(&mut t);
        let old = core::mem::replace(&mut self.installed, desired);
        let old_model = core::mem::replace(&mut self.model, new);
        let old_names = core::mem::replace(&mut self.names, Arc::new(tr.names));
        let old_ids = self.interface_ids.clone();
        let old_learnt = learnt.map(|l| core::mem::replace(&mut self.learnt, l));
        self.interface_ids.extend(self.names.interfaces.clone());
        if let Err(e) = self.save() {
            // Not saved: not accepted. Put the tables back as they were.
            let back = diff(&self.installed, &old);
            let undone = self.writer.commit(back.ops);
            self.installed = old;
            self.model = old_model;
            self.names = old_names;
            self.interface_ids = old_ids;
            if let Some(l) = old_learnt {
                self.learnt = l;
            }
            return Err(not_saved(e, undone.err()));
        }
        spent.save = lap(&mut t);
        self.generation += 1;
        Ok(Applied {
            table_changes: n,
            incremental: false,
            spent_us: spent,
        })
    }
}

fn not_saved(e: StoreError, undo: Option<ovr_tables::state::BatchError>) -> ApiError {
    ApiError::Internal(match undo {
        None => format!("could not save the state, nothing changed: {e}"),
        Some(u) => format!("could not save the state ({e}) nor restore the tables ({u})"),
    })
}

/// Where errors of the `k`th change are named.
fn prefix(c: &Change, k: usize, batch: bool) -> String {
    Origin::of(c, k, batch).prefix()
}

/// Where errors of one change are named, kept unformatted until an error needs it (a
/// batch of entry changes makes none, mostly).
#[derive(Debug, Clone, Copy)]
struct Origin {
    k: usize,
    batch: bool,
    /// The JSON path of the change's object in a batch.
    path: &'static str,
}

impl Origin {
    fn of(c: &Change, k: usize, batch: bool) -> Self {
        let path = match c {
            Change::Create(o) => match o {
                Object::Interface(_) => "create.interface",
                Object::Network(_) => "create.network",
                Object::Tunnel(_) => "create.tunnel",
                Object::Nexthop(_) => "create.nexthop",
                Object::Route(_) => "create.route",
                Object::Bridge(_) => "create.bridge",
                Object::Label(_) => "create.label",
            },
            Change::Replace(o) => match o {
                Object::Interface(_) => "replace.interface",
                Object::Network(_) => "replace.network",
                Object::Tunnel(_) => "replace.tunnel",
                Object::Nexthop(_) => "replace.nexthop",
                Object::Route(_) => "replace.route",
                Object::Bridge(_) => "replace.bridge",
                Object::Label(_) => "replace.label",
            },
            Change::Delete(_) => "delete",
            Change::SetPolicy(_) => "set_policy.rules",
        };
        Self { k, batch, path }
    }

    /// "changes[2].create.route" in a batch; "rules" for a policy alone, else empty.
    fn prefix(&self) -> String {
        match (self.batch, self.path) {
            (true, p) => format!("changes[{}].{p}", self.k),
            (false, "set_policy.rules") => "rules".to_string(),
            (false, _) => String::new(),
        }
    }
}

/// A translation error as an API error: a field of an object the request placed is named
/// relative to the request; anything else by its path in the whole configuration. A key
/// that is there twice is a conflict (409), anything else invalid (422).
fn config_error(e: &ConfigError, placed: &[(Placed, String)]) -> ApiError {
    let error = |field: String, message: &str| match e {
        ConfigError::Duplicate { .. } => ApiError::Conflict {
            message: message.to_string(),
            field: Some(field),
        },
        _ => ApiError::invalid(field, message),
    };
    let path = e.path().unwrap_or("(document)");
    for (at, prefix) in placed {
        let Some((section, i)) = at else { continue };
        let doc = format!("{section}[{i}]");
        // A policy change is placed at its network; only its policy is the request's.
        let doc = if prefix.ends_with("rules") {
            format!("{doc}.policy")
        } else {
            doc
        };
        if let Some(rest) = path.strip_prefix(&doc)
            && (rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
        {
            let rest = rest.strip_prefix('.').unwrap_or(rest);
            let field = match (prefix.as_str(), rest) {
                ("", "") => "(body)".to_string(),
                ("", r) => r.to_string(),
                (p, "") => p.to_string(),
                (p, r) if r.starts_with('[') => format!("{p}{r}"),
                (p, r) => format!("{p}.{r}"),
            };
            return error(field, e.message());
        }
    }
    error(path.to_string(), e.message())
}
