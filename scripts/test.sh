#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/property tests, fixture checks against
# scapy and tshark, and a short fuzz run of every parser.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

echo "== cargo fmt"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
echo "== pytest"
python3 -m pytest -q --durations=25 tests
echo "== fuzz (short run of every target)"
bash scripts/fuzz.sh "${OVR_FUZZ_SECONDS:-15}"
