//! The state file: the desired configuration, saved atomically on every accepted change,
//! and how it combines with the configuration file given at start (docs/agent.md).
//!
//! Atomic: written to a temporary file in the same directory, flushed to disk, renamed
//! over the old one, and the directory flushed; a crash leaves the old file or the new
//! one, never a mix.

use ovr_config::model::Config;
use ovr_config::{ConfigError, Names};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The state file's format version.
const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a state file ovrd can read: {message}")]
    Parse { path: String, message: String },
    #[error("{0}")]
    Config(#[from] ConfigError),
}

/// The ids names had, so that a restart gives them the same ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedIds {
    /// Every interface name ever given an id (see `Agent`).
    pub interfaces: BTreeMap<String, u32>,
    pub networks: BTreeMap<String, u32>,
    pub nexthops: BTreeMap<String, u32>,
}

impl SavedIds {
    pub fn of(interfaces: &BTreeMap<String, InterfaceId>, names: &Names) -> Self {
        Self {
            interfaces: interfaces.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
            networks: names
                .networks
                .iter()
                .map(|(k, v)| (k.clone(), v.0))
                .collect(),
            nexthops: names
                .nexthops
                .iter()
                .map(|(k, v)| (k.clone(), v.0))
                .collect(),
        }
    }

    pub fn names(&self) -> Names {
        Names {
            interfaces: self
                .interfaces
                .iter()
                .map(|(k, v)| (k.clone(), InterfaceId(*v)))
                .collect(),
            networks: self
                .networks
                .iter()
                .map(|(k, v)| (k.clone(), VrfId(*v)))
                .collect(),
            nexthops: self
                .nexthops
                .iter()
                .map(|(k, v)| (k.clone(), NextHopId(*v)))
                .collect(),
            tunnels: BTreeMap::new(),
        }
    }
}

/// What the state file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Saved {
    pub version: u32,
    /// The configuration file this state started from, as it read then: when the file
    /// given at start no longer reads the same, the operator edited it, and it wins.
    pub base: Option<Config>,
    /// The desired configuration: the file plus every change accepted since.
    pub config: Config,
    pub ids: SavedIds,
}

/// The state file.
#[derive(Debug, Clone)]
pub struct Store {
    path: PathBuf,
}

impl Store {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// The saved state, or `None` if there is no state file.
    pub fn load(&self) -> Result<Option<Saved>, StoreError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        let parse = |message: String| StoreError::Parse {
            path: self.path.display().to_string(),
            message,
        };
        let saved: Saved = serde_json::from_str(&text).map_err(|e| parse(e.to_string()))?;
        if saved.version != VERSION {
            return Err(parse(format!(
                "version {} (this ovrd reads {VERSION})",
                saved.version
            )));
        }
        Ok(Some(saved))
    }

    /// Writes the state atomically (temporary file, fsync, rename, fsync of the directory).
    pub fn save(
        &self,
        base: Option<&Config>,
        config: &Config,
        ids: SavedIds,
    ) -> Result<(), StoreError> {
        let saved = Saved {
            version: VERSION,
            base: base.cloned(),
            config: config.clone(),
            ids,
        };
        let text =
            serde_json::to_vec_pretty(&saved).map_err(|e| self.io(std::io::Error::other(e)))?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir).map_err(|e| self.io(e))?;
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = dir.join(tmp_name);
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&text)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            std::fs::File::open(&dir)?.sync_all()
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.io(e)
        })
    }

    /// Keeps a copy of the state file beside it (before a changed configuration file
    /// replaces it); returns where.
    fn back_up(&self) -> Result<PathBuf, StoreError> {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".prev");
        let to = self.path.with_file_name(name);
        std::fs::copy(&self.path, &to).map_err(|e| self.io(e))?;
        Ok(to)
    }
}

/// Where the desired configuration at start comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// No state file: the configuration file (or nothing).
    ConfigFile,
    /// The state file (the configuration file, if given, is the one it started from).
    State,
    /// The configuration file changed since the state was saved: the file, with the
    /// previous state kept at this path.
    ConfigFileChanged { previous_state: PathBuf },
}

/// The desired configuration to start with.
#[derive(Debug, Clone)]
pub struct Start {
    pub config: Config,
    /// The configuration file as read now (the base of the state saved from here on).
    pub base: Option<Config>,
    /// Ids to keep.
    pub ids: Names,
    pub source: Source,
}

/// Combines the configuration file and the state file (docs/agent.md): the state file
/// wins unless the configuration file reads differently from when the state began.
pub fn initial(config_file: Option<&Path>, store: Option<&Store>) -> Result<Start, StoreError> {
    let file = config_file.map(Config::load).transpose()?;
    let saved = match store {
        Some(s) => s.load()?,
        None => None,
    };
    Ok(match (saved, file) {
        (None, file) => Start {
            config: file.clone().unwrap_or_default(),
            base: file,
            ids: Names::default(),
            source: Source::ConfigFile,
        },
        (Some(s), None) => Start {
            config: s.config,
            base: s.base,
            ids: s.ids.names(),
            source: Source::State,
        },
        (Some(s), Some(f)) if s.base.as_ref() == Some(&f) => Start {
            config: s.config,
            base: Some(f),
            ids: s.ids.names(),
            source: Source::State,
        },
        (Some(s), Some(f)) => {
            let previous_state = match store {
                Some(st) => st.back_up()?,
                None => PathBuf::new(),
            };
            Start {
                config: f.clone(),
                base: Some(f),
                ids: s.ids.names(),
                source: Source::ConfigFileChanged { previous_state },
            }
        }
    })
}
