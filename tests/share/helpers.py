"""Helpers of the share-group tests: topics, producing, and topic ids as the brokers know them."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kopfka import uuids


def create_topic(bootstrap: str, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(30)


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_topics(__import__("confluent_kafka").TopicCollection([topic]))[topic].result(30)
    return uuids.from_str(str(desc.topic_id))


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[object] = []
    for v in values:
        kwargs = {} if partition is None else {"partition": partition}
        p.produce(topic, value=v, on_delivery=lambda err, _m: errors.append(err) if err else None, **kwargs)
    assert p.flush(30) == 0 and not errors, errors


class RawShareMember:
    """A share-group member speaking the protocol itself (kio requests over one connection), for
    what a client library hides: exact acquired ranges, session epochs, holding records, errors."""

    def __init__(self, conn: Any, group: str, member_id: str | None = None) -> None:
        self.conn = conn
        self.group = group
        self.member_id = member_id or str(uuid.uuid4()).replace("-", "")[:22]
        self.member_epoch = 0
        self.session_epoch = 0
        self.assignment: dict[uuid.UUID, list[int]] = {}

    @classmethod
    async def open(cls, bootstrap: str, group: str) -> RawShareMember:
        from kopfka.client.connection import KafkaConnection

        return cls(await KafkaConnection.open(bootstrap), group)

    async def heartbeat(self, topics: list[str] | None = None, epoch: int | None = None) -> Any:
        body = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": self.member_epoch if epoch is None else epoch,
            "rack_id": None,
            "subscribed_topic_names": topics,
        }
        resp = await self.conn.request(76, 1, body)
        if resp.error_code == 0:
            self.member_epoch = resp.member_epoch
            if resp.assignment is not None:
                self.assignment = {t.topic_id: list(t.partitions) for t in resp.assignment.topic_partitions}
        return resp

    async def join(self, topics: list[str], partitions: int, timeout: float = 30) -> None:
        """Heartbeat until the assignment covers `partitions` partitions."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:  # as clients do: find the coordinator (creating __consumer_offsets), then join
            found = await self.conn.request(10, 4, {"key_type": 0, "coordinator_keys": [self.group]})
            resp = await self.heartbeat(topics) if found.coordinators[0].error_code == 0 else None
            if resp is not None and resp.error_code == 0:
                break
            assert asyncio.get_running_loop().time() < deadline, resp
            await asyncio.sleep(0.2)
        while sum(len(p) for p in self.assignment.values()) < partitions:
            assert asyncio.get_running_loop().time() < deadline, resp
            await asyncio.sleep(0.2)
            resp = await self.heartbeat(None)

    async def fetch(
        self,
        parts: list[tuple[uuid.UUID, int]],
        acks: dict[tuple[uuid.UUID, int], list[Any]] | None = None,
        *,
        max_wait: int = 500,
        max_records: int = 500,
        epoch: int | None = None,
        version: int = 2,
    ) -> Any:
        acks = acks or {}
        by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for tid, p in parts:
            by_topic.setdefault(tid, []).append(
                {
                    "partition_index": p,
                    "acknowledgement_batches": [
                        {"first_offset": a, "last_offset": b, "acknowledge_types": t}
                        for a, b, t in acks.get((tid, p), [])
                    ],
                }
            )
        body = {
            "group_id": self.group,
            "member_id": self.member_id,
            "share_session_epoch": self.session_epoch if epoch is None else epoch,
            "max_wait": max_wait,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "max_records": max_records,
            "batch_size": 500,
            "share_acquire_mode": 0,
            "is_renew_ack": False,
            "topics": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
            "forgotten_topics_data": [],
        }
        resp = await self.conn.request(78, version, body, timeout=max_wait / 1000 + 30)
        if resp.error_code == 0 and epoch is None:
            self.session_epoch = 1 if self.session_epoch in (0, -1) else self.session_epoch + 1
        return resp

    async def acknowledge(self, acks: dict[tuple[uuid.UUID, int], list[Any]], *, epoch: int | None = None) -> Any:
        by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for (tid, p), batches in acks.items():
            by_topic.setdefault(tid, []).append(
                {
                    "partition_index": p,
                    "acknowledgement_batches": [
                        {"first_offset": a, "last_offset": b, "acknowledge_types": t} for a, b, t in batches
                    ],
                }
            )
        body = {
            "group_id": self.group,
            "member_id": self.member_id,
            "share_session_epoch": self.session_epoch if epoch is None else epoch,
            "is_renew_ack": False,
            "topics": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp = await self.conn.request(79, 2, body)
        if resp.error_code == 0 and epoch is None:
            self.session_epoch += 1
        return resp

    async def close(self) -> None:
        await self.conn.close()


def acquired(resp: Any) -> dict[int, list[tuple[int, int, int]]]:
    """partition -> acquired (first, last, delivery count) ranges of a ShareFetch response."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for t in resp.responses:
        for p in t.partitions:
            if p.acquired_records:
                out.setdefault(p.partition_index, []).extend(
                    (a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records
                )
    return out


def partition_errors(resp: Any, field: str = "error_code") -> dict[int, int]:
    return {p.partition_index: int(getattr(p, field)) for t in resp.responses for p in t.partitions}
