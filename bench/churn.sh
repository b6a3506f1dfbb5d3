#!/usr/bin/env bash
# Route churn (bench/churn.py): update rate through the API, and forwarding while routes
# churn. Builds ovr (release), then runs bench/churn.py with the arguments given:
#   bash bench/churn.sh --quick              # smoke run, about a minute
#   bash bench/churn.sh                      # rate and forward (about 15 minutes here)
#   bash bench/churn.sh rate --prefix ovrch  # one part
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --locked -q -p ovr-cli -p ovrd
exec python3 bench/churn.py "$@"
