"""ovrctl decode against tshark: the same capture (made by scapy), the same fields.

The capture holds VXLAN, MPLS-in-UDP and MPLS-in-GRE packets as a peer sends them and
malformed packets; ovr must report the tunnel fields tshark reads and drop each malformed
packet under the reason that names what is wrong.
"""

import re
import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    pcap = tmp_path_factory.mktemp("decode") / "overlay.pcap"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_demo_pcap.py"), str(pcap)], check=True)
    subprocess.run(["cargo", "build", "-q", "-p", "ovr-cli"], check=True, cwd=ROOT)
    out = subprocess.run([str(ROOT / "target" / "debug" / "ovrctl"), "decode", str(pcap)],
                         check=True, capture_output=True, text=True).stdout
    lines = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s*(\d+)  (.*)$", out, re.M)}
    fields = subprocess.run(
        ["tshark", "-n", "-r", str(pcap), "-T", "fields", "-E", "separator=;",
         "-e", "frame.number", "-e", "vxlan.vni", "-e", "mpls.label", "-e", "gre.key", "-e", "ip.src"],
        check=True, capture_output=True, text=True).stdout
    rows = {int(r.split(";")[0]): r.split(";")[1:] for r in fields.strip().splitlines()}
    return out, lines, rows


def test_tunnel_fields_match_tshark(decoded):
    _, lines, rows = decoded
    checked = 0
    for n, (vni, labels, key, _) in rows.items():
        if n >= 8:  # the malformed ones are checked below
            continue
        if vni:
            assert f"vxlan vni {vni}" in lines[n]
            checked += 1
        for label in filter(None, labels.split(",")):
            assert re.search(rf"mpls \[.*\b{label} tc", lines[n]), (label, lines[n])
            checked += 1
        if key:
            assert f"key {int(key, 0)}" in lines[n]
    assert checked >= 4


def test_malformed_packets_are_dropped_with_named_reasons(decoded):
    out, lines, _ = decoded
    expected = {
        8: "vxlan_truncated",
        9: "ipv4_bad_header_length",
        10: "ipv4_truncated",
        11: "vxlan_bad_flags",
        12: "mpls_truncated",
        13: "gre_bad_version",
    }
    for n, reason in expected.items():
        assert f"DROP {reason}:" in lines[n], lines[n]
    for n in range(1, 8):
        assert "DROP" not in lines[n], lines[n]
    assert "13 packets: 7 well-formed, 6 would be dropped" in out
