//! ovrd's REST API from another program (ovrctl, the ovr-cni plugin): a minimal HTTP/1.1
//! client over ovrd's Unix socket (or its TCP listener, with a bearer token), one request
//! per connection (`Connection: close`), the whole response read; and [`call`], which
//! sends JSON and turns the API's error bodies into [`ApiFailure`].
//! The API is local and small; a full HTTP stack and an async runtime would be most of
//! the callers' size for no gain.

#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a request got no HTTP answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("ovrd is not running (nothing listens on {0}; start ovrd, or give --socket)")]
    NotRunning(String),
    #[error("permission denied on {0}: the API socket is root's (mode 0600); run ovrctl as root")]
    Denied(String),
    #[error("{0} is not a socket (it is {1}): give ovrd's API socket with --socket")]
    NotASocket(String, &'static str),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("ovrd answered something that is not HTTP: {0}")]
    Malformed(String),
}

pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// How long ovrd may take to answer (a commit of a large batch takes a while).
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Where ovrd's API is.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Unix(PathBuf),
    /// `ADDR:PORT` of `ovrd --api-listen`, and the bearer token it wants.
    Tcp {
        addr: String,
        token: Option<String>,
    },
}

/// One request with the default timeout ([`TIMEOUT`]).
pub fn request_to(
    to: &Endpoint,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> Result<Response, ClientError> {
    request_within(to, method, path, body, TIMEOUT)
}

/// One request; ovrd must answer within `timeout`.
pub fn request_within(
    to: &Endpoint,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Response, ClientError> {
    let name = match to {
        Endpoint::Unix(p) => p.display().to_string(),
        Endpoint::Tcp { addr, .. } => format!("http://{addr}"),
    };
    let io = |source| ClientError::Io {
        path: name.clone(),
        source,
    };
    let refused = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            let what = match to {
                Endpoint::Unix(p) => not_a_socket(p),
                Endpoint::Tcp { .. } => None,
            };
            match what {
                Some(what) => ClientError::NotASocket(name.clone(), what),
                None => ClientError::NotRunning(name.clone()),
            }
        }
        std::io::ErrorKind::PermissionDenied => ClientError::Denied(name.clone()),
        _ => io(e),
    };
    let (mut s, auth): (Box<dyn Stream>, _) = match to {
        Endpoint::Unix(p) => {
            let s = UnixStream::connect(p).map_err(refused)?;
            s.set_read_timeout(Some(timeout)).map_err(io)?;
            (Box::new(s), String::new())
        }
        Endpoint::Tcp { addr, token } => {
            let s = TcpStream::connect(addr).map_err(refused)?;
            s.set_read_timeout(Some(timeout)).map_err(io)?;
            let auth = token
                .as_ref()
                .map(|t| format!("Authorization: Bearer {t}\r\n"))
                .unwrap_or_default();
            (Box::new(s), auth)
        }
    };
    let body = body.unwrap_or(&[]);
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: ovrd\r\nConnection: close\r\n{auth}Accept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).map_err(io)?;
    s.write_all(body).map_err(io)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(io)?;
    parse(&raw)
}

/// What the path is when it exists and is not a socket (connecting to it is refused
/// as if nothing listened).
fn not_a_socket(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).ok()?.file_type();
    if t.is_socket() {
        None
    } else if t.is_file() {
        Some("a regular file")
    } else if t.is_dir() {
        Some("a directory")
    } else {
        Some("neither a socket nor a regular file")
    }
}

/// Why a JSON request did not succeed: no answer at all, or the API's refusal.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{0}")]
    Api(ApiFailure),
}

/// A refusal from the API: its HTTP status and the body's `error` and `field`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    pub status: u16,
    pub error: String,
    pub field: Option<String>,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let class = match self.status {
            404 => "not found: ",
            409 => "conflict: ",
            401 => "unauthorized: ",
            503 => "unavailable: ",
            _ => "",
        };
        write!(f, "{class}{}", self.error)?;
        if let Some(field) = &self.field {
            write!(f, " (field: {field})")?;
        }
        Ok(())
    }
}

/// Sends `body` as JSON and reads the answer as JSON (a body that is not JSON becomes a
/// string); a status of 400 or more is an [`ApiFailure`].
pub fn call(
    to: &Endpoint,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
) -> Result<serde_json::Value, CallError> {
    let bytes = body.map(|b| b.to_string().into_bytes());
    let r = request_within(to, method, path, bytes.as_deref(), timeout)?;
    answer(r).map_err(CallError::Api)
}

/// The JSON of a response, or the API's refusal.
pub fn answer(r: Response) -> Result<serde_json::Value, ApiFailure> {
    use serde_json::Value;
    let v: Value = serde_json::from_slice(&r.body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&r.body).into()));
    if r.status >= 400 {
        return Err(ApiFailure {
            status: r.status,
            error: v["error"]
                .as_str()
                .map_or_else(|| v.to_string(), str::to_string),
            field: v["field"].as_str().map(str::to_string),
        });
    }
    Ok(v)
}

/// Percent-encodes a path segment (names are free text).
pub fn seg(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

fn parse(raw: &[u8]) -> Result<Response, ClientError> {
    let bad = |m: &str| ClientError::Malformed(m.to_string());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("headers not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let chunked = lines.any(|l| {
        l.to_ascii_lowercase()
            .replace(' ', "")
            .starts_with("transfer-encoding:chunked")
    });
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest).ok_or_else(|| bad("bad chunked body"))?
    } else {
        rest.to_vec()
    };
    Ok(Response { status, body })
}

/// Joins the chunks of a chunked body (RFC 9112 section 7.1).
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&b[..eol]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_responses() {
        let r = parse(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (404, &b"{}"[..]));
        let r = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abcde"[..]));
        assert!(parse(b"garbage").is_err());
    }

    #[test]
    fn an_error_body_becomes_a_failure_with_its_field() {
        let r = Response {
            status: 422,
            body: br#"{"error":"bad vni","field":"vni"}"#.to_vec(),
        };
        let f = answer(r).unwrap_err();
        assert_eq!((f.status, f.field.as_deref()), (422, Some("vni")));
        assert_eq!(f.to_string(), "bad vni (field: vni)");
        let r = Response {
            status: 404,
            body: b"gone".to_vec(),
        };
        assert_eq!(answer(r).unwrap_err().to_string(), "not found: \"gone\"");
        let r = Response {
            status: 201,
            body: br#"{"name":"a"}"#.to_vec(),
        };
        assert_eq!(answer(r).unwrap()["name"], "a");
        assert_eq!(seg("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn a_missing_socket_says_ovrd_is_not_running() {
        let to = Endpoint::Unix("/nonexistent/ovrd.sock".into());
        let e = request_to(&to, "GET", "/", None).err().unwrap();
        assert!(matches!(e, ClientError::NotRunning(_)), "{e}");
        assert!(e.to_string().contains("ovrd is not running"));
    }

    #[test]
    fn a_regular_file_or_a_directory_is_not_a_socket() {
        let dir = std::env::temp_dir().join(format!("ovr-http-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ovrd.sock");
        std::fs::write(&file, "").unwrap();
        for (p, what) in [(&file, "a regular file"), (&dir, "a directory")] {
            let e = request_to(&Endpoint::Unix(p.clone()), "GET", "/", None)
                .err()
                .unwrap();
            assert!(
                matches!(e, ClientError::NotASocket(_, w) if w == what),
                "{e}"
            );
            assert!(e.to_string().contains("is not a socket"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
