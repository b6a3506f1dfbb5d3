//! ovr's declarative configuration: a YAML document (`model`) describing interfaces,
//! networks, tunnels, next hops, routes, bridge entries, labels and policies, translated
//! into one all-or-nothing batch of table changes (`translate`). The agent serves the
//! same model over its API.
//!
//! Every error names the field it is about, as a path into the document
//! (`networks[1].flood[0]: no next hop named 'x'`).
#![forbid(unsafe_code)]

pub mod model;
mod translate;

pub use model::{Config, FlowSettings};
pub use translate::{Names, Translation};

use std::path::Path;

/// A configuration that cannot be used, and where the problem is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{file}: {error}")]
    InFile {
        file: String,
        error: Box<ConfigError>,
    },
    #[error("{file}: {message}")]
    Io { file: String, message: String },
}

impl ConfigError {
    pub(crate) fn invalid(path: String, message: String) -> Self {
        let path = if path.is_empty() {
            "(document)".into()
        } else {
            path
        };
        ConfigError::Invalid { path, message }
    }
}

impl Config {
    /// Parses a YAML document.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            // The YAML crate puts its own path in front and the position at the end.
            let msg = inner.to_string();
            let msg = match msg.split_once(": ") {
                Some((p, m)) if !p.contains(' ') => m.to_string(),
                _ => msg,
            };
            ConfigError::invalid(if path == "." { String::new() } else { path }, msg)
        })
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
        translate::translate(self)
    }
}

#[cfg(test)]
mod tests;
