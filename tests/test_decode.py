"""ovrctl decode against tshark: the same capture (made by scapy), the same fields.

The capture holds VXLAN, MPLS-in-UDP and MPLS-in-GRE packets as a peer sends them and
malformed packets; ovr must report the tunnel fields tshark reads and drop each malformed
packet under the reason that names what is wrong.
"""

import json
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


# --- capture input: snapshot length, link types, pcapng, a cut-off end ----------------
# (the same reader serves `ovrctl replay --pcap`; checked at its end)

OVRCTL = ROOT / "target" / "debug" / "ovrctl"


def _decode(path, *extra):
    r = subprocess.run([str(OVRCTL), "decode", str(path), *extra], capture_output=True, text=True)
    lines = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s*(\d+)  (.*)$", r.stdout, re.M)}
    return r, lines


def _tshark(path, *fields):
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "separator=;",
                          "-e", "frame.number", *[a for f in fields for a in ("-e", f)]],
                         check=True, capture_output=True, text=True).stdout
    return {int(r.split(";")[0]): r.split(";")[1:] for r in out.strip().splitlines()}


@pytest.fixture(scope="module")
def captures(tmp_path_factory, decoded):  # decoded: ovrctl is built
    from scapy.all import IP, UDP, Ether, IPv6, PcapNgWriter, Raw, conf, wrpcap
    from scapy.layers.l2 import CookedLinux, CookedLinuxV2
    conf.verb = 0
    d = tmp_path_factory.mktemp("captures")
    demo = d / "overlay.pcap"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_demo_pcap.py"), str(demo)], check=True)
    ip4 = lambda n: IP(src=f"10.1.0.{n}", dst="10.2.0.9") / UDP(sport=1000 + n, dport=2000) / Raw(b"z" * n)
    ip6 = IPv6(src="fd00:1::5", dst="fd00:2::9") / UDP(sport=7, dport=8) / Raw(b"v6")
    wrpcap(str(d / "raw.pcap"), [ip4(5), ip6, ip4(6)], linktype=101)
    wrpcap(str(d / "ipv4.pcap"), [ip4(7)], linktype=228)
    sll = lambda t, n: CookedLinux(pkttype=t, lladdrtype=1, lladdrlen=6, src=bytes.fromhex("020000000105") + b"\0\0", proto=0x0800) / ip4(n)
    wrpcap(str(d / "sll.pcap"), [sll(0, 5), sll(4, 6)], linktype=113)
    sll2 = CookedLinuxV2(proto=0x0800, ifindex=3, lladdrtype=1, pkttype=0, lladdrlen=6, src=bytes.fromhex("020000000105") + b"\0\0") / ip4(8)
    wrpcap(str(d / "sll2.pcap"), [sll2], linktype=276)
    subprocess.run(["editcap", "-F", "pcap", "-s", "60", str(demo), str(d / "snap60.pcap")], check=True, capture_output=True)
    subprocess.run(["editcap", "-F", "pcapng", str(demo), str(d / "overlay.pcapng")], check=True, capture_output=True)
    w = PcapNgWriter(str(d / "scapy.pcapng"))
    for p in [Ether(src="02:00:00:00:01:05", dst="02:00:00:00:00:01") / ip4(5)] * 2:
        w.write(p)
    w.close()
    return d


def test_snaplen_truncated_records_are_dropped_by_name_and_the_rest_decoded(captures):
    r, lines = _decode(captures / "snap60.pcap")
    assert r.returncode == 0, r.stderr
    lens = _tshark(captures / "snap60.pcap", "frame.len", "frame.cap_len")
    cut = [n for n, (orig, cap) in lens.items() if int(cap) < int(orig)]
    assert cut and len(cut) < len(lens)
    for n in lens:
        if n in cut:
            assert lines[n].startswith("DROP capture_snaplen_truncated: 60 of"), lines[n]
        else:
            assert "capture_" not in lines[n], lines[n]
    assert f"drop capture_snaplen_truncated: {len(cut)}" in r.stdout


def test_raw_ip_and_linux_cooked_captures_are_decoded_as_what_they_are(captures):
    for name, link in [("raw.pcap", "raw ip"), ("ipv4.pcap", "raw ip"),
                       ("sll.pcap", "linux sll"), ("sll2.pcap", "linux sll2")]:
        r, lines = _decode(captures / name)
        assert r.returncode == 0, (name, r.stderr)
        rows = _tshark(captures / name, "ip.src", "ipv6.src", "udp.srcport")
        assert len(lines) == len(rows), (name, r.stdout)
        for n, (src4, src6, sport) in rows.items():
            assert lines[n].startswith(link + " "), (name, lines[n])
            src = src4 or src6
            assert f"ipv4 {src} >" in lines[n] or f"ipv6 {src} >" in lines[n], (name, lines[n])
            assert f"udp {sport} > " in lines[n], (name, lines[n])
            assert "DROP" not in lines[n], (name, lines[n])
    _, lines = _decode(captures / "sll.pcap")
    assert lines[1].startswith("linux sll in from 02:00:00:00:01:05 proto 0x0800")
    assert lines[2].startswith("linux sll out from 02:00:00:00:01:05")


def test_pcapng_reads_as_its_pcap(captures):
    pcap, _ = _decode(captures / "overlay.pcap")
    ng, _ = _decode(captures / "overlay.pcapng")
    assert ng.returncode == 0, ng.stderr
    assert ng.stdout == pcap.stdout
    r, lines = _decode(captures / "scapy.pcapng")
    assert r.returncode == 0, r.stderr
    assert len(lines) == 2 and all("ipv4 10.1.0.5 > 10.2.0.9" in l for l in lines.values())


def test_a_cut_off_last_record_loses_only_that_record(captures):
    whole = (captures / "overlay.pcap").read_bytes()
    n = len(_tshark(captures / "overlay.pcap"))
    for ext, data in [("pcap", whole), ("pcapng", (captures / "overlay.pcapng").read_bytes())]:
        cut = captures / f"cut.{ext}"
        cut.write_bytes(data[:-7])
        r, lines = _decode(cut)
        assert r.returncode == 0, r.stderr
        assert sorted(lines) == list(range(1, n)), r.stdout
        assert "cut off at the end of the file" in r.stderr
        assert f"{n - 1} packets:" in r.stdout


def test_decode_json(captures):
    r, _ = _decode(captures / "snap60.pcap", "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert v["format"] == "pcap" and v["total"] == len(v["packets"])
    assert [p["number"] for p in v["packets"]] == list(range(1, v["total"] + 1))
    assert v["dropped"]["capture_snaplen_truncated"] >= 1
    assert v["well_formed"] + sum(v["dropped"].values()) == v["total"]
    whole = [p for p in v["packets"] if p["drop"] is None]
    assert len(whole) == v["well_formed"] > 0
    assert all(p["layers"][0].startswith("eth ") for p in whole)
    cut = next(p for p in v["packets"] if p["drop"] == "capture_snaplen_truncated")
    assert cut["detail"].startswith("60 of") and cut["layers"] == []


def test_replay_takes_raw_ip_as_routed_to_the_interface(captures, tmp_path):
    """Raw IP received on vm1 is routed as if sent to vm1's own MAC: red's route to
    10.2.0.0/24 carries both IPv4 packets to host B in VNI 100."""
    config = ROOT / "crates" / "config" / "examples" / "two-networks.yaml"
    for name in ("raw.pcap", "sll.pcap"):
        out = tmp_path / name
        r = subprocess.run([str(OVRCTL), "replay", "--config", str(config), "--pcap", f"vm1={captures / name}",
                            "--out", str(out), "--json"], check=True, capture_output=True, text=True)
        v = json.loads(r.stdout)
        assert v["inputs"][0]["format"] == "pcap" and v["inputs"][0]["left_out"] == {}
        rows = _tshark(out / "uplink.pcap", "vxlan.vni", "udp.srcport")
        assert sorted(r[1].split(",")[-1] for r in rows.values()) == ["1005", "1006"], (name, rows)
        assert all(r[0] == "100" for r in rows.values()), (name, rows)
    # Records cut by the snapshot length are counted per input, not replayed.
    r = subprocess.run([str(OVRCTL), "replay", "--config", str(config), "--pcap", f"uplink={captures / 'snap60.pcap'}",
                        "--out", str(tmp_path / "snap"), "--json"], check=True, capture_output=True, text=True)
    v = json.loads(r.stdout)
    left = v["inputs"][0]["left_out"]["capture_snaplen_truncated"]
    assert left >= 1 and v["packets_in"] == v["inputs"][0]["records"] - left
