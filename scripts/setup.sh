#!/usr/bin/env bash
# Installs what building and testing ovr needs, on Debian as root. Idempotent: each
# step runs only when its tool is missing.
set -euo pipefail

need_apt=()
command -v tshark >/dev/null || need_apt+=(tshark)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v python3 >/dev/null || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
command -v cc >/dev/null || need_apt+=(build-essential)
# The AF_XDP driver's XDP program is C, built by crates/io/build.rs.
command -v clang >/dev/null || need_apt+=(clang)
[ -f /usr/include/bpf/bpf_helpers.h ] || need_apt+=(libbpf-dev)
command -v curl >/dev/null || need_apt+=(curl ca-certificates)
# The system tests' traffic tools.
command -v ping >/dev/null || need_apt+=(iputils-ping)
command -v ethtool >/dev/null || need_apt+=(ethtool)
command -v iperf3 >/dev/null || need_apt+=(iperf3)
# The cluster: etcd (the store, and etcdctl for the tests), and what the etcd-client
# crate's build needs (protoc and the well-known .proto files).
command -v etcd >/dev/null || need_apt+=(etcd-server)
command -v etcdctl >/dev/null || need_apt+=(etcd-client)
command -v protoc >/dev/null || need_apt+=(protobuf-compiler)
[ -f /usr/include/google/protobuf/any.proto ] || need_apt+=(libprotobuf-dev)
# BGP EVPN: GoBGP is ovr's speaker (its gRPC client is built from the .proto files the
# -dev package installs).
command -v gobgpd >/dev/null || need_apt+=(gobgpd)
[ -f /usr/share/gocode/src/github.com/osrg/gobgp/api/gobgp.proto ] \
    || need_apt+=(golang-github-osrg-gobgp-dev)
# FRR: the EVPN tests' peer (zebra + bgpd over the kernel's VXLAN).
[ -x /usr/lib/frr/bgpd ] || need_apt+=(frr)
# Containers: podman (CNI backend) and the reference CNI plugins, for ovr-cni's tests
# (host-local as a delegated IPAM plugin; busybox-static makes the test image).
command -v podman >/dev/null || need_apt+=(podman)
[ -x /usr/lib/cni/host-local ] || need_apt+=(containernetworking-plugins)
command -v runc >/dev/null || need_apt+=(runc)
[ -x /bin/busybox ] || need_apt+=(busybox-static)
# memif's real peer in the system tests: DPDK's testpmd with the memif PMD.
command -v dpdk-testpmd >/dev/null || need_apt+=(dpdk-dev librte-net-memif23)
# ... and its pcap PMD, which replays a file into a memif port.
[ -e /usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_net_pcap.so.23 ] || need_apt+=(librte-net-pcap23)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: apt-get install ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! python3 -c 'import scapy, pytest' 2>/dev/null; then
    echo "setup: pip install scapy pytest"
    python3 -m pip install -q scapy pytest 2>/dev/null \
        || python3 -m pip install -q --break-system-packages scapy pytest
fi

if ! python3 -c 'import schemathesis' 2>/dev/null; then
    echo "setup: pip install schemathesis"
    python3 -m pip install -q schemathesis 2>/dev/null \
        || python3 -m pip install -q --break-system-packages schemathesis
fi

if ! command -v cargo >/dev/null; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    else
        echo "setup: installing Rust with rustup"
        curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain 1.95.0 -c rustfmt,clippy
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
fi
