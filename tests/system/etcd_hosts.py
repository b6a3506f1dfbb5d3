"""A small cluster for system tests: an underlay bridge in a namespace of its own with a
real etcd on it, and hosts each running `ovrd --etcd` in a namespace of its own (its
uplink on the bridge; its own stack reaches etcd on a management link, since the uplink
and its VTEP address are ovrd's alone). Tests add workloads and intent on top."""

import json

from system.etcd import EtcdCluster
from system.netns import Lab, sh, until
from system.ovrd import Ovrd


class EtcdHosts:
    def __init__(self, tmp, lab, etcd_prefix, hosts, members=1, networks=None, ttl=3):
        self.tmp, self.lab, self.hosts, self.etcd = tmp, Lab(lab), {}, None
        self.etcd_prefix, self.members, self.ttl = etcd_prefix, members, ttl
        self.host_ids, self.networks = list(range(1, hosts + 1)), networks or {}

    def up(self):
        u = self.lab.ns("u")
        sh("ip", "link", "add", "br0", "type", "bridge", ns=u)
        sh("ip", "addr", "add", "192.0.2.250/24", "dev", "br0", ns=u)
        sh("ip", "link", "set", "br0", "up", ns=u)
        self.etcd = EtcdCluster(members=self.members, name_prefix=self.etcd_prefix, netns=u,
                                host="192.0.2.250")
        self.etcd.__enter__()
        for name, value in self.networks.items():
            self.etcd.ctl("put", f"/ovr/v1/networks/{name}", json.dumps(value))
        for i in self.host_ids:
            h = self.lab.ns(f"h{i}")
            self.lab.veth(h, "uplink", u, f"p{i}", mac_a=f"02:00:00:00:00:0{i}")
            sh("ip", "link", "set", f"p{i}", "master", "br0", ns=u)
            self.lab.veth(h, "mgmt", u, f"m{i}")
            sh("ip", "link", "set", f"m{i}", "master", "br0", ns=u)
            sh("ip", "addr", "add", f"192.0.2.{100 + i}/24", "dev", "mgmt", ns=h)
            (self.tmp / f"h{i}.yaml").write_text(
                "interfaces:\n"
                f"  - {{ name: uplink, kind: underlay, mac: \"02:00:00:00:00:0{i}\","
                f" addresses: [192.0.2.{i}/24] }}\n")
            self.start(i)
        until("every host in etcd", lambda: len(self.etcd_keys("/ovr/v1/hosts/")) ==
              len(self.host_ids), 10)

    def start(self, i, *extra):
        """(Re)starts host i's ovrd."""
        self.hosts[i] = Ovrd(f"{self.lab.prefix}-h{i}", self.tmp / f"h{i}.log",
                             "--config", self.tmp / f"h{i}.yaml", "--etcd",
                             ",".join(self.etcd.urls), "--host-name", f"h{i}",
                             "--etcd-lease-ttl", self.ttl, *extra)

    def etcd_keys(self, prefix):
        r = self.etcd.ctl("get", "--prefix", "--keys-only", prefix)
        return [k for k in r.stdout.split() if k]

    def down(self):
        for h in self.hosts.values():
            h.stop()
        if self.etcd:
            self.etcd.__exit__(None, None, None)
        self.lab.close()
