//! Cache prefetch hints for batch lookups.
//!
//! A batch lookup first computes every key's bucket address and prefetches it, then
//! compares: the memory loads of the whole batch are in flight at once instead of one
//! after another (worth 2-3x at table sizes beyond the cache; see PLATFORM.md).
//! std offers no safe prefetch, hence an unsafe block (the crate's only other one is `hugemem`'s mapping).
#![allow(unsafe_code)]

/// Hints the CPU to bring the cache line holding `*p` into all cache levels.
/// A hint only: it never faults and has no effect on program semantics.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 (SSE, which every x86_64 CPU has) never faults and does not
    // read memory architecturally, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
