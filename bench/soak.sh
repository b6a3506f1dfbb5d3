#!/usr/bin/env bash
# Soak (bench/soak.py): the two-host lab under mixed traffic (TCP, short-lived UDP flows,
# ping), route churn and API polling, each ovrd's RSS, drop reasons and log watched.
# Builds ovr (release), then runs bench/soak.py with the arguments given:
#   bash bench/soak.sh --minutes 3                 # a short run
#   bash bench/soak.sh                             # one hour
#   bash bench/soak.sh --minutes 10 --offload tc   # with the fast path at TC (or xdp)
# Exit status 0 when every criterion holds, 1 when one fails (summary.json says which).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v iperf3 >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }
cargo build --release --locked -q -p ovr-cli -p ovrd
exec python3 bench/soak.py "$@"
