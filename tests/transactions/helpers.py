"""Helpers for the transaction tests: topics, and reading a topic to its end with each client in
either isolation level (a read is complete when the consumer's position reaches the high
watermark of every partition, which read_committed can only do once no transaction is open)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CLIENTS = ("confluent", "kafka-python", "aiokafka")


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, rf: int = 1, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=config or {})])[name].result(30)


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw-probe"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def read_values(
    client: str, bootstrap: str, topic: str, partitions: int, *, committed: bool, timeout: float = 30.0
) -> list[str]:
    """Every value of `topic` from the start to the high watermark, as `client` delivers it."""
    hw = high_watermarks(bootstrap, topic, partitions)
    iso = "read_committed" if committed else "read_uncommitted"
    if client == "confluent":
        return _read_confluent(bootstrap, topic, hw, iso, timeout)
    if client == "kafka-python":
        return _read_kafka_python(bootstrap, topic, hw, iso, timeout)
    if client == "aiokafka":
        return asyncio.run(_read_aiokafka(bootstrap, topic, hw, iso, timeout))
    raise ValueError(client)


def _read_confluent(bootstrap: str, topic: str, hw: dict[int, int], iso: str, timeout: float) -> list[str]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "isolation.level": iso,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    tps = [TopicPartition(topic, p, 0) for p in hw]
    c.assign(tps)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in c.consume(500, 0.2):
                if m.error() is None:
                    out.append(m.value().decode())
            pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in hw])}
            if all(pos[p] >= hw[p] or hw[p] == 0 for p in hw):  # an empty partition has no position
                return out
        raise TimeoutError(f"confluent {iso} stopped at {pos}, high watermarks {hw}")
    finally:
        c.close()


def _read_kafka_python(bootstrap: str, topic: str, hw: dict[int, int], iso: str, timeout: float) -> list[str]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=iso, enable_auto_commit=False)
    tps = [KTP(topic, p) for p in hw]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                out.extend(r.value.decode() for r in records)
            if all(c.position(tp) >= hw[tp.partition] for tp in tps):
                return out
        raise TimeoutError(f"kafka-python {iso} stopped at {[c.position(tp) for tp in tps]}, high watermarks {hw}")
    finally:
        c.close()


async def _read_aiokafka(bootstrap: str, topic: str, hw: dict[int, int], iso: str, timeout: float) -> list[str]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=iso, enable_auto_commit=False)
    await c.start()
    tps = [ATP(topic, p) for p in hw]
    c.assign(tps)
    await c.seek_to_beginning(*tps)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for records in (await c.getmany(timeout_ms=200)).values():
                out.extend(r.value.decode() for r in records)
            if all([await c.position(tp) >= hw[tp.partition] for tp in tps]):
                return out
        raise TimeoutError(f"aiokafka {iso} did not reach the high watermarks {hw}")
    finally:
        await c.stop()


def run_transactions(
    client: str, bootstrap: str, topic: str, partitions: int, plan: list[tuple[str, bool]], txn_id: str
) -> None:
    """With `client`'s transactional producer: one transaction per (prefix, commit) of `plan`,
    each writing `<prefix>-<i>` for i in 0..5 over the partitions, then committed or aborted."""
    if client == "confluent":
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
        p.init_transactions(30)
        for prefix, commit in plan:
            p.begin_transaction()
            for i in range(6):
                p.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % partitions)
            p.flush(30)
            (p.commit_transaction if commit else p.abort_transaction)(30)
    elif client == "kafka-python":
        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        kp.init_transactions()
        for prefix, commit in plan:
            kp.begin_transaction()
            for i in range(6):
                kp.send(topic, f"{prefix}-{i}".encode(), partition=i % partitions)
            kp.flush(30)
            (kp.commit_transaction if commit else kp.abort_transaction)()
        kp.close()
    elif client == "aiokafka":
        asyncio.run(_aiokafka_transactions(bootstrap, topic, partitions, plan, txn_id))
    else:
        raise ValueError(client)


async def _aiokafka_transactions(
    bootstrap: str, topic: str, partitions: int, plan: list[tuple[str, bool]], txn_id: str
) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    await p.start()
    try:
        for prefix, commit in plan:
            await p.begin_transaction()
            futs = [await p.send(topic, f"{prefix}-{i}".encode(), partition=i % partitions) for i in range(6)]
            await asyncio.gather(*futs)
            await (p.commit_transaction() if commit else p.abort_transaction())
    finally:
        await p.stop()


async def wait_for_coordinator(conn: Any, key: str, key_type: int = 1) -> int:
    """FindCoordinator until answered (the first lookup creates the internal topic): its node id."""
    from kopfka.protocol.errors import ErrorCode

    for _ in range(100):
        c = (await conn.request(10, 4, {"key_type": key_type, "coordinator_keys": [key]})).coordinators[0]
        if c.error_code == ErrorCode.none:
            return int(c.node_id)
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no coordinator for {key}")


async def kio_request(bootstrap: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    from kopfka.client.connection import KafkaConnection

    conn = await KafkaConnection.open(bootstrap)
    try:
        return await conn.request(api_key, version, body)
    finally:
        await conn.close()


async def write_unknown_transaction(
    bootstrap: str, transactional_id: str, topic: str, partition: int, *, inits: int = 1
) -> tuple[int, int]:
    """A transactional batch the coordinator never heard of (no AddPartitionsToTxn), as a late
    retried produce leaves one in the field: it pins the partition's last stable offset until
    aborted. Needs transaction.partition.verification.enable=false. Each of `inits`
    InitProducerId calls bumps the epoch; returns (producer id, epoch) of the batch."""
    from kopfka.client.connection import KafkaConnection
    from kopfka.protocol.errors import ErrorCode
    from kopfka.protocol.record_codec import Record, encode_batch

    conn = await KafkaConnection.open(bootstrap)
    try:
        await wait_for_coordinator(conn, transactional_id)
        for _ in range(inits):
            r = await conn.request(22, 4, {"transactional_id": transactional_id, "transaction_timeout": 60000})
            assert r.error_code == ErrorCode.none
        pid, epoch = r.producer_id, r.producer_epoch
        batch = encode_batch(
            [Record(0, int(time.time() * 1000), None, transactional_id.encode())],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            transactional=True,
        )
        data = [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]
        resp = await conn.request(
            0, 10, {"transactional_id": transactional_id, "acks": -1, "timeout": 5000, "topic_data": data}
        )
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
        return pid, epoch
    finally:
        await conn.close()


async def lso_and_high_watermark(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """ListOffsets latest in read_committed (the last stable offset) and read_uncommitted."""
    out = []
    for isolation in (1, 0):
        body = {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}],
        }
        out.append(int((await kio_request(bootstrap, 2, 7, body)).topics[0].partitions[0].offset))
    return out[0], out[1]
