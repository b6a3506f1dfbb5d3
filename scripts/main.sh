#!/usr/bin/env bash
# The main job: a two-host, two-tenant overlay on this machine, real traffic through ovr.
# Each host is a network namespace running its own ovrd; the hosts meet on an underlay
# bridge; each has one workload per tenant. Both tenants use the same subnet and the same
# addresses. The lab is a cluster: an etcd on the underlay holds the intent (a network per
# tenant, a port per workload), and each host's ovrd derives its tunnels, bridge entries
# and flood lists from it. Shows ping and a TCP transfer across hosts, that the same
# address reaches a different workload in each tenant, a workload added and deleted while
# the lab runs (only its port written to etcd), a host whose ovrd is killed leaving the
# cluster within its lease, ovr's counters, and tears everything down.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

cargo build --release --locked -q -p ovr-cli -p ovrd
ovrctl=./target/release/ovrctl
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    echo
    echo "== ovrctl lab down"
    "$ovrctl" lab down
}
trap cleanup EXIT

echo "== ovrctl lab up --hosts 2 --tenants 2"
"$ovrctl" lab up --hosts 2 --tenants 2
"$ovrctl" lab status
# etcd, from this (the root) namespace: the lab's link-local URL.
etcd=$("$ovrctl" lab status --json | python3 -c 'import json, sys; print(",".join(json.load(sys.stdin)["etcd"]))')
# The hosts alive in the cluster (their leased key is there), as ovrctl cluster sees them.
cluster_hosts() {
    "$ovrctl" --etcd "$etcd" cluster hosts --json |
        python3 -c 'import json, sys; print(" ".join(h["name"] for h in json.load(sys.stdin) if h["alive"]))'
}
echo
echo "== the cluster in etcd ($etcd): intent written by lab up, hosts and endpoints by each ovrd"
etcdctl --endpoints "$etcd" get --prefix --keys-only /ovr/v1/ | sed '/^$/d'

echo
echo "== ping across hosts in tenant 1: h1-t1-w1 (10.1.0.11) -> h2-t1-w1 (10.1.0.21), VXLAN VNI 101"
"$ovrctl" lab exec h1-t1-w1 -- ping -c 3 -i 0.2 10.1.0.21
echo
echo "== the virtual gateway answers: h1-t2-w1 -> 10.1.0.1"
"$ovrctl" lab exec h1-t2-w1 -- ping -c 1 10.1.0.1

echo
echo "== tenants stay apart: 10.1.0.21 is a different workload in each tenant"
# Each workload on host 2 answers a TCP connection with its own name.
for w in h2-t1-w1 h2-t2-w1; do
    ip netns exec "ovrlab-$w" timeout 30 python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 7000)); s.listen(4)
while True:
    c, _ = s.accept(); c.sendall(b'$w'); c.close()" &
    pids+=($!)
done
sleep 0.5
for w in h1-t1-w1 h1-t2-w1; do
    answer=$("$ovrctl" lab exec "$w" -- python3 -c "
import socket
print(socket.create_connection(('10.1.0.21', 7000), timeout=5).recv(64).decode())")
    echo "$w asks 10.1.0.21:7000 who it is: $answer"
done

echo
echo "== TCP across hosts: iperf3 from h1-t1-w1 to h2-t1-w1 (MTU 1500 inside the tunnel)"
ip netns exec ovrlab-h2-t1-w1 iperf3 -s -1 >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
"$ovrctl" lab exec h1-t1-w1 -- iperf3 -c 10.1.0.21 -t 3

echo
echo "== a workload joins while the lab runs: ovrctl lab workload add --host 2 --tenant 1"
new=$("$ovrctl" lab workload add --host 2 --tenant 1)
addr=$("$ovrctl" lab status --json | python3 -c "import json, sys
print(next(w['address'] for w in json.load(sys.stdin)['workloads'] if w['name'] == '$new'))")
echo "$new at $addr: only its port was written to etcd; h2's ovrd attaches it, h1 learns it"
for i in $(seq 50); do
    if "$ovrctl" lab exec h1-t1-w1 -- ping -c 1 -W 1 "$addr" >/dev/null; then
        echo "h1-t1-w1 reaches $new ($addr) after $i attempt(s)"
        break
    fi
    [ "$i" = 50 ] && { echo "h1-t1-w1 does not reach $new ($addr)"; exit 1; }
    sleep 0.1
done
"$ovrctl" lab exec h1-t1-w1 -- ping -c 2 -i 0.2 "$addr"
echo
echo "== and leaves: ovrctl lab workload del $new"
"$ovrctl" lab workload del "$new"
sleep 0.5
if "$ovrctl" lab exec h1-t1-w1 -- ping -c 2 -i 0.2 -W 1 "$addr" >/dev/null; then
    echo "$addr still answers after its deletion"; exit 1
fi
echo "$addr no longer answers"

echo
echo "== the operator's view of host 1, over ovrd's API (ovrctl --socket /run/ovr-lab/h1.sock ...)"
"$ovrctl" --socket /run/ovr-lab/h1.sock interfaces
"$ovrctl" --socket /run/ovr-lab/h1.sock flows --limit 5
"$ovrctl" --socket /run/ovr-lab/h1.sock dropstats

echo
echo "== a host dies: kill -9 h2's ovrd; the cluster forgets it within its 5 s lease"
echo "hosts in the cluster: $(cluster_hosts)"
"$ovrctl" --etcd "$etcd" cluster hosts
kill -9 "$("$ovrctl" lab status --json | python3 -c 'import json, sys
print(next(h["ovrd_pid"] for h in json.load(sys.stdin)["hosts"] if h["name"] == "h2"))')"
ms() { echo $(( $(date +%s%N) / 1000000 )); }
start=$(ms)
while [[ " $(cluster_hosts) " == *" h2 "* ]]; do
    if (( $(ms) - start > 7000 )); then
        echo "h2 is still in the cluster after 7 s"; exit 1
    fi
    sleep 0.2
done
elapsed=$(( $(ms) - start ))
echo "h2 left the cluster $((elapsed / 1000)).$((elapsed % 1000 / 100)) s after its ovrd was killed; hosts now: $(cluster_hosts)"
"$ovrctl" --etcd "$etcd" cluster hosts
