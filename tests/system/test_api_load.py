"""The API under load and against idle or hostile clients, on a real ovrd: a thousand
concurrent reads all answered; idle connections closed; new requests answered while
hundreds of idle connections are open; the TCP listener's token rules.

The load itself is bench/api_load.py (the benchmark); here only what must hold is
asserted, never a time.
"""

import sys

import pytest

from conftest import ROOT
from system.netns import Lab
from system.test_agent import Host, binaries, two_vms

sys.path.insert(0, str(ROOT / "bench"))
import api_load  # noqa: E402


@pytest.fixture
def host(tmp_path):
    ovrd, ovrctl = binaries()
    lab = Lab("ld")
    h = None
    try:
        a, vm1, vm2 = two_vms(lab)
        h = Host(ovrd, ovrctl, a, tmp_path)
        h.start()
        yield h
    finally:
        if h is not None:
            h.stop()
        lab.close()


def test_a_thousand_concurrent_counter_reads_are_all_answered(host):
    results, _ = api_load.run(1000, socket=host.socket)
    s = api_load.summary(results, 0)
    assert s["statuses"] == {"200": 1000}, s
    # Every answer is the whole document, the interfaces named.
    for _, _, (_, body) in results[:10]:
        assert b'"name":"vm1"' in body, body[:200]
    # The worker still answers everything else afterwards.
    assert host.json("flows")["active"] >= 0
