"""tshark capturing on an interface of a namespace into a pcap file.

Starting waits until tshark says it is capturing ("Capturing on ..." on its standard
error): a cold tshark takes seconds to load its dissectors, and on a fresh machine it took
longer than any fixed sleep the tests used to give it, so the traffic they sent went
uncaptured (or a test that looks for the absence of packets passed without looking)."""

import subprocess
import threading
import time

from scapy.all import rdpcap


class Capture:
    def __init__(self, ns, iface, path, bpf=None, ready_within=30.0):
        self.path = str(path)
        args = ["ip", "netns", "exec", ns, "tshark", "-q", "-i", iface, "-w", self.path]
        if bpf:
            args += ["-f", bpf]
        self.p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        self._said = []
        self._capturing = False
        self._heard = threading.Event()
        # Keeps reading after the line so tshark never blocks on a full pipe.
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self._heard.wait(ready_within)
        if not self._capturing:
            self.p.kill()
            self.p.wait()
            raise RuntimeError(f"tshark on {ns}/{iface} did not start capturing (waited up to "
                               f"{ready_within} s): {''.join(self._said)}")

    def _read_stderr(self):
        for line in self.p.stderr:
            self._said.append(line)
            if line.startswith("Capturing on"):
                self._capturing = True
                self._heard.set()
        # tshark ended: whoever waits for it to capture need not wait longer.
        self._heard.set()

    def stop(self, settle=0.5):
        """Ends the capture (after `settle` seconds for frames still in flight); returns the
        path of the pcap file."""
        time.sleep(settle)
        self.p.terminate()
        self.p.wait(timeout=20)
        return self.path

    def packets(self, settle=0.5):
        """Ends the capture and reads it with scapy."""
        return list(rdpcap(self.stop(settle)))
