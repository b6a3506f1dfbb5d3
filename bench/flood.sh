#!/usr/bin/env bash
# New-flow flood (bench/flood.py): established TCP and UDP flows of other workloads and
# networks with and without a flood of new flows from one workload, interleaved.
# Builds ovr (release), then runs bench/flood.py with the arguments given:
#   bash bench/flood.sh                       # 2 rounds of quiet / flood / steady, 5 s each
#   bash bench/flood.sh --rounds 4 --offload tc
#   python3 bench/flood.py --help             # every option
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v iperf3 >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }
cargo build --release --locked -q -p ovr-cli -p ovrd
exec python3 bench/flood.py "$@"
