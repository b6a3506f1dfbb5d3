#!/usr/bin/env bash
# The main job, until the two-host lab exists: ovr's parsers on overlay traffic made by
# an independent implementation (scapy), beside tshark's view of the same packets, then
# the IPv4 FIB at full-table size.
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
echo "== an IPv4 FIB of 1M BGP-like prefixes (ovrctl lpm-demo)"
./target/release/ovrctl lpm-demo
