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
# its own PID (bench/memif_common.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
flows=${1:-262144}
secs=${2:-10}
rounds=${3:-3}
cpu=${4:-1}
source bench/memif_common.sh memif-vxlan
sock_a=$dir/a.sock
sock_b=$dir/u.sock
config=$dir/vxlan.yaml

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
    memif: { role: server, socket: $sock_a, id: 0 }
  - name: memif-u
    kind: underlay
    mac: "02:00:00:00:01:01"
    addresses: [192.0.2.1/24]
    memif: { role: server, socket: $sock_b, id: 0 }
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

# testpmd replays the flows from port 0 (net_pcap) into memif-a (port 1) and counts
# what comes out of memif-u (port 2); chained: 0 -> 1 -> 2 -> 0 (net_pcap drops it).
loop_args=(
    --vdev="net_pcap0,rx_pcap=$dir/flows.pcap,infinite_rx=1"
    --vdev="net_memif0,role=client,socket=$sock_a,socket-abstract=no,id=0,mac=02:00:00:00:00:0a"
    --vdev="net_memif1,role=client,socket=$sock_b,socket-abstract=no,id=0,mac=02:00:00:00:01:02"
    -- -i --total-num-mbufs=$((flows + 65536)) --mbuf-size=384 --forward-mode=io
    --port-topology=chained
)
# Every frame of the file is held in an mbuf of about 700 bytes.
loop_mem=$(((flows + 65536) / 1000 + 512))
loop_start=start
# Long enough for every flow to be set up once.
warmup=4
rx_port=2
run_rounds "VXLAN encapsulation, $flows flows"
