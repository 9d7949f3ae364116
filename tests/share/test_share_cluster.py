"""Share groups on a KRaft cluster of three brokers: share-partition leaders, share coordinators
and the group coordinator on different brokers (their RPCs go over the inter-broker listener),
then a broker SIGKILLed: its partitions' new leaders take their delivery state over from the
share coordinators (themselves moved where their state partitions' replicas are)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from kopfka.client.connection import KafkaConnection

from .test_share_protocol import earliest

sys.path.insert(0, str(Path(__file__).parents[1] / "kraft"))
from cluster import FAST, Cluster, wait_until

PROPS = {
    **FAST,
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "2",
    "share.coordinator.state.topic.num.partitions": "3",
    "share.coordinator.state.topic.replication.factor": "2",
    "share.coordinator.state.topic.min.isr": "1",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.record.lock.duration.ms": "5000",
    "group.share.min.record.lock.duration.ms": "1000",
}


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions)
    assert p.flush(30) == 0


def _consume(bootstrap: str, group: str, topic: str, seen: Counter[bytes], want: set[bytes], timeout: float) -> None:
    """Two share consumers until every value of `want` was seen (implicit acknowledgement)."""
    stop = threading.Event()

    def run() -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            c.subscribe([topic])
            while not stop.is_set():
                for m in c.poll(0.3):
                    if m.error() is None:
                        seen[m.value()] += 1
            c.commit_sync()
        finally:
            c.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    while not want <= set(seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # a duplicate would show up here
    stop.set()
    for t in threads:
        t.join(60)


async def _offsets(bootstrap: str, group: str) -> dict[int, tuple[int, int]]:
    for addr in bootstrap.split(","):
        try:
            conn = await KafkaConnection.open(addr)
        except OSError:
            continue
        try:
            found = await conn.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
            c = found.coordinators[0]
        finally:
            await conn.close()
        conn = await KafkaConnection.open(f"{c.host}:{c.port}")
        try:
            resp = await conn.request(90, 1, {"groups": [{"group_id": group, "topics": None}]})
            g = resp.groups[0]
            return {p.partition_index: (p.start_offset, p.lag) for t in g.topics for p in t.partitions}
        finally:
            await conn.close()
    raise AssertionError("no broker answered")


@pytest.mark.timeout(400)
def test_share_group_across_brokers_and_a_failover(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, controllers=1, brokers=3, props=PROPS)
    cluster.format_all()
    cluster.start()
    try:
        b = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_topics([NewTopic("spread", 6, 2)])["spread"].result(30)
        earliest(b, "gx")
        first = [f"a{i}".encode() for i in range(300)]
        _produce(b, "spread", first, 6)
        seen: Counter[bytes] = Counter()
        _consume(b, "gx", "spread", seen, set(first), 60)
        assert set(seen) == set(first) and max(seen.values()) == 1, seen.most_common(3)
        offsets: dict[int, Any] = asyncio.run(_offsets(b, "gx"))
        assert offsets == {p: (50, 0) for p in range(6)}

        victim = cluster.brokers[1]
        victim.kill()  # SIGKILL: its partitions and coordinators move to the other brokers
        b = cluster.bootstrap()
        wait_until(lambda: all(p.leader != victim.node_id for p in _leaders(b)), 30, "new leaders")
        second = [f"b{i}".encode() for i in range(120)]
        _produce(b, "spread", second, 6)
        _consume(b, "gx", "spread", seen, set(second), 90)
        assert set(seen) == set(first) | set(second), sorted(set(second) - set(seen))[:5]
        assert max(seen.values()) == 1, seen.most_common(3)  # nothing acknowledged came back
        offsets = asyncio.run(_offsets(b, "gx"))
        assert offsets == {p: (70, 0) for p in range(6)}
    finally:
        cluster.stop()


def _leaders(bootstrap: str) -> list[Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics("spread", timeout=10)
    return [p for p in md.topics["spread"].partitions.values()]
