//! Serving a listener (the Unix socket or TCP): one task per connection, HTTP/1.1 by
//! hyper, with the limits a daemon's API needs against idle, slow or too many clients
//! (axum's own `serve` has none of them).
//!
//! - **Header read**: a request head must arrive whole within `HEADER_TIMEOUT` of its
//!   first byte (a client sending a head a byte at a time is cut off).
//! - **Idle**: a connection with no request in progress and nothing sent for
//!   `IDLE_TIMEOUT` is closed (keep-alive clients reconnect); so is one where a request
//!   is in progress but no byte has moved either way for that long (a body that stopped
//!   coming, an answer nobody reads).
//! - **Cap**: at most `max` connections per listener. At the cap, idle connections are
//!   closed at once to make room, and new ones wait in the kernel's backlog.

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, Semaphore, watch};
use tower_service::Service;

/// A request head must be complete this long after its first byte.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection doing nothing is closed after this long.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections per listener at most (fewer if the descriptor limit is low: `cap`).
pub const MAX_CONNECTIONS: usize = 2048;
/// Under pressure (the cap reached), connections idle this long are closed at once.
const PRESSURE_IDLE: Duration = Duration::from_secs(1);

/// The limits of one listener.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header: Duration,
    pub idle: Duration,
    pub max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header: HEADER_TIMEOUT,
            idle: IDLE_TIMEOUT,
            max: MAX_CONNECTIONS,
        }
    }
}

/// Serves `app` on `listener` until the listener fails (never, in practice: axum's
/// `Listener` retries failed accepts).
pub async fn serve<L: axum::serve::Listener>(mut listener: L, app: Router, limits: Limits) {
    let slots = Arc::new(Semaphore::new(limits.max));
    let (pressure, _) = watch::channel(0u64);
    loop {
        let permit = loop {
            if let Ok(p) = Arc::clone(&slots).try_acquire_owned() {
                break p;
            }
            // Full: idle connections make room (asked again every second, as those
            // busy now go idle); new ones wait in the kernel's backlog meanwhile.
            pressure.send_modify(|n| *n += 1);
            tokio::select! {
                p = Arc::clone(&slots).acquire_owned() => match p {
                    Ok(p) => break p,
                    Err(_) => return,
                },
                () = tokio::time::sleep(PRESSURE_IDLE) => {}
            }
        };
        let (io, _) = listener.accept().await;
        let (app, pressure) = (app.clone(), pressure.subscribe());
        tokio::spawn(async move {
            connection(io, app, limits, pressure).await;
            drop(permit);
        });
    }
}

/// What a connection did last, for its watchdog (times in ms since `start`).
struct Activity {
    start: Instant,
    /// Last byte read or written.
    last_io: AtomicU64,
    /// Requests being answered.
    in_flight: AtomicUsize,
    /// When the first byte of the next request head arrived (+1; 0: none yet).
    head_since: AtomicU64,
    /// Wakes the watchdog when a head starts (its deadline is nearer than idle's).
    head_started: Notify,
}

impl Activity {
    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// What to do `now`: close, or look again within this many ms.
    fn verdict(&self, l: &Limits, pressure: bool) -> Result<u64, &'static str> {
        let now = self.now();
        let ms = |d: Duration| d.as_millis() as u64;
        let quiet = now.saturating_sub(self.last_io.load(Ordering::Relaxed));
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return if quiet >= ms(l.idle) {
                Err("no byte moved during a request")
            } else {
                Ok(ms(l.idle) - quiet)
            };
        }
        match self.head_since.load(Ordering::Relaxed) {
            0 if pressure && quiet >= ms(PRESSURE_IDLE) => Err("idle, at the connection cap"),
            0 if quiet >= ms(l.idle) => Err("idle"),
            0 => Ok(ms(l.idle) - quiet),
            since => {
                let reading = now.saturating_sub(since - 1);
                if reading >= ms(l.header) {
                    Err("request head not complete in time")
                } else {
                    Ok(ms(l.header) - reading)
                }
            }
        }
    }
}

async fn connection<S>(io: S, app: Router, limits: Limits, mut pressure: watch::Receiver<u64>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let act = Arc::new(Activity {
        start: Instant::now(),
        last_io: AtomicU64::new(0),
        in_flight: AtomicUsize::new(0),
        head_since: AtomicU64::new(0),
        head_started: Notify::new(),
    });
    let io = Watched {
        io,
        act: Arc::clone(&act),
    };
    let seen = Arc::clone(&act);
    let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let mut app = app.clone();
        let act = Arc::clone(&seen);
        act.in_flight.fetch_add(1, Ordering::Relaxed);
        act.head_since.store(0, Ordering::Relaxed);
        async move {
            let r = app.call(req.map(axum::body::Body::new)).await;
            act.last_io.store(act.now(), Ordering::Relaxed);
            act.in_flight.fetch_sub(1, Ordering::Relaxed);
            r
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    // The head's timeout is ours (it counts from the first byte; hyper's own from the
    // end of the previous answer, which is the idle time).
    http.timer(TokioTimer::new()).header_read_timeout(None);
    let conn = http.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let mut pressed = false;
    loop {
        let wait = match act.verdict(&limits, pressed) {
            Ok(ms) => Duration::from_millis(ms.max(1)),
            Err(why) => {
                tracing::debug!("API connection closed: {why}");
                return;
            }
        };
        pressed = false;
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("API connection: {e}");
                }
                return;
            }
            () = tokio::time::sleep(wait) => {}
            () = act.head_started.notified() => {}
            () = async {
                if pressure.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            } => pressed = true,
        }
    }
}

/// The connection's stream, noting when bytes move.
struct Watched<S> {
    io: S,
    act: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            let a = &self.act;
            let now = a.now();
            a.last_io.store(now, Ordering::Relaxed);
            if a.in_flight.load(Ordering::Relaxed) == 0 && a.head_since.load(Ordering::Relaxed) == 0
            {
                a.head_since.store(now + 1, Ordering::Relaxed);
                a.head_started.notify_one();
            }
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r
            && n > 0
        {
            self.act.last_io.store(self.act.now(), Ordering::Relaxed);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r
            && n > 0
        {
            self.act.last_io.store(self.act.now(), Ordering::Relaxed);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The connection cap for a process allowed `nofile` descriptors: two listeners, and
/// room for the interfaces, state and capture files.
pub fn cap(nofile: u64) -> usize {
    let room = nofile.saturating_sub(256) / 2;
    (room as usize).clamp(16, MAX_CONNECTIONS)
}
