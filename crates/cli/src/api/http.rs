//! A minimal HTTP/1.1 client over ovrd's Unix socket (or its TCP listener, with a bearer
//! token): one request per connection (`Connection: close`), the whole response read.
//! The API is local and small; a full HTTP stack and an async runtime would be most of
//! ovrctl's size for no gain.

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
const TIMEOUT: Duration = Duration::from_secs(60);

/// Where ovrd's API is.
pub enum Endpoint {
    Unix(PathBuf),
    /// `ADDR:PORT` of `ovrd --api-listen`, and the bearer token it wants.
    Tcp {
        addr: String,
        token: Option<String>,
    },
}

pub fn request_to(
    to: &Endpoint,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
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
            s.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
            (Box::new(s), String::new())
        }
        Endpoint::Tcp { addr, token } => {
            let s = TcpStream::connect(addr).map_err(refused)?;
            s.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
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
