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
# librdkafka debug lines worth reading when a worker fails: leader changes, delegation, txn errors
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
        self.argv = [sys.executable, str(WORKER), bootstrap, IN, OUT, GROUP, txn_id, str(self.progress), *extra]
        self.restarts = 0
        self.proc = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        return subprocess.Popen(self.argv, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, env=env)

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

    def wait_done(self, timeout: float = 180, *, restarts: int = 0) -> None:
        """Waits for the worker to finish. With `restarts`, a worker whose producer hit a fatal
        error (fenced after its own timeouts) is started again, as an exactly-once application
        replaces its producer: the new one fences the old and resumes from the committed offsets,
        and the audit still checks every record exactly once."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                rc = self.proc.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"worker still running after {timeout}s:\n{self.lines()[-5:]}") from None
            fatal = "FATAL" in self.log.read_text(errors="replace").split("== restarted ==")[-1]
            if rc != 0 and fatal and self.restarts < restarts:
                self.restarts += 1
                print(f"worker {self.progress.stem}: fatal producer error, restarted:\n{self.story()}", flush=True)
                with open(self.log, "a") as f:
                    f.write("== restarted ==\n")
                with open(self.progress, "a") as f:
                    f.write("restarted after a fatal error\n")
                self.proc = self._spawn()
                continue
            assert rc == 0, f"worker exited {rc}:\n{self.story()}"
            return


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
    expected = Counter(f"out-{i}" for i in range(n))
    committed = read_values("confluent", bootstrap, OUT, partitions, committed=True, timeout=60)
    missing = expected - Counter(committed)
    duplicated = Counter(committed) - expected
    if missing or duplicated:
        other = Counter(read_values("kafka-python", bootstrap, OUT, partitions, committed=True, timeout=60))
        wrong = {int(v.split("-")[1]) % partitions for v in [*missing, *duplicated]}  # out-<i> is in i % partitions
        history = "; ".join(worker.lines()) if worker is not None else "?"
        story = worker.story() if worker is not None else ""
        replicas = replica_report(node_dirs, OUT, wrong, [*missing, *duplicated])
        raise AssertionError(
            f"missing {sorted(missing)[:10]}, duplicated {sorted(duplicated)[:10]}\n"
            f"kafka-python read_committed: missing {sorted(expected - other)[:10]},"
            f" duplicated {sorted(other - expected)[:10]}\n"
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
