//! When a worker with nothing to read keeps looking for frames, and when it sleeps in
//! poll(2) until one arrives (adaptive, as VPP's rx-mode adaptive).
//!
//! Looking costs the whole CPU whatever the rate; sleeping costs one wakeup (a few
//! microseconds of CPU) per burst of frames, plus the wakeup's latency. Above the rate
//! where frames come faster than wakeups pay, the worker keeps looking for `--spin-us`
//! after traffic; below it, it sleeps as soon as it has nothing to do, so that moderate
//! traffic does not keep a core busy (at 20 kpps, spinning cost ~13x the kernel's CPU per
//! packet). The rate is counted over short windows, with hysteresis so that a rate near
//! the threshold does not flip the mode every window.

use std::time::{Duration, Instant};

/// How long a rate is counted over.
const WINDOW: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// Never sleep.
    pub busy_poll: bool,
    /// How long to keep looking after traffic, while spinning pays.
    pub spin: Duration,
    /// The frame rate from which spinning pays (0: always, the window alone decides).
    pub spin_from_pps: u64,
}

#[derive(Debug)]
pub struct Pacer {
    pacing: Pacing,
    last_traffic: Instant,
    window_start: Instant,
    window_frames: u64,
    spinning: bool,
}

impl Pacer {
    pub fn new(pacing: Pacing, now: Instant) -> Self {
        Self {
            pacing,
            last_traffic: now - pacing.spin,
            window_start: now,
            window_frames: 0,
            spinning: pacing.spin_from_pps == 0,
        }
    }

    /// `frames` were received in the iteration that began at `now`.
    pub fn received(&mut self, now: Instant, frames: usize) {
        if frames > 0 {
            self.last_traffic = now;
            self.window_frames += frames as u64;
        }
        self.roll(now);
    }

    /// Whether the worker, at `now`, should sleep until a frame or a request comes.
    pub fn should_sleep(&mut self, now: Instant) -> bool {
        if self.pacing.busy_poll {
            return false;
        }
        self.roll(now);
        let window = if self.spinning {
            self.pacing.spin
        } else {
            Duration::ZERO
        };
        now.saturating_duration_since(self.last_traffic) >= window
    }

    /// Whether the worker keeps looking after traffic (the current rate pays for it).
    #[cfg(test)]
    fn spinning(&self) -> bool {
        self.spinning
    }

    /// Ends a counting window that is over: the mode follows its rate (spin from the
    /// threshold up, sleep below half of it).
    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed < WINDOW || self.pacing.spin_from_pps == 0 {
            return;
        }
        let pps = self.window_frames as f64 / elapsed.as_secs_f64();
        let from = self.pacing.spin_from_pps as f64;
        if pps >= from {
            self.spinning = true;
        } else if pps < from / 2.0 {
            self.spinning = false;
        }
        self.window_start = now;
        self.window_frames = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACING: Pacing = Pacing {
        busy_poll: false,
        spin: Duration::from_micros(500),
        spin_from_pps: 50_000,
    };

    /// Frames `every_us` apart from `t`, for `span_ms`; returns the time after them.
    fn traffic(p: &mut Pacer, mut t: Instant, every_us: u64, span_ms: u64) -> Instant {
        let (every, end) = (
            Duration::from_micros(every_us),
            t + Duration::from_millis(span_ms),
        );
        while t < end {
            p.received(t, 1);
            t += every;
        }
        t
    }

    #[test]
    fn slow_traffic_sleeps_between_frames_fast_traffic_keeps_looking() {
        let t0 = Instant::now();
        let mut p = Pacer::new(PACING, t0);
        // 20 kpps: frames 50 µs apart. After one window the worker sleeps at once.
        let t = traffic(&mut p, t0, 50, 30);
        assert!(!p.spinning());
        assert!(p.should_sleep(t));
        // 200 kpps: from the next window on, it keeps looking after each frame...
        let t = traffic(&mut p, t, 5, 30);
        assert!(p.spinning());
        assert!(!p.should_sleep(t + Duration::from_micros(100)));
        // ...for the spin window, then sleeps.
        assert!(p.should_sleep(t + Duration::from_micros(600)));
        // Idle for a while: back to sleeping at once.
        let later = t + Duration::from_millis(100);
        assert!(p.should_sleep(later));
        assert!(!p.spinning());
    }

    #[test]
    fn a_rate_near_the_threshold_does_not_flip_the_mode() {
        let t0 = Instant::now();
        let mut p = Pacer::new(PACING, t0);
        let t = traffic(&mut p, t0, 10, 20);
        assert!(p.spinning());
        // 40 kpps: below the threshold, above half of it: still spinning.
        let t = traffic(&mut p, t, 25, 50);
        assert!(p.spinning());
        // 10 kpps: below half: sleeps.
        traffic(&mut p, t, 100, 30);
        assert!(!p.spinning());
    }

    #[test]
    fn no_threshold_always_spins_after_traffic_and_busy_poll_never_sleeps() {
        let t0 = Instant::now();
        let mut p = Pacer::new(
            Pacing {
                spin_from_pps: 0,
                ..PACING
            },
            t0,
        );
        // 1 kpps: t is 1 ms after the last frame.
        let t = traffic(&mut p, t0, 1000, 30);
        assert!(p.spinning() && !p.should_sleep(t - Duration::from_micros(900)));
        assert!(p.should_sleep(t));
        let mut busy = Pacer::new(
            Pacing {
                busy_poll: true,
                ..PACING
            },
            t0,
        );
        assert!(!busy.should_sleep(t0 + Duration::from_secs(10)));
    }
}
