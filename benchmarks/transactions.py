"""Transactions benchmark (issue 16) on a real `kopfka serve`:

  (1) throughput (records acknowledged per second over --seconds) of a transactional
      confluent-kafka producer committing every --interval-ms (100 ms), against the same producer
      without transactions (idempotent, acks=all) measured in the same run: the ratio, target
      >= 0.8;
  (2) commit latency (commit_transaction: flush of the transaction's last records, EndTxn,
      PrepareCommit written; the markers follow asynchronously) p50 / p99.

With --kafka the same two measurements run against Apache Kafka 4.3 (scripts/get-kafka) for
reference figures.

Usage: python benchmarks/transactions.py [--seconds 5] [--rounds 3] [--size 100] [--partitions 4]
                                         [--interval-ms 100] [--rate 0] [--kafka]

Unpaced, both producers run as fast as the Python produce loop goes, so a ratio near or above 1
says the client loop is the limit, not the broker; --rate N paces both at N records/s (below that
limit) so the comparison shows what transactions cost at the same offered load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "tests" / "kafkaref"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kopfka_process import KopfkaProcess  # noqa: E402

COMMON = {"linger.ms": 5, "batch.size": 262144, "queue.buffering.max.messages": 1_000_000, "acks": "all"}


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future resolves
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _produce(p: Producer, topic: str, payload: bytes) -> None:
    while True:
        try:
            p.produce(topic, payload)
            return
        except BufferError:
            p.poll(0.01)


def _pace(t0: float, n: int, rate: float, p: Producer) -> None:
    """Holds the loop at `rate` records/s (0: as fast as it goes), serving callbacks meanwhile."""
    if rate:
        while n >= rate * (time.perf_counter() - t0):
            p.poll(0.001)


def plain(bootstrap: str, topic: str, seconds: float, size: int, rate: float = 0) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **COMMON})
    payload = b"x" * size
    for _ in range(2000):  # warm-up: producer id, metadata, connections
        _produce(p, topic, payload)
    p.flush(60)
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        _pace(t0, n, rate, p)
        _produce(p, topic, payload)
        p.poll(0)
        n += 1
    assert p.flush(300) == 0
    return n / (time.perf_counter() - t0)


def transactional(
    bootstrap: str, topic: str, seconds: float, size: int, interval_ms: int, rate: float = 0
) -> tuple[float, list[float]]:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{time.time_ns()}", **COMMON})
    p.init_transactions(60)
    payload = b"x" * size
    p.begin_transaction()  # warm-up transaction
    for _ in range(2000):
        _produce(p, topic, payload)
    p.commit_transaction(60)
    commits: list[float] = []
    sent = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        p.begin_transaction()
        until = time.perf_counter() + interval_ms / 1000
        while time.perf_counter() < until:
            _pace(t0, sent, rate, p)
            _produce(p, topic, payload)
            p.poll(0)
            sent += 1
        c0 = time.perf_counter()
        p.commit_transaction(60)
        commits.append((time.perf_counter() - c0) * 1000)
    return sent / (time.perf_counter() - t0), commits


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def measure(label: str, bootstrap: str, args: argparse.Namespace) -> float:
    create_topic(bootstrap, "bench-plain", args.partitions)
    create_topic(bootstrap, "bench-txn", args.partitions)
    bases, txns, commits = [], [], []
    for _ in range(args.rounds):  # alternated, medians: the machine is shared
        bases.append(plain(bootstrap, "bench-plain", args.seconds, args.size, args.rate))
        rate, lat = transactional(bootstrap, "bench-txn", args.seconds, args.size, args.interval_ms, args.rate)
        txns.append(rate)
        commits.extend(lat)
    base, txn = statistics.median(bases), statistics.median(txns)
    ratio = txn / base
    print(f"[{label}] without transactions: {base:,.0f} records/s (median of {', '.join(f'{b:,.0f}' for b in bases)})")
    print(
        f"[{label}] transactional, commit every {args.interval_ms} ms: {txn:,.0f} records/s "
        f"(median of {', '.join(f'{t:,.0f}' for t in txns)}; {len(commits)} transactions)"
    )
    paced = f", both paced at {args.rate:,.0f} records/s" if args.rate else ", unpaced"
    print(f"[{label}] ratio {ratio:.2f} (target >= 0.8{paced})")
    print(
        f"[{label}] commit latency p50 {statistics.median(commits):.1f} ms, p99 {pct(commits, 0.99):.1f} ms, "
        f"max {max(commits):.1f} ms"
    )
    return ratio


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5, help="length of each measurement")
    ap.add_argument("--rounds", type=int, default=3, help="alternating measurements of each kind")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--interval-ms", type=int, default=100)
    ap.add_argument(
        "--rate",
        type=float,
        default=0,
        help="pace both producers at this many records/s (0: unpaced); below the client loop's own limit the "
        "ratio then shows what transactions cost the broker, not the Python produce loop",
    )
    ap.add_argument("--kafka", action="store_true", help="also measure Apache Kafka 4.3 for reference")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kopfka-txn-bench-") as tmp:
        k = KopfkaProcess(Path(tmp) / "data").start()
        try:
            ratio = measure("kopfka", k.bootstrap, args)
        finally:
            k.kill()
        if args.kafka:
            from kafka_ref import KafkaCluster

            cluster = KafkaCluster(Path(tmp) / "kafka").format()
            try:
                cluster.start()
                measure("kafka 4.3", cluster.bootstrap, args)
            finally:
                cluster.kill()
    return 0 if ratio >= 0.8 else 1


if __name__ == "__main__":
    sys.exit(main())
