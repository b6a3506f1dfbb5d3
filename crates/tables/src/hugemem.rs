//! Fixed-size arrays for the large per-worker tables (the flow table's entries and
//! buckets), on 2 MiB pages where the system gives them.
//!
//! From about 64K flows up, each flow lookup misses the TLB as well as the caches: with
//! 4 KiB pages the STLB covers 8 MiB, the flow table at 256K flows is about 100 MiB, so
//! every dependent load of a lookup (bucket, then entry) also waits for a page walk.
//! On 2 MiB pages the same table needs 50 TLB entries.
//!
//! Explicit huge pages (MAP_HUGETLB) come first, when the administrator reserved enough
//! (`vm.nr_hugepages`); otherwise the array asks for transparent huge pages (madvise),
//! which kernels configured `madvise` or `always` grant to a 2 MiB-aligned region that
//! asks; otherwise it stays on 4 KiB pages and works the same. `Vec` can ask for
//! neither, hence this small owner of an anonymous mapping.
#![allow(unsafe_code)]

use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;

const HUGE_PAGE: usize = 2 << 20;

/// What backs a [`HugeArray`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Reserved huge pages (MAP_HUGETLB).
    Explicit,
    /// 2 MiB-aligned memory that asked for transparent huge pages; whether the kernel
    /// granted them shows in /proc/self/smaps (`AnonHugePages`).
    Transparent,
    /// 4 KiB pages: asked for, or the array is smaller than a huge page.
    Small,
}

/// `len` values of `T`, each initialised to `T::default()`, fixed in size and place.
pub struct HugeArray<T> {
    ptr: NonNull<T>,
    len: usize,
    map: NonNull<libc::c_void>,
    map_len: usize,
    pages: Pages,
}

// SAFETY: the array owns its values like a `Box<[T]>` does.
unsafe impl<T: Send> Send for HugeArray<T> {}
// SAFETY: shared access only hands out `&T`.
unsafe impl<T: Sync> Sync for HugeArray<T> {}

impl<T: Default> HugeArray<T> {
    /// An array of `len` default values; on huge pages if `huge` and the system has them.
    ///
    /// # Panics
    /// When the system has no memory for it at all (as `Vec` does).
    pub fn new(len: usize, huge: bool) -> Self {
        assert!(
            align_of::<T>() <= 4096,
            "HugeArray: alignment beyond a page"
        );
        let bytes = len
            .checked_mul(size_of::<T>())
            .expect("HugeArray: size overflows")
            .max(1);
        let (map, map_len, start, pages) =
            map(bytes, huge).unwrap_or_else(|| panic!("HugeArray: no memory for {bytes} bytes"));
        let ptr = start.cast::<T>();
        for i in 0..len {
            // SAFETY: `start` has room for `len` values of `T`, page-aligned (so aligned
            // for `T`): `i < len` stays inside.
            let slot = unsafe { ptr.add(i) };
            // SAFETY: a slot of the fresh mapping, which nothing else refers to yet.
            unsafe { slot.write(T::default()) };
        }
        Self {
            ptr,
            len,
            map,
            map_len,
            pages,
        }
    }
}

impl<T> HugeArray<T> {
    /// What backs the array.
    pub fn pages(&self) -> Pages {
        self.pages
    }

    /// Start of the values (to find the mapping in /proc/self/smaps).
    pub fn address(&self) -> usize {
        self.ptr.as_ptr() as usize
    }
}

/// Maps at least `bytes`: the mapping, its length, where the values start and what
/// backs them.
#[allow(clippy::type_complexity)]
fn map(bytes: usize, huge: bool) -> Option<(NonNull<libc::c_void>, usize, NonNull<u8>, Pages)> {
    let anon = |len, extra| {
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra,
                -1,
                0,
            )
        };
        (p != libc::MAP_FAILED).then(|| NonNull::new(p)).flatten()
    };
    if huge && bytes >= HUGE_PAGE {
        let len = bytes.next_multiple_of(HUGE_PAGE);
        if let Some(p) = anon(len, libc::MAP_HUGETLB) {
            return Some((p, len, p.cast(), Pages::Explicit));
        }
        // One huge page more, so that a 2 MiB-aligned start fits inside.
        let len = bytes.next_multiple_of(HUGE_PAGE) + HUGE_PAGE;
        if let Some(p) = anon(len, 0) {
            let start = (p.as_ptr() as usize).next_multiple_of(HUGE_PAGE);
            let start = p
                .cast::<u8>()
                .map_addr(|_| start.try_into().expect("non-zero"));
            // SAFETY: advice on memory this function just mapped. Refused advice (a
            // kernel without transparent huge pages) leaves small pages, which work.
            let asked = unsafe {
                libc::madvise(start.as_ptr().cast(), len - HUGE_PAGE, libc::MADV_HUGEPAGE)
            } == 0;
            let pages = if asked {
                Pages::Transparent
            } else {
                Pages::Small
            };
            return Some((p, len, start, pages));
        }
    }
    let len = bytes.next_multiple_of(4096);
    anon(len, 0).map(|p| (p, len, p.cast(), Pages::Small))
}

impl<T> Deref for HugeArray<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised values live at `ptr` for the array's life.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for HugeArray<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for HugeArray<T> {
    fn drop(&mut self) {
        let values = core::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
        // SAFETY: the values were initialised in `new` and are dropped once, here.
        unsafe { core::ptr::drop_in_place(values) };
        // SAFETY: the mapping made in `new`, returned whole; nothing refers to it now.
        unsafe { libc::munmap(self.map.as_ptr(), self.map_len) };
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for HugeArray<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HugeArray")
            .field("len", &self.len)
            .field("pages", &self.pages)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `AnonHugePages` (or, for MAP_HUGETLB, `Private_Hugetlb`) bytes of the
    /// mapping that holds `addr`.
    fn huge_bytes_at(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        let mut total = 0;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((a, b)) = range.split_once('-')
                && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                inside = (a..b).contains(&addr);
                continue;
            }
            if inside {
                for field in ["AnonHugePages:", "Private_Hugetlb:"] {
                    if let Some(kb) = line.strip_prefix(field) {
                        total += kb
                            .trim()
                            .trim_end_matches(" kB")
                            .trim()
                            .parse::<u64>()
                            .unwrap()
                            * 1024;
                    }
                }
            }
        }
        total
    }

    fn thp_mode() -> String {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default()
    }

    #[test]
    fn values_start_as_default_and_are_kept() {
        let mut a = HugeArray::<(u64, [u8; 24])>::new(100_000, true);
        assert_eq!(a.len(), 100_000);
        assert!(a.iter().all(|v| *v == Default::default()));
        a[99_999].0 = 7;
        a[0].1[3] = 9;
        assert_eq!((a[99_999].0, a[0].1[3], a[500].0), (7, 9, 0));
        assert_eq!(a.address() % align_of::<(u64, [u8; 24])>(), 0);
    }

    #[test]
    fn a_large_array_lands_on_huge_pages_when_the_kernel_has_them() {
        let a = HugeArray::<[u64; 8]>::new(256 << 10, true); // 16 MiB
        match a.pages() {
            Pages::Explicit => assert!(huge_bytes_at(a.address()) >= 16 << 20),
            Pages::Transparent if !thp_mode().contains("[never]") => {
                // At least some: a machine whose memory is fragmented may grant fewer.
                assert!(huge_bytes_at(a.address()) >= 2 << 20);
            }
            p => assert!(
                thp_mode().contains("[never]") || thp_mode().is_empty(),
                "{p:?}"
            ),
        }
        let small = HugeArray::<[u64; 8]>::new(256 << 10, false);
        assert_eq!(small.pages(), Pages::Small);
        assert_eq!(huge_bytes_at(small.address()), 0);
    }

    #[test]
    fn small_and_empty_arrays_work() {
        let a = HugeArray::<u32>::new(0, true);
        assert!(a.is_empty());
        let b = HugeArray::<u32>::new(10, true);
        assert_eq!((b.pages(), &b[..]), (Pages::Small, &[0u32; 10][..]));
    }

    #[test]
    fn values_are_dropped_with_the_array() {
        use std::rc::Rc;
        #[derive(Default)]
        struct Counted(Option<Rc<()>>);
        let rc = Rc::new(());
        let mut a = HugeArray::<Counted>::new(1000, true);
        for v in a.iter_mut() {
            v.0 = Some(rc.clone());
        }
        assert_eq!(Rc::strong_count(&rc), 1001);
        drop(a);
        assert_eq!(Rc::strong_count(&rc), 1);
    }
}
