//! The one error type: what is wrong, and where in the document (and in which file).

/// A configuration that cannot be used, and where the problem is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A field that is wrong: `path` is where in the document ("routes[3].prefix"); for
    /// a syntax or type error the message ends with the YAML line and column.
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    /// A key written twice in a keyed collection (`routes[3]`: "duplicate of routes[1]
    /// (network red, prefix 10.0.0.0/24)"); the API answers it with 409.
    #[error("{path}: {message}")]
    Duplicate { path: String, message: String },
    /// An error in a file (`Config::load`, `ConfigFile`): "cfg.yaml:12: routes[3].prefix:
    /// ...", the line where the field (or the construct that is not closed) is written.
    #[error("{file}{}: {error}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    InFile {
        file: String,
        line: Option<usize>,
        error: Box<ConfigError>,
    },
    /// The file could not be read.
    #[error("{file}: {message}")]
    Io { file: String, message: String },
}

impl ConfigError {
    pub(crate) fn invalid(path: String, message: String) -> Self {
        let path = if path.is_empty() || path == "." {
            "(document)".into()
        } else {
            path
        };
        ConfigError::Invalid { path, message }
    }

    /// Where in the document the problem is (`None` when the file could not be read).
    pub fn path(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { path, .. } | ConfigError::Duplicate { path, .. } => Some(path),
            ConfigError::InFile { error, .. } => error.path(),
            ConfigError::Io { .. } => None,
        }
    }

    /// What is wrong, without the path or the file.
    pub fn message(&self) -> &str {
        match self {
            ConfigError::Invalid { message, .. }
            | ConfigError::Duplicate { message, .. }
            | ConfigError::Io { message, .. } => message,
            ConfigError::InFile { error, .. } => error.message(),
        }
    }

    /// A parse error, at the path `serde_path_to_error` tracked. The YAML crate's own
    /// message starts with its (same, or less precise) path: that is dropped, the line
    /// and column it ends with are kept.
    pub(crate) fn parse(e: serde_path_to_error::Error<serde_yaml_ng::Error>) -> Self {
        let path = e.path().to_string();
        let msg = e.into_inner().to_string();
        let msg = match msg.split_once(": ") {
            Some((p, m)) if !p.is_empty() && !p.contains(' ') && path.starts_with(p) => {
                m.to_string()
            }
            _ => msg,
        };
        ConfigError::invalid(path, msg)
    }
}
