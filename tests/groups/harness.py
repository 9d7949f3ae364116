"""Helpers for the group tests: consumer worker processes, their event logs, ownership checks."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("consumer_worker.py")


@dataclass
class Worker:
    client: str
    bootstrap: str
    topic: str
    group: str
    events_path: Path
    label: str
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    killed_at: float | None = None

    def start(self) -> Worker:
        log = open(self.events_path.with_suffix(".log"), "ab")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), self.client, self.bootstrap, self.topic, self.group, str(self.events_path),
             "--label", self.label, *self.extra],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return self

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM: the worker reports owning nothing, then closes (leaves the group)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"worker {self.label} did not stop: {self.output()[-3000:]}") from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.killed_at = time.time()
            self.proc.kill()
            self.proc.wait(10)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        try:
            return self.events_path.with_suffix(".log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def events(self) -> list[dict[str, Any]]:
        try:
            lines = self.events_path.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line being written
        return out

    def owned(self) -> set[int]:
        owns = [e for e in self.events() if e["ev"] == "own"]
        return set(owns[-1]["parts"]) if owns and self.alive else set()

    def records(self) -> list[tuple[int, int]]:
        return [(e["p"], e["o"]) for e in self.events() if e["ev"] == "rec"]


def wait_for(pred: Callable[[], bool], timeout: float, what: str, diag: Callable[[], str] = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{diag()}")


def balanced(workers: Iterable[Worker], partitions: int) -> bool:
    """Every live worker owns a fair share; together they own each partition exactly once."""
    live = [w for w in workers if w.alive]
    owned = [w.owned() for w in live]
    if not live or sorted(p for o in owned for p in o) != list(range(partitions)):
        return False
    return max(len(o) for o in owned) - min(len(o) for o in owned) <= 1


def describe(workers: Iterable[Worker]) -> str:
    return "\n".join(f"{w.label} alive={w.alive} owned={sorted(w.owned())}\n{w.output()[-1500:]}" for w in workers)


def ownership_intervals(workers: Iterable[Worker]) -> dict[int, list[tuple[float, float, str]]]:
    """partition -> [(start, end, worker)] from each worker's own-events (end = next change,
    the SIGKILL time, or the worker's last event)."""
    out: dict[int, list[tuple[float, float, str]]] = {}
    for w in workers:
        evs = w.events()
        end_of_life = w.killed_at or (evs[-1]["t"] if evs else 0.0)
        since: dict[int, float] = {}
        for e in evs:
            if e["ev"] != "own":
                continue
            now = set(e["parts"])
            for p in list(since):
                if p not in now:
                    out.setdefault(p, []).append((since.pop(p), e["t"], w.label))
            for p in now:
                since.setdefault(p, e["t"])
        for p, start in since.items():
            out.setdefault(p, []).append((start, end_of_life, w.label))
    return out


def assert_no_double_ownership(workers: Iterable[Worker]) -> int:
    """No partition is owned by two workers at once; returns the number of ownership intervals."""
    total = 0
    for p, ivs in ownership_intervals(workers).items():
        ivs.sort()
        total += len(ivs)
        for (s1, e1, w1), (s2, _e2, w2) in itertools.pairwise(ivs):
            assert s2 >= e1, f"partition {p} owned by {w1} [{s1:.3f}, {e1:.3f}) and {w2} from {s2:.3f}"
    return total


class Producer:
    """confluent-kafka producer sending to explicit partitions; remembers acknowledged offsets."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer as CkProducer

        self.p = CkProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
        self.acked: set[tuple[int, int]] = set()
        self.errors: list[str] = []
        self.n = 0

    def _cb(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.add((msg.partition(), msg.offset()))

    def send(self, topic: str, count: int, partitions: int) -> None:
        for _ in range(count):
            self.p.produce(topic, value=str(self.n).encode(), partition=self.n % partitions, on_delivery=self._cb)
            self.n += 1
            self.p.poll(0)
        assert self.p.flush(30) == 0
        assert not self.errors, self.errors


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = admin.list_consumer_group_offsets([req])[group].result(30)
    return {tp.partition: tp.offset for tp in res.topic_partitions}
