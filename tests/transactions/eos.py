"""Driving eos_worker.py processes and auditing their output: every input record exactly once
in what read_committed sees, the killed transactions' records present but aborted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from transactions.forensics import replica_report
from transactions.helpers import read_values

WORKER = Path(__file__).with_name("eos_worker.py")
IN, OUT, GROUP, TXN_ID = "eos-in", "eos-out", "eos-g", "eos-tx"
# librdkafka debug lines worth reading when a worker fails: leader changes, delegation, txn states
STORY = re.compile(r"\|(LEADER|BRKDELGT|TXNERR|PIDSTATE)\||Error|error|timed out|fenced")
DEBUG = ("--debug", "metadata,topic,eos")  # about 15% slower than without (28 -> 33 s in test_txn_cluster)


def feed(bootstrap: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(n):
        p.produce(IN, value=str(i).encode(), partition=i % partitions)
    assert p.flush(60) == 0


class Worker:
    def __init__(self, bootstrap: str, root: Path, label: str, txn_id: str = TXN_ID, *extra: str) -> None:
        self.progress = root / f"{label}.progress"
        self.log = root / f"{label}.log"
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), bootstrap, IN, OUT, GROUP, txn_id, str(self.progress), *extra],
            stdout=open(self.log, "ab"),
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def lines(self) -> list[str]:
        try:
            return self.progress.read_text().splitlines()
        except FileNotFoundError:
            return []

    def wait_for(self, line: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while line not in self.lines():
            assert self.proc.poll() is None, f"worker exited {self.proc.returncode}:\n{self.story()}"
            assert time.monotonic() < deadline, f"worker never logged {line!r}:\n{self.lines()[-5:]}"
            time.sleep(0.05)

    def story(self, lines: int = 120) -> str:
        """The worker's log without librdkafka's debug chatter: which broker it sent each
        partition to and why (run with --debug metadata,topic,eos), and every error."""
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return "(no worker log)"
        kept = [line for line in text.splitlines() if not line.startswith("%7|") or STORY.search(line)]
        return "\n".join(kept[-lines:])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def wait_done(self, timeout: float = 180) -> None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"worker still running after {timeout}s:\n{self.lines()[-5:]}") from None
        assert rc == 0, f"worker exited {rc}:\n{self.story()}"


def audit(
    bootstrap: str,
    n: int,
    partitions: int,
    *,
    aborted_in_log: bool = False,
    node_dirs: Iterable[Path] = (),
    worker: Worker | None = None,
) -> None:
    """Exactly once in what read_committed delivers. On a failure it says more: what a second
    client (kafka-python) reads, the worker's history, and each replica of the partitions
    concerned as it lies on disk (`node_dirs`)."""
    committed = read_values("confluent", bootstrap, OUT, partitions, committed=True, timeout=60)
    missing = Counter(f"out-{i}" for i in range(n)) - Counter(committed)
    duplicated = Counter(committed) - Counter(f"out-{i}" for i in range(n))
    if missing or duplicated:
        other = Counter(read_values("kafka-python", bootstrap, OUT, partitions, committed=True, timeout=60))
        wrong = {int(v.split("-")[1]) % partitions for v in [*missing, *duplicated]}  # out-<i> is in i % partitions
        history = "; ".join(worker.lines()) if worker is not None else "?"
        story = worker.story() if worker is not None else ""
        replicas = replica_report(node_dirs, OUT, wrong, [*missing, *duplicated])
        raise AssertionError(
            f"missing {sorted(missing)[:10]}, duplicated {sorted(duplicated)[:10]}\n"
            f"kafka-python read_committed: missing {sorted(Counter(f'out-{i}' for i in range(n)) - other)[:10]},"
            f" duplicated {sorted(other - Counter(f'out-{i}' for i in range(n)))[:10]}\n"
            f"worker: {history}\n{story}\n{replicas}"
        )
    if aborted_in_log:
        everything = read_values("confluent", bootstrap, OUT, partitions, committed=False, timeout=60)
        assert len(everything) > n, "the killed transaction's records are in the log (aborted)"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        offsets = c.committed([TopicPartition(IN, p) for p in range(partitions)], 30)
        ends = [c.get_watermark_offsets(TopicPartition(IN, p), 30)[1] for p in range(partitions)]
    finally:
        c.close()
    assert [tp.offset for tp in offsets] == ends, "the input offsets were committed with the output"
