#!/usr/bin/env bash
# VXLAN encapsulation through memif per ovr core, at many flows: frames of FLOWS different
# flows into ovr by one memif interface, out by a memif underlay inside VXLAN.
#
#   [OVRD_BIN=path] bench/memif_vxlan.sh [FLOWS] [SECONDS] [ROUNDS] [SWITCH_CPU]
#       (default: 262144 flows, 10 s, 3 rounds, CPU 1)
#
# The layout (two CPUs, two busy pollers: each has a core of its own):
#
#   testpmd (io forwarding, chained ports, CPU 0)       ovrd (CPU 1)
#     port 0, net_pcap: FLOWS 64-byte frames, replayed over and over
#       └──► port 1, memif client of a.sock ───────►  memif-a (network red)
#                                                        │ bridged to 02:..:0b: VXLAN
#     port 2, memif client of u.sock  ◄──────────────  memif-u (the underlay)
#       └──► port 0 (net_pcap drops what it is sent)
#
# Every frame goes to 02:00:00:00:00:0b, behind a VXLAN tunnel (VNI 100) out of the
# underlay; the flows differ in source address and ports (FLOWS inner 5-tuples, one
# flow-table entry each). The rate is what testpmd received on port 2 in SECONDS (its
# counters cleared after a warm-up that sets every flow up), over wall time and per
# second ovrd's worker was on a CPU (/proc/.../schedstat). The ceiling of the loop: the
# same testpmd with a testpmd in ovrd's place, forwarding memif-a to memif-u unchanged
# (io, no VXLAN). Rounds alternate ceiling / ovr; compare medians of one sitting. Needs
# dpdk-testpmd with net_pcap (scripts/setup.sh) and root; every process is stopped by
# its own PID.
set -euo pipefail
cd "$(dirname "$0")/.."
flows=${1:-262144}
secs=${2:-10}
rounds=${3:-3}
cpu=${4:-1}
other=$((1 - cpu))
if [ -z "${OVRD_BIN:-}" ]; then
    cargo build -q --release -p ovrd
fi
ovrd_bin=${OVRD_BIN:-$PWD/target/release/ovrd}
dir=$(mktemp -d /tmp/ovr-bench-memif-vxlan.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# The flows: 64-byte IPv4/UDP frames from 02:..:0a to 02:..:0b, written as pcap records
# directly (scapy takes minutes for 256K frames).
python3 - "$dir/flows.pcap" "$flows" <<'EOF'
import struct, sys
path, n = sys.argv[1], int(sys.argv[2])
def csum(h):
    s = sum(struct.unpack("!10H", h))
    s = (s & 0xffff) + (s >> 16)
    return ~((s & 0xffff) + (s >> 16)) & 0xffff
with open(path, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
    eth = bytes.fromhex("02000000000b" "02000000000a" "0800")
    for i in range(n):
        # A different (source address, source port) per flow, up to 15.7M of them.
        src = bytes([10, 16 + (i >> 16), (i >> 8) & 0xff, 1])
        ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 50, 0, 0, 64, 17, 0, src,
                                   bytes([10, 1, 0, 2])))
        ip[10:12] = struct.pack("!H", csum(bytes(ip)))
        udp = struct.pack("!HHHH", 1024 + (i & 0xff), 9, 30, 0)
        frame = eth + bytes(ip) + udp + bytes(22)
        f.write(struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame)
EOF

cat >"$dir/vxlan.yaml" <<EOF
interfaces:
  - name: memif-a
    kind: memif
    network: red
    peer_mac: "02:00:00:00:00:0a"
    memif: { role: server, socket: $dir/a.sock, id: 0 }
  - name: memif-u
    kind: underlay
    mac: "02:00:00:00:01:01"
    addresses: [192.0.2.1/24]
    memif: { role: server, socket: $dir/u.sock, id: 0 }
networks:
  - { name: red, vni: 100 }
tunnels:
  - { name: to-b, underlay: memif-u, remote: 192.0.2.2, remote_mac: "02:00:00:00:01:02" }
nexthops:
  - { name: b-red, kind: tunnel, tunnel: to-b, encap: vxlan, vni: 100 }
bridge:
  - { network: red, mac: "02:00:00:00:00:0b", nexthop: b-red }
flows:
  capacity: $((flows * 5 / 2))
  setup_rate: 0
EOF

# testpmd exits at end of file on stdin: each reads a FIFO this shell holds open; the
# looping one also takes its commands there.
mkfifo "$dir/loop.in" "$dir/switch.in"
exec 9<>"$dir/loop.in" 8<>"$dir/switch.in"
n=0
switch=

switch_testpmd() {
    n=$((n + 1))
    dpdk-testpmd --lcores="0@$cpu,1@$cpu" --no-huge -m 512 --no-pci \
        --file-prefix="ovrbench-$$-$n" \
        --vdev="net_memif0,role=server,socket=$dir/a.sock,socket-abstract=no,id=0" \
        --vdev="net_memif1,role=server,socket=$dir/u.sock,socket-abstract=no,id=0" \
        -- --total-num-mbufs=16384 --forward-mode=io --auto-start <&8 >"$1" 2>&1 &
    pids+=("$!")
}

ovrd_switch() {
    rm -f "$dir/state.json" "$dir"/*.sock
    "$ovrd_bin" --config "$dir/vxlan.yaml" --state "$dir/state.json" \
        --api-socket "$dir/ovrd.sock" --cpu "$cpu" >"$1" 2>&1 &
    switch=$!
    pids+=("$switch")
    for _ in $(seq 100); do grep -q forwarding "$1" && break; sleep 0.1; done
}

worker_cpu() {
    local f
    f=$(grep -l ovr-worker-0 /proc/"${switch:-0}"/task/*/comm 2>/dev/null | head -1 || true)
    if [ -n "$f" ]; then awk '{print $1}' "$(dirname "$f")/schedstat"; else echo 0; fi
}

# loop LOG: the replaying testpmd; writes "FRAMES WALL_SECONDS" to $dir/result.
loop() {
    n=$((n + 1))
    dpdk-testpmd --lcores="0@$other,1@$other" --no-huge -m 1024 --no-pci \
        --file-prefix="ovrbench-$$-$n" \
        --vdev="net_pcap0,rx_pcap=$dir/flows.pcap,infinite_rx=1" \
        --vdev="net_memif0,role=client,socket=$dir/a.sock,socket-abstract=no,id=0,mac=02:00:00:00:00:0a" \
        --vdev="net_memif1,role=client,socket=$dir/u.sock,socket-abstract=no,id=0,mac=02:00:00:00:01:02" \
        -- -i --total-num-mbufs=$((flows + 65536)) --mbuf-size=384 --forward-mode=io \
        --port-topology=chained <&9 >"$1" 2>&1 &
    local tp=$!
    pids+=("$tp")
    for _ in $(seq 300); do grep -q "testpmd>" "$1" && break; sleep 0.1; done
    sleep 1
    echo "start" >&9
    # Long enough for every flow to be set up once.
    sleep 4
    echo "clear port stats all" >&9
    sleep 0.2
    worker_cpu >"$dir/cpu0"
    local t0 t1
    t0=$(date +%s.%N)
    sleep "$secs"
    echo "show port stats all" >&9
    t1=$(date +%s.%N)
    worker_cpu >"$dir/cpu1"
    sleep 1
    echo "stop" >&9
    sleep 0.5
    echo "quit" >&9
    wait "$tp" 2>/dev/null || true
    python3 - "$1" "$t0" "$t1" <<'EOF'
import re, sys
t = open(sys.argv[1], errors="replace").read()
t = t[t.rfind("NIC statistics for port 2"):]
print(re.search(r"RX-packets:\s+(\d+)", t).group(1), float(sys.argv[3]) - float(sys.argv[2]))
EOF
} >"$dir/result"

ceiling=()
ovr=()
ovr_cpu=()
for r in $(seq 1 "$rounds"); do
    switch=
    switch_testpmd "$dir/ceil-switch-$r.log"
    sw=${pids[-1]}
    sleep 2
    loop "$dir/ceil-loop-$r.log"
    read -r frames wall <"$dir/result"
    kill -INT "$sw" 2>/dev/null || true
    wait "$sw" 2>/dev/null || true
    ceiling+=("$(python3 -c "print(f'{$frames / $wall / 1e6:.2f}')")")

    ovrd_switch "$dir/ovrd-$r.log"
    loop "$dir/ovr-loop-$r.log"
    read -r frames wall <"$dir/result"
    on_cpu=$(($(cat "$dir/cpu1") - $(cat "$dir/cpu0")))
    kill "$switch"
    wait "$switch" 2>/dev/null || true
    ovr+=("$(python3 -c "print(f'{$frames / $wall / 1e6:.2f}')")")
    ovr_cpu+=("$(python3 -c "print(f'{$frames / max($on_cpu, 1) * 1e3:.2f}')")")
    echo "round $r: testpmd switch ${ceiling[-1]} Mpps, ovr (VXLAN, $flows flows)" \
        "${ovr[-1]} Mpps (${ovr_cpu[-1]} Mpps per second on a CPU)"
done
python3 - "${ceiling[*]}" "${ovr[*]}" "${ovr_cpu[*]}" "$flows" <<'EOF'
import statistics, sys
c, o, oc = ([float(x) for x in a.split()] for a in sys.argv[1:4])
print(f"median of {len(c)} rounds, 64-byte frames of {sys.argv[4]} flows, switch alone on "
      f"one CPU: testpmd (no VXLAN) {statistics.median(c):.2f} Mpps, ovr VXLAN encap "
      f"{statistics.median(o):.2f} Mpps ({statistics.median(oc):.2f} per CPU second)")
EOF
