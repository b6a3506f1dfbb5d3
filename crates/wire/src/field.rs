//! Byte ranges of header fields and big-endian accessors over them.
//!
//! Callers check the buffer length once (`new_checked`); these helpers then index within
//! that length. They still use slice indexing, so a bug shows up as a test failure, never
//! as an out-of-bounds read.

pub(crate) type Field = core::ops::Range<usize>;

#[inline]
pub(crate) fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
pub(crate) fn write_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn write_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
