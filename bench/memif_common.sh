# Shared by bench/memif.sh and bench/memif_vxlan.sh (sourced, with the benchmark's name):
# the layout of a switch alone on one CPU between memif interfaces and one looping
# testpmd on the other, and the rounds that alternate the ceiling (a testpmd switch) with
# ovrd. The caller sets, before sourcing: secs, rounds, cpu; then, before `run_rounds`:
#   sock_a, sock_b   the switch's two memif sockets
#   config           ovrd's configuration (its memif servers on sock_a and sock_b)
#   loop_args        the looping testpmd's vdevs, "--" and its options (an array)
#   loop_start       the command that starts its forwarding
#   warmup, rx_port  seconds before the counters are cleared; the port counted
#   loop_mem         the looping testpmd's memory in MB (default 1024)
#   in_flight        frames the loop keeps in flight (optional): the medians line then
#                    adds the mean round trip, in_flight / rate (Little's law)
# Every process is stopped by its own PID.
other=$((1 - cpu))
if [ -z "${OVRD_BIN:-}" ]; then
    cargo build -q --release -p ovrd
fi
ovrd_bin=${OVRD_BIN:-$PWD/target/release/ovrd}
dir=$(mktemp -d "/tmp/ovr-bench-$1.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    # testpmd's runtime files (hundreds of MB in a tmpfs) outlive it.
    rm -rf /var/run/dpdk/ovrbench-$$-*
}
trap cleanup EXIT

# testpmd exits at end of file on stdin: each reads a FIFO this shell holds open; the
# looping one also takes its commands there.
mkfifo "$dir/loop.in" "$dir/switch.in"
exec 9<>"$dir/loop.in" 8<>"$dir/switch.in"
n=0
switch=

# switch_testpmd LOG: the ceiling's switch, io forwarding between two memif servers.
switch_testpmd() {
    n=$((n + 1))
    dpdk-testpmd --lcores="0@$cpu,1@$cpu" --no-huge -m 512 --no-pci \
        --file-prefix="ovrbench-$$-$n" \
        --vdev="net_memif0,role=server,socket=$sock_a,socket-abstract=no,id=0" \
        --vdev="net_memif1,role=server,socket=$sock_b,socket-abstract=no,id=0" \
        -- --total-num-mbufs=16384 --forward-mode=io --auto-start <&8 >"$1" 2>&1 &
    pids+=("$!")
}

# ovrd_switch LOG: ovrd on $config, its worker on $cpu; its PID in $switch.
ovrd_switch() {
    rm -f "$dir/state.json" "$sock_a" "$sock_b"
    "$ovrd_bin" --config "$config" --state "$dir/state.json" \
        --api-socket "$dir/ovrd.sock" --cpu "$cpu" >"$1" 2>&1 &
    switch=$!
    pids+=("$switch")
    for _ in $(seq 100); do grep -q forwarding "$1" && break; sleep 0.1; done
}

# The time ovrd's worker has been on a CPU, in ns (0 without ovrd).
worker_cpu() {
    local f
    f=$(grep -l ovr-worker-0 /proc/"${switch:-0}"/task/*/comm 2>/dev/null | head -1 || true)
    if [ -n "$f" ]; then awk '{print $1}' "$(dirname "$f")/schedstat"; else echo 0; fi
}

# loop LOG: the looping testpmd; writes "FRAMES WALL_SECONDS" of the measured window
# (what port $rx_port received) to $dir/result.
loop() {
    n=$((n + 1))
    dpdk-testpmd --lcores="0@$other,1@$other" --no-huge -m "${loop_mem:-1024}" --no-pci \
        --file-prefix="ovrbench-$$-$n" "${loop_args[@]}" <&9 >"$1" 2>&1 &
    local tp=$!
    pids+=("$tp")
    for _ in $(seq 300); do grep -q "testpmd>" "$1" && break; sleep 0.1; done
    sleep 1
    echo "$loop_start" >&9
    sleep "$warmup"
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
    python3 - "$1" "$t0" "$t1" "$rx_port" <<'EOF'
import re, sys
t = open(sys.argv[1], errors="replace").read()
t = t[t.rfind(f"NIC statistics for port {sys.argv[4]}"):]
print(re.search(r"RX-packets:\s+(\d+)", t).group(1), float(sys.argv[3]) - float(sys.argv[2]))
EOF
} >"$dir/result"

# run_rounds WHAT: $rounds rounds, each the ceiling then ovrd; prints each round and the
# medians, WHAT saying what ovr does to the frames.
run_rounds() {
    local ceiling=() ovr=() ovr_cpu=() r frames wall on_cpu sw
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
        echo "round $r: testpmd switch ${ceiling[-1]} Mpps, ovr ($1) ${ovr[-1]} Mpps" \
            "(${ovr_cpu[-1]} Mpps per second on a CPU)"
    done
    python3 - "${ceiling[*]}" "${ovr[*]}" "${ovr_cpu[*]}" "$1" "${in_flight:-0}" <<'EOF'
import statistics, sys
c, o, oc = ([float(x) for x in a.split()] for a in sys.argv[1:4])
print(f"median of {len(c)} rounds, 64-byte frames, switch alone on one CPU: "
      f"testpmd {statistics.median(c):.2f} Mpps, ovr ({sys.argv[4]}) "
      f"{statistics.median(o):.2f} Mpps ({statistics.median(oc):.2f} per CPU second)")
n = int(sys.argv[5])
if n:
    rtt = lambda mpps: n / mpps  # µs: frames in flight over frames per µs
    print(f"mean round trip with {n} frames in flight (Little's law): "
          f"testpmd switch {rtt(statistics.median(c)):.2f} µs, ovr {rtt(statistics.median(o)):.2f} µs")
EOF
}
