//! Token buckets: how a rate per interface is kept (new flows set up, packets taken in).

const NS: u64 = 1_000_000_000;

/// A token bucket in nanosecond units: `rate` tokens per second accrue continuously, up
/// to `burst` tokens. It starts full.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenBucket {
    /// Tokens available, times 10^9.
    credit: u64,
    /// When credit was last added; `None` until first used.
    last: Option<u64>,
}

impl TokenBucket {
    /// Takes one token at `now` (ns) if there is one.
    pub fn take(&mut self, now: u64, rate: u32, burst: u32) -> bool {
        let cap = u64::from(burst.max(1)) * NS;
        let credit = match self.last {
            None => cap,
            Some(l) => self
                .credit
                .saturating_add(now.saturating_sub(l).min(NS) * u64::from(rate))
                .min(cap),
        };
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        match credit.checked_sub(NS) {
            Some(left) => {
                self.credit = left;
                true
            }
            None => {
                self.credit = credit;
                false
            }
        }
    }
}

/// The burst a rate gets when none is given: a tenth of a second's worth, at least 64.
pub fn default_burst(rate: u32) -> u32 {
    (rate / 10).max(64)
}

/// One token bucket per interface id, grown as ids appear.
#[derive(Debug, Default)]
pub struct PerInterface(Vec<TokenBucket>);

impl PerInterface {
    pub fn take(&mut self, iface: u32, now: u64, rate: u32, burst: u32) -> bool {
        let i = iface as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, TokenBucket::default());
        }
        self.0[i].take(now, rate, burst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_lets_its_burst_through_then_the_rate() {
        let mut b = TokenBucket::default();
        let taken = (0..150).filter(|_| b.take(0, 1000, 100)).count();
        assert_eq!(taken, 100, "the burst, at once");
        // 50 ms later: 50 tokens at 1000/s.
        let taken = (0..150).filter(|_| b.take(50_000_000, 1000, 100)).count();
        assert_eq!(taken, 50);
        // A long quiet spell refills to the burst, no more.
        let taken = (0..500).filter(|_| b.take(60 * NS, 1000, 100)).count();
        assert_eq!(taken, 100);
    }

    #[test]
    fn a_clock_going_back_adds_nothing() {
        let mut b = TokenBucket::default();
        assert_eq!((0..10).filter(|_| b.take(NS, 1, 5)).count(), 5);
        assert!(!b.take(NS / 2, 1, 5));
        assert!(!b.take(NS, 1, 5));
        assert!(b.take(2 * NS, 1, 5));
    }

    #[test]
    fn interfaces_have_their_own_buckets() {
        let mut p = PerInterface::default();
        assert_eq!((0..10).filter(|_| p.take(3, 0, 1, 2)).count(), 2);
        assert_eq!((0..10).filter(|_| p.take(7, 0, 1, 4)).count(), 4);
    }
}
