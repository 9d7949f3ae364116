"""kopfka beside Apache Kafka 4.3 (issue 18): one run, the same client (confluent-kafka), the same
machine, each figure for both brokers and as a ratio kopfka/Kafka.

  produce   records/s and MB/s, 1 KiB and 100 B records, acks=1 and acks=all (target >= 0.8)
  fetch     MB/s reading a topic of 64 KiB records from the start with a consumer, so the
            consumer's per-record Python work does not bound the figure; the median of
            --fetch-rounds reads (target >= 0.8)
  latency   end-to-end p50/p99 (produce call -> consumer receives) at a fixed rate, half of the
            lower 1 KiB acks=1 produce rate (p99 target <= 1.0)
  cluster   3 combined nodes, RF=3 topic, acks=all produce (target >= 0.8)
  cpu       broker CPU seconds per GB moved over the produce and fetch phases
  rss       broker resident memory after the load (target <= 0.25)
  cold      spawn -> first answered Metadata on a freshly formatted node, the median of
            --cold-starts starts of each broker, alternated (target <= 0.1); kopfka as installed
            by the test command and the image, with its compiled dataclass methods cached
            (kopfka.dataclass_cache: warmed first; --cold-uncached times it without them)
  restart   SIGKILL with --restart-gib of segments on disk -> first answered Metadata

Kafka runs with its own start-script JVM settings (1 GiB heap, G1). Usage:
  python benchmarks/vs_kafka.py [--records 200000] [--restart-gib 10] [--skip cluster,restart]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [
    str(HERE.parent / "tests" / "kafkaref"),
    str(HERE.parent / "tests"),
    str(HERE.parent / "tests" / "kraft"),
]

import pace  # noqa: E402  (benchmarks/pace.py)
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka_ref import SERVER_JVM_KAFKA_DEFAULTS, KafkaCluster, KafkaUnavailable, kafka_home  # noqa: E402
from kopfka_process import KopfkaProcess, free_port  # noqa: E402

TARGETS = {
    "produce": (">=", 0.8),
    "fetch": (">=", 0.8),
    "p99": ("<=", 1.0),
    "rss": ("<=", 0.25),
    "cold": ("<=", 0.1),
    "cluster": (">=", 0.8),
}


# --- process figures ---------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mib(pid: int) -> tuple[float, float]:
    status = dict(ln.split(":", 1) for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in ln)
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def wait_metadata(bootstrap: str, timeout: float = 120) -> float:
    """Seconds until the broker answers a Metadata request listing itself."""
    t0 = time.monotonic()
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.connection.setup.timeout.ms": 1000,
            # the client retries a refused connection every 5-10 ms: the figure's resolution
            "reconnect.backoff.max.ms": 10,
            "reconnect.backoff.ms": 5,
        }
    )
    while time.monotonic() - t0 < timeout:
        try:
            if admin.list_topics(timeout=1).brokers:
                return time.monotonic() - t0
        except Exception:
            time.sleep(0.02)
    raise TimeoutError(f"{bootstrap} did not answer Metadata in {timeout}s")


# --- the two brokers ---------------------------------------------------------------------------
class Broker:
    """One broker under test: how to start it, where it listens, which process to measure."""

    def __init__(
        self,
        name: str,
        start: Callable[[], Any],
        bootstrap: Callable[[Any], str],
        pids: Callable[[Any], list[int]],
        kill: Callable[[Any], None],
    ) -> None:
        self.name, self._start, self._bootstrap, self._pids, self._kill = name, start, bootstrap, pids, kill
        self.handle: Any = None

    def start(self) -> float:
        t0 = time.monotonic()
        self.handle = self._start()
        wait_metadata(self.bootstrap)
        return time.monotonic() - t0

    @property
    def bootstrap(self) -> str:
        return self._bootstrap(self.handle)

    @property
    def pids(self) -> list[int]:
        return self._pids(self.handle)

    def cpu(self) -> float:
        return sum(cpu_seconds(p) for p in self.pids)

    def kill(self) -> None:
        if self.handle is not None:
            self._kill(self.handle)


def kafka_single(root: Path) -> Broker:
    cluster = KafkaCluster(root, 1).format()

    def start() -> KafkaCluster:
        for n in cluster.nodes:
            n.start(SERVER_JVM_KAFKA_DEFAULTS)
        return cluster

    return Broker("Kafka", start, lambda c: c.bootstrap, lambda c: [n.proc.pid for n in c.nodes], lambda c: c.kill())


def kopfka_single(root: Path) -> Broker:
    port = free_port()
    proc = KopfkaProcess(root / "data", port=port)

    def start() -> KopfkaProcess:
        proc.log_path.parent.mkdir(parents=True, exist_ok=True)
        proc.proc = subprocess.Popen(proc.command(), stdout=open(proc.log_path, "ab"), stderr=subprocess.STDOUT)
        return proc

    return Broker("kopfka", start, lambda p: p.bootstrap, lambda p: [p.proc.pid], lambda p: p.kill())


# --- workloads ------------------------------------------------------------------------------------
def create_topic(bootstrap: str, topic: str, partitions: int, rf: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf, config=config)])[topic].result(60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=5).topics.get(topic)
        if t is not None and t.error is None and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> float:
    """Records/s for n records of `size` bytes (after a 2,000-record warm-up)."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "enable.idempotence": acks == "all",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1 << 20,
        }
    )
    payload = os.urandom(size)
    for _ in range(2000):
        p.produce(topic, payload)
    p.flush(120)
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.005)
    left = p.flush(600)
    dt = time.perf_counter() - t0
    assert left == 0, f"{left} records undelivered"
    return n / dt


def fetch(bootstrap: str, topic: str, partitions: int, expect: int) -> float:
    """Bytes/s of one consumer reading `expect` records from the start; the consumer connects
    and learns the partitions first (assigned at the end), so only the reading is timed."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.time_ns()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            "queued.max.messages.kbytes": 1048576,
        }
    )
    c.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    for _ in range(3):
        c.consume(100, 0.3)
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = size = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 600
    while got < expect and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
                size += len(m.value() or b"")
    dt = time.perf_counter() - t0
    c.close()
    assert got >= expect, f"read {got} of {expect}"
    return size / dt


def latency(bootstrap: str, topic: str, rate: float, seconds: float) -> tuple[float, float]:
    """End-to-end p50/p99 ms at `rate` records/s of 1 KiB (acks=1)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{time.time_ns()}",
            "fetch.wait.max.ms": 100,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, 0, -1)])  # from the end
    lat: list[float] = []
    done = threading.Event()

    def consume() -> None:
        while not done.is_set():
            for m in c.consume(1000, 0.1):
                if m.error() is None and m.value():
                    lat.append((time.perf_counter() - struct.unpack(">d", m.value()[:8])[0]) * 1000)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(2)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    pad = bytes(1016)
    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        pace.wait_until(p, t0 + i / rate)  # sleeps: a poll(<1 ms) loop would spin a core
        p.produce(topic, struct.pack(">d", time.perf_counter()) + pad, partition=0)
    p.flush(60)
    time.sleep(2)
    done.set()
    t.join()
    c.close()
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1]


def fill(bootstrap: str, topic: str, gib: float) -> None:
    """Write `gib` GiB as 512 KiB records (acks=1) to one partition; every record must be
    acknowledged. (1 MiB records, used until 2026-11-29, exceed both brokers' default
    message.max.bytes of 1 MiB + 12 B once framed: every one was refused, so the restart figures
    measured empty logs.)"""
    failed: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.kbytes": 1 << 21,
        }
    )
    payload = os.urandom(1 << 19)
    for _ in range(int(gib * 2048)):
        while True:
            try:
                p.produce(topic, payload, partition=0, on_delivery=report)
                break
            except BufferError:
                p.poll(0.01)
        if failed:
            raise RuntimeError(f"fill: a record was refused: {failed[0]}")
    assert p.flush(1800) == 0
    if failed:
        raise RuntimeError(f"fill: {len(failed)} records refused, the first: {failed[0]}")


# --- the run ------------------------------------------------------------------------------------
def ratio_line(what: str, unit: str, kafka: float, kopfka: float, target: str | None = None) -> str:
    r = kopfka / kafka if kafka else float("nan")
    verdict = ""
    if target in TARGETS:
        op, bound = TARGETS[target]
        ok = r >= bound if op == ">=" else r <= bound
        verdict = f"  target {op} {bound}: {'met' if ok else 'MISSED'}"
    return f"{what:<44} Kafka {kafka:>12.2f} {unit:<8} kopfka {kopfka:>12.2f} {unit:<8} ratio {r:6.3f}{verdict}"


def single_node(args: argparse.Namespace, root: Path, lines: list[str]) -> None:
    figures: dict[str, dict[str, float]] = {}
    brokers = [kafka_single(root / "kafka"), kopfka_single(root / "kopfka")]
    rounds: dict[str, list[float]] = {b.name: [] for b in brokers}
    for b in brokers:  # one broker at a time: they would share the two cores otherwise
        f = figures.setdefault(b.name, {})
        print(f"== {b.name}", flush=True)
        os.sync()  # the previous broker's ~2 GB of dirty pages are not written back during this one's run
        b.start()
        try:
            create_topic(b.bootstrap, "warmup", 3)  # JIT and page cache: neither broker is timed cold
            produce(b.bootstrap, "warmup", args.records // 4, 1024, "1")
            cpu0, moved = b.cpu(), 0
            for size, acks in ((1024, "1"), (1024, "all"), (100, "1"), (100, "all")):
                topic = f"p{size}-{acks}"
                create_topic(b.bootstrap, topic, 3)
                n = args.records if size == 100 else args.records // 4
                f[f"produce {size} {acks}"] = produce(b.bootstrap, topic, n, size, acks)
                moved += (n + 2000) * size
                print(f"   produce {size} B acks={acks}: {f[f'produce {size} {acks}']:.0f} rec/s", flush=True)
            # fetch: 64 KiB records, so the consumer's per-record Python work does not bound the figure
            create_topic(b.bootstrap, "fetch", 3)
            nf = args.fetch_mib * 16  # 64 KiB records
            produce(b.bootstrap, "fetch", nf, 64 * 1024, "1")
            # the median of --fetch-rounds reads: the reader, not the broker, sets this figure
            # (kopfka's broker was ~7% busy at 300 MB/s, Kafka's ~12%), and one read moved by up to
            # 1.7x (184-318 MB/s in one run; kopfka's first read after its produce phases the slowest)
            os.sync()  # nor its own, during the reads
            for _ in range(args.fetch_rounds):
                rounds[b.name].append(fetch(b.bootstrap, "fetch", 3, nf + 2000))
            moved += (nf + 2000) * 64 * 1024 * (1 + args.fetch_rounds)
            f["cpu/GB"] = (b.cpu() - cpu0) / (moved / 1e9)
            f["rss"], f["hwm"] = (sum(x) for x in zip(*(rss_mib(p) for p in b.pids), strict=True))
            print(f"   cpu {f['cpu/GB']:.1f} s/GB, rss {f['rss']:.0f} MiB", flush=True)
        finally:
            b.kill()
    for b in brokers:
        figures[b.name]["fetch"] = statistics.median(rounds[b.name])
        print(f"   {b.name} fetch rounds: " + ", ".join(f"{r / 1e6:.0f}" for r in rounds[b.name]) + " MB/s", flush=True)
    rate = 0.5 * min(figures[b.name]["produce 1024 1"] for b in brokers)
    rate = min(rate, args.max_latency_rate)
    for b in brokers:  # latency on a fresh process, alone on the machine
        b.start()
        try:
            create_topic(b.bootstrap, "lat", 1)
            figures[b.name]["p50"], figures[b.name]["p99"] = latency(b.bootstrap, "lat", rate, args.latency_seconds)
        finally:
            b.kill()
    k, o = figures["Kafka"], figures["kopfka"]
    for size, acks in ((1024, "1"), (1024, "all"), (100, "1"), (100, "all")):
        key = f"produce {size} {acks}"
        lines.append(ratio_line(f"produce {size} B acks={acks}", "rec/s", k[key], o[key], "produce"))
        lines.append(ratio_line(f"produce {size} B acks={acks}", "MB/s", k[key] * size / 1e6, o[key] * size / 1e6))
    lines.append(ratio_line("fetch 64 KiB records (consumer)", "MB/s", k["fetch"] / 1e6, o["fetch"] / 1e6, "fetch"))
    lines.append(ratio_line(f"e2e latency p50 at {rate:.0f} rec/s", "ms", k["p50"], o["p50"]))
    lines.append(ratio_line(f"e2e latency p99 at {rate:.0f} rec/s", "ms", k["p99"], o["p99"], "p99"))
    lines.append(ratio_line("broker CPU per GB moved", "s/GB", k["cpu/GB"], o["cpu/GB"]))
    lines.append(ratio_line("broker RSS after the load", "MiB", k["rss"], o["rss"], "rss"))
    lines.append(ratio_line("broker peak RSS (VmHWM)", "MiB", k["hwm"], o["hwm"]))


def cold_starts(args: argparse.Namespace, root: Path, lines: list[str]) -> None:
    """Median of fresh starts, alternating the brokers: one start moves by +-20% on a shared
    machine, and the target is a ratio of two such figures."""
    from kopfka import dataclass_cache

    if not args.cold_uncached and dataclass_cache.warm() != 0:
        raise RuntimeError("could not warm kopfka's dataclass method cache")
    times: dict[str, list[float]] = {"Kafka": [], "kopfka": []}
    before = os.environ.get("KOPFKA_DATACLASS_CACHE")
    if args.cold_uncached:
        os.environ["KOPFKA_DATACLASS_CACHE"] = "off"  # the nodes spawned below inherit it
    try:
        for i in range(args.cold_starts):
            for b in (kafka_single(root / f"kafka-c{i}"), kopfka_single(root / f"kopfka-c{i}")):
                try:
                    times[b.name].append(b.start())
                finally:
                    b.kill()
    finally:
        if before is None:
            os.environ.pop("KOPFKA_DATACLASS_CACHE", None)
        else:
            os.environ["KOPFKA_DATACLASS_CACHE"] = before
    k, o = statistics.median(times["Kafka"]), statistics.median(times["kopfka"])
    cached = "uncached" if args.cold_uncached else "dataclass methods cached"
    what = f"cold start, median of {args.cold_starts} (fresh node -> Metadata; kopfka {cached})"
    lines.append(ratio_line(what, "s", k, o, "cold"))
    for name, ts in times.items():
        lines.append(f"    {name} cold starts: " + ", ".join(f"{t:.2f}" for t in ts) + " s")
    floor = statistics.median(python_floor() for _ in range(args.cold_starts))
    lines.append(
        f"    of kopfka's, the interpreter's own start with site-packages and asyncio: {floor:.2f} s "
        f"(a tenth of Kafka's figure leaves {k / 10 - floor:.2f} s for the broker)"
    )


def python_floor() -> float:
    """Seconds for this interpreter to start, import asyncio and exit: the part of kopfka's cold
    start no broker code can remove."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import asyncio"], check=True)
    return time.monotonic() - t0


def latency_only(args: argparse.Namespace, root: Path, lines: list[str]) -> None:
    figures: dict[str, tuple[float, float]] = {}
    for b in (kafka_single(root / "kafka-l"), kopfka_single(root / "kopfka-l")):
        b.start()
        try:
            create_topic(b.bootstrap, "lat", 1)
            latency(b.bootstrap, "lat", args.latency_rate, 3)  # warm-up
            figures[b.name] = latency(b.bootstrap, "lat", args.latency_rate, args.latency_seconds)
        finally:
            b.kill()
    (k50, k99), (o50, o99) = figures["Kafka"], figures["kopfka"]
    lines.append(ratio_line(f"e2e latency p50 at {args.latency_rate:.0f} rec/s", "ms", k50, o50))
    lines.append(ratio_line(f"e2e latency p99 at {args.latency_rate:.0f} rec/s", "ms", k99, o99, "p99"))


def three_nodes(args: argparse.Namespace, root: Path, lines: list[str]) -> None:
    from kopfka import uuids
    from test_combined_mode import CombinedNode

    rates = {}
    kafka = KafkaCluster(root / "kafka3", 3).format()
    for n in kafka.nodes:
        n.start(SERVER_JVM_KAFKA_DEFAULTS)
    try:
        for n in kafka.nodes:
            n.wait_ready(180)
        create_topic(kafka.bootstrap, "rf3", 3, rf=3, **{"min.insync.replicas": "2"})
        rates["Kafka"] = produce(kafka.bootstrap, "rf3", args.records // 4, 1024, "all")
    finally:
        kafka.kill()
    nodes = [CombinedNode(root / "kopfka3", i, f"127.0.0.{31 + i}") for i in range(3)]
    quorum = {"controller.quorum.bootstrap.servers": ",".join(n.controller_address for n in nodes)}
    initial = ",".join(f"{n.node_id}@{n.controller_address}:{n.directory_id}" for n in nodes)
    cluster_id = uuids.to_str(uuids.random_uuid())
    try:
        for n in nodes:
            n.write_config(quorum)
            assert n.format(cluster_id, "--initial-controllers", initial).returncode == 0
            n.start()
        for n in nodes:
            n.wait_ready(120)
        bootstrap = ",".join(n.address for n in nodes)
        create_topic(bootstrap, "rf3", 3, rf=3, **{"min.insync.replicas": "2"})
        rates["kopfka"] = produce(bootstrap, "rf3", args.records // 4, 1024, "all")
    finally:
        for n in nodes:
            n.kill()
    lines.append(ratio_line("3 nodes, RF=3, acks=all, 1 KiB", "rec/s", rates["Kafka"], rates["kopfka"], "cluster"))


def restart(args: argparse.Namespace, root: Path, lines: list[str]) -> None:
    times = {}
    for data, b in (("kafka-r", kafka_single(root / "kafka-r")), ("kopfka-r", kopfka_single(root / "kopfka-r"))):
        b.start()
        try:
            create_topic(b.bootstrap, "big", 1, **{"segment.bytes": str(1 << 30)})
            t0 = time.monotonic()
            fill(b.bootstrap, "big", args.restart_gib)
            on_disk = sum(f.stat().st_size for f in (root / data).rglob("big-0/*.log"))
            print(
                f"   {b.name}: wrote {args.restart_gib} GiB in {time.monotonic() - t0:.0f} s "
                f"({on_disk / 2**30:.2f} GiB of big-0 segments on disk)",
                flush=True,
            )
        finally:
            b.kill()  # SIGKILL: an unclean shutdown
        times[b.name] = b.start()
        try:
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "restart-check"})
            _, end = c.get_watermark_offsets(TopicPartition("big", 0), timeout=60)
            c.close()
        finally:
            b.kill()
        shutil.rmtree(root / data, ignore_errors=True)
        written = int(args.restart_gib * 2048)
        print(f"   {b.name}: restarted in {times[b.name]:.2f} s, end offset {end} of {written} written", flush=True)
        if end != written:
            raise RuntimeError(f"{b.name} came back with {end} of {written} acknowledged records")
    lines.append(
        ratio_line(f"restart after SIGKILL, {args.restart_gib} GiB on disk", "s", times["Kafka"], times["kopfka"])
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="100 B records per produce run (1 KiB: a quarter)")
    ap.add_argument("--fetch-mib", type=int, default=512, help="MiB of 64 KiB records for the fetch phase")
    ap.add_argument("--fetch-rounds", type=int, default=3, help="timed fetch reads of each broker (the median)")
    ap.add_argument("--latency-seconds", type=float, default=15)
    ap.add_argument(
        "--max-latency-rate",
        type=float,
        default=5_000,
        help="cap on the latency rate (the Python producer's pacing loop holds ~5k rec/s steadily)",
    )
    ap.add_argument("--restart-gib", type=float, default=10)
    ap.add_argument("--latency-rate", type=float, default=0, help="only the latency comparison, at this rate")
    ap.add_argument("--cold-starts", type=int, default=5, help="fresh starts of each broker for the cold figure")
    ap.add_argument(
        "--cold-uncached", action="store_true", help="kopfka's cold starts without its dataclass method cache"
    )
    ap.add_argument("--skip", default="", help="comma-separated: single,cold,cluster,restart")
    ap.add_argument("--dir", type=Path, default=None, help="where the brokers write (default: a temp dir)")
    args = ap.parse_args()
    try:
        kafka_home()
    except KafkaUnavailable as exc:
        print(f"Apache Kafka unavailable: {exc}")
        return 2
    skip = set(filter(None, args.skip.split(",")))
    root = Path(tempfile.mkdtemp(prefix="vs-kafka-", dir=args.dir))
    lines: list[str] = []
    try:
        if args.latency_rate:
            latency_only(args, root, lines)
        elif "single" not in skip:
            single_node(args, root, lines)
        if "cold" not in skip and not args.latency_rate:
            cold_starts(args, root, lines)
        if "cluster" not in skip:
            three_nodes(args, root, lines)
        if "restart" not in skip:
            restart(args, root, lines)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nkopfka vs Apache Kafka {os.environ.get('KAFKA_VERSION', '4.3.1')} (same client, same machine, one run)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
