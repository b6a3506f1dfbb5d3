//! Where the fast path outlives ovrd: a directory on a BPF filesystem (bpffs) holding
//! the program, its maps and one link per interface, each pinned by name:
//!
//! ```text
//! DIR/ovr_flows ovr_ifaces ovr_xsks ovr_tx ovr_gen ovr_counters   the maps
//! DIR/ovr_xdp | DIR/ovr_tc                                          the program
//! DIR/link-IFINDEX                                                  its link on an interface
//! ```
//!
//! A pinned link keeps its program attached, and the program its maps, after the process
//! that made them is gone (SIGTERM without `--detach-fast-path-on-exit`, kill -9, a crash):
//! established flows keep forwarding. The next ovrd opens the same maps and replaces the
//! program in each link atomically (`bpf_link_update`), never detaching it first.
//! Removing a pin (or unmounting the filesystem) lets go of what it held.
//!
//! Several ovrds on one machine (a lab: one per network namespace, all on one bpffs)
//! each pin under a directory of their own. An interface index is only meaningful in
//! the network namespace of the ovrd that pinned it: a directory belongs to one ovrd.

use crate::OffloadError;
use std::path::{Path, PathBuf};

/// bpffs's `f_type` (linux/magic.h).
const BPF_FS_MAGIC: u64 = 0xcafe_4a11;

/// The map names of bpf/fast_path.c, each pinned under its own name.
pub const MAPS: [&str; 7] = [
    "ovr_flows",
    "ovr_tpls",
    "ovr_ifaces",
    "ovr_xsks",
    "ovr_tx",
    "ovr_gen",
    "ovr_counters",
];

fn err(op: &'static str, e: impl std::fmt::Display) -> OffloadError {
    OffloadError::Bpf {
        op,
        message: e.to_string(),
    }
}

/// A pin directory, on bpffs.
#[derive(Debug, Clone)]
pub struct PinDir {
    dir: PathBuf,
    /// A bpffs was mounted here by this process, in a mount namespace of its own: what is
    /// pinned goes with the process (said once, at start).
    pub private_mount: bool,
    /// The directory, locked (flock) for as long as this process uses it: one ovrd at a
    /// time adopts what is there.
    _lock: std::sync::Arc<std::fs::File>,
}

impl PinDir {
    /// Creates `dir` if needed, on a bpffs: if its parent is not on one, a bpffs is
    /// mounted on the parent (with the default, /sys/fs/bpf/ovr: at /sys/fs/bpf, where
    /// systemd mounts it). Fails if another process uses the directory.
    pub fn prepare(dir: &Path) -> Result<Self, OffloadError> {
        let what = |e: std::io::Error| err("pin directory", format!("{}: {e}", dir.display()));
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(what)?;
        let mut private_mount = false;
        if !on_bpffs(parent) {
            rustix::mount::mount(
                "bpf",
                parent,
                "bpf",
                rustix::mount::MountFlags::empty(),
                None,
            )
            .map_err(|e| {
                err(
                    "mount bpffs",
                    format!("{}: {e} (mount -t bpf bpf DIR)", parent.display()),
                )
            })?;
            // `ip netns exec` runs ovrd in a mount namespace of its own: a filesystem
            // mounted there is gone (and its pins with it) when ovrd exits.
            let ns = |p: &str| std::fs::read_link(p).ok();
            private_mount = ns("/proc/self/ns/mnt") != ns("/proc/1/ns/mnt");
        }
        match std::fs::create_dir(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(what(e)),
            _ => {}
        }
        let lock = std::fs::File::open(dir).map_err(what)?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |_| {
                err(
                    "pin directory",
                    format!("{}: another ovrd uses it", dir.display()),
                )
            },
        )?;
        Ok(Self {
            dir: dir.to_path_buf(),
            private_mount,
            _lock: std::sync::Arc::new(lock),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    pub fn map(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn program(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn link(&self, ifindex: u32) -> PathBuf {
        self.dir.join(format!("link-{ifindex}"))
    }

    /// Interfaces with a pinned link.
    pub fn links(&self) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| {
                let name = e.ok()?.file_name();
                name.to_str()?.strip_prefix("link-")?.parse().ok()
            })
            .collect()
    }

    /// Whether a fast path was left here (its flow map is pinned).
    pub fn holds_maps(&self) -> bool {
        self.map(MAPS[0]).exists()
    }

    /// Removes every pin (links first: that detaches the program wherever nothing else
    /// holds it).
    pub fn clear(&self) {
        for i in self.links() {
            let _ = std::fs::remove_file(self.link(i));
        }
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// [`Self::clear`], then the directory.
    pub fn remove_all(&self) {
        self.clear();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Removes what an earlier ovrd left pinned in `dir` (its fast path goes on forwarding
/// until then): the ovrd starting now runs without a fast path, and nothing would keep
/// those entries right. Mounts nothing; returns whether there was one.
pub fn remove_left(dir: &Path) -> Result<bool, OffloadError> {
    if !dir.is_dir() || !on_bpffs(dir) {
        return Ok(false);
    }
    let pins = PinDir::prepare(dir)?;
    let left = pins.holds_maps() || !pins.links().is_empty();
    if left {
        pins.remove_all();
    }
    Ok(left)
}

fn on_bpffs(dir: &Path) -> bool {
    rustix::fs::statfs(dir).is_ok_and(|s| s.f_type as u64 == BPF_FS_MAGIC)
}
