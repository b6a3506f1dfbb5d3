//! The state file: the desired configuration, saved atomically on every accepted change,
//! and how it combines with the configuration file given at start (docs/agent.md).
//!
//! Atomic: written to a temporary file in the same directory, flushed to disk, renamed
//! over the old one, and the directory flushed; a crash leaves the old file or the new
//! one, never a mix.
//!
//! Cheap for table entries: rewriting a million routes for every change would make each
//! change cost the whole model. So the file is a snapshot (one JSON value) followed by
//! records (one JSON value per line), each a batch of route, bridge or label changes
//! accepted since, appended and flushed to disk (`fdatasync`) before the change is
//! answered. A record is whole or, if a crash cut it, the torn last one, which was never
//! answered and is ignored when the file is read. (What ovrd learns from peers, EVPN's
//! MACs and host routes, is not in the file at all: the agent holds it apart, `learnt`,
//! and the peers give it again after a restart.) When the records outgrow the snapshot
//! (and at every start, and for any other kind of change) the file is rewritten whole as
//! above, so appending costs at most twice the bytes of the changes themselves.

use crate::change::Change;
use crate::model::Model;
use ovr_config::model::Config;
use ovr_config::{ConfigError, ConfigFile, Names};
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

/// The snapshot as written: the same fields, borrowed (a million routes are not copied
/// to be saved).
#[derive(Serialize)]
struct SavedRef<'a> {
    version: u32,
    base: Option<&'a Config>,
    config: &'a Config,
    ids: &'a SavedIds,
}

/// Changes appended after the snapshot (route, bridge and label changes only: they give
/// no name an id).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record<C> {
    changes: C,
}

/// Records may grow to the snapshot's size, and at least to this, before a rewrite.
const MIN_RECORDS: u64 = 1 << 20;

/// The state file.
#[derive(Debug, Clone)]
pub struct Store {
    path: PathBuf,
    /// Bytes of the last snapshot written, and of the records appended since.
    snapshot: u64,
    appended: u64,
    /// An append failed and could not be taken back: the next save rewrites the file.
    dirty: bool,
}

impl Store {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            snapshot: 0,
            appended: 0,
            dirty: true,
        }
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

    /// The saved state (the snapshot with the records after it applied), or `None` if
    /// there is no state file.
    pub fn load(&self) -> Result<Option<Saved>, StoreError> {
        match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            _ => {}
        }
        // No size limit: ovrd wrote it, and it holds whatever the API accepted.
        let text = ovr_config::read_text(&self.path, None)?;
        let parse = |message: String| StoreError::Parse {
            path: self.path.display().to_string(),
            message,
        };
        let mut values = serde_json::Deserializer::from_str(&text).into_iter::<Saved>();
        let mut saved = match values.next() {
            Some(s) => s.map_err(|e| parse(e.to_string()))?,
            None => return Err(parse("empty".into())),
        };
        if saved.version != VERSION {
            return Err(parse(format!(
                "version {} (this ovrd reads {VERSION})",
                saved.version
            )));
        }
        let start = values.byte_offset();
        let mut records =
            serde_json::Deserializer::from_str(&text[start..]).into_iter::<Record<Vec<Change>>>();
        let mut model: Option<Model> = None;
        let mut log = Vec::new();
        let mut n = 0;
        loop {
            let at = start + records.byte_offset();
            match records.next() {
                None => break,
                // Cut by a crash while it was written: never answered, so never accepted.
                Some(Err(e)) if e.is_eof() => {
                    tracing::warn!(path = %self.path.display(), offset = at, "ignoring the torn last record of the state file");
                    break;
                }
                Some(Err(e)) => return Err(parse(format!("record {n} (byte {at}): {e}"))),
                Some(Ok(r)) => {
                    let m =
                        model.get_or_insert_with(|| Model::new(core::mem::take(&mut saved.config)));
                    for (k, c) in r.changes.into_iter().enumerate() {
                        m.apply(c, &mut log).map_err(|e| {
                            parse(format!(
                                "record {n} (byte {at}), change {k} does not apply: {e}"
                            ))
                        })?;
                        log.clear();
                    }
                    n += 1;
                }
            }
        }
        if let Some(m) = model {
            saved.config = m.into_config();
        }
        Ok(Some(saved))
    }

    /// Writes the state atomically (temporary file, fsync, rename, fsync of the directory).
    pub fn save(
        &mut self,
        base: Option<&Config>,
        config: &Config,
        ids: &SavedIds,
    ) -> Result<(), StoreError> {
        let saved = SavedRef {
            version: VERSION,
            base,
            config,
            ids,
        };
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir).map_err(|e| self.io(e))?;
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = dir.join(tmp_name);
        let write = || -> std::io::Result<u64> {
            let f = std::fs::File::create(&tmp)?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
            serde_json::to_writer(&mut w, &saved)?;
            w.write_all(b"\n")?;
            let f = w.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
            let len = f.metadata()?.len();
            std::fs::rename(&tmp, &self.path)?;
            std::fs::File::open(&dir)?.sync_all()?;
            Ok(len)
        };
        match write() {
            Ok(len) => {
                (self.snapshot, self.appended, self.dirty) = (len, 0, false);
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(self.io(e))
            }
        }
    }

    /// A batch of route, bridge and label changes as `append` writes it (made before the
    /// changes are applied, which consumes them, rather than from a copy of them).
    pub fn record(&self, changes: &[Change]) -> Result<Vec<u8>, StoreError> {
        let mut line = serde_json::to_vec(&Record { changes })
            .map_err(|e| self.io(std::io::Error::other(e)))?;
        line.push(b'\n');
        Ok(line)
    }

    /// Appends a `record` to the file and flushes it to disk.
    /// `Ok(false)`: not appended, the caller rewrites the file instead (the records
    /// outgrew the snapshot, or an earlier append failed). On an error the file is cut
    /// back to what it was.
    pub fn append(&mut self, line: &[u8]) -> Result<bool, StoreError> {
        if self.dirty {
            return Ok(false);
        }
        let room = self.snapshot.max(MIN_RECORDS);
        if self.appended + line.len() as u64 > room {
            return Ok(false);
        }
        // Opened for every record (not created): a file replaced or removed under ovrd
        // is noticed, and the caller rewrites it.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| self.io(e))?;
        let len = f.metadata().map_err(|e| self.io(e))?.len();
        let written = f.write_all(line).and_then(|()| f.sync_data());
        if let Err(e) = written {
            if f.set_len(len).and_then(|()| f.sync_data()).is_err() {
                self.dirty = true;
            }
            return Err(self.io(e));
        }
        self.appended += line.len() as u64;
        Ok(true)
    }

    /// Where the state is kept when a changed configuration file replaces it.
    fn previous(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".prev");
        self.path.with_file_name(name)
    }

    /// Keeps a copy of the state file at `to` (before a changed configuration file
    /// replaces it).
    pub fn back_up(&self, to: &Path) -> Result<(), StoreError> {
        std::fs::copy(&self.path, to).map_err(|e| self.io(e))?;
        Ok(())
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

/// An error in the starting configuration, named in the file it came from: the
/// configuration file, with the line of the field, or the state file.
pub fn in_file(
    e: StoreError,
    source: &Source,
    config_file: Option<&Path>,
    store: Option<&Store>,
) -> StoreError {
    let StoreError::Config(c) = e else { return e };
    let located = match (source, config_file, store) {
        (Source::State, _, Some(s)) => ConfigError::InFile {
            file: s.path().display().to_string(),
            line: None,
            error: Box::new(c),
        },
        (Source::State, _, None) => c,
        (_, Some(f), _) => match ConfigFile::read(f) {
            Ok(file) => file.locate(c),
            Err(_) => ConfigError::InFile {
                file: f.display().to_string(),
                line: None,
                error: Box::new(c),
            },
        },
        (_, None, _) => c,
    };
    StoreError::Config(located)
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
            // Copied there once the start went well (`Agent::started`).
            let previous_state = store.map(Store::previous).unwrap_or_default();
            Start {
                config: f.clone(),
                base: Some(f),
                ids: s.ids.names(),
                source: Source::ConfigFileChanged { previous_state },
            }
        }
    })
}
