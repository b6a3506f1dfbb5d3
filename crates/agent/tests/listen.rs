//! The listeners' limits, with short timeouts on a real socket: idle connections and
//! heads that never end are closed; at the connection cap, idle connections make room
//! for a new request.

mod common;

use common::*;
use ovr_agent::api::{DEFAULT_BODY_LIMIT, router};
use ovr_agent::listen::{Limits, serve};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const GET: &[u8] = b"GET /api/v1/ids HTTP/1.1\r\nHost: ovrd\r\n\r\n";

fn start(dir: &Path, limits: Limits) -> std::path::PathBuf {
    let path = dir.join("api.sock");
    let l = tokio::net::UnixListener::bind(&path).unwrap();
    let (app, _) = app(example(), DEFAULT_BODY_LIMIT);
    let _ = router; // the same router ovrd serves
    tokio::spawn(serve(l, app, limits));
    path
}

/// Reads until the peer closes; answers what came and how long it took.
async fn until_closed(s: &mut UnixStream, within: Duration) -> (Vec<u8>, Duration) {
    let t = Instant::now();
    let mut got = Vec::new();
    tokio::time::timeout(within, s.read_to_end(&mut got))
        .await
        .expect("the connection was not closed in time")
        .ok();
    (got, t.elapsed())
}

/// One response's head and body on a keep-alive connection (Content-Length framed).
async fn response(s: &mut UnixStream) -> String {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        let n = s.read(&mut b).await.unwrap();
        assert!(n > 0, "closed before an answer");
        buf.extend_from_slice(&b[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap();
            if buf.len() >= end + 4 + len {
                return text;
            }
        }
    }
}

#[tokio::test]
async fn idle_connections_are_closed_and_keep_alive_works_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        header: Duration::from_millis(400),
        idle: Duration::from_millis(800),
        max: 64,
    };
    let path = start(dir.path(), limits);
    // Never a byte: closed after the idle time.
    let mut silent = UnixStream::connect(&path).await.unwrap();
    // Two requests on one connection, then idle: closed after the idle time too.
    let mut kept = UnixStream::connect(&path).await.unwrap();
    for _ in 0..2 {
        kept.write_all(GET).await.unwrap();
        assert!(response(&mut kept).await.starts_with("HTTP/1.1 200"));
    }
    let (_, t) = until_closed(&mut silent, Duration::from_secs(5)).await;
    assert!(t >= Duration::from_millis(600), "closed after {t:?}");
    let (got, _) = until_closed(&mut kept, Duration::from_secs(5)).await;
    assert!(got.is_empty());
}

#[tokio::test]
async fn a_head_sent_slowly_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        header: Duration::from_millis(400),
        idle: Duration::from_secs(30),
        max: 64,
    };
    let path = start(dir.path(), limits);
    let mut s = UnixStream::connect(&path).await.unwrap();
    let t = Instant::now();
    // A byte every 50 ms: never idle, never a whole head.
    let mut closed = false;
    for b in b"GET /api/v1/ids HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
        if s.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        let mut x = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(50), s.read(&mut x)).await
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "still open after {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

#[tokio::test]
async fn at_the_cap_idle_connections_make_room() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        header: Duration::from_secs(10),
        idle: Duration::from_secs(30),
        max: 8,
    };
    let path = start(dir.path(), limits);
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(UnixStream::connect(&path).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = Instant::now();
    let mut s = UnixStream::connect(&path).await.unwrap();
    s.write_all(GET).await.unwrap();
    let text = tokio::time::timeout(Duration::from_secs(10), response(&mut s))
        .await
        .expect("no answer at the cap");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}
