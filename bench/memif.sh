#!/usr/bin/env bash
# memif forwarding rate per ovr core: 64-byte frames looped between one dpdk-testpmd and
# a switch over two memif interfaces, the switch alone on its CPU.
#
#   [OVRD_BIN=path] bench/memif.sh [SECONDS] [ROUNDS] [SWITCH_CPU] [BURSTS]
#       (default: 10 s, 4 rounds, CPU 1, 16 bursts of 32 frames in flight)
#
# The layout (two CPUs, two busy pollers: each has a core of its own):
#
#   testpmd (io forwarding, CPU 0)                 the switch (CPU 1)
#     port 0, memif client of a.sock  ── frames to 02:..:0b ──►  a  ──► b
#     port 1, memif client of b.sock  ◄───────────────────────────────┘
#     port 1's frames are forwarded out of port 0 again: a loop.
#
# testpmd starts the loop with BURSTS bursts (`start tx_first`), every frame addressed to
# 02:00:00:00:00:0b (port 1's own frames too, so that one direction carries them all),
# then forwards whatever comes back. The switch is ovrd (examples/memif-l2.yaml, its
# worker pinned to SWITCH_CPU) or, for the ceiling, a second testpmd forwarding between
# two memif servers in io mode on the same CPU. The rate is the frames testpmd received
# on port 1 in SECONDS (its counters cleared after a 2 s warm-up), over wall time;
# for ovrd also per second its worker was on a CPU (/proc/.../schedstat), which takes out
# what other processes took of the core. Rounds alternate ceiling / ovr; compare medians
# of one sitting. Needs dpdk-testpmd (scripts/setup.sh) and root. Every process is
# stopped by its own PID.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-4}
cpu=${3:-1}
bursts=${4:-16}
other=$((1 - cpu))
# OVRD_BIN: another ovrd binary to measure (an earlier build, kept aside), not built here.
if [ -z "${OVRD_BIN:-}" ]; then
    cargo build -q --release -p ovrd
fi
ovrd_bin=${OVRD_BIN:-$PWD/target/release/ovrd}
dir=$(mktemp -d /tmp/ovr-bench-memif.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# testpmd exits at end of file on stdin: each reads a FIFO this shell holds open; the
# looping one also takes its commands there.
mkfifo "$dir/loop.in" "$dir/switch.in"
exec 9<>"$dir/loop.in" 8<>"$dir/switch.in"

n=0
# switch_testpmd LOG: the ceiling's switch, io forwarding between two memif servers.
switch_testpmd() {
    n=$((n + 1))
    dpdk-testpmd --lcores="0@$cpu,1@$cpu" --no-huge -m 512 --no-pci \
        --file-prefix="ovrbench-$$-$n" \
        --vdev="net_memif0,role=server,socket=$dir/memif-a.sock,socket-abstract=no,id=0" \
        --vdev="net_memif1,role=server,socket=$dir/memif-b.sock,socket-abstract=no,id=0" \
        -- --total-num-mbufs=16384 --forward-mode=io --auto-start <&8 >"$1" 2>&1 &
    pids+=("$!")
}

# ovrd_switch LOG: ovrd on examples/memif-l2.yaml; its PID in $switch.
ovrd_switch() {
    sed "s#/run/ovr/#$dir/#" examples/memif-l2.yaml >"$dir/memif-l2.yaml"
    rm -f "$dir/state.json" "$dir"/memif-*.sock
    "$ovrd_bin" --config "$dir/memif-l2.yaml" --state "$dir/state.json" \
        --api-socket "$dir/ovrd.sock" --cpu "$cpu" >"$1" 2>&1 &
    switch=$!
    pids+=("$switch")
    for _ in $(seq 100); do grep -q forwarding "$1" && break; sleep 0.1; done
}

# loop LOG: the looping testpmd; writes "FRAMES WALL_SECONDS" of the measured window to
# $dir/result.
loop() {
    n=$((n + 1))
    dpdk-testpmd --lcores="0@$other,1@$other" --no-huge -m 512 --no-pci \
        --file-prefix="ovrbench-$$-$n" \
        --vdev="net_memif0,role=client,socket=$dir/memif-a.sock,socket-abstract=no,id=0,mac=02:00:00:00:00:0a" \
        --vdev="net_memif1,role=client,socket=$dir/memif-b.sock,socket-abstract=no,id=0,mac=02:00:00:00:00:0b" \
        -- -i --total-num-mbufs=32768 --forward-mode=io \
        --eth-peer=0,02:00:00:00:00:0b --eth-peer=1,02:00:00:00:00:0b <&9 >"$1" 2>&1 &
    local tp=$!
    pids+=("$tp")
    for _ in $(seq 100); do grep -q "testpmd>" "$1" && break; sleep 0.1; done
    sleep 1
    echo "start tx_first $bursts" >&9
    sleep 2
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
t = t[t.rfind("NIC statistics for port 1"):]
print(re.search(r"RX-packets:\s+(\d+)", t).group(1), float(sys.argv[3]) - float(sys.argv[2]))
EOF
} >"$dir/result"

# The time ovrd's worker has been on a CPU, in ns (0 without ovrd).
switch=
worker_cpu() {
    local f
    f=$(grep -l ovr-worker-0 /proc/"${switch:-0}"/task/*/comm 2>/dev/null | head -1 || true)
    if [ -n "$f" ]; then awk '{print $1}' "$(dirname "$f")/schedstat"; else echo 0; fi
}

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
    echo "round $r: testpmd switch ${ceiling[-1]} Mpps, ovr ${ovr[-1]} Mpps" \
        "(${ovr_cpu[-1]} Mpps per second on a CPU)"
done
python3 - "${ceiling[*]}" "${ovr[*]}" "${ovr_cpu[*]}" <<'EOF'
import statistics, sys
c, o, oc = ([float(x) for x in a.split()] for a in sys.argv[1:4])
print(f"median of {len(c)} rounds, 64-byte frames, switch alone on one CPU: "
      f"testpmd {statistics.median(c):.2f} Mpps, ovr {statistics.median(o):.2f} Mpps "
      f"({statistics.median(oc):.2f} per CPU second)")
EOF
echo "logs: $dir"
