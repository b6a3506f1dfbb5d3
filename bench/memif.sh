#!/usr/bin/env bash
# memif forwarding rate per ovr core: 64-byte frames looped between one dpdk-testpmd and
# a switch over two memif interfaces, the switch alone on its CPU.
#
#   [OVRD_BIN=path] bench/memif.sh [SECONDS] [ROUNDS] [SWITCH_CPU] [BURSTS] [BURST]
#       (default: 10 s, 4 rounds, CPU 1, 16 bursts of 32 frames in flight)
#
# Latency: with few frames in flight (`bench/memif.sh 8 3 1 1 1`: one frame) the loop's
# rate is set by the round trip, and Little's law gives its mean: frames in flight over
# the rate (a round trip crosses the switch once and the looping testpmd once).
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
# stopped by its own PID (bench/memif_common.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-4}
cpu=${3:-1}
bursts=${4:-16}
burst=${5:-32}
# Frames the loop keeps in flight: the rounds' lines give the mean round trip from it.
in_flight=$((bursts * burst))
# OVRD_BIN: another ovrd binary to measure (an earlier build, kept aside), not built here.
source bench/memif_common.sh memif

sock_a=$dir/memif-a.sock
sock_b=$dir/memif-b.sock
config=$dir/memif-l2.yaml
sed "s#/run/ovr/#$dir/#" examples/memif-l2.yaml >"$config"
# testpmd starts the loop with $bursts bursts, every frame to 02:00:00:00:00:0b, and
# counts what comes back out of memif-b on port 1.
loop_args=(
    --vdev="net_memif0,role=client,socket=$sock_a,socket-abstract=no,id=0,mac=02:00:00:00:00:0a"
    --vdev="net_memif1,role=client,socket=$sock_b,socket-abstract=no,id=0,mac=02:00:00:00:00:0b"
    -- -i --total-num-mbufs=32768 --forward-mode=io --burst="$burst"
    --eth-peer=0,02:00:00:00:00:0b --eth-peer=1,02:00:00:00:00:0b
)
loop_start="start tx_first $bursts"
warmup=2
rx_port=1
run_rounds "L2"
