"""Shared helpers for the log-management tests: a broker tuned for fast background tasks,
topic creation, keyed produce and whole-topic reads with confluent-kafka, raw requests."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kopfka.client.connection import KafkaConnection
from kopfka_process import KopfkaProcess

SEGMENT_BYTES = 1024 * 1024  # the smallest segment.bytes Kafka accepts

FAST = {
    "num.partitions": "1",
    "log.initial.task.delay.ms": "0",
    "log.retention.check.interval.ms": "200",
    "log.cleaner.backoff.ms": "200",
    "log.flush.offset.checkpoint.interval.ms": "300",
    "log.flush.start.offset.checkpoint.interval.ms": "300",
    "log.segment.delete.delay.ms": "1000",
    "log.segment.bytes": str(SEGMENT_BYTES),
}


def broker(data_dir: Path, **overrides: str) -> KopfkaProcess:
    return KopfkaProcess(data_dir, overrides={**FAST, **overrides})


@contextmanager
def crash_env(point: str | None) -> Iterator[None]:
    """Arm a KOPFKA_CRASH_POINT for processes started inside the block."""
    old = os.environ.pop("KOPFKA_CRASH_POINT", None)
    if point:
        os.environ["KOPFKA_CRASH_POINT"] = point
    try:
        yield
    finally:
        os.environ.pop("KOPFKA_CRASH_POINT", None)
        if old is not None:
            os.environ["KOPFKA_CRASH_POINT"] = old


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic]
    fut.result(30)
    # wait for the leader to be known
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if (
            t is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 for p in t.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leader")


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes | None]],
    *,
    partition: int = 0,
    timestamps: list[int] | None = None,
    extra: dict[str, Any] | None = None,
) -> list[int]:
    """Produce (key, value) pairs in order (acks=all, idempotent); returns their offsets."""
    acked: dict[int, int] = {}
    errors: list[str] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "enable.idempotence": True,
            "compression.type": "lz4",
            **(extra or {}),
        }
    )
    for i, (k, v) in enumerate(records):

        def cb(err: Any, msg: Any, i: int = i) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked[i] = msg.offset()

        while True:
            try:
                p.produce(
                    topic, v, key=k, partition=partition, on_delivery=cb, timestamp=timestamps[i] if timestamps else 0
                )
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    return [acked[i] for i in range(len(records))]


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-tests"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)  # type: ignore[no-any-return]
    finally:
        c.close()


def read_all(
    bootstrap: str, topic: str, partition: int = 0, start: int = OFFSET_BEGINNING, timeout: float = 60
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from `start` to the high watermark."""
    low, high = watermarks(bootstrap, topic, partition)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "log-tests",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    out: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        if high <= low:
            return out
        c.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= high:
                            return out
                        continue
                    raise AssertionError(err)
                out.append((m.offset(), m.key(), m.value()))
                if m.offset() >= high - 1:
                    return out
        raise TimeoutError(f"read {len(out)} records, high watermark {high}")
    finally:
        c.close()


def wait_for(cond: Callable[[], Any], timeout: float = 60, interval: float = 0.2, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what or cond}")
        time.sleep(interval)


def raw_request(bootstrap: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    async def go() -> Any:
        conn = await KafkaConnection.open(bootstrap)
        try:
            return await conn.request(api_key, version, body)
        finally:
            await conn.close()

    return asyncio.run(go())


def describe_log_dirs(bootstrap: str) -> dict[str, tuple[int, dict[tuple[str, int], tuple[int, bool]]]]:
    """dir -> (error code, {(topic, p): (size, is_future)})."""
    resp = raw_request(bootstrap, 35, 4, {"topics": None})
    out = {}
    for r in resp.results:
        parts = {
            (t.name, p.partition_index): (p.partition_size, p.is_future_key) for t in r.topics for p in t.partitions
        }
        out[r.log_dir] = (int(r.error_code), parts)
    return out


def checkpoint_entries(path: Path) -> dict[tuple[str, int], int]:
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2, lines[:2]
    out = {}
    for line in lines[2:]:
        t, p, o = line.split(" ")
        out[(t, int(p))] = int(o)
    return out


def latest_per_key(records: list[tuple[bytes | None, bytes | None]]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for k, v in records:
        assert k is not None
        out[k] = v
    return out
