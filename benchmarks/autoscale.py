"""Autoscaler reaction time on the Kubernetes test bed (issue 15): from a load change to the
decision, and to the new broker leading partitions; from the end of the load to the scale-down.

Runs the end-to-end scenario of e2e/test_autoscale.py (3 brokers, bytes-in target 100 KiB/s
per broker, a ~600 kB/s burst from a client pod, a verifiable producer audited throughout) and
prints its timings against their floors, both from that run's own spec: a scale-up cannot be
decided before the scale-up stabilization window has seen the load (plus one 3 s operator tick
per scrape), and a scale-down not before the scale-down window. The time from the decision to
the new broker leading partitions is the pod start, its registration and the throttled data
movement (spec.rebalance) followed by preferred-leader elections.

    python benchmarks/autoscale.py

Needs root and the test bed binaries (e2e/testbed.sh build); the e2e fixtures bring the test
bed up when it is down. The machine is shared: the load average is printed with the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "e2e")]

from test_autoscale import CLUSTER  # noqa: E402

TICK_S = 3.0  # the operator's roll/autoscale timer


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    auto = CLUSTER["spec"]["brokers"]["autoscaling"]  # type: ignore[index]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figures.json"
        env = {**os.environ, "KOPFKA_AUTOSCALE_FIGURES": str(out)}
        before = load()
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-x", "e2e/test_autoscale.py"],
            cwd=REPO,
            env=env,
        )
        if not out.exists():
            print("the scenario wrote no figures (it failed before its first measurement)")
            return 1
        figures = json.loads(out.read_text())
    up_floor = float(auto["scaleUpStabilizationWindowSeconds"]) + TICK_S
    down_floor = float(auto["scaleDownStabilizationWindowSeconds"])
    print(f"load average before/after: {before} / {load()}")
    print(f"audit: {figures.get('audit')}")
    if "decided_up_s" in figures:
        up = figures["decided_up_s"]
        print(f"load change -> scale-up decided: {up:.1f} s (floor {up_floor:.0f} s, ratio {up / up_floor:.2f})")
        print(f"  reason: {figures.get('up_reason')}")
    if "new_broker_leads_s" in figures:
        leads = figures["new_broker_leads_s"]
        after = leads - figures["decided_up_s"]
        print(f"load change -> new broker leads partitions: {leads:.1f} s ({after:.1f} s after the decision)")
    if "down_after_load_end_s" in figures:
        down = figures["down_after_load_end_s"]
        print(f"load end -> back to 3 brokers: {down:.1f} s (floor {down_floor:.0f} s, ratio {down / down_floor:.2f})")
        print(f"  reason: {figures.get('down_reason')}")
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
