#!/usr/bin/env bash
# The main job: a two-host, two-tenant overlay on this machine, real traffic through ovr.
# Each host is a network namespace running its own ovrd; the hosts meet on an underlay
# bridge; each has one workload per tenant. Both tenants use the same subnet and the same
# addresses. Shows ping and a TCP transfer across hosts, that the same address reaches a
# different workload in each tenant, ovr's counters, and tears everything down.
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
echo "== the operator's view of host 1, over ovrd's API (ovrctl --socket /run/ovr-lab/h1.sock ...)"
"$ovrctl" --socket /run/ovr-lab/h1.sock interfaces
"$ovrctl" --socket /run/ovr-lab/h1.sock flows --limit 5
"$ovrctl" --socket /run/ovr-lab/h1.sock dropstats
