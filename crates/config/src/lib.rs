//! ovr's declarative configuration: a YAML document (`model`) describing interfaces,
//! networks, tunnels, next hops, routes, bridge entries, labels and policies, translated
//! into one all-or-nothing batch of table changes (`translate`). The agent serves the
//! same model over its API.
//!
//! Every error names the field it is about, as a path into the document
//! (`networks[1].flood[0]: no next hop named 'x'`); syntax and type errors also give
//! the YAML line and column.
#![forbid(unsafe_code)]

mod chains;
mod error;
mod file;
mod keys;
pub mod model;
mod nexthops;
mod translate;
pub mod values;

pub use error::ConfigError;
pub use file::{ConfigFile, MAX_FILE_BYTES, read_text};
pub use model::{Config, FlowSettings};
pub use translate::{Names, Origin, Section, Translation, refused_at};

use ovr_tables::state::{TablesReader, TablesWriter, new_tables};
use std::path::Path;

/// Forwarding tables holding a configuration file: what ovrd and `ovrctl replay` start
/// from.
pub struct Loaded {
    pub translation: Translation,
    pub writer: TablesWriter,
    pub reader: TablesReader,
}

/// Reads, translates and applies a configuration file to new tables. Errors name the
/// file, the line and the field.
pub fn load_tables(path: &Path) -> Result<Loaded, ConfigError> {
    let file = ConfigFile::read(path)?;
    let translation = file.parse()?.translate().map_err(|e| file.locate(e))?;
    let (mut writer, reader) = new_tables();
    translation.apply(&mut writer).map_err(|e| file.locate(e))?;
    Ok(Loaded {
        translation,
        writer,
        reader,
    })
}

impl Config {
    /// Parses a YAML document (its aliases not expanding it beyond about twice its size,
    /// see `file`; nothing at all is the empty configuration, unlike in a file). Errors
    /// give the YAML line and column where known.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        file::parse(text, false).map_err(|(e, _)| e)
    }

    /// Reads and parses a configuration file (at most `MAX_FILE_BYTES`); errors name the
    /// file and the line.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        ConfigFile::read(path)?.parse()
    }

    /// The table changes this configuration makes, resolved and checked.
    pub fn translate(&self) -> Result<Translation, ConfigError> {
        translate::translate(self, &Names::default())
    }

    /// Like [`Self::translate`], keeping the ids `keep` gave to names that still exist
    /// (what the agent does for every change, so that unrelated objects keep theirs).
    pub fn translate_keeping(&self, keep: &Names) -> Result<Translation, ConfigError> {
        translate::translate(self, keep)
    }
}

#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod error_tests;
#[cfg(test)]
mod tests;
