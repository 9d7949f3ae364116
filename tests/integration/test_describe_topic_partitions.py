"""DescribeTopicPartitions (KIP-966): cursor pagination and the response partition limit, served
to Kafka's own Java admin client (describeTopics uses it from Kafka 3.7 on) and to raw requests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from java_clients import JavaAdmin
from kopfka.client.connection import KafkaConnection
from kopfka_process import KopfkaProcess
from quotas.quota_helpers import sample, scrape, start_broker

UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST = 3, 17, 42
TOPICS = {"dtp-a": 5, "dtp-b": 3, "dtp-c": 1}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KopfkaProcess, int]]:
    proc, http = start_broker(tmp_path_factory.mktemp("dtp") / "data", **{"max.request.partition.size.limit": "4"})
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        for fut in admin.create_topics([NewTopic(n, p, 1) for n, p in TOPICS.items()]).values():
            fut.result(30)
        yield proc, http
    finally:
        proc.kill()


def dtp(bootstrap: str, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
    async def call() -> Any:
        conn = await KafkaConnection.open(bootstrap)
        try:
            body = {
                "topics": [{"name": n} for n in names],
                "response_partition_limit": limit,
                "cursor": {"topic_name": cursor[0], "partition_index": cursor[1]} if cursor else None,
            }
            return await conn.request(75, 0, body)
        finally:
            await conn.close()

    return asyncio.run(call())


def pages(resp: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics]


def cursor_of(resp: Any) -> tuple[str, int] | None:
    c = resp.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


@pytest.mark.timeout(120)
def test_java_admin_describe_topics_pages_through_describe_topic_partitions(
    broker: tuple[KopfkaProcess, int], java_admin: JavaAdmin
) -> None:
    proc, http = broker
    before = (
        sample(
            scrape(http), "kafka_network_requestmetrics_requests_total", request="DescribeTopicPartitions", version="0"
        )
        or 0
    )
    (res,) = java_admin.run(proc.bootstrap, ["describe-topics", "dtp-b,dtp-a,dtp-c", "2"])
    topics = res["ok"]
    assert {n: [p["partition"] for p in t["partitions"]] for n, t in topics.items()} == {
        n: list(range(p)) for n, p in TOPICS.items()
    }
    for t in topics.values():
        assert not t["internal"] and len(t["topic_id"]) == 22
        for p in t["partitions"]:
            assert p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1]
    # 9 partitions at 2 per response: the client followed the cursor through 5 responses
    after = sample(
        scrape(http), "kafka_network_requestmetrics_requests_total", request="DescribeTopicPartitions", version="0"
    )
    assert after is not None and after - before == 5


def test_cursor_and_limit(broker: tuple[KopfkaProcess, int]) -> None:
    bootstrap = broker[0].bootstrap
    names = ["dtp-c", "dtp-a", "dtp-b"]
    r = dtp(bootstrap, names, limit=3)
    assert pages(r) == [("dtp-a", [0, 1, 2])] and cursor_of(r) == ("dtp-a", 3)
    r = dtp(bootstrap, names, limit=3, cursor=("dtp-a", 3))
    assert pages(r) == [("dtp-a", [3, 4]), ("dtp-b", [0])] and cursor_of(r) == ("dtp-b", 1)
    r = dtp(bootstrap, names, limit=2, cursor=("dtp-b", 1))
    assert pages(r) == [("dtp-b", [1, 2])] and cursor_of(r) == ("dtp-c", 0)  # the next topic, from partition 0
    r = dtp(bootstrap, names, limit=3, cursor=("dtp-c", 0))
    assert pages(r) == [("dtp-c", [0])] and cursor_of(r) is None
    # the broker caps the limit at max.request.partition.size.limit (4 here)
    r = dtp(bootstrap, names)
    assert pages(r) == [("dtp-a", [0, 1, 2, 3])] and cursor_of(r) == ("dtp-a", 4)


def test_all_topics_and_errors(broker: tuple[KopfkaProcess, int]) -> None:
    bootstrap = broker[0].bootstrap
    # no topic list: every topic (following the cursor past the 4-partition cap), no error entries
    seen: list[tuple[str, list[int]]] = []
    cursor = None
    for _ in range(20):
        r = dtp(bootstrap, [], limit=100, cursor=cursor)
        assert all(t.error_code == 0 for t in r.topics)
        seen += pages(r)
        if (cursor := cursor_of(r)) is None:
            break
    merged: dict[str, list[int]] = {}
    for n, ps in seen:
        merged.setdefault(n, []).extend(ps)
    assert {n: ps for n, ps in merged.items() if n.startswith("dtp-")} == {n: list(range(p)) for n, p in TOPICS.items()}
    assert all(len(ps) <= 4 for _, ps in seen)
    r = dtp(bootstrap, [], limit=1, cursor=("dtp-b", 2))
    assert pages(r)[0] == ("dtp-b", [2])
    # named topics that do not exist carry their error, and still take their place in name order
    r = dtp(bootstrap, ["nope", "dtp-c", "bad name!"], limit=100)
    assert [(t.name, int(t.error_code)) for t in r.topics] == [
        ("bad name!", INVALID_TOPIC_EXCEPTION),
        ("dtp-c", 0),
        ("nope", UNKNOWN_TOPIC_OR_PARTITION),
    ]
    # a cursor outside the requested topics, or a negative partition: INVALID_REQUEST on every topic
    for cursor in (("dtp-a", 0), ("dtp-c", -1)):
        r = dtp(bootstrap, ["dtp-c", "dtp-b"], cursor=cursor)
        assert [(t.name, int(t.error_code)) for t in r.topics] == [
            ("dtp-c", INVALID_REQUEST),
            ("dtp-b", INVALID_REQUEST),
        ]


def test_offline_replicas_and_missing_leader_listener() -> None:
    """The rules Kafka's metadata cache applies, on a hand-built image."""
    from kopfka.metadata import records as mr
    from kopfka.metadata.image import replay
    from kopfka.server.apis.describe_topic_partitions import describe

    d1, d2 = "MUsD4cB9QhWjT5r3wBvBBw", "MkHfq8x0TGOk2P2yl0wXNQ"
    image = replay(
        [
            mr.RegisterBrokerRecord(1, "i1", 1, (mr.Endpoint("PLAINTEXT", "h", 1),), fenced=False, log_dirs=(d1,)),
            mr.RegisterBrokerRecord(2, "i2", 1, (mr.Endpoint("PLAINTEXT", "h", 2),), fenced=True),
            mr.RegisterBrokerRecord(3, "i3", 1, (mr.Endpoint("OTHER", "h", 3),), fenced=False),
            mr.RegisterBrokerRecord(5, "i5", 1, (mr.Endpoint("PLAINTEXT", "h", 5),), fenced=False, log_dirs=(d1,)),
            mr.TopicRecord("t", "AAAAAAAAAAAAAAAAAAAAZg"),
            mr.PartitionRecord(
                0, "AAAAAAAAAAAAAAAAAAAAZg", (1, 2, 3, 4, 5), (1,), 3, 7, 0, directories=(d1, d1, d1, d1, d2)
            ),
        ]
    )
    (topic,) = describe(image, ["t"], "PLAINTEXT", 10, None, False)["topics"]
    (p,) = topic["partitions"]
    assert p["leader_id"] == -1 and p["leader_epoch"] == 7  # broker 3 has no PLAINTEXT endpoint
    assert p["offline_replicas"] == [2, 3, 4, 5]  # fenced, no listener, unregistered, dir offline
    assert p["replica_nodes"] == [1, 2, 3, 4, 5] and p["isr_nodes"] == [1]
