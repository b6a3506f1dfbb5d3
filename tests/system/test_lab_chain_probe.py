"""Health probes in a cluster's intent (docs/chains.md "Health in the cluster"): the lab's
chain (`ovrctl lab up --hosts 2 --tenants 1 --service-chain`) with its service `fw`
given an ICMP probe (`ovrctl cluster services add fw ... --probe icmp:100:3 --replace`).

- Every host takes the probe into its configuration; each probes its own instance only
  (the other's sides are reached through the overlay, and its host's word counts).
- A session of h1's (a ping every 10 ms from `h1-t1-w1` to the `ext` workload on h2) is
  pinned to `fw-h2`, the instance on h2; that instance hangs with its links up (nftables
  in its namespace drops what it would forward and the probes' echo requests). h2's
  probe fails, h2 withdraws the instance's ports' endpoints, and h1 moves the session
  to `fw-h1`: the longest run of lost replies is under 1 s, the packets are then counted
  in fw-h1's nftables and no more reach fw-h2.
- Answering again, fw-h2's endpoints come back and h1 steers new sessions to it.
- The same with the instance on h1 (the session's entry host, which drops it at once;
  h2 follows through etcd): the two losses side by side. That session, moved to fw-h2
  (on its destination's host), crosses it both ways.

One lab for the module (prefix `pclab<pid>`), always taken down. Each round prints the
loss it measured (bench/RESULTS.md quotes them)."""

import json
import os
import subprocess
import time

import pytest

from conftest import ROOT
from system.chain_lab import counted, delete_rules, ext_on
from system.overlay_lab import OVRCTL, OverlayLab, sh

PROBE = {"kind": "icmp", "interval_ms": 100, "failures": 3}
# A hung instance forwards nothing (a rule at the top of its forward chain counts and
# drops, comment "hang") and answers no probe (this table); its links stay up.
HANG = ("table inet pchang {\n chain input {\n type filter hook input priority -10;\n"
        " icmp type echo-request drop\n }\n}\n")
INTERVAL = 0.01


@pytest.fixture(scope="module")
def lab(request):
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli", "-p", "ovrd"], cwd=ROOT, check=True)
    lab = OverlayLab(f"pclab{os.getpid() % 10000}", "--service-chain")
    request.addfinalizer(lambda: lab.__exit__(None, None, None))
    lab = lab.__enter__()
    urls = ",".join(lab.status()["etcd"])
    sh(OVRCTL, "cluster", "--etcd", urls, "services", "add", "fw", "--replace",
       "--instance", "fw-h1:h1:fw-h1-l:fw-h1-r", "--instance", "fw-h2:h2:fw-h2-l:fw-h2-r",
       "--probe", "icmp:100:3")
    # Each instance counts what it forwards by direction too.
    for s in lab.status()["services"]:
        for side in ("left", "right"):
            sh("nft", "add", "rule", "inet", "fw", "forward", "iifname", side, "counter",
               "comment", f'"from-{side}"', ns=s["namespace"])
    return lab


def instances(lab, host):
    """The instances of `fw` as `host` sees them, by name."""
    f = lab.json(host, "chains")["chains"][0]["functions"][0]
    return f, {i["name"]: i for i in f["instances"]}


def wait(what, f, within_s=5.0):
    end = time.monotonic() + within_s
    while not f():
        assert time.monotonic() < end, f"not within {within_s} s: {what}"
        time.sleep(0.05)


def ping(lab, dst, secs):
    """A ping session (its own ICMP id) from h1-t1-w1, one request every 10 ms, each
    reply printed with its time."""
    return subprocess.Popen(
        ["ip", "netns", "exec", lab.ns("h1-t1-w1"), "ping", "-n", "-D", "-i", str(INTERVAL),
         "-w", str(secs), dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def replies(out):
    """The times of the replies (ping's requests may come slower than every 10 ms on a
    loaded machine: losses are measured in time, not in sequence numbers)."""
    return sorted(float(line[1:line.index("]")]) for line in out.splitlines()
                  if line.startswith("[") and "icmp_seq=" in line)


def longest_loss(out):
    """The longest time without a reply, less the interval between two requests."""
    t = replies(out)
    return max((b - a for a, b in zip(t, t[1:])), default=0) - INTERVAL, t


def session_on(lab, dst, ns, others, secs):
    """A ping session that goes through the instance of namespace `ns` (new sessions
    until one does: the entry host picks the instance by hash)."""
    for _ in range(20):
        p = ping(lab, dst, secs)
        time.sleep(0.3)
        before = {n: counted(n) for n in [ns, *others]}
        time.sleep(0.3)
        grew = {n: counted(n) - before[n] for n in before}
        if grew[ns] > 0 and all(grew[o] == 0 for o in others):
            return p
        p.kill()
        p.wait()
    pytest.fail(f"no session of 20 went through {ns}")


def endpoints(lab, host):
    keys = lab.etcdctl("get", "--keys-only", "--prefix", f"/ovr/v1/endpoints/{host}/")
    return {k.rsplit("/", 1)[1] for k in keys.split()}


def test_every_host_takes_the_probe_and_probes_its_own_instance(lab):
    for h, other in (("h1", "h2"), ("h2", "h1")):
        wait(f"{h} has the probe, both instances healthy", lambda: (
            instances(lab, h)[0].get("probe") == PROBE
            and all(i["healthy"] for i in instances(lab, h)[1].values())))
        _, inst = instances(lab, h)
        mine, theirs = inst[f"fw-{h}"], inst[f"fw-{other}"]
        for side in ("left", "right"):
            wait(f"{h} probes its own {side}", lambda: (
                instances(lab, h)[1][f"fw-{h}"][side]["probe"]["answered"] >= 3))
            assert theirs[side]["via"] == f"{other}:svc", theirs
            assert not theirs[side].get("probe"), theirs
        assert mine["left"]["probe"]["kind"] == "icmp", mine


def unhang(ns):
    sh("nft", "delete", "table", "inet", "pchang", ns=ns, check=False)
    delete_rules(ns, "hang")


@pytest.mark.parametrize("host", ["h2", "h1"])
def test_a_hung_instance_leaves_every_host_within_1s_and_comes_back(lab, host):
    """The instance on `host` hangs while h1's session goes through it: on h2 the other
    host (h1, the session's entry host) takes h2's word through etcd; on h1 its own host
    drops it at once, and h2 follows through etcd (the two side by side)."""
    dst = ext_on(lab, "h2")["address"]
    ns = {s["name"]: s["namespace"] for s in lab.status()["services"]}
    other_host = "h1" if host == "h2" else "h2"
    hung, other = f"fw-{host}", f"fw-{other_host}"
    ports = {f"{hung}-l", f"{hung}-r"}
    losses = []
    for round in range(3):
        wait(f"{hung} healthy on {other_host}",
             lambda: instances(lab, other_host)[1][hung]["healthy"], 10)
        p = session_on(lab, dst, ns[hung], [ns[other]], 6)
        try:
            sh("nft", "insert", "rule", "inet", "fw", "forward", "counter", "drop",
               "comment", '"hang"', ns=ns[hung])
            sh("nft", "-f", "-", ns=ns[hung], input=HANG)
            went = time.monotonic()
            wait(f"{hung}'s endpoints withdrawn", lambda: not ports & endpoints(lab, host), 2)
            wait(f"{other_host} leaves {hung} out", lambda: not instances(lab, other_host)[1].get(
                hung, {}).get("healthy"), 2)
            left_s = time.monotonic() - went
            # Its links stayed up: the probe took it out.
            for iface in ("fwl", "fwr"):
                link = json.loads(sh("ip", "-j", "link", "show", iface, ns=lab.ns(host)).stdout)
                assert link[0]["operstate"] == "UP", link
            # The session goes through the other instance now, and nothing reaches the
            # hung one any more.
            count = ((other, "from-left"), (other, "from-right"), (hung, "hang"))
            time.sleep(0.3)
            before = {c: counted(ns[n], c) for n, c in count}
            time.sleep(0.5)
            grew = {c: counted(ns[n], c) - before[c] for n, c in count}
            assert grew["hang"] == 0, grew

            # Answering again: its endpoints come back and the other host takes it in
            # (the session stays where it moved).
            unhang(ns[hung])
            answered = time.monotonic()
            wait(f"{hung}'s endpoints back", lambda: ports <= endpoints(lab, host), 2)
            wait(f"{other_host} takes {hung} in again", lambda: instances(lab, other_host)[1]
                 .get(hung, {}).get("healthy"), 2)
            back_s = time.monotonic() - answered
            out, _ = p.communicate(timeout=15)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            unhang(ns[hung])
        loss, t = longest_loss(out)
        losses.append(loss)
        print(f"round {round}: {hung} hung; {other_host} left it out {left_s:.2f} s later; "
              f"longest loss of the 10 ms ping {loss:.2f} s, {len(t)} replies; "
              f"back on {other_host} {back_s:.2f} s after it answered again")
        assert loss < 1.0, f"replies lost for {loss:.2f} s: {out}"
        # Answered to the end (6 s, less the 0.6 s of finding the session).
        assert t and t[-1] - t[0] > 5, out
        # Through the other instance both ways: its requests into its left, the replies
        # into its right (some 60 a second each way).
        print(f"  {other} forwarded in 0.5 s: {grew}; {len(t) / (t[-1] - t[0]):.0f} replies/s")
        assert grew["from-left"] >= 15 and grew["from-right"] >= 15, grew
        # New sessions reach it again.
        p = session_on(lab, dst, ns[hung], [ns[other]], 1)
        p.kill()
        p.wait()
    print(f"{hung} hung, longest losses: {', '.join(f'{x:.2f}' for x in losses)} s")
