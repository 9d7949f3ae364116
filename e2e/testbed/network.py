"""The pods' network: a host-only bridge, the two sysctls kube-proxy needs, and a guard.

The guard is an nftables table that drops anything forwarded between the pod bridge and any
other interface, so no pod (and no test) can reach an address off this machine, whatever the
default routes of the host say. The previous sysctl values are recorded and restored by `down`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from . import BRIDGE, GATEWAY, POD_CIDR

GUARD_TABLE = "kopfka_testbed_guard"
SYSCTLS = {
    "net/ipv4/ip_forward": "1",  # service traffic is DNAT'ed and forwarded bridge to bridge
    "net/bridge/bridge-nf-call-iptables": "1",  # pod -> service -> pod on one bridge
}


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key


def setup(run_dir: Path) -> None:
    saved = run_dir / "sysctl.json"
    if not saved.exists():
        saved.write_text(json.dumps({k: _sysctl_path(k).read_text().strip() for k in SYSCTLS}))
    for key, value in SYSCTLS.items():
        _sysctl_path(key).write_text(value)
    if _run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
    prefix = POD_CIDR.split("/")[1]
    _run("ip", "addr", "replace", f"{GATEWAY}/{prefix}", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    rules = f"""
table inet {GUARD_TABLE} {{
  chain forward {{
    type filter hook forward priority -10; policy accept;
    iifname "{BRIDGE}" oifname != "{BRIDGE}" counter drop comment "pods reach nothing off the bridge"
    oifname "{BRIDGE}" iifname != "{BRIDGE}" counter drop comment "nothing off the bridge reaches pods"
  }}
}}
"""
    _run("nft", "delete", "table", "inet", GUARD_TABLE, check=False)
    subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True)


def teardown(run_dir: Path) -> None:
    for family, table in (("inet", GUARD_TABLE), ("ip", "kube-proxy"), ("ip6", "kube-proxy")):
        _run("nft", "delete", "table", family, table, check=False)
    _run("ip", "link", "delete", BRIDGE, check=False)
    saved = run_dir / "sysctl.json"
    if saved.exists():
        for key, value in json.loads(saved.read_text()).items():
            _sysctl_path(key).write_text(value)
        saved.unlink()
