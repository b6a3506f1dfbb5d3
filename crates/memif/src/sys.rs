//! Everything of memif that needs `unsafe`: the control socket's system calls (fds
//! passed with SCM_RIGHTS), memfd regions and their mappings, eventfds, poll and epoll.
//! The rest of the crate is safe code over the few types here.
//!
//! A [`Mapping`] is memory the peer writes too, at any time: it is only ever reached
//! through bounds-checked copies, volatile reads and writes, and alignment-checked
//! atomics (never as a Rust reference to plain data), in the manner of vm-memory's
//! `VolatileSlice`.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU16;

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Where a control socket lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SocketAddr {
    /// A file in the file system (what VPP and libmemif use).
    Path(std::path::PathBuf),
    /// A name in the abstract namespace (DPDK's default).
    Abstract(String),
}

impl std::fmt::Display for SocketAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SocketAddr::Path(p) => write!(f, "{}", p.display()),
            SocketAddr::Abstract(n) => write!(f, "@{n}"),
        }
    }
}

fn sockaddr(a: &SocketAddr) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid (empty) value.
    let mut sa: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let (bytes, start): (Vec<u8>, usize) = match a {
        SocketAddr::Path(p) => {
            use std::os::unix::ffi::OsStrExt;
            (p.as_os_str().as_bytes().to_vec(), 0)
        }
        SocketAddr::Abstract(n) => (n.as_bytes().to_vec(), 1),
    };
    // A path keeps a terminating NUL; an abstract name starts with one.
    if bytes.is_empty() || start + bytes.len() >= sa.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("socket name '{a}' is empty or longer than 107 bytes"),
        ));
    }
    for (i, b) in bytes.iter().enumerate() {
        sa.sun_path[start + i] = *b as libc::c_char;
    }
    let base = core::mem::offset_of!(libc::sockaddr_un, sun_path);
    let len = match a {
        SocketAddr::Path(_) => base + bytes.len() + 1,
        SocketAddr::Abstract(_) => base + 1 + bytes.len(),
    };
    Ok((sa, len as libc::socklen_t))
}

fn seqpacket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with constant arguments.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A non-blocking listening SOCK_SEQPACKET socket at `a` (a stale socket file left by an
/// earlier run is removed first; any other file there is an error).
pub fn listen(a: &SocketAddr) -> io::Result<OwnedFd> {
    if let SocketAddr::Path(p) = a {
        use std::os::unix::fs::FileTypeExt;
        if let Some(dir) = p.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_socket() => std::fs::remove_file(p)?,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", p.display()),
                ));
            }
            Err(_) => {}
        }
    }
    let (sa, len) = sockaddr(a)?;
    let fd = seqpacket()?;
    // SAFETY: `sa` is a valid sockaddr_un of `len` bytes for the duration of the call.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_un).cast(),
            len,
        )
    })?;
    // SAFETY: plain system call on a socket we own.
    check(unsafe { libc::listen(fd.as_raw_fd(), 16) })?;
    Ok(fd)
}

/// Accepts a connection (non-blocking); `None` if none is waiting.
pub fn accept(listener: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    // SAFETY: null address pointers are allowed (the peer's address is not wanted).
    let r = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: `r` was just returned by accept4(2) and is owned by nobody else.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(r) }))
}

/// Connects a non-blocking SOCK_SEQPACKET socket to `a` (a unix socket connects or fails
/// at once).
pub fn connect(a: &SocketAddr) -> io::Result<OwnedFd> {
    let (sa, len) = sockaddr(a)?;
    let fd = seqpacket()?;
    // SAFETY: `sa` is a valid sockaddr_un of `len` bytes for the duration of the call.
    check(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_un).cast(),
            len,
        )
    })?;
    Ok(fd)
}

/// Room for the control data of one message: a few fds (more than memif ever sends,
/// so that extra ones are received and closed rather than left to MSG_CTRUNC) and
/// credentials.
const CMSG_SPACE: usize = 128;

/// Sends one message, with `pass` as SCM_RIGHTS if given.
pub fn send(fd: &OwnedFd, msg: &[u8], pass: Option<RawFd>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut libc::c_void,
        iov_len: msg.len(),
    };
    let mut ctl = [0u64; CMSG_SPACE / 8];
    // SAFETY: msghdr is plain data; all zeroes is a valid empty header.
    let mut mh: libc::msghdr = unsafe { core::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    if let Some(p) = pass {
        let n = core::mem::size_of::<RawFd>() as u32;
        mh.msg_control = ctl.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        mh.msg_controllen = unsafe { libc::CMSG_SPACE(n) } as usize;
        // SAFETY: msg_control points to `ctl`, at least CMSG_SPACE(4) bytes, aligned.
        let c = unsafe { libc::CMSG_FIRSTHDR(&mh) };
        // SAFETY: CMSG_LEN only computes a size.
        let cmsg_len = unsafe { libc::CMSG_LEN(n) } as usize;
        // SAFETY: `c` points to the start of `ctl` (non-null: the buffer is big enough).
        unsafe {
            (*c).cmsg_level = libc::SOL_SOCKET;
        }
        // SAFETY: as above.
        unsafe {
            (*c).cmsg_type = libc::SCM_RIGHTS;
        }
        // SAFETY: as above.
        unsafe {
            (*c).cmsg_len = cmsg_len;
        }
        // SAFETY: CMSG_DATA of the first header lies within `ctl` with room for one fd.
        let data = unsafe { libc::CMSG_DATA(c) };
        // SAFETY: `data` has room for one RawFd (CMSG_LEN above); unaligned write.
        unsafe { core::ptr::write_unaligned(data.cast::<RawFd>(), p) };
    }
    // SAFETY: `mh` and everything it points to live for the duration of the call.
    let r = unsafe { libc::sendmsg(fd.as_raw_fd(), &mh, libc::MSG_NOSIGNAL) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if r as usize != msg.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short send"));
    }
    Ok(())
}

/// One datagram received.
#[derive(Debug)]
pub struct Received {
    /// Bytes received (0: the peer closed).
    pub len: usize,
    /// The datagram was longer than the buffer (MSG_TRUNC).
    pub truncated: bool,
    /// Control data was cut (MSG_CTRUNC): fds may have been lost.
    pub ctrunc: bool,
    /// Descriptors passed with it, owned (closed when dropped unless used).
    pub fds: Vec<OwnedFd>,
}

/// Receives one datagram into `buf` (non-blocking: `WouldBlock` if none is waiting).
pub fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Received> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut ctl = [0u64; CMSG_SPACE / 8];
    // SAFETY: msghdr is plain data; all zeroes is a valid empty header.
    let mut mh: libc::msghdr = unsafe { core::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.as_mut_ptr().cast();
    mh.msg_controllen = CMSG_SPACE;
    // SAFETY: `mh` points to `buf` and `ctl`, both live and of the lengths given.
    let r = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut mh, libc::MSG_CMSG_CLOEXEC) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: `mh` was filled by the kernel; its control length is within `ctl`.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(&mh) };
    while !c.is_null() {
        // SAFETY: `c` is a header within `ctl` as CMSG_FIRSTHDR/NXTHDR return them.
        let h: libc::cmsghdr = unsafe { core::ptr::read_unaligned(c) };
        let (level, kind, len) = (h.cmsg_level, h.cmsg_type, h.cmsg_len);
        if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
            // SAFETY: CMSG_LEN only computes a size.
            let hdr = unsafe { libc::CMSG_LEN(0) } as usize;
            let n = len.saturating_sub(hdr) / core::mem::size_of::<RawFd>();
            // SAFETY: the data of header `c` lies within `ctl`.
            let data = unsafe { libc::CMSG_DATA(c) }.cast::<RawFd>();
            for i in 0..n {
                // SAFETY: `i` < n fds of this header, all within `ctl`; unaligned read.
                let raw = unsafe { core::ptr::read_unaligned(data.wrapping_add(i)) };
                // SAFETY: the kernel installed `raw` in our table for us alone.
                fds.push(unsafe { OwnedFd::from_raw_fd(raw) });
            }
        }
        // SAFETY: `c` is a valid header of `mh`.
        c = unsafe { libc::CMSG_NXTHDR(&mh, c) };
    }
    Ok(Received {
        len: r as usize,
        truncated: mh.msg_flags & libc::MSG_TRUNC != 0,
        ctrunc: mh.msg_flags & libc::MSG_CTRUNC != 0,
        fds,
    })
}

/// A memfd of `size` bytes that can no longer shrink (F_SEAL_SHRINK), as memif's
/// senders make regions.
pub fn memfd(name: &str, size: u64) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let fd = check(unsafe {
        libc::memfd_create(c.as_ptr(), libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC)
    })?;
    // SAFETY: `fd` was just returned by memfd_create(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain system call on a file we own.
    check(unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) })?;
    // SAFETY: plain system call on a file we own.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) })?;
    Ok(fd)
}

/// The size of file `fd` and its seals (0 if it cannot be sealed).
pub fn size_and_seals(fd: &OwnedFd) -> io::Result<(u64, i32)> {
    // SAFETY: stat is plain data; all zeroes is valid.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `st` is a live stat struct the kernel fills.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    // SAFETY: plain system call; fails with EINVAL on files without seals.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    Ok((st.st_size as u64, seals.max(0)))
}

pub const SEAL_SHRINK: i32 = libc::F_SEAL_SHRINK;

/// A non-blocking eventfd (a ring's interrupt, or a wake-up).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain system call.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: `fd` was just returned by eventfd(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd (an interrupt); errors (a full counter) do not matter.
pub fn eventfd_signal(fd: RawFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from a live u64.
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Resets an eventfd's counter; returns whether it was signalled.
pub fn eventfd_drain(fd: RawFd) -> bool {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a live u64.
    let r = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    r == 8
}

/// poll(2) over `fds`; returns how many are ready (0 on timeout or interruption).
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: `fds` is a live slice of pollfd of the length given.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// An epoll set: one descriptor that is readable when any of its members is (the data
/// path hands it to the worker's poll(2), and changes its members per connection).
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain system call.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by epoll_create1(2) and is owned by nobody else.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn add(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: `ev` is a live epoll_event for the duration of the call.
        check(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })
            .map(|_| ())
    }

    pub fn del(&self, fd: RawFd) {
        // SAFETY: a null event is allowed for EPOLL_CTL_DEL.
        let _ = unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                core::ptr::null_mut(),
            )
        };
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// A shared mapping of a whole region file, unmapped when dropped. The peer writes it
/// concurrently: every access is bounds-checked and volatile (or atomic).
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, reached only through volatile or atomic
// accesses and copies, never through references to plain data: any thread may use it.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` gives no access that would race in Rust's sense beyond
// what the peer process already does to the same bytes.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared, read and write. The caller has checked that the
    /// file is at least `len` bytes long and cannot shrink (else a later access could
    /// fault with SIGBUS).
    pub fn map(fd: &OwnedFd, len: usize) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty region"));
        }
        // SAFETY: a fresh mapping chosen by the kernel, of a file descriptor we hold;
        // it aliases no Rust object.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { ptr: p.cast(), len })
    }

    /// A fresh sealed memfd of `len` bytes, mapped (a client's region; tests, fuzzing).
    pub fn memfd(name: &str, len: usize) -> io::Result<Self> {
        Self::map(&memfd(name, len as u64)?, len)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `off..off + n` lies inside the mapping.
    #[inline]
    fn fits(&self, off: usize, n: usize) -> bool {
        off.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// The 16-bit atomic at `off` (a ring's head or tail), if in bounds and aligned.
    #[inline]
    pub fn atomic_u16(&self, off: usize) -> Option<&AtomicU16> {
        if !self.fits(off, 2) || !off.is_multiple_of(2) {
            return None;
        }
        // SAFETY: in bounds (checked) and 2-aligned (the mapping is page-aligned and
        // `off` is even); AtomicU16 has the layout of u16 and the memory lives as long
        // as `self`. Every access to it is atomic on our side.
        Some(unsafe { &*self.ptr.wrapping_add(off).cast::<AtomicU16>() })
    }

    #[inline]
    pub fn read_u16(&self, off: usize) -> Option<u16> {
        if !self.fits(off, 2) {
            return None;
        }
        // SAFETY: in bounds (checked); volatile and unaligned-safe.
        let b = unsafe { core::ptr::read_volatile(self.ptr.wrapping_add(off).cast::<[u8; 2]>()) };
        Some(u16::from_le_bytes(b))
    }

    #[inline]
    pub fn write_u16(&self, off: usize, v: u16) -> bool {
        if !self.fits(off, 2) {
            return false;
        }
        // SAFETY: in bounds (checked); volatile write of plain bytes.
        unsafe {
            core::ptr::write_volatile(
                self.ptr.wrapping_add(off).cast::<[u8; 2]>(),
                v.to_le_bytes(),
            )
        };
        true
    }

    #[inline]
    pub fn read_u32(&self, off: usize) -> Option<u32> {
        if !self.fits(off, 4) {
            return None;
        }
        // SAFETY: in bounds (checked); volatile and unaligned-safe.
        let b = unsafe { core::ptr::read_volatile(self.ptr.wrapping_add(off).cast::<[u8; 4]>()) };
        Some(u32::from_le_bytes(b))
    }

    #[inline]
    pub fn write_u32(&self, off: usize, v: u32) -> bool {
        if !self.fits(off, 4) {
            return false;
        }
        // SAFETY: in bounds (checked); volatile write of plain bytes.
        unsafe {
            core::ptr::write_volatile(
                self.ptr.wrapping_add(off).cast::<[u8; 4]>(),
                v.to_le_bytes(),
            )
        };
        true
    }

    /// Reads the 16 bytes at `off` (a descriptor) once, as a snapshot.
    #[inline]
    pub fn read_16(&self, off: usize) -> Option<[u8; 16]> {
        if !self.fits(off, 16) {
            return None;
        }
        // SAFETY: in bounds (checked); one volatile read of plain bytes.
        let b = unsafe { core::ptr::read_volatile(self.ptr.wrapping_add(off).cast::<[u8; 16]>()) };
        Some(b)
    }

    /// Asks the CPU to bring the line at `off` into its cache ahead of a copy (`write`:
    /// for writing). A hint only: nothing is read, and an offset out of bounds is ignored.
    #[inline]
    pub fn prefetch(&self, off: usize, write: bool) {
        if !self.fits(off, 1) {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
            let p = self.ptr.wrapping_add(off).cast::<i8>();
            if write {
                // SAFETY: a prefetch never faults nor changes memory; `p` is in bounds.
                unsafe { _mm_prefetch::<_MM_HINT_ET0>(p) };
            } else {
                // SAFETY: as above.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = write;
    }

    /// Copies `dst.len()` bytes from `off` out of the mapping; false if out of bounds.
    #[inline]
    pub fn copy_out(&self, off: usize, dst: &mut [u8]) -> bool {
        if !self.fits(off, dst.len()) {
            return false;
        }
        // SAFETY: the source range is in bounds (checked) and cannot overlap `dst` (a
        // Rust slice, not part of the mapping). The bytes may change while copied; the
        // result is treated as untrusted frame data.
        unsafe {
            core::ptr::copy_nonoverlapping(self.ptr.wrapping_add(off), dst.as_mut_ptr(), dst.len())
        };
        true
    }

    /// Copies `src` into the mapping at `off`; false if out of bounds.
    #[inline]
    pub fn copy_in(&self, off: usize, src: &[u8]) -> bool {
        if !self.fits(off, src.len()) {
            return false;
        }
        // SAFETY: the destination range is in bounds (checked) and does not overlap
        // `src`; the mapping is writable shared memory.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.wrapping_add(off), src.len())
        };
        true
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and no reference into the
        // mapping outlives `self` (atomic refs borrow it).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
