#!/usr/bin/env bash
# Builds the .deb for hosts (package "ovr": ovrd, ovrctl, ovr-cni, the systemd unit, example
# settings under /etc/ovr; docs/deploy.md) and prints its path on the last line.
# Run as root on Debian, like the other scripts: setup.sh installs the build's needs
# (clang and libbpf-dev for the BPF programs, protoc for the etcd client).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh >&2
export PATH="$HOME/.cargo/bin:$PATH"

if ! cargo deb --version >/dev/null 2>&1; then
    echo "deb: cargo install cargo-deb" >&2
    cargo install cargo-deb --locked -q
fi

# The same release build as scripts/main.sh; cargo deb then only packs it.
# OVR_DEB_PROFILE=dev packs the debug build instead: the packaging test's, which the other
# system tests have built already (a release build from a clean clone takes minutes).
profile=${OVR_DEB_PROFILE:-release}
cargo build --profile "$profile" --locked -q -p ovr-cli -p ovrd -p ovr-cni
# Stripped (the release profile keeps line tables for local profiling; hosts get the
# smaller binaries, and target/release/ keeps the unstripped ones).
cargo deb -p ovrd --profile "$profile" --no-build --strip -q
