#!/usr/bin/env bash
# First real-I/O comparison on one machine: the same two-host overlay shape built three
# ways, measured interleaved so that the ratios hold on a noisy machine:
#   ovr     ovrctl lab (one ovrd per host namespace, VXLAN over an underlay bridge), twice:
#           as ovrd starts by default (AF_PACKET with offloads for workloads, AF_XDP for
#           the underlay) and with AF_XDP everywhere (workloads without tx offloads)
#   kernel  the same namespaces with the kernel's bridge + vxlan device per host
#   direct  two workload namespaces on one veth pair (no forwarder: the tools' ceiling)
# For each: ping RTT p50/p99 (300 pings, 5 ms apart), iperf3 TCP (3 s), and 64-byte UDP
# arriving at the far workload's interface (ovrctl bench gen/sink, 3 s) at 1, 1K, 64K
# and 256K flows.
#   bash bench/real_io.sh [ROUNDS]        (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh >/dev/null
export PATH="$HOME/.cargo/bin:$PATH"
rounds=${1:-3}
cargo build --release --locked -q -p ovr-cli -p ovrd
ovrctl=./target/release/ovrctl
P=ovrbench            # every namespace this script makes starts with this
made=()

ns() { ip netns add "$1"; made+=("$1"); ip -n "$1" link set lo up; }
in_ns() { local n=$1; shift; ip netns exec "$n" "$@"; }
veth() { # ns_a name_a ns_b name_b
    ip link add ${P}tmpa type veth peer name ${P}tmpb
    ip link set ${P}tmpa netns "$1"; ip -n "$1" link set ${P}tmpa name "$2"; ip -n "$1" link set "$2" up
    ip link set ${P}tmpb netns "$3"; ip -n "$3" link set ${P}tmpb name "$4"; ip -n "$3" link set "$4" up
}
cleanup() {
    for ((i=${#made[@]}-1; i>=0; i--)); do ip netns del "${made[$i]}" 2>/dev/null || true; done
    made=()
    "$ovrctl" lab down >/dev/null 2>&1 || true
}
trap cleanup EXIT

kernel_up() {
    ns $P-ul; ip -n $P-ul link add br0 type bridge; ip -n $P-ul link set br0 up
    for h in 1 2; do
        ns $P-h$h; ns $P-h$h-w
        veth $P-h$h uplink $P-ul h$h
        ip -n $P-ul link set h$h master br0
        ip -n $P-ul link set h$h mtu 9000; ip -n $P-h$h link set uplink mtu 9000
        ip -n $P-h$h addr add 192.0.2.$h/24 dev uplink
        ip -n $P-h$h link add vxlan101 type vxlan id 101 dstport 4789 local 192.0.2.$h dev uplink
        other=$((3 - h))
        in_ns $P-h$h bridge fdb append 00:00:00:00:00:00 dev vxlan101 dst 192.0.2.$other
        ip -n $P-h$h link add brt1 type bridge
        ip -n $P-h$h link set vxlan101 master brt1; ip -n $P-h$h link set vxlan101 up
        veth $P-h$h w1 $P-h$h-w eth0
        ip -n $P-h$h link set w1 master brt1; ip -n $P-h$h link set brt1 up
        ip -n $P-h$h-w addr add 10.1.0.${h}1/24 dev eth0
    done
}

direct_up() {
    ns $P-d1; ns $P-d2
    veth $P-d1 eth0 $P-d2 eth0
    ip -n $P-d1 addr add 10.1.0.11/24 dev eth0
    ip -n $P-d2 addr add 10.1.0.21/24 dev eth0
}

# measure CLIENT_NS SERVER_NS -> prints "p50 p99 gbit"
measure() {
    local c=$1 s=$2
    in_ns "$c" ping -c 300 -i 0.005 10.1.0.21 >/tmp/$P-ping.txt 2>&1 || true
    local lat
    lat=$(grep -o 'time=[0-9.]*' /tmp/$P-ping.txt | cut -d= -f2 | sort -n | awk '
        { v[NR] = $1 } END { if (NR == 0) { print "- -"; exit }
          printf "%.0f %.0f", v[int(NR*0.5)+0] * 1000, v[int(NR*0.99)] * 1000 }')
    in_ns "$s" iperf3 -s -1 >/dev/null 2>&1 &
    local srv=$!
    sleep 0.3
    local gbit
    gbit=$(in_ns "$c" iperf3 -c 10.1.0.21 -t 3 -J 2>/dev/null | python3 -c '
import json, sys
try: print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))
except Exception: print("-")')
    wait $srv 2>/dev/null || true
    echo "$lat $gbit"
}

mac_of() { ip -n "$1" -br link show "$2" | awk '{print $3}'; }

# udp CLIENT_NS SERVER_NS FLOWS -> delivered Mpps
udp() {
    local c=$1 s=$2 flows=$3
    in_ns "$s" "$ovrctl" bench sink --seconds 4.5 >/tmp/$P-sink.txt &
    local sink=$!
    sleep 0.5
    in_ns "$c" "$ovrctl" bench gen --iface eth0 --src-mac "$(mac_of "$c" eth0)" \
        --dst-mac "$(mac_of "$s" eth0)" --src 10.1.0.11 --dst 10.1.0.21 --flows "$flows" \
        --seconds 3 >/dev/null
    wait $sink
    python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["mpps"])' /tmp/$P-sink.txt
}

row() { # round system client server
    read -r p50 p99 g < <(measure "$3" "$4")
    local u=()
    for f in 1 1000 64000 256000; do u+=("$(udp "$3" "$4" $f)"); done
    echo "| $1 | $2 | $p50 | $p99 | $g | ${u[0]} | ${u[1]} | ${u[2]} | ${u[3]} |"
}

echo "| round | system | ping p50 (µs) | ping p99 (µs) | TCP (Gbit/s) | 64 B Mpps, 1 flow | 1K | 64K | 256K |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
    # Static labs (no etcd), as these rows were always measured.
    # ovr as it starts by default: AF_PACKET for the workloads (offloads on, as a
    # container has them), AF_XDP for the underlay.
    "$ovrctl" lab up --static --hosts 2 --tenants 1 >/dev/null
    row "$r" "ovr auto, offloads on" ovrlab-h1-t1-w1 ovrlab-h2-t1-w1
    "$ovrctl" lab down >/dev/null
    # ovr with AF_XDP everywhere: workloads must send complete frames.
    "$ovrctl" lab up --static --hosts 2 --tenants 1 --no-workload-offloads --ovrd-arg=--driver=af-xdp >/dev/null
    row "$r" "ovr AF_XDP, offloads off" ovrlab-h1-t1-w1 ovrlab-h2-t1-w1
    "$ovrctl" lab down >/dev/null
    kernel_up
    row "$r" "kernel bridge + vxlan" $P-h1-w $P-h2-w
    cleanup
    direct_up
    row "$r" "direct veth" $P-d1 $P-d2
    cleanup
done
