"""Helpers for the Spark tests: topics, producing and reading records with confluent-kafka."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        fut.result(30)
    # Wait until the partitions have leaders (metadata propagated).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return name
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} not ready")


def produce(bootstrap: str, topic: str, records: Iterable[dict[str, Any]]) -> int:
    """Produce dicts with value/key/partition/headers/timestamp; returns the count, raising on error."""
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "on_delivery": lambda err, msg: errors.append(err) if err else None})
    n = 0
    for r in records:
        kwargs = {k: r[k] for k in ("key", "partition", "headers", "timestamp") if k in r}
        p.produce(topic, r["value"], **kwargs)
        p.poll(0)
        n += 1
    assert p.flush(60) == 0
    assert not errors, errors
    return n


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """DeleteRecords: raises the log start offset exactly as retention would."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        fut.result(30)


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
        return int(lo), int(hi)
    finally:
        c.close()


def consume_all(bootstrap: str, topic: str, partitions: Sequence[int]) -> list[Any]:
    """Every record of the partitions, via a plain consumer (the reference for comparisons)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ref", "enable.partition.eof": True,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    out: list[Any] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    while len(eof) < len(partitions) and time.monotonic() < deadline:
        for m in c.consume(500, 1.0):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition() or 0)
                continue
            out.append(m)
    c.close()
    return out
