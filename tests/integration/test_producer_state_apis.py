"""Producer state as clients see it: DescribeProducers through Kafka's Java admin client, and
producer ids expiring at runtime (producer.id.expiration.ms, checked every
producer.id.expiration.check.interval.ms), as Kafka's PeriodicProducerExpirationCheck does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from java_clients import JavaAdmin
from kopfka.client.connection import KafkaConnection
from kopfka_process import KopfkaProcess

EXPIRATION_MS = 10_000  # room for a loaded machine: the first describe must come before the id expires
UNKNOWN_TOPIC_OR_PARTITION = 3


async def _describe_producers(bootstrap: str, topics: list[tuple[str, list[int]]]) -> Any:
    conn = await KafkaConnection.open(bootstrap)
    try:
        body = {"topics": [{"name": n, "partition_indexes": ps} for n, ps in topics]}
        return await conn.request(61, 0, body)
    finally:
        await conn.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(
        tmp_path / "data",
        overrides={
            "producer.id.expiration.ms": str(EXPIRATION_MS),
            "producer.id.expiration.check.interval.ms": "250",
        },
    ).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.mark.timeout(120)
def test_describe_producers_and_runtime_expiration(broker: KopfkaProcess, java_admin: JavaAdmin) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("idem", 2, 1)])["idem"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(3):
        p.produce("idem", b"v%d" % i, partition=0)
        assert p.flush(30) == 0
    described, untouched, _, expired = java_admin.run(
        broker.bootstrap,
        ["describe-producers", "idem", "0"],
        ["describe-producers", "idem", "1"],
        ["sleep", str(EXPIRATION_MS + 1500)],
        ["describe-producers", "idem", "0"],
        timeout_ms=10000,
    )
    (state,) = described["ok"]
    assert state["producer_id"] >= 0 and state["producer_epoch"] == 0
    assert state["last_sequence"] == 2 and state["current_txn_start_offset"] == -1 and state["last_timestamp"] > 0
    assert untouched == {"ok": [], "elapsed_ms": untouched["elapsed_ms"]}
    # a partition the broker does not lead: the error on that partition (the Java client only asks leaders)
    resp = asyncio.run(_describe_producers(broker.bootstrap, [("idem", [0, 7]), ("nope", [0])]))
    codes = {(t.name, p.partition_index): int(p.error_code) for t in resp.topics for p in t.partitions}
    assert codes == {("idem", 0): 0, ("idem", 7): UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
    # idle longer than producer.id.expiration.ms: the broker forgot it while running
    assert expired["ok"] == []
