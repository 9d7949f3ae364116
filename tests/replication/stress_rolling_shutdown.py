"""Stress the rolling controlled shutdown under CPU load (not collected by pytest; run by hand).

    python tests/replication/stress_rolling_shutdown.py --rounds 30 --load 2

One cluster (1 controller + 3 brokers, the reliability gate's settings) with Kafka's verifiable
producer writing throughout; each round SIGTERMs every broker in turn, waits for it to exit,
restarts it and waits for full ISRs. `--load N` runs N busy-looping processes meanwhile. A broker
that has not exited after --exit-timeout seconds counts as a hang: its Python stacks are dumped
with py-spy when available, then it is killed. Prints every exit time, then a summary line with
the count of shutdowns, hangs, the slowest exit and the 1-minute load average seen.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from harness import VerifiableProducer, create_topic, new_cluster, wait_full_isr


def _spin() -> None:
    while True:
        pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--load", type=int, default=2, help="busy-looping processes to run meanwhile")
    ap.add_argument("--exit-timeout", type=float, default=40.0)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="stress-rolling-"))
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load)]
    for s in spinners:
        s.start()
    c = new_cluster(root, 3)
    c.start()
    times: list[float] = []
    hangs = 0
    loads: list[float] = []
    prod: VerifiableProducer | None = None
    try:
        create_topic(c, "gate", 3, 3)
        wait_full_isr(c, "gate", 60)
        prod = VerifiableProducer(c.bootstrap(), "gate").start(root / "producer.log")
        for r in range(args.rounds):
            for b in c.brokers:
                assert b.proc is not None
                t0 = time.monotonic()
                b.proc.send_signal(signal.SIGTERM)
                try:
                    b.proc.wait(args.exit_timeout)
                except subprocess.TimeoutExpired:
                    hangs += 1
                    print(f"HANG: broker {b.node_id} in round {r} did not exit", flush=True)
                    if shutil.which("py-spy"):
                        dump = subprocess.run(
                            ["py-spy", "dump", "--pid", str(b.proc.pid)], capture_output=True, text=True
                        )
                        print(dump.stdout, dump.stderr, flush=True)
                    b.proc.kill()
                    b.proc.wait()
                dt = time.monotonic() - t0
                times.append(dt)
                loads.append(os.getloadavg()[0])
                print(
                    f"round {r} broker {b.node_id}: exit {b.proc.returncode} after {dt:.2f}s (load {loads[-1]:.1f})",
                    flush=True,
                )
                b.start()
                b.wait_ready(90)
                wait_full_isr(c, "gate", 90)
        stuck = [b.node_id for b in c.brokers if "did not stop when cancelled" in b.log_text()]
    finally:
        if prod is not None:
            prod.stop()
        c.stop()
        for s in spinners:
            s.kill()
    print(
        f"SUMMARY shutdowns={len(times)} hangs={hangs} max_exit_s={max(times, default=0):.2f} "
        f"mean_exit_s={sum(times) / max(1, len(times)):.2f} load1_min={min(loads, default=0):.1f} "
        f"load1_max={max(loads, default=0):.1f} busy_loops={args.load} cpus={os.cpu_count()} "
        f"brokers_logging_stuck_tasks={stuck}",
        flush=True,
    )
    shutil.rmtree(root, ignore_errors=True)
    return 1 if hangs or stuck else 0


if __name__ == "__main__":
    sys.exit(main())
