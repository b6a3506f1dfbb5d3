//! Buffer descriptors and the checks every descriptor the peer wrote passes before a
//! byte of its buffer is touched. Pure functions over region sizes (no memory), so that
//! tests and the fuzzer drive them directly.

/// `MEMIF_DESC_FLAG_NEXT`: the frame continues in the next descriptor.
pub const DESC_FLAG_NEXT: u16 = 1;
/// The size of a descriptor in a ring.
pub const DESC_LEN: usize = 16;
/// The longest chain of descriptors one frame may use.
pub const MAX_CHAIN: usize = 64;
/// The longest frame received whole (a chain carrying more is dropped).
pub const MAX_FRAME: usize = 65535;

/// One descriptor, as read (once) from the ring: `flags` u16, `region` u16, `length`
/// u32, `offset` u32, `metadata` u32, little-endian, 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Desc {
    pub flags: u16,
    pub region: u16,
    pub length: u32,
    pub offset: u32,
    pub metadata: u32,
}

impl Desc {
    pub fn from_bytes(b: [u8; 16]) -> Self {
        Self {
            flags: u16::from_le_bytes([b[0], b[1]]),
            region: u16::from_le_bytes([b[2], b[3]]),
            length: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            offset: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            metadata: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..2].copy_from_slice(&self.flags.to_le_bytes());
        b[2..4].copy_from_slice(&self.region.to_le_bytes());
        b[4..8].copy_from_slice(&self.length.to_le_bytes());
        b[8..12].copy_from_slice(&self.offset.to_le_bytes());
        b[12..16].copy_from_slice(&self.metadata.to_le_bytes());
        b
    }

    pub fn next(&self) -> bool {
        self.flags & DESC_FLAG_NEXT != 0
    }
}

/// Why a descriptor (and the frame it belongs to) was refused. Each is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DescError {
    #[error("descriptor names a region that does not exist")]
    Region,
    #[error("descriptor's buffer lies outside its region")]
    Bounds,
    #[error("descriptor's length exceeds the buffer size")]
    Length,
    #[error("frame chains more descriptors than allowed")]
    ChainTooLong,
    #[error("frame longer than the largest frame")]
    FrameTooLarge,
}

impl DescError {
    pub const ALL: [DescError; 5] = [
        DescError::Region,
        DescError::Bounds,
        DescError::Length,
        DescError::ChainTooLong,
        DescError::FrameTooLarge,
    ];

    /// A short name for counters.
    pub fn name(self) -> &'static str {
        match self {
            DescError::Region => "desc_region",
            DescError::Bounds => "desc_bounds",
            DescError::Length => "desc_length",
            DescError::ChainTooLong => "chain_too_long",
            DescError::FrameTooLarge => "frame_too_large",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// Checks that `d` describes `d.length` bytes (at most `max_len`) inside one of the
/// regions whose sizes are `regions`; returns (region, offset, length).
#[inline]
pub fn check(
    d: &Desc,
    regions: &[usize],
    max_len: u32,
) -> Result<(usize, usize, usize), DescError> {
    let r = d.region as usize;
    let Some(&size) = regions.get(r) else {
        return Err(DescError::Region);
    };
    if d.length > max_len {
        return Err(DescError::Length);
    }
    let (off, len) = (d.offset as usize, d.length as usize);
    match off.checked_add(len) {
        Some(end) if end <= size => Ok((r, off, len)),
        _ => Err(DescError::Bounds),
    }
}

/// Checks a whole chain (descriptors in ring order, each but the last with NEXT);
/// returns the frame's total length.
pub fn check_chain(chain: &[Desc], regions: &[usize], max_len: u32) -> Result<usize, DescError> {
    if chain.len() > MAX_CHAIN {
        return Err(DescError::ChainTooLong);
    }
    let mut total = 0usize;
    for d in chain {
        total += check(d, regions, max_len)?.2;
    }
    if total > MAX_FRAME {
        return Err(DescError::FrameTooLarge);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(region: u16, offset: u32, length: u32) -> Desc {
        Desc {
            region,
            offset,
            length,
            ..Desc::default()
        }
    }

    #[test]
    fn layout_round_trips() {
        let b = [1, 0, 2, 0, 0x40, 0, 0, 0, 0, 0x10, 0, 0, 9, 0, 0, 0];
        let x = Desc::from_bytes(b);
        assert_eq!(
            x,
            Desc {
                flags: 1,
                region: 2,
                length: 64,
                offset: 0x1000,
                metadata: 9
            }
        );
        assert!(x.next());
        assert_eq!(x.to_bytes(), b);
    }

    #[test]
    fn region_index_checked() {
        assert_eq!(check(&d(0, 0, 64), &[4096], 2048), Ok((0, 0, 64)));
        assert_eq!(check(&d(1, 0, 64), &[4096], 2048), Err(DescError::Region));
        assert_eq!(check(&d(0, 0, 64), &[], 2048), Err(DescError::Region));
    }

    #[test]
    fn bounds_checked_as_a_range() {
        assert_eq!(check(&d(0, 4032, 64), &[4096], 2048), Ok((0, 4032, 64)));
        assert_eq!(
            check(&d(0, 4033, 64), &[4096], 2048),
            Err(DescError::Bounds)
        );
        assert_eq!(check(&d(0, 4096, 0), &[4096], 2048), Ok((0, 4096, 0)));
        assert_eq!(
            check(&d(0, u32::MAX, 2048), &[4096], 2048),
            Err(DescError::Bounds)
        );
    }

    #[test]
    fn length_checked() {
        assert_eq!(
            check(&d(0, 0, 2049), &[1 << 20], 2048),
            Err(DescError::Length)
        );
        assert_eq!(
            check(&d(0, 0, u32::MAX), &[usize::MAX], 2048),
            Err(DescError::Length)
        );
    }

    #[test]
    fn chains_checked() {
        let mut c = vec![d(0, 0, 2048); 4];
        c.push(d(0, 0, 100));
        assert_eq!(check_chain(&c, &[1 << 20], 2048), Ok(4 * 2048 + 100));
        c[2].region = 5;
        assert_eq!(check_chain(&c, &[1 << 20], 2048), Err(DescError::Region));
        let long = vec![d(0, 0, 1); MAX_CHAIN + 1];
        assert_eq!(
            check_chain(&long, &[1 << 20], 2048),
            Err(DescError::ChainTooLong)
        );
        let big = vec![d(0, 0, 2048); 33];
        assert_eq!(
            check_chain(&big, &[1 << 20], 2048),
            Err(DescError::FrameTooLarge)
        );
    }
}
