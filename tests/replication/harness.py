"""Replication test harness: KRaft clusters (1 controller + N brokers, separate processes) with
short replication timeouts, Kafka's verifiable producer/consumer, and the loss/duplicate audit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "kraft"))

from cluster import Cluster, Node, request, run, wait_until
from kopfka import uuids

RUNNER = str(Path(__file__).parent / "kafkatest_run.py")

REPLICATION = {
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "5",
}


def new_cluster(root: Path, brokers: int = 3, props: dict[str, str] | None = None) -> Cluster:
    c = Cluster(root, 1, brokers, dynamic=True, props={**REPLICATION, **(props or {})})
    c.format_all()
    return c


def broker(c: Cluster, node_id: int) -> Node:
    return next(b for b in c.brokers if b.node_id == node_id)


async def _create(addr: str, name: str, partitions: int, rf: int, configs: dict[str, str],
                  assignments: dict[int, list[int]] | None) -> Any:
    body = {
        "timeout": 15000, "validate_only": False,
        "topics": [{
            "name": name,
            "num_partitions": -1 if assignments else partitions,
            "replication_factor": -1 if assignments else rf,
            "assignments": [{"partition_index": p, "broker_ids": b} for p, b in (assignments or {}).items()],
            "configs": [{"name": k, "value": v} for k, v in configs.items()],
        }],
    }
    resp = await request(addr, 19, 7, body, timeout=30)
    return resp.topics[0]


def create_topic(c: Cluster, name: str, partitions: int = 3, rf: int = 3, configs: dict[str, str] | None = None,
                 assignments: dict[int, list[int]] | None = None) -> None:
    t = run(_create(c.bootstrap().split(",")[0], name, partitions, rf, configs or {"min.insync.replicas": "2"},
                    assignments))
    assert int(t.error_code) == 0, t


@dataclass
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


def describe(c: Cluster, topic: str) -> dict[int, PartitionInfo]:
    """Partition state from the first live broker's Metadata answer."""
    last: Exception | None = None
    for b in c.brokers:
        if not b.alive:
            continue
        try:
            body = {"topics": [{"name": topic, "topic_id": uuids.ZERO_UUID}], "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False}
            resp = run(request(b.address, 3, 12, body, timeout=5))
            t = resp.topics[0]
            return {int(p.partition_index): PartitionInfo(int(p.leader_id), int(p.leader_epoch),
                                                          [int(x) for x in p.replica_nodes],
                                                          [int(x) for x in p.isr_nodes]) for p in t.partitions}
        except Exception as exc:
            last = exc
    raise RuntimeError(f"no broker answered Metadata: {last}")


def wait_full_isr(c: Cluster, topic: str, timeout: float = 60) -> dict[int, PartitionInfo]:
    def ok() -> dict[int, PartitionInfo] | None:
        d = describe(c, topic)
        good = d and all(sorted(p.isr) == sorted(p.replicas) and p.leader >= 0 for p in d.values())
        return d if good else None

    return wait_until(ok, timeout, f"every ISR of {topic} to be full", interval=0.3)  # type: ignore[no-any-return]


@dataclass
class VerifiableProducer:
    """Kafka's verifiable producer (acks=all, idempotent) writing value i = 0, 1, 2, ..."""

    bootstrap: str
    topic: str
    throughput: int = 300
    max_messages: int = 1_000_000
    acked: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # partition -> [(offset, value)]
    errors: list[str] = field(default_factory=list)
    proc: subprocess.Popen[str] | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    log: list[str] = field(default_factory=list)

    def start(self, log_path: Path) -> VerifiableProducer:
        args = [sys.executable, RUNNER, "producer", "--topic", self.topic, "--broker-list", self.bootstrap,
                "--throughput", str(self.throughput), "--max-messages", str(self.max_messages), "--acks", "-1",
                # the scripts pass on only -X keys prefixed conf_ (client config)
                "-X", "conf_enable.idempotence=true", "-X", "conf_linger.ms=5", "-X", "conf_retry.backoff.ms=100",
                "-X", "conf_message.timeout.ms=120000", "-X", "conf_topic.metadata.refresh.interval.ms=1000"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            name = ev.get("name")
            with self._lock:
                if name == "producer_send_success":
                    self.acked.setdefault(int(ev["partition"]), []).append((int(ev["offset"]), str(ev["value"])))
                elif name == "producer_send_error":
                    self.errors.append(str(ev.get("message")))

    @property
    def acked_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def wait_acked(self, n: int, timeout: float = 60) -> None:
        wait_until(lambda: self.acked_count >= n, timeout, f"{n} acknowledged records", interval=0.2)

    def stop(self, timeout: float = 30) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._thread is not None:
            self._thread.join(5)


def consume_all(bootstrap: str, topic: str, expected: int, log_path: Path, timeout: float = 90,
                idle_s: float = 5.0) -> dict[int, list[tuple[int, str]]]:
    """Kafka's verifiable consumer (verbose): every record it returns, per partition (offset, value)."""
    args = [sys.executable, RUNNER, "consumer", "--topic", topic, "--group-id", f"audit-{time.time_ns()}",
            "--broker-list", bootstrap, "--verbose", "--reset-policy", "earliest"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    got: dict[int, list[tuple[int, str]]] = {}
    count = [0]
    last = [time.monotonic()]

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("name") == "record_data":
                got.setdefault(int(ev["partition"]), []).append((int(ev["offset"]), str(ev["value"])))
                count[0] += 1
                last[0] = time.monotonic()

    th = threading.Thread(target=read, daemon=True)
    th.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if count[0] >= expected and time.monotonic() - last[0] > idle_s:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    th.join(5)
    return got


@dataclass
class Audit:
    acked: int
    consumed: int
    lost: int
    duplicated: int
    out_of_order: int
    lost_sample: list[tuple[int, int, str]]

    def line(self, scenario: str) -> str:
        return (f"[{scenario}] acked={self.acked} consumed={self.consumed} lost={self.lost} "
                f"duplicated={self.duplicated} out_of_order={self.out_of_order}")


def audit(acked: dict[int, list[tuple[int, str]]], consumed: dict[int, list[tuple[int, str]]]) -> Audit:
    """Lost: acked (partition, offset, value) never read. Duplicated: one value stored at two offsets
    (a producer retry written twice). Out of order: a partition's records not in offset order or its
    acked values not increasing with the offset."""
    lost: list[tuple[int, int, str]] = []
    dup = 0
    ooo = 0
    total_consumed = 0
    for recs in consumed.values():
        seen: dict[str, int] = {}
        offsets = [o for o, _ in recs]
        # a consumer may re-read after a rebalance: judge the log by distinct offsets
        by_offset = dict(recs)
        total_consumed += len(by_offset)
        for o, v in sorted(by_offset.items()):
            if v in seen and seen[v] != o:
                dup += 1
            seen.setdefault(v, o)
        if any(b < a for a, b in pairwise(offsets)):
            distinct = sorted(set(offsets))
            ooo += 0 if distinct == sorted(by_offset) else 1
        values = [int(v) for _, v in sorted(by_offset.items()) if v.isdigit()]
        ooo += sum(1 for a, b in pairwise(values) if b < a)
    n_acked = 0
    for p, recs in acked.items():
        by_offset = dict(consumed.get(p, []))
        for o, v in recs:
            n_acked += 1
            if by_offset.get(o) != v:
                lost.append((p, o, v))
    return Audit(n_acked, total_consumed, len(lost), dup, ooo, lost[:10])


def run_scenario(c: Cluster, topic: str, tmp: Path, scenario: str, disrupt: Callable[[VerifiableProducer], None],
                 *, throughput: int = 300) -> Audit:
    """Produce continuously, run the disruption, let the producer finish, then read everything back."""
    prod = VerifiableProducer(c.bootstrap(), topic, throughput=throughput).start(tmp / f"{scenario}-producer.log")
    try:
        prod.wait_acked(200, timeout=60)
        disrupt(prod)
        wait_full_isr(c, topic, timeout=90)
        before = prod.acked_count
        prod.wait_acked(before + 200, timeout=60)
    finally:
        prod.stop()
    total = prod.acked_count
    consumed = consume_all(c.bootstrap(), topic, total, tmp / f"{scenario}-consumer.log")
    result = audit(prod.acked, consumed)
    print(result.line(scenario), flush=True)
    if prod.errors:
        print(f"[{scenario}] producer errors: {len(prod.errors)}, e.g. {prod.errors[:3]}", flush=True)
    if result.lost:
        print(f"[{scenario}] lost sample (partition, offset, value): {result.lost_sample}", flush=True)
    return result
