"""End-to-end: precedence over all eight levels (user ANONYMOUS + client-id), CreateTopics against
controller_mutation_rate (strict), connection limits, KIP-714 telemetry from librdkafka, and the
Prometheus endpoint parsed by prometheus-client with figures matching what the test produced."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kopfka.client.admin import Admin
from kopfka.client.connection import KafkaConnection
from kopfka.client.quotas import describe_client_quotas
from kopfka_process import KopfkaProcess

from .quota_helpers import admin_call, create_topic, sample, scrape, set_quota, start_broker

ANON = "ANONYMOUS"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KopfkaProcess, int]]:
    proc, http = start_broker(
        Path(tmp_path_factory.mktemp("quota-admin")) / "data", **{"max.connections.per.ip.overrides": "127.0.0.3:5"}
    )
    try:
        yield proc, http
    finally:
        proc.kill()


LEVELS: list[list[tuple[str, str | None]]] = [
    [("user", ANON), ("client-id", "app")],
    [("user", ANON), ("client-id", None)],
    [("user", ANON)],
    [("user", None), ("client-id", "app")],
    [("user", None), ("client-id", None)],
    [("user", None)],
    [("client-id", "app")],
    [("client-id", None)],
]
TAGS = [(ANON, "app"), (ANON, "app"), (ANON, ""), (ANON, "app"), (ANON, "app"), (ANON, ""), ("", "app"), ("", "app")]


def test_eight_levels_end_to_end(broker: tuple[KopfkaProcess, int]) -> None:
    """Each level, set together with every less specific one, is the one that meters client 'app'."""
    proc, http = broker
    bs = proc.bootstrap
    from confluent_kafka import Producer

    create_topic(bs, "prec")
    for level in range(1, 9):
        for i, entity in enumerate(LEVELS):
            if i + 1 >= level:
                set_quota(bs, entity, {"producer_byte_rate": float(1_000_000 * (i + 1))})
            else:
                set_quota(bs, entity, remove=["producer_byte_rate"])
        p = Producer({"bootstrap.servers": bs, "client.id": "app", "enable.metrics.push": False})
        p.produce("prec", b"x" * 100)
        assert p.flush(10) == 0
        m = scrape(http)
        user, client = TAGS[level - 1]
        assert sample(m, "kafka_server_produce_quota_limit", user=user, client_id=client) == 1_000_000 * level, level
    found = admin_call(bs, lambda a: describe_client_quotas(a, [("client-id", 1, None)], strict=True))
    assert found == [([("client-id", None)], {"producer_byte_rate": 8_000_000.0})]
    for entity in LEVELS:
        set_quota(bs, entity, remove=["producer_byte_rate"])
    assert admin_call(bs, lambda a: describe_client_quotas(a, [], strict=False)) == []


def test_create_topics_beyond_controller_mutation_rate(broker: tuple[KopfkaProcess, int]) -> None:
    proc, _ = broker
    bs = proc.bootstrap
    # kopfka's admin client identifies as client-id "kopfka-cli"; 2 partitions/s, burst 11 * 1 s * 2 = 22
    set_quota(bs, [("client-id", "kopfka-cli")], {"controller_mutation_rate": 2.0})

    async def burst(version: int, prefix: str, n: int) -> tuple[list[int], int]:
        conn = await KafkaConnection.open(bs)
        try:
            resp = await conn.request(
                19,
                version,
                {
                    "topics": [
                        {
                            "name": f"{prefix}-{i}",
                            "num_partitions": 1,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                        for i in range(n)
                    ],
                    "timeout": 30000,
                    "validate_only": False,
                },
            )
            return [int(t.error_code) for t in resp.topics], int(resp.throttle_time.total_seconds() * 1000)
        finally:
            await conn.close()

    codes, throttle = asyncio.run(burst(7, "strict", 30))
    ok = codes.count(0)
    assert ok == 23 and codes[:ok] == [0] * ok  # 22 credits, the 23rd drives the bucket to -1
    assert codes[ok:] == [89] * (30 - ok)  # THROTTLING_QUOTA_EXCEEDED, nothing created for them
    assert 0 < throttle <= 600
    time.sleep(throttle / 1000 + 0.6)
    codes, _ = asyncio.run(burst(7, "after", 1))
    assert codes == [0]
    codes, throttle = asyncio.run(burst(5, "permissive", 3))  # old versions: accepted, throttled
    assert codes == [0, 0, 0] and throttle > 0
    set_quota(bs, [("client-id", "kopfka-cli")], remove=["controller_mutation_rate"])


def test_delete_topics_charged_by_partitions_deleted(broker: tuple[KopfkaProcess, int]) -> None:
    """DeleteTopics charges the partitions it deletes (KIP-599): strict from v5, permissive before."""
    proc, _ = broker
    bs = proc.bootstrap
    for name, n in (("del-a", 10), ("del-b", 10), ("del-c", 10), ("del-d", 1), ("old-a", 10), ("old-b", 1)):
        create_topic(bs, name, n)
    # a user + client-id entity of its own, so the bucket is fresh: 2 partitions/s, burst 22
    entity: list[tuple[str, str | None]] = [("user", ANON), ("client-id", "kopfka-cli")]
    set_quota(bs, entity, {"controller_mutation_rate": 2.0})
    unknown_id = uuid.uuid4()

    Result = tuple[list[tuple[str, int]], int]

    async def delete(version: int, names: list[str], by_id: uuid.UUID | None = None) -> Result:
        conn = await KafkaConnection.open(bs)
        try:
            if version >= 6:
                topics = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
                if by_id is not None:
                    topics.insert(1, {"name": None, "topic_id": by_id})
                body: dict[str, object] = {"topics": topics, "timeout": 30000}
            else:
                body = {"topic_names": names, "timeout": 30000}
            resp = await conn.request(20, version, body)
            out = [(r.name or "", int(r.error_code)) for r in resp.responses]
            return out, int(resp.throttle_time.total_seconds() * 1000)
        finally:
            await conn.close()

    # 22 credits: del-a (10) -> 12, an unknown id costs nothing, del-b (10) -> 2, del-c (10) accepted
    # while the bucket is still positive -> -8, del-d refused; the throttle is 8 / 2 per s = 4 s
    results, throttle = asyncio.run(delete(6, ["del-a", "del-b", "del-c", "del-d"], unknown_id))
    assert results == [("del-a", 0), ("", 100), ("del-b", 0), ("del-c", 0), ("del-d", 89)]
    assert 3000 <= throttle <= 4000
    names = [t.name for t in admin_call(bs, lambda a: a.metadata())[1]]
    assert "del-d" in names and not {"del-a", "del-b", "del-c"} & set(names)
    results, throttle = asyncio.run(delete(4, ["old-a", "old-b"]))  # old version: accepted, only throttled
    assert results == [("old-a", 0), ("old-b", 0)] and throttle > 3000
    set_quota(bs, entity, remove=["controller_mutation_rate"])
    assert asyncio.run(delete(6, ["del-d"]))[0] == [("del-d", 0)]


def _api_versions(sock: socket.socket) -> bool:
    """Send ApiVersions v0; True if answered, False if the broker closed the connection."""
    try:
        body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
        sock.sendall(struct.pack(">i", len(body)) + body)
        sock.settimeout(5)
        head = sock.recv(4)
        return len(head) == 4
    except OSError:
        return False


def test_connection_limits_reject_excess_and_admit_the_rest(broker: tuple[KopfkaProcess, int]) -> None:
    proc, http = broker
    socks = [socket.create_connection(("127.0.0.1", proc.port), source_address=("127.0.0.3", 0)) for _ in range(8)]
    answered = [_api_versions(s) for s in socks]
    assert answered.count(True) == 5 and answered.count(False) == 3  # max.connections.per.ip.overrides 127.0.0.3:5
    for s in socks:
        s.close()
    time.sleep(0.3)
    again = socket.create_connection(("127.0.0.1", proc.port), source_address=("127.0.0.3", 0))
    assert _api_versions(again)  # slots freed: admitted again
    again.close()
    # per-IP creation rate from 127.0.0.2: 3/s over a 10 s padded window
    set_quota(proc.bootstrap, [("ip", "127.0.0.2")], {"connection_creation_rate": 3.0})
    results = []
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", proc.port), source_address=("127.0.0.2", 0))
        results.append(_api_versions(s))
        s.close()
    admitted = results.count(True)
    assert 28 <= admitted <= 32 and results[:admitted] == [True] * admitted  # ~30 admitted, the rest refused
    m = scrape(http)
    assert (
        sample(m, "kafka_server_socket_server_metrics_connection_rejected_total", listener="PLAINTEXT", reason="rate")
        or 0
    ) >= 40 - admitted


def test_librdkafka_pushes_telemetry_and_early_push_is_throttled(broker: tuple[KopfkaProcess, int]) -> None:
    proc, http = broker
    bs = proc.bootstrap
    admin_call(
        bs,
        lambda a: a.incremental_alter_configs(
            16,
            "producers",
            [("metrics", 0, "org.apache.kafka."), ("interval.ms", 0, "1000"), ("match", 0, "client_id=tele.*")],
        ),
    )
    from confluent_kafka import Producer

    create_topic(bs, "tele")
    p = Producer({"bootstrap.servers": bs, "client.id": "tele-producer"})
    deadline = time.monotonic() + 20
    found: list[str] = []
    while time.monotonic() < deadline and not found:
        p.produce("tele", b"v" * 100)
        p.poll(0.5)
        m = scrape(http)
        found = [
            name
            for (name, labels) in m
            if name.startswith("kafka_client_telemetry_org_apache_kafka_producer")
            and ("client_id", "tele-producer") in labels
        ]
    p.flush(10)
    assert found, "no pushed telemetry on /metrics"

    async def early() -> tuple[int, int, int]:
        conn = await KafkaConnection.open(bs)
        try:
            import kopfka.client.connection as kc

            kc.CLIENT_ID = "tele-manual"
            got = await conn.request(71, 0, {"client_instance_id": uuid.UUID(int=0)})
            iid, sid = got.client_instance_id, got.subscription_id
            push = {
                "client_instance_id": iid,
                "subscription_id": sid,
                "terminating": False,
                "compression_type": 0,
                "metrics": b"",
            }
            first = await conn.request(72, 0, push)
            second = await conn.request(72, 0, push)
            return int(first.error_code), int(second.error_code), int(second.throttle_time.total_seconds() * 1000)
        finally:
            import kopfka.client.connection as kc

            kc.CLIENT_ID = "kopfka-cli"
            await conn.close()

    first, second, throttle = asyncio.run(early())
    assert first == 0 and second == 89 and 0 < throttle <= 1000


def test_telemetry_subscription_matches_client_software_name(broker: tuple[KopfkaProcess, int]) -> None:
    """ApiVersions v3+ names the client software; a KIP-714 `match` on it selects librdkafka clients."""
    proc, http = broker
    bs = proc.bootstrap
    admin_call(
        bs,
        lambda a: a.incremental_alter_configs(
            16,
            "by-software",
            [
                ("metrics", 0, "org.apache.kafka."),
                ("interval.ms", 0, "1000"),
                ("match", 0, "client_software_name=(librdkafka|confluent-kafka-python),client_software_version=.+"),
            ],
        ),
    )
    from confluent_kafka import Producer

    create_topic(bs, "sw")
    p = Producer({"bootstrap.servers": bs, "client.id": "sw-producer"})  # no client_id subscription matches it
    deadline = time.monotonic() + 20
    found: list[str] = []
    while time.monotonic() < deadline and not found:
        p.produce("sw", b"v" * 100)
        p.poll(0.5)
        found = [n for (n, labels) in scrape(http) if ("client_id", "sw-producer") in labels and "telemetry" in n]
    p.flush(10)
    admin_call(bs, lambda a: a.incremental_alter_configs(16, "by-software", [("match", 0, "client_software_name=x")]))
    assert found, "the subscription matching the client software name selected nothing"


def test_metrics_endpoint_matches_what_was_produced(broker: tuple[KopfkaProcess, int]) -> None:
    proc, http = broker
    bs = proc.bootstrap
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    create_topic(bs, "figures")
    p = Producer({"bootstrap.servers": bs, "enable.metrics.push": False, "linger.ms": 50})
    n, size = 500, 2000
    for i in range(n):
        p.produce("figures", b"%06d" % i + b"z" * (size - 6))
    assert p.flush(10) == 0
    c = Consumer(
        {"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False, "enable.metrics.push": False}
    )
    c.assign([TopicPartition("figures", 0, OFFSET_BEGINNING)])
    got = 0
    deadline = time.monotonic() + 20
    while got < n and time.monotonic() < deadline:
        got += len([m for m in c.consume(500, 1.0) if m.error() is None])
    c.close()
    assert got == n
    m = scrape(http)  # parsed by prometheus_client.parser
    assert sample(m, "kafka_server_brokertopicmetrics_messagesin_total", topic="figures") == n
    bytes_in = sample(m, "kafka_server_brokertopicmetrics_bytesin_total", topic="figures") or 0
    assert n * size <= bytes_in <= n * (size + 100)
    log_size = sample(m, "kafka_log_log_size", topic="figures", partition="0")
    assert log_size == bytes_in  # every byte appended is in the log
    assert sample(m, "kafka_log_log_logendoffset", topic="figures", partition="0") == n
    bytes_out = sample(m, "kafka_server_brokertopicmetrics_bytesout_total", topic="figures") or 0
    assert bytes_out >= bytes_in
    assert (sample(m, "kafka_network_requestmetrics_requests_total", request="Produce", version="12") or 0) + sum(
        v
        for (name, labels), v in m.items()
        if name == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in labels
    ) >= 1
    assert sample(m, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert sample(m, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert any(name == "kafka_network_requestmetrics_totaltimems_bucket" for name, _ in m)


__all__ = ["Admin"]
