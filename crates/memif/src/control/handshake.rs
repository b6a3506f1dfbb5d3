//! The handshake's checks and set-up for each role: the server checks what a client
//! declares (INIT, each region and ring, the cookies at CONNECT) before anything is
//! mapped or dereferenced; the client makes its region, rings and eventfds on HELLO and
//! builds the connection on CONNECTED.

use super::*;

/// Server: checks INIT and finds the interface it asks for.
pub(super) fn server_init(
    servers: &[Arc<Link>],
    busy: &[*const Link],
    socket: Option<&SocketAddr>,
    i: &Init,
) -> Result<Arc<Link>, Reason> {
    if i.version != VERSION {
        return Err(reason(
            "incompatible_version",
            format!("incompatible memif version {:#06x}", i.version),
        ));
    }
    let link = servers
        .iter()
        .find(|l| {
            Some(&l.cfg.socket) == socket && l.cfg.id == i.id && !l.removed.load(Ordering::Acquire)
        })
        .ok_or_else(|| reason("unknown_id", "ID not found"))?;
    if busy.contains(&Arc::as_ptr(link)) {
        return Err(reason("already_connected", "Already connected"));
    }
    if i.mode != link.cfg.mode.to_u8() {
        return Err(reason("mode_mismatch", "interface mode mismatch"));
    }
    let ours = msg::secret_bytes(&link.cfg.secret).unwrap_or_default();
    if !link.cfg.secret.is_empty() && !msg::secrets_equal(&ours, &i.secret) {
        return Err(reason("bad_secret", "Incorrect secret"));
    }
    Ok(link.clone())
}

/// Server: checks ADD_REGION (in sequence, the fd's size at least what is declared,
/// sealed against shrinking) and maps it.
pub(super) fn check_region(
    p: &Pending,
    index: u16,
    size: u64,
    fd: &OwnedFd,
) -> Result<Mapping, Reason> {
    if index as usize != p.regions.len() || index as usize >= MAX_REGIONS {
        return Err(reason("bad_region_index", "Invalid region index"));
    }
    if size == 0 || size > MAX_REGION_SIZE {
        return Err(reason(
            "bad_region_size",
            format!("invalid region size {size}"),
        ));
    }
    let (actual, seals) =
        sys::size_and_seals(fd).map_err(|e| reason("bad_region_fd", format!("region fd: {e}")))?;
    if actual < size {
        return Err(reason(
            "region_too_small",
            format!("region file of {actual} bytes, declared {size}"),
        ));
    }
    if seals & sys::SEAL_SHRINK == 0 {
        return Err(reason(
            "region_not_sealed",
            "region not sealed against shrinking",
        ));
    }
    Mapping::map(fd, size as usize).map_err(|e| reason("mmap_failed", format!("mmap: {e}")))
}

/// Server: checks ADD_RING's place, size and index before anything is dereferenced.
pub(super) fn check_ring(
    p: &Pending,
    r: &AddRing,
    max_log2: u8,
    queues: usize,
) -> Result<RingRef, Reason> {
    if r.index as usize >= queues {
        return Err(reason("bad_ring_index", "Invalid ring index"));
    }
    let list = if r.c2s() { &p.c2s } else { &p.s2c };
    if list.get(r.index as usize).is_some_and(Option::is_some) {
        return Err(reason("duplicate_ring", "ring added twice"));
    }
    if r.private_hdr_size != 0 {
        return Err(reason("private_header", "private header not supported"));
    }
    let sizes: Vec<usize> = p.regions.iter().map(Mapping::len).collect();
    ring::check_layout(r.region, r.offset, r.log2_size, &sizes, max_log2)
        .map_err(|e| reason("bad_ring", e.to_string()))
}

/// Takes a direction's rings: all present, 0..n, one size.
pub(super) fn take_rings(
    list: &mut Vec<Option<(RingRef, OwnedFd)>>,
) -> Result<(Vec<RingRef>, Vec<OwnedFd>), Reason> {
    if list.is_empty() {
        return Err(reason("missing_ring", "no ring in a direction"));
    }
    let mut refs = Vec::new();
    let mut fds = Vec::new();
    for r in list.drain(..) {
        let (rr, fd) = r.ok_or_else(|| reason("missing_ring", "ring indices not contiguous"))?;
        refs.push(rr);
        fds.push(fd);
    }
    Ok((refs, fds))
}

/// Server: on CONNECT, checks every ring's cookie, resets head and tail, and builds the
/// connection.
pub(super) fn server_connect(p: &mut Pending) -> Result<Arc<Conn>, Reason> {
    let (c2s, c2s_fd) = take_rings(&mut p.c2s)?;
    let (s2c, s2c_fd) = take_rings(&mut p.s2c)?;
    let log2 = c2s[0].log2;
    if c2s.iter().chain(&s2c).any(|r| r.log2 != log2) {
        return Err(reason("bad_ring", "rings of different sizes"));
    }
    let regions = std::mem::take(&mut p.regions);
    for r in c2s.iter().chain(&s2c) {
        let ring = Ring::new(&regions, *r).map_err(|e| reason("bad_ring", e.to_string()))?;
        if ring.cookie() != msg::COOKIE {
            return Err(reason("bad_cookie", "Wrong ring cookie"));
        }
        ring.set_head(0);
        ring.set_tail(0);
        // Polling until the data path arms interrupts before it sleeps.
        ring.set_flags(if c2s.contains(r) {
            ring::RING_FLAG_MASK_INT
        } else {
            0
        });
    }
    p.region_fds.clear();
    Ok(Arc::new(Conn::new(
        regions,
        false,
        c2s,
        s2c,
        c2s_fd,
        s2c_fd,
        0,
        0,
        log2,
        desc_max_len(),
    )))
}

/// The largest descriptor a server takes: the client chooses its buffer size, so any
/// length inside a region.
pub(super) fn desc_max_len() -> u32 {
    crate::desc::MAX_FRAME as u32
}

/// Client: on HELLO, agrees on queues and ring size, makes the region (rings, then
/// buffers), the interrupt eventfds, and queues INIT, ADD_REGION, ADD_RING... CONNECT.
pub(super) fn client_setup(p: &mut Pending, cfg: &Config, h: &Hello) -> Result<(), Reason> {
    if h.min_version > VERSION || h.max_version < VERSION {
        return Err(reason("incompatible_version", "Incompatible memif version"));
    }
    let n_c2s = cfg.queues.min(h.max_c2s_ring as usize + 1);
    let n_s2c = cfg.queues.min(h.max_s2c_ring as usize + 1);
    let log2 = cfg.log2_ring_size.min(h.max_log2_ring_size).max(1);
    let rb = ring::ring_bytes(log2);
    let rings = (n_c2s + n_s2c) * rb;
    let buffers = ((n_c2s + n_s2c) << log2) * cfg.buffer_size as usize;
    let size = (rings + buffers) as u64;
    let fd =
        sys::memfd("memif_region_0", size).map_err(|e| reason("memfd_failed", e.to_string()))?;
    let map = Mapping::map(&fd, size as usize).map_err(|e| reason("mmap_failed", e.to_string()))?;
    let regions = vec![map];
    p.outbox.clear();
    p.outbox.push_back((
        Msg::Init(Init {
            version: VERSION,
            id: cfg.id,
            mode: cfg.mode.to_u8(),
            secret: msg::secret_bytes(&cfg.secret).unwrap_or_default(),
            name: cfg.app_name.clone(),
        }),
        None,
    ));
    p.outbox.push_back((
        Msg::AddRegion(msg::AddRegion { index: 0, size }),
        Some(fd.as_raw_fd()),
    ));
    let mut c2s = Vec::new();
    let mut s2c = Vec::new();
    for g in 0..n_c2s + n_s2c {
        let rr = RingRef {
            region: 0,
            offset: g * rb,
            log2,
        };
        let ring = Ring::new(&regions, rr).map_err(|e| reason("internal", e.to_string()))?;
        ring.init();
        for s in 0..(1u16 << log2) {
            let i = ((g as u32) << log2) + u32::from(s);
            ring.set_desc(
                s,
                crate::desc::Desc {
                    flags: 0,
                    region: 0,
                    length: cfg.buffer_size,
                    offset: rings as u32 + i * cfg.buffer_size,
                    metadata: 0,
                },
            );
        }
        let efd = sys::eventfd().map_err(|e| reason("eventfd_failed", e.to_string()))?;
        if g < n_c2s {
            c2s.push(Some((rr, efd)));
        } else {
            s2c.push(Some((rr, efd)));
        }
    }
    for (list, flag) in [(&c2s, msg::ADD_RING_FLAG_C2S), (&s2c, 0)] {
        for (i, r) in list.iter().enumerate() {
            let Some((rr, efd)) = r else { continue };
            p.outbox.push_back((
                Msg::AddRing(AddRing {
                    flags: flag,
                    index: i as u16,
                    region: 0,
                    offset: rr.offset as u32,
                    log2_size: log2,
                    private_hdr_size: 0,
                }),
                Some(efd.as_raw_fd()),
            ));
        }
    }
    p.outbox.push_back((Msg::Connect(cfg.name.clone()), None));
    p.regions = regions;
    p.region_fds = vec![fd];
    p.c2s = c2s;
    p.s2c = s2c;
    p.buffers = rings as u32;
    p.log2 = log2;
    let _ = DESC_LEN;
    Ok(())
}

/// Client: on CONNECTED, builds the connection and offers every receive buffer.
pub(super) fn client_connect(p: &mut Pending, cfg: &Config) -> Result<Arc<Conn>, Reason> {
    let (c2s, c2s_fd) = take_rings(&mut p.c2s)?;
    let (s2c, s2c_fd) = take_rings(&mut p.s2c)?;
    let regions = std::mem::take(&mut p.regions);
    for r in &s2c {
        let ring = Ring::new(&regions, *r).map_err(|e| reason("bad_ring", e.to_string()))?;
        ring.set_flags(ring::RING_FLAG_MASK_INT);
    }
    p.region_fds.clear();
    let conn = Conn::new(
        regions,
        true,
        s2c,
        c2s,
        s2c_fd,
        c2s_fd,
        p.buffers,
        cfg.buffer_size,
        p.log2,
        cfg.buffer_size,
    );
    Ok(Arc::new(conn))
}
