//! Reading configuration files: the one loader behind `ovrd --config`, `ovrctl replay
//! --config`, ovrctl's batch files and the agent's state file.
//!
//! - A file over its size limit (`MAX_FILE_BYTES` for what people write) is refused
//!   before it is read or parsed.
//! - An empty file (nothing, or only blanks and comments) is an error, not an empty
//!   router: write `{}` for a configuration with nothing in it.
//! - YAML aliases may not blow the document up: expanding them may at most double it
//!   (`expanded_budget`), whatever the repetition the YAML crate itself allows.
//! - Every error names the file, the line and the field:
//!   `cfg.yaml:12: routes[3].prefix: ...`. A syntax error is reported where the
//!   construct that is not closed opens (an unclosed `{`, `[` or quote), not where the
//!   parser gave up.

use crate::ConfigError;
use crate::model::Config;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, Visitor};
use std::cell::Cell;
use std::io::Read;
use std::path::Path;

/// The largest configuration (or batch) file read: 64 MiB. A bigger one is refused
/// before it is read.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

const EMPTY_FILE: &str = "the file is empty";

/// Reads a whole text file, refusing one over `limit` bytes (before reading it), one
/// that is not UTF-8 and one with nothing but blanks in it.
pub fn read_text(path: &Path, limit: Option<u64>) -> Result<String, ConfigError> {
    let file = path.display().to_string();
    let fail = |message: String| ConfigError::Io {
        file: file.clone(),
        message,
    };
    let f = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let meta = f.metadata().map_err(|e| fail(e.to_string()))?;
    if meta.is_dir() {
        return Err(fail("is a directory, not a file".into()));
    }
    let too_big = |size: String| {
        fail(format!(
            "{size} bytes, over the {} bytes (64 MiB) a configuration file may have: refused without reading it",
            limit.unwrap_or_default()
        ))
    };
    if let Some(limit) = limit
        && meta.is_file()
        && meta.len() > limit
    {
        return Err(too_big(meta.len().to_string()));
    }
    // Not trusted for pipes and files that grow: read one byte past the limit at most.
    let mut bytes = Vec::new();
    f.take(limit.map_or(u64::MAX, |l| l + 1))
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    if let Some(limit) = limit
        && bytes.len() as u64 > limit
    {
        return Err(too_big(format!("more than {limit}")));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        fail(format!(
            "not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    if text.trim().is_empty() {
        return Err(fail(EMPTY_FILE.into()));
    }
    Ok(text)
}

/// A configuration file as read, kept to parse it and to say on which line a field
/// that translation or the tables refuse is written.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    name: String,
    text: String,
}

impl ConfigFile {
    /// Reads a configuration file (at most `MAX_FILE_BYTES`).
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = read_text(path, Some(MAX_FILE_BYTES)).map_err(|e| match e {
            ConfigError::Io { file, message } if message == EMPTY_FILE => ConfigError::Io {
                file,
                message: format!("{message} (write {{}} for a configuration with nothing in it)"),
            },
            e => e,
        })?;
        Ok(Self {
            name: path.display().to_string(),
            text,
        })
    }

    /// A file's name and its text, already read.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            text: text.into(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configuration in it; errors name the file and the line.
    pub fn parse(&self) -> Result<Config, ConfigError> {
        parse(&self.text, true).map_err(|(e, line)| self.at(e, line))
    }

    /// The error with the file's name and the line of the field it names, if that field
    /// is written in the file (an error from translating or applying what `parse` gave).
    pub fn locate(&self, e: ConfigError) -> ConfigError {
        if let ConfigError::InFile { .. } | ConfigError::Io { .. } = e {
            return e;
        }
        let line = e.path().and_then(|p| line_of(&self.text, p));
        self.at(e, line)
    }

    fn at(&self, error: ConfigError, line: Option<usize>) -> ConfigError {
        // "... at line 12 column 5" at the end of a message on line 12: the line is
        // said first already, the column is kept.
        let error = match (error, line) {
            (ConfigError::Invalid { path, message }, Some(l)) => {
                let message = match message.rsplit_once(&format!(" at line {l} column ")) {
                    Some((m, c)) if c.bytes().all(|b| b.is_ascii_digit()) => {
                        format!("{m} (column {c})")
                    }
                    _ => message,
                };
                ConfigError::Invalid { path, message }
            }
            (e, _) => e,
        };
        ConfigError::InFile {
            file: self.name.clone(),
            line,
            error: Box::new(error),
        }
    }
}

/// At most this many values (scalars, sequences, mappings) per byte of the document,
/// plus `EXPANDED_EXTRA`, once its aliases are expanded. Without aliases a document
/// holds at most about one value per byte, so only aliases can reach it.
const EXPANDED_PER_BYTE: u64 = 2;
const EXPANDED_EXTRA: u64 = 100_000;

/// How many values a document of this size may expand to.
pub(crate) fn expanded_budget(text: &str) -> u64 {
    (text.len() as u64)
        .saturating_mul(EXPANDED_PER_BYTE)
        .saturating_add(EXPANDED_EXTRA)
}

const TOO_MANY: &str = "its aliases expand the document to more than";

/// Parses a YAML configuration. The error comes with the line it is on, when known.
/// `document`: a document with nothing in it is an error (a file), rather than an empty
/// configuration.
pub(crate) fn parse(text: &str, document: bool) -> Result<Config, (ConfigError, Option<usize>)> {
    // Only aliases (`*name`) make a document bigger than it is written.
    if text.contains('*') {
        walk(text)?;
    }
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let empty = || {
        (
            ConfigError::invalid(
                String::new(),
                "no configuration: the document is empty (write {} for a configuration with nothing in it)".into(),
            ),
            None,
        )
    };
    match serde_path_to_error::deserialize::<_, Config>(de) {
        Ok(c) if document && c == Config::default() && is_empty(text) => Err(empty()),
        Ok(c) => Ok(c),
        Err(_) if document && is_empty(text) => Err(empty()),
        Err(e) => {
            // A syntax error further on often shows first as a wrong type (an unclosed
            // `{` swallows the next line): the document's own error comes first.
            walk(text)?;
            let line = e.inner().location().map(|l| l.line());
            let e = ConfigError::parse(e);
            Err(match unclosed(e.message()) {
                Some((l, message)) => (
                    ConfigError::invalid(e.path().unwrap_or_default().to_string(), message),
                    Some(l),
                ),
                None => (e, line),
            })
        }
    }
}

/// Whether a document holds no value (empty, blanks, comments, `---`, or null).
fn is_empty(text: &str) -> bool {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    matches!(Option::<IgnoredAny>::deserialize(de), Ok(None))
}

/// Reads the whole document without a type: a syntax error anywhere, or aliases that
/// expand it beyond `expanded_budget`, is an error.
fn walk(text: &str) -> Result<(), (ConfigError, Option<usize>)> {
    let budget = expanded_budget(text);
    let left = Cell::new(budget);
    let de = serde_yaml_ng::Deserializer::from_str(text);
    Walk(&left).deserialize(de).map_err(|e| {
        let line = e.location().map(|l| l.line());
        let msg = e.to_string();
        let (line, msg) = match unclosed(&msg) {
            Some((l, m)) => (Some(l), m),
            None if msg.starts_with(TOO_MANY) => (
                line,
                format!(
                    "{TOO_MANY} {budget} values ({EXPANDED_PER_BYTE} per byte of the file, plus {EXPANDED_EXTRA}): refused"
                ),
            ),
            None => (line, msg),
        };
        (ConfigError::invalid(String::new(), msg), line)
    })
}

/// For a syntax error about something not closed (a flow mapping or sequence, a quoted
/// string), the line where it opens and a message that says so.
fn unclosed(msg: &str) -> Option<(usize, String)> {
    for (context, what) in [
        ("while parsing a flow mapping", "'{'"),
        ("while parsing a flow sequence", "'['"),
        ("while scanning a quoted scalar", "quote"),
    ] {
        let Some((problem, at)) = msg.split_once(&format!(", {context} at line ")) else {
            continue;
        };
        let (line, column) = at.split_once(" column ")?;
        let line: usize = line.parse().ok()?;
        return Some((
            line,
            format!("the {what} at line {line} column {column} is not closed: {problem}"),
        ));
    }
    None
}

/// Visits every value, counting them against a budget.
#[derive(Clone, Copy)]
struct Walk<'a>(&'a Cell<u64>);

impl Walk<'_> {
    fn count<E: de::Error>(self) -> Result<(), E> {
        match self.0.get().checked_sub(1) {
            Some(n) => {
                self.0.set(n);
                Ok(())
            }
            None => Err(E::custom(TOO_MANY)),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

macro_rules! scalars {
    ($($f:ident: $t:ty),*) => {
        $(fn $f<E: de::Error>(self, _: $t) -> Result<(), E> {
            self.count()
        })*
    };
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    scalars!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_i128: i128,
        visit_u128: u128, visit_f64: f64, visit_str: &str, visit_bytes: &[u8]);

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.count()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.count()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.count()?;
        self.deserialize(d)
    }

    fn visit_newtype_struct<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.count()?;
        self.deserialize(d)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        self.count()?;
        while s.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        self.count()?;
        while m.next_key_seed(self)?.is_some() {
            m.next_value_seed(self)?;
        }
        Ok(())
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, e: A) -> Result<(), A::Error> {
        use de::VariantAccess;
        self.count()?;
        let ((), v) = e.variant_seed(self)?;
        v.newtype_variant_seed(self)
    }
}

/// One step of a path into the document: `routes`, `[3]`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `routes[3].prefix` as steps (`None` for what is not such a path: "(document)").
fn steps(path: &str) -> Option<Vec<Step>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => part.split_at(i),
            None => (part, ""),
        };
        if key.is_empty() || key.starts_with('(') || key == "?" {
            return None;
        }
        out.push(Step::Key(key.to_string()));
        while let Some(r) = rest.strip_prefix('[') {
            let (n, after) = r.split_once(']')?;
            out.push(Step::Index(n.parse().ok()?));
            rest = after;
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(out)
}

const FOUND: &str = "\u{1}found\u{1}";

/// The line the value at `path` is written on or, for a field left out (an underlay
/// interface's missing `mac`), that of the nearest object around it that is written.
pub(crate) fn line_of(text: &str, path: &str) -> Option<usize> {
    let steps = steps(path)?;
    (1..=steps.len()).rev().find_map(|n| {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        match Find(&steps[..n]).deserialize(de) {
            Err(e) if e.to_string().contains(FOUND) => e.location().map(|l| l.line()),
            _ => None,
        }
    })
}

/// Follows a path into the document and fails on arriving: the YAML crate gives the
/// error the position of the value it was reading, which is the one the path names.
struct Find<'a>(&'a [Step]);

impl<'de> DeserializeSeed<'de> for Find<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Find<'_> {
    /// Arrived (a value the path ends at), or not there (a scalar the path goes into).
    fn end<E: de::Error>(&self) -> Result<(), E> {
        if self.0.is_empty() {
            Err(E::custom(FOUND))
        } else {
            Ok(())
        }
    }
}

macro_rules! found {
    ($($f:ident: $t:ty),*) => {
        $(fn $f<E: de::Error>(self, _: $t) -> Result<(), E> {
            self.end()
        })*
    };
}

impl<'de> Visitor<'de> for Find<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    found!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_i128: i128,
        visit_u128: u128, visit_f64: f64, visit_str: &str, visit_bytes: &[u8]);

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.end()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.end()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        let Some((Step::Index(want), rest)) = self.0.split_first() else {
            return self.end();
        };
        for _ in 0..*want {
            if s.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        s.next_element_seed(Find(rest))?;
        Ok(())
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        let Some((Step::Key(want), rest)) = self.0.split_first() else {
            return self.end();
        };
        while let Some(k) = m.next_key::<serde_yaml_ng::Value>()? {
            if k.as_str() == Some(want.as_str()) {
                return m.next_value_seed(Find(rest));
            }
            m.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}
