"""Kafka's verifiable producer and consumer (confluent_kafka.kafkatest, through kafkatest_run.py)
and the audit of what was acknowledged against what can be read back: lost, duplicated, out of
order. Shared by the replication gate (local processes) and the operator's e2e tests (the same
clients inside a pod: `command` is then a `kubectl exec` prefix).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

RUNNER = str(Path(__file__).parent / "replication" / "kafkatest_run.py")
LOCAL = (sys.executable, RUNNER)


@dataclass
class VerifiableProducer:
    """Kafka's verifiable producer (acks=all, idempotent) writing value i = 0, 1, 2, ..."""

    bootstrap: str
    topic: str
    throughput: int = 300
    max_messages: int = 1_000_000
    acked: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # partition -> [(offset, value)]
    errors: list[str] = field(default_factory=list)
    command: Sequence[str] = LOCAL  # how to run kafkatest_run.py
    proc: subprocess.Popen[str] | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    log: list[str] = field(default_factory=list)

    def start(self, log_path: Path) -> VerifiableProducer:
        args = [
            *self.command,
            "producer",
            "--topic",
            self.topic,
            "--broker-list",
            self.bootstrap,
            "--throughput",
            str(self.throughput),
            "--max-messages",
            str(self.max_messages),
            "--acks",
            "-1",
            # the scripts pass on only -X keys prefixed conf_ (client config)
            "-X",
            "conf_enable.idempotence=true",
            "-X",
            "conf_linger.ms=5",
            "-X",
            "conf_retry.backoff.ms=100",
            "-X",
            "conf_message.timeout.ms=120000",
            "-X",
            "conf_topic.metadata.refresh.interval.ms=1000",
        ]
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=open(log_path, "w"),
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
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
        deadline = time.monotonic() + timeout
        while self.acked_count < n:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {n} acknowledged records")
            time.sleep(0.2)

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


def consume_all(
    bootstrap: str,
    topic: str,
    expected: int,
    log_path: Path,
    timeout: float = 90,
    idle_s: float = 5.0,
    command: Sequence[str] = LOCAL,
) -> dict[int, list[tuple[int, str]]]:
    """Kafka's verifiable consumer (verbose): every record it returns, per partition (offset, value)."""
    args = [
        *command,
        "consumer",
        "--topic",
        topic,
        "--group-id",
        f"audit-{time.time_ns()}",
        "--broker-list",
        bootstrap,
        "--verbose",
        "--reset-policy",
        "earliest",
    ]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
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
        return (
            f"[{scenario}] acked={self.acked} consumed={self.consumed} lost={self.lost} "
            f"duplicated={self.duplicated} out_of_order={self.out_of_order}"
        )


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
