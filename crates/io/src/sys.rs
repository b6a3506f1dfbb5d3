//! The system calls the drivers make, each wrapped once. The only `unsafe` of the crate.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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

/// A non-blocking AF_PACKET raw socket bound to interface `index`, receiving every
/// EtherType but not the frames this host sends. Every frame read or written carries a
/// virtio-net header in front (PACKET_VNET_HDR), so that frames whose checksum or
/// segmentation was left to the NIC arrive whole and say so.
pub fn packet_socket(index: u32) -> io::Result<OwnedFd> {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: socket(2) with constant arguments; the result is checked.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::c_int::from(proto),
        )
    })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // SAFETY: the option value points to a live c_int of the length given.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            (&raw const one).cast(),
            core::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    // SAFETY: the option value points to a live c_int of the length given.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            (&raw const one).cast(),
            core::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    // Deep socket buffers absorb bursts while the worker is busy with a vector; without
    // them TCP through ovr loses segments at every burst. FORCE (as root) passes the
    // rmem_max/wmem_max limits; failing that, the default stays.
    let size: libc::c_int = 8 << 20;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        // SAFETY: the option value points to a live c_int of the length given.
        let _ = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&raw const size).cast(),
                core::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { core::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = index as i32;
    // SAFETY: `sll` is a valid sockaddr_ll and the length matches it.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const sll).cast(),
            core::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// Receives up to `lens.len()` frames in one call, frame `i` into the `i`th `frame`-byte
/// slice of `buf`; returns each frame's length in `lens`
/// and how many arrived (0 when none is waiting). Frames longer than their buffer are
/// cut to it; `truncated` reports them.
pub fn recv_batch(
    fd: &OwnedFd,
    buf: &mut [u8],
    frame: usize,
    lens: &mut [usize],
    truncated: &mut [bool],
) -> io::Result<usize> {
    let mut bufs: Vec<&mut [u8]> = buf.chunks_exact_mut(frame.max(1)).collect();
    let n = bufs.len().min(lens.len()).min(truncated.len());
    let mut iovs: Vec<libc::iovec> = bufs[..n]
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: mmsghdr is plain data; all-zero is valid (no name, no control).
    let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { core::mem::zeroed() }).collect();
    for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
        m.msg_hdr.msg_iov = iov;
        m.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: every msg points to one iovec over a live, exclusively borrowed buffer of
    // the stated length; the kernel writes at most that much and `msg_len`.
    let r = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            core::ptr::null_mut(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(e),
        };
    }
    let got = r as usize;
    for i in 0..got {
        let full = msgs[i].msg_len as usize;
        truncated[i] = full > bufs[i].len();
        lens[i] = full.min(bufs[i].len());
    }
    Ok(got)
}

/// Sends messages, each a header the socket expects and a frame, in one call (more if
/// the kernel takes fewer); returns how many it took.
pub fn send_batch(fd: &OwnedFd, frames: &[(&[u8], &[u8])]) -> io::Result<usize> {
    let mut iovs: Vec<[libc::iovec; 2]> = frames
        .iter()
        .map(|(prefix, f)| {
            [
                libc::iovec {
                    iov_base: prefix.as_ptr().cast_mut().cast(),
                    iov_len: prefix.len(),
                },
                libc::iovec {
                    iov_base: f.as_ptr().cast_mut().cast(),
                    iov_len: f.len(),
                },
            ]
        })
        .collect();
    // SAFETY: mmsghdr is plain data; all-zero is valid.
    let mut msgs: Vec<libc::mmsghdr> = (0..frames.len())
        .map(|_| unsafe { core::mem::zeroed() })
        .collect();
    for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
        m.msg_hdr.msg_iov = iov.as_mut_ptr();
        m.msg_hdr.msg_iovlen = 2;
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
