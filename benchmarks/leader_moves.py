"""What a leadership move costs a producer, with and without KIP-951 leader discovery, in one run.

Each phase runs a fresh local cluster (1 controller + 3 brokers, separate processes, each in a
session of its own, Kafka's default replication timings) and an acks=all idempotent
confluent-kafka producer at a fixed rate to an RF=3 topic (min.insync.replicas=2), one record
per partition in turn, in a process of its own. After a quiet baseline the leadership of every
partition moves --moves times, --interval seconds apart:

  moves     (default) a preferred-leader move with nothing restarted: each partition's replica
            list is rotated by one (AlterPartitionReassignments, same replicas) and ElectLeaders
            PREFERRED moves every leadership to the new first replica at once;
  restarts  each broker in turn is SIGTERMed (a controlled shutdown moves its leadership away),
            restarted and, once every ISR is full again, made preferred leader again
            (ElectLeaders), as a rolling restart does.

The phases alternate between brokers that answer NOT_LEADER_OR_FOLLOWER with the new leader and
its endpoint (KIP-951) and brokers that leave both out (the benchmark-only key
internal.leader.discovery.enable=false), so the client has to look the leader up with a Metadata
request first; --rounds repeats the pair in the other order.

Prints, per phase, each record's delivery latency (produce call -> delivery report) p50/p99/max
before the first move and from the first move on, the Metadata requests the producer sent in that
time (librdkafka's statistics), the slowest record of each move (--verbose: where the slow
records lie among the events: SIGTERM, exit, restart, elections), and the load average next to
every figure: the machine is shared, so only figures at a similar load compare. Then the p99
ratios: during/before per phase, and without/with leader discovery.

librdkafka puts the records of a refused batch back with retry.backoff.ms (100 ms) before it
sends them again, hint or not: with its defaults that wait dominates a move on loopback, where a
Metadata round trip is a millisecond. `--producer-config retry.backoff.ms=10` shows the round
trip that leader discovery saves.

    python benchmarks/leader_moves.py [--scenario moves|restarts] [--rate 200] [--partitions 6]
                                      [--baseline 20] [--moves 8] [--interval 4] [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "replication"))

from harness import broker, create_topic, describe, new_cluster, wait_full_isr, wait_until  # noqa: E402
from kopfka.client.admin import Admin  # noqa: E402

TOPIC = "moves"
# Kafka's defaults for what decides how a leader waits for its followers (the harness shortens
# them), and no automatic rebalance: the benchmark moves leadership itself
KAFKA_DEFAULTS = {
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.backoff.ms": "1000",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "auto.leader.rebalance.enable": "false",
}

# The producer runs in a process of its own, so the benchmark's own work never delays its
# callbacks; a thread serves delivery reports as they arrive. Statistics (every second) are
# printed as they come, with the time, so the benchmark can take the counts of any period.
PROBE = r"""
import json, os, sys, threading, time
from confluent_kafka import Producer
rate, topic, partitions, bootstrap, stop_file, debug, extra = (
    float(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7])
def on_stats(s):
    s = json.loads(s)
    brokers = s.get("brokers", {}).values()
    print(json.dumps({"t": time.time(),
                      "metadata": sum(b.get("req", {}).get("Metadata", 0) for b in brokers)}), flush=True)
conf = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0,
        "statistics.interval.ms": 1000, "stats_cb": on_stats}
if debug:
    conf["debug"] = debug
conf.update(json.loads(extra))
p = Producer(conf)
out = []
def done(err, msg, sent):
    out.append((sent, (time.time() - sent) * 1000, err is None, msg.partition()))
running = True
def serve():
    while running:
        p.poll(0.05)
t = threading.Thread(target=serve, daemon=True)
t.start()
start = time.time()
i = 0
while not os.path.exists(stop_file):
    sent = time.time()
    p.produce(topic, str(i).encode(), partition=i % partitions, on_delivery=lambda e, m, s=sent: done(e, m, s))
    i += 1
    delay = start + i / rate - time.time()
    if delay > 0:
        time.sleep(delay)
p.flush(120)
running = False
t.join()
p.poll(1.5)
for row in out:
    print(json.dumps(row))
"""


@dataclass
class Phase:
    discovery: bool
    records: list[tuple[float, float, bool, int]] = field(default_factory=list)
    stats: list[dict[str, float]] = field(default_factory=list)
    baseline: tuple[float, float] = (0.0, 0.0)
    moves: list[float] = field(default_factory=list)  # when each move was asked for
    end: float = 0.0
    events: list[str] = field(default_factory=list)
    marks: list[tuple[float, str]] = field(default_factory=list)  # (when, what happened)
    load_before: str = ""
    load_after: str = ""

    @property
    def name(self) -> str:
        return "with leader discovery   " if self.discovery else "without leader discovery"

    def latencies(self, lo: float, hi: float) -> list[float]:
        return [ms for sent, ms, ok, _ in self.records if lo <= sent < hi and ok]

    def counted(self, key: str, lo: float, hi: float) -> float:
        """How much a statistics counter grew between lo and hi (nearest reports)."""
        before = [s[key] for s in self.stats if s["t"] <= lo]
        after = [s[key] for s in self.stats if s["t"] >= hi]
        start = before[-1] if before else 0.0
        end = after[0] if after else (self.stats[-1][key] if self.stats else 0.0)
        return end - start


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def figures(lat: list[float]) -> str:
    return (
        f"p50 {pct(lat, 0.5):7.1f} ms  p99 {pct(lat, 0.99):7.1f} ms  max {max(lat, default=float('nan')):7.1f} ms"
        f"  ({len(lat)} records)"
    )


async def _admin(c: Any, op: str, arg: Any) -> Any:
    admin = await Admin.connect(c.bootstrap().split(",")[0])
    try:
        if op == "reassign":
            return await admin.alter_partition_reassignments(arg)
        return await admin.elect_leaders(arg)
    finally:
        await admin.close()


def preferred_move(c: Any, partitions: int, mark: Any) -> str:
    """Rotate every replica list by one, then elect the new first replicas (all at once)."""
    now = describe(c, TOPIC)
    target = {(TOPIC, p): now[p].replicas[1:] + now[p].replicas[:1] for p in range(partitions)}
    errors = [e for e in asyncio.run(_admin(c, "reassign", target)).values() if e is not None]
    assert not errors, errors
    wait_until(
        lambda: all(describe(c, TOPIC)[p].replicas == target[(TOPIC, p)] for p in range(partitions)),
        30,
        "the reordered replica lists",
        interval=0.05,
    )
    t0 = mark("elect")
    asyncio.run(_admin(c, "elect", {TOPIC: list(range(partitions))}))
    wait_until(
        lambda: all(describe(c, TOPIC)[p].leader == target[(TOPIC, p)][0] for p in range(partitions)),
        30,
        "the preferred leaders",
        interval=0.05,
    )
    return f"every leader moved in {time.time() - t0:.2f} s"


def restart(c: Any, node_id: int, partitions: int, mark: Any) -> str:
    """SIGTERM one broker (controlled shutdown), start it again, make it preferred leader again."""
    b = broker(c, node_id)
    led = sum(1 for p in describe(c, TOPIC).values() if p.leader == node_id)
    t0 = mark(f"SIGTERM {node_id}")
    b.terminate(timeout=120)
    stopped = mark(f"{node_id} exited") - t0
    b.start()
    b.wait_ready(120)
    mark(f"{node_id} ready")
    wait_full_isr(c, TOPIC, timeout=180)
    full = mark("ISRs full") - t0
    mark("elect")
    asyncio.run(_admin(c, "elect", {TOPIC: list(range(partitions))}))
    return f"broker {node_id} (led {led}): controlled shutdown {stopped:.1f} s, ISRs full again {full:.1f} s"


def run_phase(args: argparse.Namespace, discovery: bool) -> Phase:
    phase = Phase(discovery)
    with tempfile.TemporaryDirectory(prefix="leader-moves-") as scratch:
        root = Path(args.keep or scratch) / ("with" if discovery else "without")
        props = {**KAFKA_DEFAULTS, "internal.leader.discovery.enable": str(discovery).lower()}
        c = new_cluster(root, 3, props, own_sessions=True)
        c.start()
        probe = None
        try:
            create_topic(c, TOPIC, args.partitions, 3, {"min.insync.replicas": "2"})
            wait_full_isr(c, TOPIC)
            stop_file = root / "probe.stop"
            probe = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    PROBE,
                    str(args.rate),
                    TOPIC,
                    str(args.partitions),
                    c.bootstrap(),
                    str(stop_file),
                    args.client_debug or "",
                    json.dumps(dict(kv.split("=", 1) for kv in args.producer_config)),
                ],
                stdout=subprocess.PIPE,
                stderr=open(root / "producer.log", "w"),  # librdkafka's log (kept with --keep)
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            time.sleep(5)  # warm-up: producer id, connections, metadata
            phase.load_before = loadavg()
            start = time.time()
            time.sleep(args.baseline)
            phase.baseline = (start, time.time())

            def mark(what: str) -> float:
                now = time.time()
                phase.marks.append((now, what))
                return now

            for i in range(args.moves):
                phase.moves.append(time.time())
                if args.scenario == "moves":
                    what = preferred_move(c, args.partitions, mark)
                else:
                    what = restart(c, i % 3, args.partitions, mark)
                phase.events.append(f"move {i + 1}: {what}  [load {loadavg()}]")
                time.sleep(args.interval)
            phase.end = time.time()
            phase.load_after = loadavg()
            stop_file.touch()
            out, _ = probe.communicate(timeout=300)
            probe = None
        finally:
            if probe is not None:
                probe.kill()
            c.stop()
    for line in out.splitlines():
        if line.startswith("["):
            phase.records.append(tuple(json.loads(line)))  # type: ignore[arg-type]
        elif line.startswith("{"):
            phase.stats.append(json.loads(line))
    return phase


def report(phase: Phase, args: argparse.Namespace) -> tuple[float, float]:
    lo, hi = phase.baseline
    before = phase.latencies(lo, hi)
    during = phase.latencies(phase.moves[0], phase.end)
    failed = sum(1 for sent, _, ok, _ in phase.records if not ok and sent >= lo)
    print(f"{phase.name}:")
    for line in phase.events:
        print("    " + line)
    print(f"  before the moves: {figures(before)}  [load {phase.load_before}]")
    print(f"  from the first  : {figures(during)}  [load {phase.load_after}]")
    ends = [*phase.moves[1:], phase.end]
    worst = [max(phase.latencies(t, end), default=float("nan")) for t, end in zip(phase.moves, ends, strict=True)]
    print("  slowest record of each move (sent until the next): " + ", ".join(f"{ms:.0f}" for ms in worst) + " ms")
    meta = phase.counted("metadata", phase.moves[0], phase.end)
    print(
        f"  producer's Metadata requests during the moves {meta:.0f}"
        f" (before: {phase.counted('metadata', lo, hi):.0f}), failed deliveries {failed}"
    )
    slow = [(sent, ms, part) for sent, ms, ok, part in phase.records if sent >= phase.moves[0] and ms > args.slow_ms]
    if args.verbose and slow:
        print(f"  records over {args.slow_ms:.0f} ms, by the last event before them (sent/delivered s after it):")
        for when, what in phase.marks:
            after = [x for x in slow if when <= x[0] < next((t for t, _ in phase.marks if t > when), phase.end)]
            if after:
                sent = [x[0] - when for x in after]
                done = [x[0] + x[1] / 1000 - when for x in after]
                print(
                    f"    {what:14s} {len(after):4d} records, sent {min(sent):.2f}-{max(sent):.2f} s,"
                    f" delivered {min(done):.2f}-{max(done):.2f} s, max {max(x[1] for x in after):.0f} ms,"
                    f" partitions {sorted({x[2] for x in after})}"
                )
    ratio = pct(during, 0.99) / pct(before, 0.99)
    print(f"  p99 ratio during/before {ratio:.2f} (target <= 3)")
    return pct(during, 0.99), pct(before, 0.99)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", choices=("moves", "restarts"), default="moves")
    ap.add_argument("--rate", type=float, default=200.0, help="records per second")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--baseline", type=float, default=20.0, help="seconds measured before the first move")
    ap.add_argument("--moves", type=int, default=8, help="leadership moves per phase (restarts: brokers restarted)")
    ap.add_argument("--interval", type=float, default=4.0, help="seconds after each move")
    ap.add_argument("--rounds", type=int, default=1, help="pairs of phases (with, without), alternating the order")
    ap.add_argument("--only", choices=("with", "without"), help="run the phases of one kind only")
    ap.add_argument("--verbose", action="store_true", help="where the slow records lie among the events")
    ap.add_argument("--slow-ms", type=float, default=50.0, help="what --verbose counts as slow")
    ap.add_argument("--keep", type=Path, help="run the clusters in this directory and keep their logs")
    ap.add_argument(
        "--producer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka setting for the producer (repeatable), e.g. retry.backoff.ms=10",
    )
    ap.add_argument("--client-debug", help="librdkafka debug contexts, logged to producer.log (see --keep)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the nodes have sessions of their own: stop them

    print(
        f"acks=all idempotent producer at {args.rate:.0f} records/s, linger.ms=0, {args.partitions} partitions RF=3,"
        f" scenario {args.scenario}: {args.moves} moves {args.interval:.0f} s apart"
        + (f", producer {' '.join(args.producer_config)}" if args.producer_config else "")
    )
    p99: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for rnd in range(args.rounds):
        for discovery in (True, False) if rnd % 2 == 0 else (False, True):
            if args.only is None or args.only == ("with" if discovery else "without"):
                p99[discovery].append(report(run_phase(args, discovery), args))
    for rnd in range(args.rounds if args.only is None else 0):
        (on, on_before), (off, off_before) = p99[True][rnd], p99[False][rnd]
        print(
            f"round {rnd + 1}: p99 during the moves without/with leader discovery {off:.0f}/{on:.0f} ms"
            f" = {off / on:.2f} (before the moves {off_before:.0f}/{on_before:.0f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
