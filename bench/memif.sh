#!/usr/bin/env bash
# memif forwarding rate: 64-byte frames from dpdk-testpmd (txonly, memif client) into
# ovrd's memif-a, bridged by ovr (examples/memif-l2.yaml) out of memif-b to a second
# testpmd (rxonly, memif client); ovrd's worker pinned to one CPU. The ceiling: one
# testpmd txonly straight into another (rxonly, memif server) on the same CPUs.
#
#   bench/memif.sh [SECONDS] [ROUNDS] [OVR_CPU]     (default: 10 s, 4 rounds, CPU 1)
#
# Rounds alternate ceiling / ovr (the machine is noisy: compare medians of one
# sitting). The rate is the receiving testpmd's own (its Rx-pps, printed every second),
# the median over the seconds after the first two. Needs dpdk-testpmd
# (scripts/setup.sh) and root. Every process is stopped by its own PID.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-4}
cpu=${3:-1}
cargo build -q --release -p ovrd
ovrd_bin=$PWD/target/release/ovrd
dir=$(mktemp -d /tmp/ovr-bench-memif.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# testpmd exits at end of file on stdin: every one reads a FIFO this shell holds open.
mkfifo "$dir/stdin"
exec 9<>"$dir/stdin"

# testpmd ROLE SOCKET MAC MODE LOG [ARGS...]: started in the background; its PID in $last.
# The sender forwards on CPU 0, the receiver on CPU 1 (each one's managing lcore, idle,
# on the other): two forwarding threads pinned to one CPU would take turns by time slice
# and measure the scheduler.
n=0
testpmd() {
    local role=$1 sock=$2 mac=$3 mode=$4 log=$5 lcores=0@0,1@1
    shift 5
    [ "$mode" = txonly ] && lcores=0@1,1@0
    n=$((n + 1))
    stdbuf -oL dpdk-testpmd --lcores=$lcores --no-huge -m 512 --no-pci \
        --file-prefix="ovrbench-$$-$n" \
        --vdev="net_memif0,role=$role,socket=$sock,socket-abstract=no,id=0,mac=$mac" \
        -- --total-num-mbufs=16384 --forward-mode="$mode" --auto-start --stats-period 1 \
        "$@" <&9 >"$log" 2>&1 &
    last=$!
    pids+=("$last")
}

# receiver ROLE SOCKET LOG: the rxonly testpmd (02:00:00:00:00:0b), its PID in $rx.
# sender ROLE SOCKET LOG: the txonly one (02:00:00:00:00:0a, to ...:0b), its PID in $tx.
receiver() {
    testpmd "$1" "$2" 02:00:00:00:00:0b rxonly "$3"
    rx=$last
}
sender() {
    testpmd "$1" "$2" 02:00:00:00:00:0a txonly "$3" --eth-peer=0,02:00:00:00:00:0b
    tx=$last
}

# The median Rx-pps of LOG after its first two seconds of traffic.
rate() {
    python3 - "$1" <<'EOF'
import re, statistics, sys
v = [int(x) for x in re.findall(r"Rx-pps:\s+(\d+)", open(sys.argv[1], errors="replace").read())]
v = [x for x in v if x > 0][2:]
print(f"{statistics.median(v) / 1e6:.2f}" if v else "0")
EOF
}

stop() {
    kill -INT "$1" 2>/dev/null || true
    sleep 1
}

ceiling=()
ovr=()
for r in $(seq 1 "$rounds"); do
    # The ceiling: testpmd to testpmd.
    rm -f "$dir/pair.sock"
    receiver server "$dir/pair.sock" "$dir/ceil-rx-$r.log"
    sleep 2
    sender client "$dir/pair.sock" "$dir/ceil-tx-$r.log"
    sleep "$secs"
    stop "$tx"
    stop "$rx"
    ceiling+=("$(rate "$dir/ceil-rx-$r.log")")

    # Through ovr.
    sed "s#/run/ovr/#$dir/#" examples/memif-l2.yaml >"$dir/memif-l2.yaml"
    rm -f "$dir/state.json"
    "$ovrd_bin" --config "$dir/memif-l2.yaml" --state "$dir/state.json" \
        --api-socket "$dir/ovrd.sock" --cpu "$cpu" >"$dir/ovrd-$r.log" 2>&1 &
    o=$!
    pids+=("$o")
    for _ in $(seq 100); do grep -q forwarding "$dir/ovrd-$r.log" && break; sleep 0.1; done
    receiver client "$dir/memif-b.sock" "$dir/ovr-rx-$r.log"
    sleep 1
    sender client "$dir/memif-a.sock" "$dir/ovr-tx-$r.log"
    sleep "$secs"
    stop "$rx"
    stop "$tx"
    kill "$o"
    wait "$o" 2>/dev/null || true
    ovr+=("$(rate "$dir/ovr-rx-$r.log")")
    echo "round $r: testpmd->testpmd ${ceiling[-1]} Mpps, testpmd->ovr->testpmd ${ovr[-1]} Mpps"
done
python3 - "${ceiling[*]}" "${ovr[*]}" <<'EOF'
import statistics, sys
c = [float(x) for x in sys.argv[1].split()]
o = [float(x) for x in sys.argv[2].split()]
print(f"median of {len(c)} rounds: testpmd->testpmd {statistics.median(c):.2f} Mpps, "
      f"testpmd->ovr->testpmd {statistics.median(o):.2f} Mpps (64 B, ovr on one CPU)")
EOF
echo "logs: $dir"
