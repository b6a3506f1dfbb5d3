#!/usr/bin/env bash
# An experiment (see tc_vxlan.c): two hosts as network namespaces, one workload each,
# VXLAN between them done by TC programs on the veths (no forwarder process), then
# iperf3 TCP across, with tshark's view of the underlay. Everything it makes is named
# ovrtc-* and removed at the end.
#   bash bench/experiments/tc_vxlan.sh [SECONDS] [--tap]
# --tap: also a packet socket on every interface the programs run on, with a socket
# filter that takes nothing (dumpcap), as ovrd's AF_PACKET sockets would be there: the
# kernel hands every frame to such taps before TC ingress, so a fast path beside ovrd
# would have to filter its own flows out of them.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-5}
tap=${2:-}
P=ovrtc
out=$(mktemp -d)
down() { for n in w1 h1 h2 w2; do ip netns del $P-$n 2>/dev/null || true; done; }
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; down; rm -rf "$out"' EXIT
down
for n in w1 h1 h2 w2; do
    ip netns add $P-$n
    # No IPv6: its neighbour and router messages would be the only other underlay traffic.
    ip netns exec $P-$n sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip link add eth0 netns $P-w1 address 02:00:00:00:01:11 mtu 1450 type veth peer w1 netns $P-h1
ip link add eth0 netns $P-w2 address 02:00:00:00:02:11 mtu 1450 type veth peer w2 netns $P-h2
ip link add u1 netns $P-h1 address 02:00:00:00:00:01 type veth peer u2 netns $P-h2 address 02:00:00:00:00:02
ip -n $P-w1 addr add 10.1.0.11/24 dev eth0
ip -n $P-w2 addr add 10.1.0.21/24 dev eth0
ip -n $P-w1 neigh add 10.1.0.21 lladdr 02:00:00:00:02:11 dev eth0
ip -n $P-w2 neigh add 10.1.0.11 lladdr 02:00:00:00:01:11 dev eth0
ip -n $P-h1 addr add 192.0.2.1/24 dev u1
ip -n $P-h2 addr add 192.0.2.2/24 dev u2
for n in w1 h1 h2 w2; do ip -n $P-$n link set lo up; done
ip -n $P-w1 link set eth0 up; ip -n $P-w2 link set eth0 up
ip -n $P-h1 link set w1 up; ip -n $P-h1 link set u1 up
ip -n $P-h2 link set w2 up; ip -n $P-h2 link set u2 up

ifindex() { ip netns exec "$1" cat "/sys/class/net/$2/ifindex"; }
build() { # host workload-dev underlay-dev local-mac peer-mac local-ip peer-ip
    for prog in ENCAP:"$2" DECAP:"$3"; do
        clang -O2 -g -target bpf -Wall -Werror -I/usr/include/x86_64-linux-gnu \
            -D"${prog%%:*}" -DWORKLOAD="$(ifindex $P-$1 "$2")" -DUNDERLAY="$(ifindex $P-$1 "$3")" \
            -DLOCAL_MAC="$4" -DPEER_MAC="$5" -DLOCAL_IP="$6" -DPEER_IP="$7" -DVNI=100 \
            -c tc_vxlan.c -o "$out/$1-${prog%%:*}.o"
        ip netns exec $P-$1 tc qdisc add dev "${prog#*:}" clsact
        ip netns exec $P-$1 tc filter add dev "${prog#*:}" ingress bpf da obj "$out/$1-${prog%%:*}.o" sec tc
    done
}
build h1 w1 u1 0x02,0,0,0,0,1 0x02,0,0,0,0,2 0xc0000201 0xc0000202
build h2 w2 u2 0x02,0,0,0,0,2 0x02,0,0,0,0,1 0xc0000202 0xc0000201

ip netns exec $P-w1 ping -c 3 -i 0.2 -q 10.1.0.21
if [ "$tap" = --tap ]; then
    for t in h1:w1 h1:u1 h2:w2 h2:u2; do
        ip netns exec $P-${t%%:*} dumpcap -q -i "${t#*:}" -f 'ether proto 0x88b5' -w "$out/${t#*:}.pcapng" 2>/dev/null &
    done
    sleep 1
fi
# What the underlay carries: a few frames of the TCP transfer, dissected by tshark.
ip netns exec $P-h2 tshark -i u2 -c 400 -w "$out/u2.pcap" -q 2>/dev/null &
cap=$!
sleep 1
ip netns exec $P-w2 iperf3 -s -D -1 >/dev/null
sleep 0.3
ip netns exec $P-w1 iperf3 -c 10.1.0.21 -t "$secs" -J > "$out/iperf.json"
wait $cap || true
python3 - "$out/iperf.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["end"]
print(f"TCP w1 -> w2 over TC VXLAN: {d['sum_received']['bits_per_second'] / 1e9:.2f} Gbit/s, "
      f"{d['sum_sent']['retransmits']} retransmitted")
PY
tshark -r "$out/u2.pcap" -d udp.port==4789,vxlan -T fields -e frame.len -e vxlan.vni 2>/dev/null |
    awk '{ n++; if ($2 == 100) v++; if ($1 > 1514) big++ }
         END { printf "underlay: %d frames, %d VXLAN with VNI 100, %d larger than 1514 B\n", n, v, big }'
