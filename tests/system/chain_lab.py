"""What the service-chain lab tests (`ovrctl lab up --service-chain`) read from the lab."""

import json

from system.overlay_lab import sh


def ext_on(lab, host):
    """The workload of network `ext` on `host`."""
    return next(w for w in lab.status()["workloads"]
                if w["network"] == "ext" and w["host"] == host)


def counted(ns, comment="lab"):
    """Packets the rule with this comment in `inet fw forward` saw in namespace `ns` (the
    lab's own counting rule by default)."""
    rules = json.loads(sh("nft", "-j", "list", "chain", "inet", "fw", "forward", ns=ns).stdout)
    for item in rules["nftables"]:
        rule = item.get("rule")
        if rule and rule.get("comment") == comment:
            return next(e["counter"]["packets"] for e in rule["expr"] if "counter" in e)
    raise AssertionError(f"no rule '{comment}' in {ns}: {rules}")


def delete_rules(ns, comment):
    """Deletes the rules with this comment from `inet fw forward` in namespace `ns`."""
    rules = json.loads(sh("nft", "-a", "-j", "list", "chain", "inet", "fw", "forward",
                          ns=ns).stdout)
    for item in rules["nftables"]:
        rule = item.get("rule")
        if rule and rule.get("comment") == comment:
            sh("nft", "delete", "rule", "inet", "fw", "forward", "handle", rule["handle"],
               ns=ns)
