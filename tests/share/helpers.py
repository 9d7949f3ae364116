"""Helpers of the share-group tests: topics, producing, and topic ids as the brokers know them."""

from __future__ import annotations

import uuid

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
