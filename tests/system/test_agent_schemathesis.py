"""Schemathesis against ovrd's own /openapi.json: generated and mutated requests to every
operation must never get a server error, and every answer must match the document
(status codes, content types, bodies).

ovrd runs in a namespace of its own (only loopback), API on TCP with a bearer token, no
interfaces: the API and the tables are what is tested, not forwarding. The seed is fixed
so that a run is repeatable.
"""

import os
import shutil
import subprocess

from system.netns import Lab
from system.ovrd import Ovrd

PORT = 18740
# ovrd wants 32 bytes at least, in a file only its owner can read.
TOKEN = "schemathesis-token-0123456789abcdef"
SEED = "324755588516889059921387446714894158531"


def test_no_server_errors_and_answers_match_the_document(tmp_path):
    st = shutil.which("st") or shutil.which("schemathesis")
    assert st, "schemathesis is not installed (scripts/setup.sh installs it)"
    (tmp_path / "token").write_text(TOKEN + "\n")
    os.chmod(tmp_path / "token", 0o600)
    lab = Lab("sc")
    ovrd = None
    try:
        ns = lab.ns("api")
        ovrd = Ovrd(ns, tmp_path / "ovrd.log", "--api-listen", f"127.0.0.1:{PORT}",
                    "--api-token-file", tmp_path / "token")
        r = subprocess.run(
            ["ip", "netns", "exec", ns, st, "run", f"http://127.0.0.1:{PORT}/openapi.json",
             "-H", f"Authorization: Bearer {TOKEN}",
             "--checks", "not_a_server_error,response_schema_conformance,"
                         "status_code_conformance,content_type_conformance",
             "--max-examples", "25", "--workers", "1", "--seed", SEED],
            capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
        assert ovrd.proc.poll() is None, "ovrd died under schemathesis"
    finally:
        if ovrd is not None:
            ovrd.stop()
        lab.close()
