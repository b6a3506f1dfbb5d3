//! The agent proper: the desired configuration, the translation installed in the tables,
//! and the one way to change them. Every change builds the new model, translates it
//! whole (keeping ids), commits the difference as one batch, then saves the state; a
//! failure at any step leaves the model, the tables and the state file as they were.

use crate::change::{self, Change, Placed};
use crate::error::ApiError;
use crate::reconcile::diff;
use crate::store::{SavedIds, Start, Store, StoreError};
use ovr_config::model::Config;
use ovr_config::{ConfigError, Names, Translation};
use ovr_tables::ids::InterfaceId;
use ovr_tables::state::TablesWriter;
use std::collections::BTreeMap;

pub struct Agent {
    config: Config,
    /// The configuration file the state started from (saved with it).
    base: Option<Config>,
    installed: Translation,
    /// Every interface name that was ever given an id, with it: a name that comes back
    /// gets its id back, and an id is never handed to another name. ovrd's drivers are
    /// bound to interface ids at start, so an id must not change meaning under them.
    interface_ids: BTreeMap<String, InterfaceId>,
    writer: TablesWriter,
    store: Option<Store>,
}

/// What an accepted change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Applied {
    /// Table changes committed (0: the configuration already was so).
    pub table_changes: usize,
}

impl Agent {
    /// Installs the starting configuration in (empty) tables and saves the state.
    pub fn start(
        start: Start,
        mut writer: TablesWriter,
        store: Option<Store>,
    ) -> Result<Self, StoreError> {
        let installed = start.config.translate_keeping(&start.ids)?;
        installed.apply(&mut writer)?;
        let mut interface_ids = start.ids.interfaces.clone();
        interface_ids.extend(installed.names.interfaces.clone());
        let agent = Self {
            config: start.config,
            base: start.base,
            installed,
            interface_ids,
            writer,
            store,
        };
        agent.save()?;
        Ok(agent)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Names and the ids they have in the tables.
    pub fn names(&self) -> &Names {
        &self.installed.names
    }

    pub fn writer(&self) -> &TablesWriter {
        &self.writer
    }

    fn save(&self) -> Result<(), StoreError> {
        match &self.store {
            Some(s) => s.save(
                self.base.as_ref(),
                &self.config,
                SavedIds::of(&self.interface_ids, &self.installed.names),
            ),
            None => Ok(()),
        }
    }

    /// Applies changes all-or-nothing. `batch`: errors name the change
    /// ("changes[2].create.route.nexthop"); otherwise the field of the one object.
    pub fn apply(&mut self, changes: Vec<Change>, batch: bool) -> Result<Applied, ApiError> {
        let mut new = self.config.clone();
        let mut placed = Vec::with_capacity(changes.len());
        for (k, c) in changes.into_iter().enumerate() {
            let prefix = match (batch, &c) {
                (true, _) => format!("changes[{k}].{}", variant_path(&c)),
                (false, Change::SetPolicy(_)) => "rules".to_string(),
                (false, _) => String::new(),
            };
            let at =
                change::apply(&mut new, c).map_err(|e| if batch { e.under(&prefix) } else { e })?;
            placed.push((at, prefix));
        }
        self.install(new, &placed)
    }

    /// Replaces the whole desired configuration (flow settings excepted: they are the
    /// dataplane's, set at start).
    pub fn replace(&mut self, new: Config) -> Result<Applied, ApiError> {
        if new.flows != self.config.flows {
            return Err(ApiError::invalid(
                "flows",
                "flow settings apply when ovrd starts: change them in the configuration file",
            ));
        }
        self.install(new, &[])
    }

    fn install(&mut self, new: Config, placed: &[(Placed, String)]) -> Result<Applied, ApiError> {
        let keep = Names {
            interfaces: self.interface_ids.clone(),
            ..self.installed.names.clone()
        };
        let t = new
            .translate_keeping(&keep)
            .map_err(|e| config_error(&e, placed))?;
        let d = diff(&self.installed, &t);
        let n = d.ops.len();
        if n > 0 {
            self.writer.commit(d.ops).map_err(|e| {
                let path = d.origins.get(e.index).cloned().unwrap_or_default();
                config_error(
                    &ConfigError::Invalid {
                        path,
                        message: e.error.to_string(),
                    },
                    placed,
                )
            })?;
        }
        let old = core::mem::replace(&mut self.installed, t);
        let old_config = core::mem::replace(&mut self.config, new);
        let old_ids = self.interface_ids.clone();
        self.interface_ids
            .extend(self.installed.names.interfaces.clone());
        if let Err(e) = self.save() {
            // Not saved: not accepted. Put the tables back as they were.
            let back = diff(&self.installed, &old);
            let undone = self.writer.commit(back.ops);
            self.installed = old;
            self.config = old_config;
            self.interface_ids = old_ids;
            let mut msg = format!("could not save the state, nothing changed: {e}");
            if let Err(u) = undone {
                msg = format!("could not save the state ({e}) nor restore the tables ({u})");
            }
            return Err(ApiError::Internal(msg));
        }
        Ok(Applied { table_changes: n })
    }
}

/// The JSON path of a change's object in a batch.
fn variant_path(c: &Change) -> String {
    let v = |o: &crate::change::Object| match o {
        crate::change::Object::Interface(_) => "interface",
        crate::change::Object::Network(_) => "network",
        crate::change::Object::Tunnel(_) => "tunnel",
        crate::change::Object::Nexthop(_) => "nexthop",
        crate::change::Object::Route(_) => "route",
        crate::change::Object::Bridge(_) => "bridge",
        crate::change::Object::Label(_) => "label",
    };
    match c {
        Change::Create(o) => format!("create.{}", v(o)),
        Change::Replace(o) => format!("replace.{}", v(o)),
        Change::Delete(_) => "delete".into(),
        Change::SetPolicy(_) => "set_policy.rules".into(),
    }
}

/// A translation error as an API error: a field of an object the request placed is named
/// relative to the request; anything else by its path in the whole configuration.
fn config_error(e: &ConfigError, placed: &[(Placed, String)]) -> ApiError {
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
            return ApiError::invalid(field, e.message());
        }
    }
    ApiError::invalid(path, e.message())
}
