//! ovr's declarative configuration: a YAML document (`model`) describing interfaces,
//! networks, tunnels, next hops, routes, bridge entries, labels and policies, translated
//! into one all-or-nothing batch of table changes (`translate`). The agent serves the
//! same model over its API.
//!
//! Every error names the field it is about, as a path into the document
//! (`networks[1].flood[0]: no next hop named 'x'`); syntax and type errors also give
//! the YAML line and column.
#![forbid(unsafe_code)]

mod error;
mod keys;
pub mod model;
mod nexthops;
mod translate;
pub mod values;

pub use error::ConfigError;
pub use model::{Config, FlowSettings};
pub use translate::{Names, Translation, refused_at};

use ovr_tables::state::{TablesReader, TablesWriter, new_tables};
use std::path::Path;

/// Forwarding tables holding a configuration file: what ovrd and `ovrctl replay` start
/// from.
pub struct Loaded {
    pub translation: Translation,
    pub writer: TablesWriter,
    pub reader: TablesReader,
}

/// Reads, translates and applies a configuration file to new tables.
pub fn load_tables(path: &Path) -> Result<Loaded, ConfigError> {
    let translation = Config::load(path)?.translate()?;
    let (mut writer, reader) = new_tables();
    translation.apply(&mut writer)?;
    Ok(Loaded {
        translation,
        writer,
        reader,
    })
}

impl Config {
    /// Parses a YAML document.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(ConfigError::parse)
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            file: file.clone(),
            message: e.to_string(),
        })?;
        Self::from_yaml(&text).map_err(|e| ConfigError::InFile {
            file,
            error: Box::new(e),
        })
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
mod error_tests;
#[cfg(test)]
mod tests;
