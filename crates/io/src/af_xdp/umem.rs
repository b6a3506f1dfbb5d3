//! The memory an AF_XDP socket shares with the kernel (the UMEM): one anonymous mapping
//! cut into equal chunks. The kernel writes received frames into chunks user space
//! gave it on the fill ring and reads frames to send from chunks named on the transmit
//! ring; at any moment a chunk belongs to exactly one side. The only `unsafe` of the
//! AF_XDP driver is here.
#![allow(unsafe_code)]

use std::io;
use std::ptr::NonNull;
use xdpilone::{Umem, UmemConfig};

/// A page-aligned anonymous mapping, unmapped on drop.
pub struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    /// Maps `len` bytes, populated up front so that the first frames fault nothing in.
    pub fn new(len: usize) -> io::Result<Self> {
        // SAFETY: an anonymous private mapping with no address hint aliases nothing; the
        // result is checked before use.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        Ok(Self { ptr, len })
    }

    /// Registers the area with the kernel as a UMEM of `config.frame_size` chunks.
    ///
    /// The caller keeps the area alive for as long as the UMEM and every socket made from
    /// it (the driver's queue declares the area last, so it is dropped last).
    pub fn register(&self, config: UmemConfig) -> Result<Umem, xdpilone::Errno> {
        let area = NonNull::slice_from_raw_parts(self.ptr, self.len);
        // SAFETY: `area` is one page-aligned mapping of `len` bytes owned by `self`, which
        // outlives the UMEM (see above); nothing else in the process writes to it except
        // through `frame`/`frame_mut`.
        unsafe { Umem::new(config, area) }
    }

    /// The `len` bytes at `addr` (a UMEM address), if they lie inside the area.
    ///
    /// Only for chunks user space owns: a descriptor just read from the receive ring, or
    /// a chunk not on the fill or transmit ring. The kernel does not write those.
    pub fn frame(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(addr).ok()?;
        if start.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: `start..start + len` lies inside the mapping (checked above), which is
        // live for `&self`; the chunk is owned by user space (see above), so the kernel
        // does not write it while the borrow lasts.
        Some(unsafe { core::slice::from_raw_parts(self.ptr.as_ptr().wrapping_add(start), len) })
    }

    /// Like [`Self::frame`], for writing a frame to send.
    pub fn frame_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(addr).ok()?;
        if start.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: as in `frame`, and `&mut self` makes this the only borrow of the area.
        Some(unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr().wrapping_add(start), len) })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_inside_the_area_only() {
        let mut a = Area::new(4096).unwrap();
        a.frame_mut(2048, 4).unwrap().copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(a.frame(2048, 4).unwrap(), &[1, 2, 3, 4]);
        assert_eq!(a.frame(4092, 4).unwrap().len(), 4);
        assert!(a.frame(4093, 4).is_none());
        assert!(a.frame(u64::MAX, 1).is_none());
        assert!(a.frame_mut(4096, 1).is_none());
    }
}
