//! Packet-rate policing in the kernel (bpf/police.h), in front of ovr's sockets: a frame
//! over its interface's rate is dropped before a worker reads it. Reading a frame costs
//! a worker about as much as forwarding it, so a policer in user space alone still lets
//! a workload sending far over its rate take the worker's time from everyone else
//! (bench/RESULTS.md, the policer against a steady sender).
//!
//! The AF_PACKET driver attaches the socket filters of bpf/police.c to its sockets; the
//! AF_XDP driver's own XDP program (bpf/xsk_redirect.c) polices as well. Either way the
//! kernel counts what it dropped, and the driver reports it (`DriverStats::rx_policed`)
//! for ovr to count as received and dropped as `policed`, as its own policer would.

use crate::error_chain;
use aya::Ebpf;
use aya::maps::Array;
use aya::programs::SocketFilter;
use std::os::fd::BorrowedFd;

/// A policer's rate and burst, in frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub packets_per_second: u32,
    pub burst: u32,
}

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/police.o"));
const EVERY: &str = "ovr_police";
const NOT_IPV4: &str = "ovr_police_not_ipv4";
const CONF: &str = "ovr_police_conf";
const STATE: &str = "ovr_police_state";

/// `struct ovr_police_conf` for `rate`: the interval between frames and the tolerance,
/// in nanoseconds (interval 0: no policer).
fn conf(rate: Option<Rate>) -> [u64; 2] {
    match rate {
        None => [0, 0],
        Some(r) => {
            let interval = (1_000_000_000 / u64::from(r.packets_per_second.max(1))).max(1);
            [interval, interval * u64::from(r.burst.max(1) - 1)]
        }
    }
}

/// Sets the policer of a loaded object that includes bpf/police.h.
pub(crate) fn set(ebpf: &mut Ebpf, rate: Option<Rate>) -> Result<(), (&'static str, String)> {
    let map = ebpf
        .map_mut(CONF)
        .ok_or(("find the policer's map", CONF.to_string()))?;
    let mut conf_map: Array<_, [u64; 2]> = Array::try_from(map)
        .map_err(|e: aya::maps::MapError| ("policer map type", e.to_string()))?;
    conf_map
        .set(0, conf(rate), 0)
        .map_err(|e| ("set the policer", error_chain(&e)))
}

/// Frames and bytes the policer of a loaded object that includes bpf/police.h dropped.
pub(crate) fn dropped(ebpf: &Ebpf) -> (u64, u64) {
    ebpf.map(STATE)
        .and_then(|m| Array::<_, [u64; 3]>::try_from(m).ok())
        .and_then(|a| a.get(&0, 0).ok())
        // tat, dropped, dropped_bytes.
        .map_or((0, 0), |s| (s[1], s[2]))
}

/// The socket filters of bpf/police.c, over one bucket, attached to every receiving
/// socket of an AF_PACKET driver. They stay attached as long as the sockets live (a
/// policer removed is one of no rate).
pub(crate) struct SocketPolicer {
    ebpf: Ebpf,
}

impl SocketPolicer {
    /// Loads the filters with `rate` and attaches them to `sockets`, each with whether
    /// it must refuse IPv4 as well (the socket beside one bound to IPv4, behind a TC
    /// program: the filter replaces its classic one, which did only that).
    pub(crate) fn attach(
        sockets: &[(BorrowedFd<'_>, bool)],
        rate: Option<Rate>,
    ) -> Result<Self, (&'static str, String)> {
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| ("load the policer", error_chain(&e)))?;
        set(&mut ebpf, rate)?;
        for (name, not_ipv4) in [(EVERY, false), (NOT_IPV4, true)] {
            let prog: &mut SocketFilter = ebpf
                .program_mut(name)
                .ok_or(("find the policer's program", name.to_string()))?
                .try_into()
                .map_err(|e: aya::programs::ProgramError| {
                    ("policer program type", e.to_string())
                })?;
            prog.load()
                .map_err(|e| ("load the policer's program", error_chain(&e)))?;
            for &(fd, _) in sockets.iter().filter(|s| s.1 == not_ipv4) {
                prog.attach(fd)
                    .map_err(|e| ("attach the policer to a socket", error_chain(&e)))?;
            }
        }
        Ok(Self { ebpf })
    }

    pub(crate) fn set(&mut self, rate: Option<Rate>) -> Result<(), (&'static str, String)> {
        set(&mut self.ebpf, rate)
    }

    pub(crate) fn dropped(&self) -> (u64, u64) {
        dropped(&self.ebpf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_an_interval_and_a_burst_a_tolerance_of_intervals() {
        assert_eq!(conf(None), [0, 0]);
        let r = |packets_per_second, burst| {
            conf(Some(Rate {
                packets_per_second,
                burst,
            }))
        };
        assert_eq!(r(20_000, 2_000), [50_000, 50_000 * 1_999]);
        // One frame at a time: no tolerance.
        assert_eq!(r(1, 1), [1_000_000_000, 0]);
        // Beyond a frame per nanosecond the interval stays one (never "no policer").
        assert_eq!(r(u32::MAX, 1)[0], 1);
    }
}
