"""A real etcd for system tests: one or three members on 127.0.0.1 (or inside a network
namespace, on its address), each with its own ports and data directory under a per-run
temporary directory, and a unique cluster token and member names, so that runs never
join each other. Members are started, killed and stopped by PID only.

    with EtcdCluster(members=3, name_prefix="ctl") as etcd:
        etcd.ctl("put", "/k", "v")
        etcd.kill(etcd.leader())

As a module-scoped pytest fixture (one cluster for a module's tests):

    @pytest.fixture(scope="module")
    def etcd():
        with EtcdCluster(members=1, name_prefix="ctl") as e:
            yield e
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

# Fast elections (PLATFORM.md): a 3-member cluster is healthy in about a second, and a
# new leader is elected about 1 s after the old one is killed.
TIMING = ["--heartbeat-interval", "50", "--election-timeout", "500"]


def free_port(host="127.0.0.1"):
    """A port nobody listens on now (the kernel's choice; etcd binds it just after)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Tls:
    """A throwaway CA with a server certificate (for 127.0.0.1 and `host`) and a client
    certificate, made with openssl in `directory` (PEM files; the paths are attributes)."""

    def __init__(self, directory, host="127.0.0.1"):
        d = os.path.join(directory, "tls")
        os.makedirs(d, exist_ok=True)
        self.ca, ca_key = os.path.join(d, "ca.pem"), os.path.join(d, "ca-key.pem")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]

        def run(*args):
            subprocess.run(["openssl", *args], check=True, capture_output=True)
        run("req", "-x509", *ec, "-keyout", ca_key, "-out", self.ca, "-days", "2",
            "-subj", "/CN=ovr-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        for who in ("server", "client"):
            cert, key, csr, ext = (os.path.join(d, f"{who}{s}")
                                   for s in (".pem", "-key.pem", ".csr", ".ext"))
            with open(ext, "w") as f:
                f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                        "extendedKeyUsage=serverAuth,clientAuth\n"
                        f"subjectAltName=IP:127.0.0.1,IP:{host},DNS:localhost\n")
            run("req", *ec, "-keyout", key, "-out", csr, "-subj", f"/CN={who}")
            run("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key,
                "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext)
            setattr(self, f"{who}_cert", cert)
            setattr(self, f"{who}_key", key)


class EtcdCluster:
    """`members` etcd processes forming one cluster; `.urls` are their client URLs.

    `netns` runs the members inside that network namespace (`ip netns exec`), listening on
    `host` (an address of the namespace); ports are then picked on 127.0.0.1 of this
    namespace, which a fresh namespace does not share, so they are free there too.

    `tls` is a `Tls` (CA, server and client certificates): clients then speak https and
    must present a certificate signed by the CA (`--client-cert-auth`); peers stay plain.
    """

    def __init__(self, members=1, name_prefix="ovrt", base_dir=None, netns=None,
                 host="127.0.0.1", timeout=20, tls=None):
        assert members in (1, 3), "one member, or three (a quorum that survives one loss)"
        self.n, self.netns, self.host, self.timeout = members, netns, host, timeout
        self.tls = tls
        self.tag = f"{name_prefix}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.dir = tempfile.mkdtemp(prefix=f"etcd-{self.tag}-", dir=base_dir)
        self.names = [f"{self.tag}-m{i}" for i in range(members)]
        ports = set()
        while len(ports) < 2 * members:
            ports.add(free_port())
        ports = sorted(ports)
        self.client_ports, self.peer_ports = ports[:members], ports[members:]
        scheme = "https" if tls else "http"
        self.urls = [f"{scheme}://{host}:{p}" for p in self.client_ports]
        self.peer_urls = [f"http://{host}:{p}" for p in self.peer_ports]
        self.procs = [None] * members
        self.logs = [os.path.join(self.dir, f"{n}.log") for n in self.names]

    # -- lifecycle --------------------------------------------------------------------

    def __enter__(self):
        try:
            self.start_all()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start_all(self):
        for i in range(self.n):
            self._spawn(i, "new")
        self.wait_healthy()

    def _command(self, i, state):
        initial = ",".join(f"{n}={u}" for n, u in zip(self.names, self.peer_urls))
        cmd = ["etcd", "--name", self.names[i],
               "--data-dir", os.path.join(self.dir, self.names[i]),
               "--listen-client-urls", self.urls[i], "--advertise-client-urls", self.urls[i],
               "--listen-peer-urls", self.peer_urls[i],
               "--initial-advertise-peer-urls", self.peer_urls[i],
               "--initial-cluster", initial, "--initial-cluster-state", state,
               "--initial-cluster-token", self.tag, "--logger=zap", *TIMING]
        if self.tls:
            cmd += ["--cert-file", self.tls.server_cert, "--key-file", self.tls.server_key,
                    "--trusted-ca-file", self.tls.ca, "--client-cert-auth"]
        return (["ip", "netns", "exec", self.netns] if self.netns else []) + cmd

    def _spawn(self, i, state):
        assert self.procs[i] is None or self.procs[i].poll() is not None, f"member {i} runs"
        log = open(self.logs[i], "ab")
        try:
            # `ip netns exec` execs etcd in place: the PID is etcd's own.
            self.procs[i] = subprocess.Popen(self._command(i, state), stdout=log, stderr=log,
                                             stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def kill(self, i):
        """SIGKILL member i (a crash: no goodbye to the others)."""
        p = self.procs[i]
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()

    def start(self, i):
        """Restarts member i on its data directory: it rejoins the running cluster."""
        self._spawn(i, "existing")
        self.wait_healthy([i])

    def stop(self, grace=10):
        """SIGTERM every member still running, SIGKILL any left after `grace` seconds,
        then removes the data directories."""
        running = [p for p in self.procs if p is not None and p.poll() is None]
        for p in running:
            os.kill(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in running:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = [None] * self.n
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- questions --------------------------------------------------------------------

    def ctl(self, *args, endpoints=None, check=True, timeout=10):
        """etcdctl (v3 API) against the cluster (or `endpoints`), returning the result."""
        cmd = ["etcdctl", "--endpoints", ",".join(endpoints or self.urls),
               "--dial-timeout", "2s", "--command-timeout", "3s"]
        if self.tls:
            cmd += ["--cacert", self.tls.ca, "--cert", self.tls.client_cert,
                    "--key", self.tls.client_key]
        cmd += args
        cmd = (["ip", "netns", "exec", self.netns] if self.netns else []) + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "ETCDCTL_API": "3"})
        if check and r.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)}: {r.stdout}{r.stderr}")
        return r

    def healthy(self, members=None):
        members = range(self.n) if members is None else members
        urls = [self.urls[i] for i in members]
        return self.ctl("endpoint", "health", endpoints=urls, check=False).returncode == 0

    def wait_healthy(self, members=None):
        deadline = time.monotonic() + self.timeout
        while not self.healthy(members):
            dead = [i for i, p in enumerate(self.procs) if p is not None and p.poll() is not None
                    and (members is None or i in members)]
            if dead or time.monotonic() > deadline:
                tails = "\n".join(f"{self.names[i]}: {self._tail(i)}" for i in (dead or
                                  range(self.n)))
                raise RuntimeError(f"etcd not healthy (exited: {dead}):\n{tails}")
            time.sleep(0.1)

    def _tail(self, i, n=5):
        try:
            with open(self.logs[i], errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"

    def leader(self):
        """The index of the current leader, or None while there is none."""
        alive = [i for i, p in enumerate(self.procs) if p is not None and p.poll() is None]
        r = self.ctl("endpoint", "status", "-w", "json",
                     endpoints=[self.urls[i] for i in alive], check=False)
        try:
            statuses = json.loads(r.stdout)
        except json.JSONDecodeError:
            return None
        for s in statuses:
            st = s["Status"]
            if st["header"]["member_id"] == st["leader"]:
                return self.urls.index(s["Endpoint"])
        return None

    def revision(self):
        """etcd's current revision."""
        r = self.ctl("endpoint", "status", "-w", "json", endpoints=self.urls[:1])
        return json.loads(r.stdout)[0]["Status"]["header"]["revision"]
