"""How long the operator's data mover takes to empty a broker, with and without a throttle.

A local cluster (1 controller + 4 brokers, separate processes, each in a session of its own)
holds a topic of --partitions partitions at RF 2, each led by one of brokers 0-2 with its other
replica on broker 3: broker 3 holds --size-mb MiB (default 1024). The mover
(kopfka_operator.rebalance.mover, as the operator runs it: one step per --tick seconds, a fresh
Mover each time, up to --concurrent moves at once) then moves everything off broker 3:

  1. unthrottled (spec.rebalance.throttleBytesPerSecond 0);
  2. the replicas are put back on broker 3 (not timed);
  3. throttled at --throttle-mb MiB/s per broker (leader and follower rates, as
     kafka-reassign-partitions --throttle sets them).

Prints the size moved, each run's time and rate, the ratio throttled/unthrottled, and the
throttled time against its floor in the same run: each copy leaves its leader (brokers 0-2) and
arrives on the broker the plan chose, every broker capped at the throttle on either side, so the
run cannot be faster than the busiest broker's bytes at the throttle (nor than unthrottled).
The time includes the mover's tick granularity (the operator's timer is 3 s) and the preferred
leader elections at the end. The machine is shared: the load average is printed with the figures.

    python benchmarks/move.py [--size-mb 1024] [--partitions 8] [--throttle-mb 20]
                              [--concurrent 5] [--tick 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "replication"))

from harness import create_topic, describe, new_cluster, run, wait_full_isr, wait_until  # noqa: E402
from kopfka.client.admin import Admin  # noqa: E402
from kopfka_operator.rebalance.mover import MoverSettings  # noqa: E402
from mover_steps import drive, fill  # noqa: E402

TOPIC = "bulk"
LEAVING = 3
MB = 1 << 20
# Kafka's replication timings where the harness shortens them (a rebalance is not a failover
# test), and no automatic leader rebalance: the mover elects the preferred leaders itself
PROPS = {
    "replica.fetch.wait.max.ms": "500",
    "replica.lag.time.max.ms": "30000",
    "auto.leader.rebalance.enable": "false",
    "min.insync.replicas": "1",
}


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def on_leaving(c: Any) -> int:
    return sum(1 for p in describe(c, TOPIC).values() if LEAVING in p.replicas)


def put_back(c: Any, original: dict[int, list[int]]) -> None:
    async def go() -> None:
        admin = await Admin.connect(c.bootstrap().split(",")[0])
        try:
            await admin.alter_partition_reassignments({(TOPIC, p): r for p, r in original.items()})
        finally:
            await admin.close()

    run(go())
    wait_until(lambda: on_leaving(c) == len(original), 600, "the replicas back on broker 3", interval=1.0)
    wait_full_isr(c, TOPIC, timeout=600)


def evacuate(c: Any, settings: MoverSettings, tick: float) -> tuple[float, float]:
    """(seconds, the busiest broker's bytes: the most any one broker sends or receives)."""
    t0 = time.monotonic()
    said, plans = drive(c.bootstrap(), settings, lambda m: m.evacuate([LEAVING]), timeout=3600, interval=tick)
    took = time.monotonic() - t0
    assert on_leaving(c) == 0, said[-3:]
    moves = {r.tp: r for plan in plans for r in plan.reassignments if r.adding}
    sent: dict[int, int] = {}
    received: dict[int, int] = {}
    for r in moves.values():
        for b in r.adding:  # copied from the leader, the first replica (brokers 0-2 lead)
            sent[r.before[0]] = sent.get(r.before[0], 0) + r.size
            received[b] = received.get(b, 0) + r.size
    return took, max([*sent.values(), *received.values()], default=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="MiB on the broker emptied (default 1024)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--throttle-mb", type=float, default=20.0, help="MiB/s per broker for the throttled run")
    ap.add_argument("--concurrent", type=int, default=5, help="spec.rebalance.maxConcurrentMoves")
    ap.add_argument("--tick", type=float, default=3.0, help="seconds between mover steps (the operator's timer)")
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="kopfka-move-", dir=args.dir))
    c = new_cluster(root, 4, PROPS, own_sessions=True)
    try:
        c.start()
        original = {p: [p % 3, LEAVING] for p in range(args.partitions)}
        create_topic(c, TOPIC, args.partitions, 2, configs={"segment.bytes": str(64 * MB)}, assignments=original)
        wait_full_isr(c, TOPIC)
        per_partition = args.size_mb * MB // args.partitions
        t0 = time.monotonic()
        fill(c.bootstrap(), TOPIC, args.partitions, per_partition, record=16 * 1024)
        wait_full_isr(c, TOPIC, timeout=600)
        size = per_partition * args.partitions
        print(
            f"size moved: {size / MB:.0f} MiB ({args.partitions} partitions, a follower of each on broker 3); "
            f"filled in {time.monotonic() - t0:.0f} s; mover tick {args.tick:g} s, "
            f"{args.concurrent} moves at once",
            flush=True,
        )

        free, _ = evacuate(c, MoverSettings(0, args.concurrent), args.tick)
        print(f"unthrottled: {free:.1f} s, {size / MB / free:.1f} MiB/s (load {load()})", flush=True)
        put_back(c, original)
        rate = int(args.throttle_mb * MB)
        slow, busiest = evacuate(c, MoverSettings(rate, args.concurrent), args.tick)
        print(
            f"throttled at {args.throttle_mb:g} MiB/s per broker: {slow:.1f} s, {size / MB / slow:.1f} MiB/s "
            f"(load {load()})",
            flush=True,
        )
        floor = max(busiest / rate, free)
        print(
            f"ratio throttled/unthrottled time: {slow / free:.2f}; the throttle's floor in this run: "
            f"{floor:.1f} s (the busiest broker sends or receives {busiest / MB:.0f} MiB at "
            f"{args.throttle_mb:g} MiB/s, and no faster than unthrottled): throttled time / floor "
            f"{slow / floor:.2f}"
        )
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
