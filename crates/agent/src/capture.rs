//! Packet captures to pcap files: the request is validated and the file created here,
//! a writer thread per capture drains the tap's bounded queue into the file (so the
//! forwarding worker never waits on a disk), and the list of captures with their
//! counters is kept for the API.
//!
//! The pcap format is written by the `pcap-file` crate (classic pcap, Ethernet link
//! type, microsecond timestamps): what tshark, tcpdump and Wireshark all read.

use crate::error::ApiError;
use ovr_dataplane::capture::{Direction, Ended, Frame, Tap, TapCounters};
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use utoipa::ToSchema;

/// Frames a capture's queue holds before the tap starts dropping (and counting).
pub const QUEUE_FRAMES: usize = 4096;
/// Captures running at once.
pub const MAX_RUNNING: usize = 8;
/// Bounds of the request's numbers.
pub const MAX_PACKETS: u64 = 100_000_000;
pub const MAX_SECONDS: u64 = 7 * 24 * 3600;
pub const MIN_SNAPLEN: u32 = 14;
pub const MAX_SNAPLEN: u32 = 65_535;
/// How often a running capture's file is flushed when frames are few (a reader of a
/// running capture sees what came up to a moment ago).
const FLUSH_EVERY: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CaptureDirection {
    Rx,
    Tx,
    #[default]
    Both,
}

impl From<CaptureDirection> for Direction {
    fn from(d: CaptureDirection) -> Self {
        match d {
            CaptureDirection::Rx => Direction::Rx,
            CaptureDirection::Tx => Direction::Tx,
            CaptureDirection::Both => Direction::Both,
        }
    }
}

/// What to capture, and where to.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureRequest {
    /// An interface of the configuration.
    pub interface: String,
    /// An absolute path to a file that does not exist yet, in a directory ovrd can
    /// write to.
    pub path: String,
    /// Frames received (rx), handed to the interface for sending (tx), or both.
    #[serde(default)]
    pub direction: CaptureDirection,
    /// Stop after this many frames (1 to 100000000).
    pub packets: Option<u64>,
    /// Stop after this many seconds (1 to 604800).
    pub seconds: Option<u64>,
    /// Bytes kept of each frame (14 to 65535; default 65535).
    pub snaplen: Option<u32>,
}

/// A capture and its counters.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct CaptureInfo {
    pub id: u32,
    pub interface: String,
    pub path: String,
    pub direction: CaptureDirection,
    pub packets: Option<u64>,
    pub seconds: Option<u64>,
    pub snaplen: u32,
    /// "running" or "finished".
    pub state: &'static str,
    /// Why it finished ("packet count reached", "time limit reached", "stopped", "the
    /// writer stopped"), null while running.
    pub ended: Option<&'static str>,
    /// Frames written to the file.
    pub written: u64,
    /// Frames lost because the writer's queue was full (the worker never waits).
    pub dropped: u64,
    /// A write error, if the file could not be written.
    pub error: Option<String>,
}

struct Capture {
    info: CaptureInfo,
    counters: Arc<TapCounters>,
    writer: Option<JoinHandle<Result<(), String>>>,
}

impl Capture {
    /// The info with the counters now; joins a writer that has finished.
    fn info(&mut self) -> CaptureInfo {
        if self.writer.as_ref().is_some_and(JoinHandle::is_finished) {
            self.join();
        }
        let c = &self.counters;
        let mut i = self.info.clone();
        i.written = c.written.load(Ordering::Relaxed);
        i.dropped = c.dropped.load(Ordering::Relaxed);
        let ended = c.ended();
        if self.writer.is_none() {
            i.state = "finished";
            i.ended = Some(if ended == Ended::Running {
                Ended::WriterGone.name()
            } else {
                ended.name()
            });
        }
        i
    }

    fn join(&mut self) {
        if let Some(h) = self.writer.take() {
            let r = h
                .join()
                .unwrap_or_else(|_| Err("the writer thread failed".into()));
            if let Err(e) = r {
                self.info.error = Some(e);
            }
        }
    }
}

/// The captures of this daemon (running and finished, until deleted).
#[derive(Default)]
pub struct Captures {
    next_id: u32,
    list: Vec<Capture>,
}

/// A capture validated and its file opened, ready for its tap to be added.
pub struct Prepared {
    tap: Tap,
    pending: Pending,
}

impl Prepared {
    /// The tap for the worker, and the rest for [`Captures::started`].
    pub fn split(self) -> (Tap, Pending) {
        (self.tap, self.pending)
    }
}

/// A capture whose tap is on its way to the worker.
pub struct Pending {
    info: CaptureInfo,
    counters: Arc<TapCounters>,
    writer: JoinHandle<Result<(), String>>,
    path: PathBuf,
}

impl Pending {
    /// Gives up (the worker did not take the tap): the file is removed. The writer is
    /// not waited for: a worker that answers late may still hold the tap, and the
    /// writer ends when it lets go.
    pub fn abandon(self) {
        self.counters.end(Ended::WriterGone);
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Captures {
    pub fn list(&mut self) -> Vec<CaptureInfo> {
        self.list.iter_mut().map(Capture::info).collect()
    }

    fn running(&mut self) -> usize {
        self.list
            .iter_mut()
            .map(Capture::info)
            .filter(|i| i.state == "running")
            .count()
    }

    /// Validates a request (interface id from `interface`), creates the file with its
    /// pcap header and starts the writer. Nothing is left behind on error.
    pub fn prepare(
        &mut self,
        r: &CaptureRequest,
        interface: Option<u32>,
    ) -> Result<Prepared, ApiError> {
        let interface = interface.ok_or_else(|| {
            ApiError::invalid("interface", format!("no interface named '{}'", r.interface))
        })?;
        let range = |field: &str, v: Option<u64>, lo: u64, hi: u64| match v {
            Some(n) if !(lo..=hi).contains(&n) => Err(ApiError::invalid(
                field,
                format!("{n} is out of range ({lo} to {hi})"),
            )),
            _ => Ok(()),
        };
        range("packets", r.packets, 1, MAX_PACKETS)?;
        range("seconds", r.seconds, 1, MAX_SECONDS)?;
        range(
            "snaplen",
            r.snaplen.map(u64::from),
            MIN_SNAPLEN.into(),
            MAX_SNAPLEN.into(),
        )?;
        if self.running() >= MAX_RUNNING {
            return Err(ApiError::Conflict {
                message: format!("{MAX_RUNNING} captures are running already: stop one first"),
                field: None,
            });
        }
        let snaplen = r.snaplen.unwrap_or(MAX_SNAPLEN);
        let path = PathBuf::from(&r.path);
        let file = create(&path)?;
        let header = PcapHeader {
            snaplen,
            datalink: DataLink::ETHERNET,
            ..PcapHeader::default()
        };
        let out = Arc::new(Mutex::new(BufWriter::new(file)));
        let pcap = match PcapWriter::with_header(Out(Arc::clone(&out)), header) {
            Ok(w) => w,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(ApiError::invalid(
                    "path",
                    format!("{}: cannot write: {e}", r.path),
                ));
            }
        };
        self.next_id += 1;
        let id = self.next_id;
        let counters = Arc::new(TapCounters::default());
        let (queue, frames) = sync_channel(QUEUE_FRAMES);
        let c = Arc::clone(&counters);
        let writer = std::thread::Builder::new()
            .name(format!("ovr-capture-{id}"))
            .spawn(move || write(pcap, &out, &frames, &c))
            .map_err(|e| {
                let _ = std::fs::remove_file(&path);
                ApiError::Internal(format!("cannot start the capture's writer: {e}"))
            })?;
        let tap = Tap {
            id,
            interface,
            direction: r.direction.into(),
            snaplen: snaplen as usize,
            left: r
                .packets
                .map(|n| Arc::new(std::sync::atomic::AtomicU64::new(n))),
            until: r.seconds.map(|s| Instant::now() + Duration::from_secs(s)),
            queue,
            counters: Arc::clone(&counters),
        };
        let info = CaptureInfo {
            id,
            interface: r.interface.clone(),
            path: r.path.clone(),
            direction: r.direction,
            packets: r.packets,
            seconds: r.seconds,
            snaplen,
            state: "running",
            ended: None,
            written: 0,
            dropped: 0,
            error: None,
        };
        Ok(Prepared {
            tap,
            pending: Pending {
                info,
                counters,
                writer,
                path,
            },
        })
    }

    /// Keeps a capture whose tap the worker took.
    pub fn started(&mut self, p: Pending) -> CaptureInfo {
        let mut c = Capture {
            info: p.info,
            counters: p.counters,
            writer: Some(p.writer),
        };
        let info = c.info();
        self.list.push(c);
        info
    }

    pub fn contains(&self, id: u32) -> bool {
        self.list.iter().any(|c| c.info.id == id)
    }

    /// Forgets a capture whose tap is gone, after its writer has flushed the file: its
    /// final counters. Blocks until the writer is done (at most the queue's frames).
    pub fn finish(&mut self, id: u32) -> Option<CaptureInfo> {
        let at = self.list.iter().position(|c| c.info.id == id)?;
        let mut c = self.list.remove(at);
        c.counters.end(Ended::Stopped);
        c.join();
        Some(c.info())
    }
}

/// Creates the capture file: the path must be absolute and new, its directory must
/// exist and be writable. Created with O_EXCL (never overwrites, never follows a
/// symbolic link at the last component), mode 0600.
fn create(path: &Path) -> Result<File, ApiError> {
    let bad = |m: String| ApiError::invalid("path", m);
    let shown = path.display();
    if !path.is_absolute() {
        return Err(bad(format!("'{shown}' is not an absolute path")));
    }
    if path.file_name().is_none() {
        return Err(bad(format!("'{shown}' does not name a file")));
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => ApiError::Conflict {
                message: format!("{shown} exists already: captures never overwrite a file"),
                field: Some("path".into()),
            },
            std::io::ErrorKind::NotFound => bad(format!("{shown}: the directory does not exist")),
            std::io::ErrorKind::PermissionDenied => {
                bad(format!("{shown}: the directory is not writable"))
            }
            _ => bad(format!("{shown}: {e}")),
        })
}

/// The file behind the pcap writer, shared with the writer thread's loop so that it can
/// flush while the pcap writer (which offers no flush) holds it.
/// (The lock is only ever taken by the writer thread: it is never contended.)
struct Out(Arc<Mutex<BufWriter<File>>>);

fn lock(out: &Mutex<BufWriter<File>>) -> std::io::Result<MutexGuard<'_, BufWriter<File>>> {
    out.lock()
        .map_err(|_| std::io::Error::other("the capture file's lock is poisoned"))
}

impl Write for Out {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        lock(&self.0)?.write(b)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        lock(&self.0)?.flush()
    }
}

/// The writer thread: frames into the file until the tap lets go of the queue, flushed
/// when the queue runs dry for a while and at the end.
fn write(
    mut pcap: PcapWriter<Out>,
    out: &Mutex<BufWriter<File>>,
    frames: &Receiver<Frame>,
    counters: &TapCounters,
) -> Result<(), String> {
    let mut dirty = false;
    loop {
        match frames.recv_timeout(FLUSH_EVERY) {
            Ok(f) => {
                let p = PcapPacket::new(f.time, f.orig_len, &f.data);
                pcap.write_packet(&p).map_err(|e| e.to_string())?;
                counters.written.fetch_add(1, Ordering::Relaxed);
                dirty = true;
            }
            Err(RecvTimeoutError::Timeout) => {
                if dirty {
                    lock(out)
                        .and_then(|mut o| o.flush())
                        .map_err(|e| e.to_string())?;
                    dirty = false;
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let mut out = lock(out).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    out.get_ref().sync_all().map_err(|e| e.to_string())
}
