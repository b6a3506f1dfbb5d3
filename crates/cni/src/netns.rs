//! Network namespaces: the container's (CNI_NETNS) and ovrd's (found from the pid of
//! whoever answers on its socket). Work inside a namespace happens on a thread of its
//! own that is thrown away afterwards, so no thread ever goes back to work in the wrong
//! namespace; a netlink socket opened there stays bound to that namespace.

use crate::error::{self, CniError, code};
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

const NSFS_MAGIC: i64 = 0x6e73_6673;
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// Opens a network namespace file, checking that it is one (nsfs, or a /proc link).
/// `Ok(None)` when it does not exist.
pub fn open(path: &Path) -> Result<Option<File>, CniError> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(error::link(&format!("{}", path.display()), e)),
    };
    let st = rustix::fs::fstatfs(&f).map_err(|e| error::link(&path.display().to_string(), e))?;
    #[allow(clippy::unnecessary_cast)] // the type of f_type differs between targets
    let kind = st.f_type as i64;
    if kind != NSFS_MAGIC && kind != PROC_SUPER_MAGIC {
        return Err(CniError::new(
            code::INVALID_ENVIRONMENT,
            format!("{} is not a network namespace", path.display()),
        ));
    }
    Ok(Some(f))
}

/// Whether two namespace files are the same namespace.
pub fn same(a: &File, b: &File) -> bool {
    let id = |f: &File| rustix::fs::fstat(f).ok().map(|s| (s.st_dev, s.st_ino));
    id(a).is_some() && id(a) == id(b)
}

/// The pid of the process that answers on `socket` (SO_PEERCRED).
pub fn peer_pid(socket: &Path) -> Result<i32, CniError> {
    let s = UnixStream::connect(socket).map_err(|e| {
        CniError::new(
            code::TRY_AGAIN_LATER,
            format!("ovrd does not answer on {}: {e}", socket.display()),
        )
    })?;
    let cred = rustix::net::sockopt::socket_peercred(&s)
        .map_err(|e| error::link("SO_PEERCRED on ovrd's socket", e))?;
    Ok(cred.pid.as_raw_nonzero().get())
}

/// ovrd's network namespace.
pub fn of_ovrd(socket: &Path) -> Result<File, CniError> {
    let pid = peer_pid(socket)?;
    let p = format!("/proc/{pid}/ns/net");
    open(Path::new(&p))?
        .ok_or_else(|| CniError::new(code::TRY_AGAIN_LATER, format!("{p}: ovrd went away")))
}

/// Runs `f` in namespace `ns`, on a thread of its own.
pub fn run_in<T: Send>(ns: &File, f: impl FnOnce() -> T + Send) -> Result<T, CniError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .map_err(|e| error::link("setns", e))?;
            Ok(f())
        })
        .join()
        .map_err(|_| error::link("namespace thread", "panicked"))?
    })
}
