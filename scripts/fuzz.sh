#!/usr/bin/env bash
# Runs cargo-fuzz targets for SECONDS each.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 15 s, every target)
# A long run, for development: scripts/fuzz.sh 600 pipeline
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
secs=${1:-15}
shift || true

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal \
        || { echo "fuzz: no nightly toolchain could be installed; fuzzing skipped"; exit 0; }
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

cd fuzz
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo +nightly fuzz list)
# Start every target from the scapy-made packets, so that the fuzzer mutates valid VXLAN,
# MPLS and GRE frames instead of having to discover them; the configuration parser from
# the example configuration.
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    if [ "$t" = config ]; then
        cp -n ../crates/config/examples/*.yaml "corpus/$t/" 2>/dev/null || true
    else
        cp -n ../crates/wire/fixtures/*.bin ../crates/wire/fixtures/offload/*.in.bin "corpus/$t/" 2>/dev/null || true
    fi
done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
    if cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=4096 >"$log" 2>&1; then
        echo "fuzz: $t: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1)"
    else
        tail -n 40 "$log"
        echo "fuzz: $t FAILED (reproduce: cd fuzz && cargo +nightly fuzz run $t artifacts/$t/...)"
        exit 1
    fi
done
