"""confluent-kafka's ShareConsumer (librdkafka 2.16, KIP-932) against kopfka: several consumers
share the partitions of a topic and every record is delivered once when acknowledged; an
explicit RELEASE brings a record back with its delivery count raised, a REJECT archives it."""

from __future__ import annotations

import threading
import time
from collections import Counter

from confluent_kafka import AcknowledgeType, ShareConsumer
from kopfka_process import KopfkaProcess

from .helpers import create_topic, produce
from .test_share_protocol import earliest, start_offsets


def _consume(
    bootstrap: str, group: str, topic: str, seen: Counter[bytes], stop: threading.Event, per_consumer: list[int]
) -> None:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        c.subscribe([topic])
        n = 0
        while not stop.is_set():
            for m in c.poll(0.3):
                if m.error() is None:
                    seen[m.value()] += 1
                    n += 1
        c.commit_sync()
        per_consumer.append(n)
    finally:
        c.close()


async def _members(bootstrap: str, group: str) -> int:
    from kopfka.client.connection import KafkaConnection

    conn = await KafkaConnection.open(bootstrap)
    try:
        resp = await conn.request(77, 1, {"group_ids": [group], "include_authorized_operations": False})
        return len(resp.groups[0].members)
    finally:
        await conn.close()


def test_consumers_share_a_topic_and_each_record_is_delivered_once(share_broker: KopfkaProcess) -> None:
    import asyncio

    b = share_broker.bootstrap
    create_topic(b, "fanned", 4)
    earliest(b, "cf")
    seen: Counter[bytes] = Counter()
    stop = threading.Event()
    per_consumer: list[int] = []
    threads = [threading.Thread(target=_consume, args=(b, "cf", "fanned", seen, stop, per_consumer)) for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while asyncio.run(_members(b, "cf")) < 3 and time.monotonic() < deadline:
        time.sleep(0.3)
    time.sleep(1.5)  # a heartbeat interval: every member has its share of the partitions
    values = [f"r{i}".encode() for i in range(400)]
    for p in range(4):
        produce(b, "fanned", values[p::4], partition=p)
    deadline = time.monotonic() + 40
    while len(seen) < len(values) and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(30)
    assert set(seen) == set(values) and max(seen.values()) == 1, seen.most_common(3)
    assert sorted(per_consumer, reverse=True)[1] > 0, per_consumer  # at least two consumers got work
    assert asyncio.run(start_offsets(b, "cf")) == {p: (100, 0) for p in range(4)}


def test_explicit_release_and_reject(share_broker: KopfkaProcess) -> None:
    b = share_broker.bootstrap
    create_topic(b, "explicit", 1)
    earliest(b, "ce")
    produce(b, "explicit", [b"keep", b"again", b"drop"], partition=0)
    c = ShareConsumer({"bootstrap.servers": b, "group.id": "ce", "share.acknowledgement.mode": "explicit"})
    try:
        c.subscribe(["explicit"])
        deliveries: list[tuple[bytes, int]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(v == b"again" and n == 2 for v, n in deliveries):
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                deliveries.append((m.value(), m.delivery_count()))
                ack = {b"keep": AcknowledgeType.ACCEPT, b"drop": AcknowledgeType.REJECT}.get(
                    m.value(), AcknowledgeType.RELEASE
                )
                if m.value() == b"again" and m.delivery_count() == 2:
                    ack = AcknowledgeType.ACCEPT
                c.acknowledge(m, ack)
            if msgs:
                c.commit_sync()
        assert deliveries == [(b"keep", 1), (b"again", 1), (b"drop", 1), (b"again", 2)]
        assert [m for m in c.poll(1.0) if m.error() is None] == []  # nothing left: rejected is archived
    finally:
        c.close()
