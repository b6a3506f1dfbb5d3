#!/usr/bin/env bash
# Builds GoBGP v3.37.0's gobgpd from the Go module proxy (once) and prints the directory
# it is in, to put first in PATH for the EVPN benchmark at 100,000 routes:
#
#     PATH=$(bash bench/gobgp_newer.sh):$PATH python3 bench/evpn_e2e.py --source frr --routes 100000
#
# Debian's gobgpd 3.10, which ovr installs and tests with, runs a MAC-mobility check for
# every type 2 path it receives that scans its whole table: quadratic, 100,000 routes never
# finish (bench/RESULTS.md, docs/bgp.md "How fast"). 3.37 looks such paths up by MAC.
set -euo pipefail
version=v3.37.0
dir=/opt/ovr-bench/gobgp-${version#v}
if [[ ! -x $dir/gobgpd ]]; then
    go=$(command -v go || echo /usr/local/go/bin/go)
    [[ -x $go ]] || { echo "gobgp_newer: Go 1.21 or later is needed (go.dev/dl, in /usr/local/go)" >&2; exit 1; }
    mkdir -p "$dir"
    GOPATH=$dir/gopath GOBIN=$dir GOFLAGS=-modcacherw "$go" install \
        "github.com/osrg/gobgp/v3/cmd/gobgpd@$version" >&2
    rm -rf "$dir/gopath"
fi
echo "$dir"
