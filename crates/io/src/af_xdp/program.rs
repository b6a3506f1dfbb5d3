//! The XDP program that steers an interface's frames into ovr's AF_XDP sockets
//! (bpf/xsk_redirect.c, built by build.rs), loaded with aya: one copy per interface, so
//! that each interface has its own socket map keyed by receive queue, and its own
//! policer (bpf/police.h).

use crate::{Rate, error_chain, police};
use aya::Ebpf;
use aya::maps::XskMap;
use aya::programs::{Xdp, XdpMode};
use std::os::fd::RawFd;

static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xsk_redirect.o"));
const PROGRAM: &str = "ovr_xsk_redirect";
const MAP: &str = "ovr_xsks";

/// The program loaded and attached to one interface. Dropping it detaches the program
/// (it is attached through a BPF link, which the kernel also removes if ovrd dies).
pub struct Attached {
    // Holds the program, its link and the map: dropped together.
    ebpf: Ebpf,
}

impl Attached {
    /// Loads a fresh copy of the program and attaches it in native (driver) mode.
    pub fn attach(interface: &str) -> Result<Self, (&'static str, String)> {
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| ("load XDP object", e.to_string()))?;
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .ok_or(("find XDP program", PROGRAM.to_string()))?
            .try_into()
            .map_err(|e: aya::programs::ProgramError| ("XDP program type", e.to_string()))?;
        prog.load()
            .map_err(|e| ("load XDP program", error_chain(&e)))?;
        prog.attach(interface, XdpMode::Driver)
            .map_err(|e| ("attach XDP program (native mode)", error_chain(&e)))?;
        Ok(Self { ebpf })
    }

    /// Steers frames arriving on receive queue `queue` to socket `fd`.
    pub fn insert(&mut self, queue: u32, fd: RawFd) -> Result<(), (&'static str, String)> {
        let map = self
            .ebpf
            .map_mut(MAP)
            .ok_or(("find XSK map", MAP.to_string()))?;
        let mut xsks: XskMap<_> = map
            .try_into()
            .map_err(|e: aya::maps::MapError| ("XSK map type", e.to_string()))?;
        xsks.set(queue, fd, 0)
            .map_err(|e| ("insert socket into XSK map", error_chain(&e)))
    }

    /// Polices the interface's frames at `rate` (None: not at all) before redirecting.
    pub fn police(&mut self, rate: Option<Rate>) -> Result<(), (&'static str, String)> {
        police::set(&mut self.ebpf, rate)
    }

    /// Frames and bytes the policer dropped.
    pub fn policed(&self) -> (u64, u64) {
        police::dropped(&self.ebpf)
    }
}
