#!/usr/bin/env bash
# The benchmark suite: ovr, the Linux kernel (bridge + vxlan) and Open vSwitch userspace
# on the same two-host topology, with a direct veth pair as the generator's ceiling,
# measured interleaved in one run. Installs what it needs, builds ovr (release), then
# runs bench/suite.py with the arguments given:
#   bash bench/suite.sh --quick            # smoke run, a few minutes
#   bash bench/suite.sh                    # full run (about 40 minutes here)
#   bash bench/suite.sh --plots bench/plots --out bench/out/official
#   python3 bench/suite.py --help          # every option
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh >/dev/null
export PATH="$HOME/.cargo/bin:$PATH"
need=()
command -v ovs-vswitchd >/dev/null || need+=(openvswitch-switch)
command -v iperf3 >/dev/null || need+=(iperf3)
command -v nft >/dev/null || need+=(nftables)
command -v ethtool >/dev/null || need+=(ethtool)
if [ ${#need[@]} -gt 0 ]; then
    echo "suite: apt-get install ${need[*]}"
    apt-get update -qq
    # Debian starts the host's own OVS service on install where it can; the suite runs
    # its own instances per namespace and never touches that one.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! python3 -c 'import matplotlib' 2>/dev/null; then
    echo "suite: pip install matplotlib"
    python3 -m pip install -q matplotlib 2>/dev/null \
        || python3 -m pip install -q --break-system-packages matplotlib
fi
cargo build --release --locked -q -p ovr-cli -p ovrd
exec python3 bench/suite.py "$@"
