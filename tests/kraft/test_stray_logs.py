"""A topic deleted and recreated under the same name while a replica's broker was down: on its
return that broker must not serve the old records as the new topic's. Its old log is a stray
(Kafka's isStrayKraftReplica: topic id not in the metadata image), renamed `-stray`."""

from __future__ import annotations

import time
from typing import Any

from cluster import Cluster, wait_until
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "stray-check", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            out += [(m.offset(), m.value()) for m in c.consume(10, 0.5) if m.error() is None]
        return out
    finally:
        c.close()


def produce(bootstrap: str, topic: str, *values: bytes) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0


def test_recreated_topic_is_not_served_from_the_old_log(make_cluster: Any) -> None:
    c: Cluster = make_cluster(1, 2).start()
    b0, b1 = c.brokers
    admin = AdminClient({"bootstrap.servers": b0.address})
    admin.create_topics([NewTopic("phoenix", num_partitions=1, replica_assignment=[[b1.node_id]])])["phoenix"].result(
        30
    )
    produce(c.bootstrap(), "phoenix", b"old-0", b"old-1", b"old-2")

    b1.kill()  # away while the topic is deleted and created again, on it again
    # a client that last read Metadata from broker 1 holds it as the controller to send admin
    # requests to (a KRaft broker names itself) until it next reads Metadata: ask through broker 0
    admin = AdminClient({"bootstrap.servers": b0.address})
    admin.delete_topics(["phoenix"])["phoenix"].result(30)
    wait_until(lambda: "phoenix" not in admin.list_topics(timeout=10).topics, 30, "the deletion")
    admin.create_topics([NewTopic("phoenix", num_partitions=1, replica_assignment=[[b1.node_id]])])["phoenix"].result(
        30
    )
    b1.start().wait_ready()

    produce(c.bootstrap(), "phoenix", b"new-0")
    assert consume_all(c.bootstrap(), "phoenix") == [(0, b"new-0")]
    strays = [p.name for p in (b1.dir / "logs").iterdir() if p.name.endswith("-stray")]
    assert len(strays) == 1 and strays[0].startswith("phoenix-0.")
    assert "Found stray log phoenix-0" in b1.log_text()
