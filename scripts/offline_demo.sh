#!/usr/bin/env bash
# ovr without a network: its parsers on overlay traffic made by an independent
# implementation (scapy), beside tshark's view of the same packets; its pipeline replaying
# a captured workload's traffic into VXLAN and back; the engine's speed on one core; the
# IPv4 FIB at full-table size.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

cargo build --release --locked -q -p ovr-cli
work=$(mktemp -d /tmp/ovr-main.XXXXXX)
trap 'rm -rf "$work"' EXIT

python3 scripts/make_demo_pcap.py "$work/overlay.pcap"
echo "== tshark's one-line view of the capture (VXLAN, MPLS-in-UDP, MPLS-in-GRE, tags, ARP, ND, malformed)"
tshark -n -r "$work/overlay.pcap" 2>/dev/null
echo
echo "== the same packets through ovr's parsers (ovrctl decode)"
./target/release/ovrctl decode "$work/overlay.pcap"
echo
echo
scenario=tests/golden/data/l3_vxlan
echo "== ovr's pipeline, offline: $scenario/config.yaml over captured packets (ovrctl replay)"
echo "   vm1 sends to 10.2.0.9 and fd00:2::9 (behind VTEP 192.0.2.2); replies come back in VXLAN"
./target/release/ovrctl replay --config "$scenario/config.yaml" \
    --pcap vm1="$scenario/in-vm1.pcap" --pcap uplink="$scenario/in-uplink.pcap" \
    --out "$work/out" --trace 2
for f in "$work"/out/*.pcap; do
    echo "-- what ovr sent on $(basename "$f" .pcap), as tshark reads it"
    tshark -n -r "$f" 2>/dev/null
done
echo
echo "== the engine on one core, no kernel I/O (ovrctl bench engine; full table in bench/RESULTS.md)"
./target/release/ovrctl bench engine --flows 256000 --seconds 1 --scenario vxlan-l2-encap
echo
echo "== an IPv4 FIB of 1M BGP-like prefixes (ovrctl lpm-demo)"
./target/release/ovrctl lpm-demo
