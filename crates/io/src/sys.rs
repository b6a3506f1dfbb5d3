//! The system calls the drivers make, each wrapped once. The only `unsafe` of the crate.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The index of a network interface in the current namespace.
pub fn if_index(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// setsockopt(2) with the option value `v` (a plain C struct or integer).
fn set_opt<T: Copy>(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: the option value points to a live T of the length given; the kernel copies
    // it (and whatever it points to) before returning.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (v as *const T).cast(),
            core::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

fn set_int(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    set_opt(fd, level, opt, &v)
}

/// Which frames a receiving packet socket takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receive {
    /// Every EtherType (served before TC ingress).
    Every,
    /// IPv4 only (served after TC ingress).
    Ipv4,
    /// Every EtherType but IPv4 (served before TC ingress, IPv4 refused by a filter).
    AllButIpv4,
    /// ARP only.
    Arp,
}

/// A non-blocking AF_PACKET raw socket bound to interface `index`, receiving `what`
/// but not the frames this host sends, into a TPACKET_V2 ring of `frames`
/// slots of `frame_size` bytes. Every frame read or written carries a virtio-net header
/// in front (PACKET_VNET_HDR), so that frames whose checksum or segmentation was left to
/// the NIC arrive whole and say so. A frame larger than a slot is also queued on the
/// socket whole (PACKET_COPY_THRESH; its slot says TP_STATUS_COPY): read it with
/// `recv_one`.
pub fn packet_socket(
    index: u32,
    frame_size: usize,
    frames: usize,
    what: Receive,
) -> io::Result<(OwnedFd, RxRing)> {
    // Protocol 0 until bound: nothing is queued before the ring exists.
    let fd = raw_packet_socket()?;
    set_int(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)?;
    set_int(&fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
    set_int(
        &fd,
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        libc::tpacket_versions::TPACKET_V2 as libc::c_int,
    )?;
    set_int(&fd, libc::SOL_PACKET, libc::PACKET_COPY_THRESH, 1)?;
    // Deep socket buffers: the receive side holds the whole copies of large (offloaded)
    // frames, the send side absorbs bursts. FORCE (as root) passes the rmem_max/wmem_max
    // limits; failing that, the default stays.
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        let _ = set_int(&fd, libc::SOL_SOCKET, opt, 8 << 20);
    }
    let ring = RxRing::new(&fd, frame_size, frames)?;
    let protocol = match what {
        Receive::Every => libc::ETH_P_ALL,
        Receive::Ipv4 => libc::ETH_P_IP,
        Receive::Arp => libc::ETH_P_ARP,
        Receive::AllButIpv4 => {
            refuse_ipv4(&fd)?;
            libc::ETH_P_ALL
        }
    };
    bind_packet(&fd, index, protocol as u16)?;
    Ok((fd, ring))
}

/// A classic BPF socket filter that refuses IPv4 frames and takes the rest whole. The
/// filter sees the frame from its Ethernet header (a VLAN tag the kernel took off is
/// not in it, as for a socket bound to IPv4, which also gets such frames).
fn refuse_ipv4(fd: &OwnedFd) -> io::Result<()> {
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let mut program = [
        op(0x28, 0, 0, 12),       // ldh [12]: the EtherType
        op(0x15, 0, 1, 0x0800),   // jeq #0x800: next, else skip one
        op(0x06, 0, 0, 0),        // ret #0: refuse
        op(0x06, 0, 0, u32::MAX), // ret #-1: take it whole
    ];
    // `program` outlives the call, which copies it.
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    set_opt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

/// Moves the calling thread into a network namespace of its own with `lo` up, for tests
/// that need an interface and traffic nothing else sees (gone with the thread).
#[cfg(test)]
pub fn private_netns() -> io::Result<()> {
    // SAFETY: unshare(2) with a constant flag; it changes only the calling thread.
    check(unsafe { libc::unshare(libc::CLONE_NEWNET) })?;
    // A child started from this thread is in its namespace.
    let up = std::process::Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()?;
    if up.success() {
        Ok(())
    } else {
        Err(io::Error::other("ip link set lo up failed"))
    }
}

/// A non-blocking AF_PACKET raw socket with protocol 0 (it receives nothing until bound
/// with another).
fn raw_packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(fd)
}

/// A non-blocking AF_PACKET raw socket for sending on interface `index` only: bound with
/// protocol 0, it receives nothing. Frames carry a virtio-net header as with
/// `packet_socket`.
pub fn packet_send_socket(index: u32) -> io::Result<OwnedFd> {
    let fd = raw_packet_socket()?;
    set_int(&fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
    let _ = set_int(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 8 << 20);
    bind_packet(&fd, index, 0)?;
    Ok(fd)
}

fn bind_packet(fd: &OwnedFd, index: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { core::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = index as i32;
    // SAFETY: `sll` is a valid sockaddr_ll and the length matches it.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const sll).cast(),
            core::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// A TPACKET_V2 receive ring mapped from the kernel: slots of a fixed size, each
/// beginning with a `tpacket2_hdr` whose status word says who owns the slot. The kernel
/// fills a slot and then sets TP_STATUS_USER; user space reads it and hands it back by
/// setting TP_STATUS_KERNEL. Slots are read and released in order.
pub struct RxRing {
    base: core::ptr::NonNull<u8>,
    len: usize,
    frame_size: usize,
    frames: usize,
}

// SAFETY: the mapping is owned by this value alone; moving it to another thread moves
// the only handle.
unsafe impl Send for RxRing {}

impl RxRing {
    fn new(fd: &OwnedFd, frame_size: usize, frames: usize) -> io::Result<Self> {
        // Blocks of 64 KiB (what the kernel allocates contiguously), whole slots in each.
        let block = 64 << 10;
        let per_block = block / frame_size;
        let req = libc::tpacket_req {
            tp_block_size: block as u32,
            tp_block_nr: frames.div_ceil(per_block) as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: (frames.div_ceil(per_block) * per_block) as u32,
        };
        set_opt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
        let len = block * req.tp_block_nr as usize;
        // SAFETY: maps the ring just set up on `fd`, of exactly its size; the result is
        // checked.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            base: core::ptr::NonNull::new(p.cast()).ok_or_else(io::Error::last_os_error)?,
            len,
            frame_size,
            frames: req.tp_frame_nr as usize,
        })
    }

    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Slots are laid out block by block; with whole slots per block and blocks a
    /// multiple of the slot size, slot `i` is simply at `i * frame_size`.
    fn at(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.frames);
        // SAFETY: i < frames, so the offset is inside the mapping.
        unsafe { self.base.as_ptr().add(i * self.frame_size) }
    }

    fn status_word(&self, i: usize) -> &core::sync::atomic::AtomicU32 {
        // SAFETY: a slot begins with its 4-byte-aligned status word (slots are
        // 16-byte aligned), which the kernel and this process access atomically.
        unsafe { core::sync::atomic::AtomicU32::from_ptr(self.at(i).cast()) }
    }

    /// Slot `i`'s status. Acquire: the kernel writes the slot, then its status.
    pub fn status(&self, i: usize) -> u32 {
        self.status_word(i)
            .load(core::sync::atomic::Ordering::Acquire)
    }

    /// Slot `i`, header and data. Only for a slot whose status says it is the user's:
    /// the kernel does not write it until `release`, which needs `&mut self`, so no
    /// slice of it can outlive the ownership.
    pub fn slot(&self, i: usize) -> &[u8] {
        // SAFETY: the slot lies inside the mapping; while it is the user's the kernel
        // leaves it alone (see above).
        unsafe { core::slice::from_raw_parts(self.at(i), self.frame_size) }
    }

    /// Hands slot `i` back to the kernel. Release: the reads of it come first.
    pub fn release(&mut self, i: usize) {
        self.status_word(i).store(
            libc::TP_STATUS_KERNEL,
            core::sync::atomic::Ordering::Release,
        );
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no slice of it is alive (they
        // borrow `self`).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// Receives one frame queued on the socket (a copy of one too large for its ring slot)
/// into `buf`; `None` when none is waiting or it did not fit.
pub fn recv_one(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is a live, exclusively borrowed buffer of the stated length.
    let r = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    Ok(((r as usize) <= buf.len()).then_some(r as usize))
}

/// Sends messages in one call (more if the kernel takes fewer); returns how many it
/// took. Message `i` is gathered from `parts[ends[i - 1]..ends[i]]` (a header the
/// socket expects, then the frame's pieces).
pub fn send_batch(fd: &OwnedFd, parts: &[&[u8]], ends: &[usize]) -> io::Result<usize> {
    let mut iovs: Vec<libc::iovec> = parts
        .iter()
        .map(|p| libc::iovec {
            iov_base: p.as_ptr().cast_mut().cast(),
            iov_len: p.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain data; all-zero is valid.
    let mut msgs: Vec<libc::mmsghdr> = (0..ends.len())
        .map(|_| unsafe { core::mem::zeroed() })
        .collect();
    let mut start = 0;
    for (m, &end) in msgs.iter_mut().zip(ends) {
        let end = end.clamp(start, iovs.len());
        m.msg_hdr.msg_iov = iovs[start..].as_mut_ptr();
        m.msg_hdr.msg_iovlen = end - start;
        start = end;
    }
    let mut sent = 0;
    while sent < msgs.len() {
        // SAFETY: the messages point to iovecs over live buffers the kernel only reads.
        let r = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                msgs[sent..].as_mut_ptr(),
                (msgs.len() - sent) as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(sent),
                _ if sent > 0 => Ok(sent),
                _ => Err(e),
            };
        }
        if r == 0 {
            break;
        }
        sent += r as usize;
    }
    Ok(sent)
}

/// The poll(2) set for readability on `fds`.
pub fn pollfds(fds: &[i32]) -> Vec<libc::pollfd> {
    fds.iter()
        .map(|fd| libc::pollfd {
            fd: *fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect()
}

/// poll(2): whether any of `p` became readable within `timeout_ms`.
pub fn poll_readable(p: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<bool> {
    // SAFETY: `p` is a live array of `p.len()` pollfd structures.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

/// How many frames the kernel dropped on an AF_PACKET socket since the last call
/// (PACKET_STATISTICS resets its counters when read).
pub fn packet_drops(fd: &OwnedFd) -> io::Result<u32> {
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = core::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: `st` is a live tpacket_stats and `len` says its size; the kernel writes at
    // most that much.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&raw mut st).cast(),
            &raw mut len,
        )
    })?;
    Ok(st.tp_drops)
}

/// The number of receive queues of interface `name` (from sysfs; 1 when unknown).
pub fn rx_queues(name: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(1)
        .max(1)
}

/// Frames an AF_XDP socket could not take on receipt (its fill ring empty or its receive
/// ring full; the redirect then fails and the device counts a receive drop too).
pub fn xsk_rx_drops(fd: RawFd) -> io::Result<u64> {
    // SAFETY: xdp_statistics is plain integers; all zero is a valid value.
    let mut st: libc::xdp_statistics = unsafe { core::mem::zeroed() };
    let mut len = core::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
    // SAFETY: `st` is a live xdp_statistics and `len` says its size; the kernel writes at
    // most that much (and says how much in `len`).
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            (&raw mut st).cast(),
            &raw mut len,
        )
    })?;
    Ok(st.rx_dropped + st.rx_ring_full)
}

/// `union bpf_attr` as BPF_MAP_LOOKUP_BATCH reads it (`batch` member).
#[repr(C)]
#[derive(Default)]
struct BpfBatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// Copies up to `keys.len() / key_size` entries of the BPF map `fd` from `cursor` on
/// (None: from the start) into `keys` and `values`; returns how many, and the cursor to
/// continue from (None: the map was read to its end). A hash map's cursor is a bucket
/// index (4 bytes); the kernel returns whole buckets only.
pub fn bpf_map_lookup_batch(
    fd: BorrowedFd<'_>,
    cursor: Option<u32>,
    keys: &mut [u8],
    key_size: usize,
    values: &mut [u8],
    value_size: usize,
) -> io::Result<(usize, Option<u32>)> {
    let max = (keys.len() / key_size.max(1)).min(values.len() / value_size.max(1));
    let in_batch = cursor.unwrap_or(0);
    let mut out_batch = 0u32;
    let mut attr = BpfBatchAttr {
        in_batch: if cursor.is_some() {
            (&raw const in_batch) as u64
        } else {
            0
        },
        out_batch: (&raw mut out_batch) as u64,
        keys: keys.as_mut_ptr() as u64,
        values: values.as_mut_ptr() as u64,
        count: max as u32,
        map_fd: fd.as_raw_fd() as u32,
        ..Default::default()
    };
    // SAFETY: `attr` is the batch member of bpf_attr, its size given; the kernel writes
    // at most `count` keys and values into `keys` and `values` (each checked above to
    // hold that many), 4 bytes into `out_batch`, and `count` back into `attr`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_BATCH,
            &raw mut attr,
            core::mem::size_of::<BpfBatchAttr>(),
        )
    };
    let n = (attr.count as usize).min(max);
    if r == 0 {
        return Ok((n, Some(out_batch)));
    }
    let e = io::Error::last_os_error();
    // ENOENT: the end of the map (with the last entries, if any).
    if e.raw_os_error() == Some(libc::ENOENT) {
        return Ok((n, None));
    }
    Err(e)
}

/// Ends the process as SIGPIPE ends a C tool whose reader went (`ovrctl flows | head`):
/// quietly, with the signal's status. SIGPIPE stays ignored until then (the Rust
/// runtime's choice) because the same process talks to sockets: a peer that closes
/// (etcd refusing a TLS client, ovrd restarting) must be an error to report, not a kill.
pub fn die_of_sigpipe() -> ! {
    // SAFETY: setting a signal's disposition to SIG_DFL installs no handler and touches
    // no memory of ours.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // SAFETY: raise() delivers the signal to this thread; its default action ends us.
    unsafe { libc::raise(libc::SIGPIPE) };
    // Only reached if the signal was blocked: end with the status a shell gives it.
    std::process::exit(128 + libc::SIGPIPE)
}
