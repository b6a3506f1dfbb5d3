//! The program on one interface: attached (or an earlier ovrd's pinned link taken over),
//! made an egress of the fast path, given AF_XDP socket slots; detached when dropped.

use super::*;

impl Bpf {
    /// Attaches the program to interface `name` (ovr's interface `id`) — XDP in native
    /// mode, TC first on ingress — makes it an egress of the fast path and, if `af_xdp`
    /// (XDP only), gives it socket slots. The fast path itself starts once
    /// [`Offload::refresh`] has described the interface from the tables. Dropping the
    /// attachment detaches the program.
    ///
    /// An interface whose link an earlier ovrd pinned keeps it: this program replaces
    /// the old one in it atomically, and its entry (what the old one knew of the
    /// interface) stays until the next refresh, so frames keep being forwarded
    /// throughout, and the interface does not count as a change.
    pub fn attach(&self, name: &str, id: u32, af_xdp: bool) -> Result<Attachment, OffloadError> {
        let ifindex = ovr_io::if_index(name).ok_or_else(|| err("find interface", name))?;
        let mut g = self.lock();
        let xsk_base = if af_xdp && self.hook == Hook::Xdp {
            g.free_slots
                .pop()
                .ok_or_else(|| err("AF_XDP slots", "all taken"))?
        } else {
            NO_XSK
        };
        let pin = g.pins.as_ref().map(|p| p.link(ifindex));
        let old = g
            .unclaimed
            .remove(&ifindex)
            .then(|| pin.as_ref().and_then(|p| PinnedLink::from_pin(p).ok()))
            .flatten()
            .map(FdLink::from);
        let kept = old
            .as_ref()
            .and_then(|_| g.ifaces.get(&ifindex, 0).ok())
            .map(|b| Iface::decode(&b));
        let entry = Iface {
            xsk_base,
            ..kept.unwrap_or(Iface {
                kind: 0,
                xsk_base,
                addrs: [[0; 4]; MAX_ADDRS],
                mac: [0; 6],
            })
        };
        let attached = (|| {
            g.ifaces
                .insert(ifindex, entry.encode(), 0)
                .map_err(|e| err("insert interface", error_chain(&e)))?;
            g.tx.insert(ifindex, ifindex, None, 0)
                .map_err(|e| err("insert egress", error_chain(&e)))?;
            let link = link(&mut g.ebpf, self.hook, name, ifindex, old, pin.as_deref())?;
            if let Some(path) = &pin
                && !path.exists()
            {
                // A new link: pinned, so that it outlives this process.
                let pinned = link
                    .pin(path)
                    .map_err(|e| err("pin link", error_chain(&e)))?;
                return Ok(FdLink::from(pinned));
            }
            Ok(link)
        })();
        match attached {
            Ok(link) => {
                g.attached.insert(id, (ifindex, entry));
                g.names.insert(id, name.to_string());
                if kept.is_none() {
                    self.changed.store(true, Ordering::Release);
                }
                Ok(Attachment {
                    program: self.clone(),
                    id,
                    ifindex,
                    xsk_base,
                    link: Some(link),
                    pin,
                    keep: false,
                })
            }
            Err(e) => {
                if let Some(p) = &pin {
                    let _ = std::fs::remove_file(p);
                }
                let _ = g.ifaces.remove(&ifindex);
                let _ = g.tx.remove(ifindex);
                if xsk_base != NO_XSK {
                    g.free_slots.push(xsk_base);
                }
                Err(e)
            }
        }
    }
}

/// The program attached to one interface. Dropped: detached, and the interface is no
/// longer an egress of the fast path — unless it is left in place ([`Attachment::leave`]).
pub struct Attachment {
    program: Bpf,
    id: u32,
    ifindex: u32,
    xsk_base: u32,
    /// The kernel's hold of the program on the interface (a TCX or XDP bpf_link):
    /// closing the last descriptor of one that is not pinned detaches the program.
    link: Option<FdLink>,
    /// Where the link is pinned.
    pin: Option<PathBuf>,
    /// Dropped without detaching (the pinned fast path outlives ovrd).
    keep: bool,
}

impl Attachment {
    /// Lets go of the interface but leaves the program on it, pinned, forwarding the
    /// flows it has for whichever ovrd comes next (without a pin, this detaches).
    pub fn leave(mut self) {
        self.keep = self.pin.is_some();
    }
}

/// The program's link on `ifindex` (interface `name`): `old` (an earlier ovrd's, pinned
/// at `pin`) with this program swapped in atomically, or a new one. An old link of the
/// other hook (ovrd restarted with another `--offload`) is let go first.
fn link(
    ebpf: &mut Ebpf,
    hook: Hook,
    name: &str,
    ifindex: u32,
    old: Option<FdLink>,
    pin: Option<&Path>,
) -> Result<FdLink, OffloadError> {
    let program = hook.program();
    let prog = ebpf
        .program_mut(program)
        .ok_or_else(|| err("find program", program))?;
    let prog_type = |e: aya::programs::ProgramError| err("program type", e);
    let link_type = |e: aya::programs::links::LinkError| err("link type", e);
    let forget_old = || {
        if let Some(p) = pin {
            let _ = std::fs::remove_file(p);
        }
    };
    match hook {
        Hook::Xdp => {
            let prog: &mut XdpProgram = prog.try_into().map_err(prog_type)?;
            let old = old.and_then(|l| XdpLink::try_from(l).ok());
            let id = match old {
                Some(l) => prog
                    .attach_to_link(l)
                    .map_err(|e| err("replace XDP program", error_chain(&e)))?,
                None => {
                    forget_old();
                    prog.attach_to_if_index(ifindex, XdpMode::Driver)
                        .map_err(|e| err("attach XDP program (native mode)", error_chain(&e)))?
                }
            };
            let l = prog
                .take_link(id)
                .map_err(|e| err("take XDP link", error_chain(&e)))?;
            FdLink::try_from(l).map_err(link_type)
        }
        Hook::Tc => {
            // TCX (Linux 6.6): a link, no qdisc to add or remove. First, so that no other
            // program on the interface sees the flows first (a program of the host's may
            // still be put before it).
            let prog: &mut SchedClassifier = prog.try_into().map_err(prog_type)?;
            let old = old.and_then(|l| SchedClassifierLink::try_from(l).ok());
            let id = match old {
                Some(l) => prog
                    .attach_to_link(l)
                    .map_err(|e| err("replace TC program", error_chain(&e)))?,
                None => {
                    forget_old();
                    prog.attach_with_options(
                        name,
                        TcAttachType::Ingress,
                        TcAttachOptions::TcxOrder(LinkOrder::first()),
                    )
                    .map_err(|e| {
                        err(
                            "attach TC program (TCX, Linux 6.6 or later)",
                            error_chain(&e),
                        )
                    })?
                }
            };
            let l = prog
                .take_link(id)
                .map_err(|e| err("take TC link", error_chain(&e)))?;
            FdLink::try_from(l).map_err(link_type)
        }
    }
}

impl ovr_io::XskSlots for Attachment {
    fn insert(&mut self, queue: u32, fd: RawFd) -> Result<(), String> {
        if self.xsk_base == NO_XSK || queue >= XSK_SLOTS {
            return Err(format!("no AF_XDP slot for queue {queue}"));
        }
        let mut g = self.program.lock();
        g.xsks
            .set(self.xsk_base + queue, fd, 0)
            .map_err(|e| error_chain(&e))?;
        g.xsk_fds.entry(self.id).or_default().push(fd);
        Ok(())
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if self.keep {
            // Pinned: closing this descriptor leaves the program attached, and the maps
            // keep the interface's entries.
            return;
        }
        // Detach first (the pin is the other hold on the link), then forget the interface.
        if let Some(p) = &self.pin {
            let _ = std::fs::remove_file(p);
        }
        drop(self.link.take());
        let mut g = self.program.lock();
        let _ = g.ifaces.remove(&self.ifindex);
        let _ = g.tx.remove(self.ifindex);
        if self.xsk_base != NO_XSK {
            for q in 0..XSK_SLOTS {
                let _ = g.xsks.unset(self.xsk_base + q);
            }
            g.free_slots.push(self.xsk_base);
        }
        g.attached.remove(&self.id);
        g.names.remove(&self.id);
        g.xsk_fds.remove(&self.id);
        self.program.changed.store(true, Ordering::Release);
    }
}
