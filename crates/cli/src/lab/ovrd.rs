//! Each lab host's ovrd as a process: started from the command recorded in the lab's
//! state (so that `restart` runs it again exactly), stopped, waited for, and which CPUs
//! its workers are pinned to.

use super::{Place, State, load, run, save};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts host `i`'s ovrd (its recorded command, output appended to its log) and waits
/// until it forwards.
pub(super) fn start_ovrd(p: &Place, s: &mut State, i: usize) -> Result<(), String> {
    let host = &s.hosts[i];
    let (program, args) = host
        .ovrd_cmd
        .split_first()
        .ok_or("no ovrd command recorded")?;
    let (pid, from) = spawn_in(&host.namespace, program, args, &host.log)?;
    s.hosts[i].ovrd_pid = Some(pid);
    save(p, s)?;
    wait_for(&s.hosts[i].log, from, "forwarding", Duration::from_secs(10))
}

/// Starts `program` in namespace `ns`, its output appended to `log`: its pid (`ip netns
/// exec` becomes the program) and where its output starts in the log.
pub(super) fn spawn_in(
    ns: &str,
    program: &str,
    args: &[String],
    log: &Path,
) -> Result<(u32, usize), String> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let from = out.metadata().map(|m| m.len() as usize).unwrap_or(0);
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    Ok((child.id(), from))
}

/// Restarts host `name`'s ovrd: SIGTERM to the one running (if any), then the same
/// command again. The lab's state follows the new process.
pub fn restart(p: &Place, name: &str) -> Result<(), String> {
    let mut s = load(p)?.ok_or("no lab is up: `ovrctl lab up` first")?;
    let i = s
        .hosts
        .iter()
        .position(|h| h.name == name && !h.kernel)
        .ok_or_else(|| format!("no ovr host named '{name}' (see `ovrctl lab status`)"))?;
    if let Some(pid) = s.hosts[i].ovrd_pid {
        stop(pid);
    }
    start_ovrd(p, &mut s, i)?;
    outln!(
        "{}: ovrd restarted (pid {})",
        name,
        s.hosts[i].ovrd_pid.unwrap_or(0)
    );
    Ok(())
}

/// SIGTERM to ovrd `pid`, SIGKILL if it is still there after 10 s.
pub(super) fn stop(pid: u32) {
    stop_all(&[pid], Duration::from_secs(10));
}

/// SIGTERM to every process of `pids` at once, SIGKILL to those still there after
/// `grace`.
pub(super) fn stop_all(pids: &[u32], grace: Duration) {
    let running: Vec<String> = pids
        .iter()
        .filter(|p| alive(**p))
        .map(u32::to_string)
        .collect();
    if running.is_empty() {
        return;
    }
    for pid in &running {
        let _ = run(None, &["kill", "-TERM", pid]);
    }
    let t = Instant::now();
    while pids.iter().any(|p| alive(*p)) && t.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in pids.iter().filter(|p| alive(**p)) {
        let _ = run(None, &["kill", "-KILL", &pid.to_string()]);
    }
}

/// Which CPUs each host's ovrd pins its workers to: the next ones of the lab's CPUs in
/// turn, so that the hosts' workers spread over them. Pinned because a worker that moves
/// between CPUs can reorder a flow's packets on a veth (each CPU's backlog is processed
/// on its own), which the workloads' TCP takes for loss. Nothing is added when the
/// ovrd arguments already say `--cpu`.
pub(super) struct Pinning {
    cpus: Vec<usize>,
    workers: usize,
    next: usize,
}

impl Pinning {
    pub(super) fn new(ovrd_args: &[String]) -> Self {
        let given = |name: &str| {
            ovrd_args.iter().enumerate().find_map(|(i, x)| {
                let value = x.strip_prefix(name)?;
                match value.strip_prefix('=') {
                    Some(v) => Some(v.to_string()),
                    None if value.is_empty() => ovrd_args.get(i + 1).cloned(),
                    None => None,
                }
            })
        };
        let cpus = if given("--cpu").is_some() {
            Vec::new()
        } else {
            rustix::thread::sched_getaffinity(None)
                .map(|set| {
                    (0..rustix::thread::CpuSet::MAX_CPU)
                        .filter(|&c| set.is_set(c))
                        .collect()
                })
                .unwrap_or_default()
        };
        let workers = given("--workers").and_then(|w| w.parse().ok()).unwrap_or(1);
        Self {
            cpus,
            workers,
            next: 0,
        }
    }

    /// `--cpu=A,B,..` for the next host's ovrd (one CPU per worker), or nothing.
    pub(super) fn next_host(&mut self) -> Option<String> {
        if self.cpus.is_empty() {
            return None;
        }
        let list: Vec<String> = (0..self.workers)
            .map(|j| self.cpus[(self.next + j) % self.cpus.len()].to_string())
            .collect();
        self.next += self.workers;
        Some(format!("--cpu={}", list.join(",")))
    }
}

/// Waits until `word` appears in `log` past byte `from`.
pub(super) fn wait_for(log: &Path, from: usize, word: &str, limit: Duration) -> Result<(), String> {
    let t = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.get(from..).is_some_and(|t| t.contains(word)) {
            return Ok(());
        }
        if t.elapsed() > limit {
            return Err(format!(
                "ovrd did not start; its log ({}):\n{text}",
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether process `pid` runs: a zombie (exited, not yet reaped by whoever inherited
/// it) does not.
pub(super) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "PID (COMM) STATE ...": COMM may hold spaces and parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}
