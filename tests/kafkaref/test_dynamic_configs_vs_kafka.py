"""Dynamic broker configs side by side with Apache Kafka: kafka-configs alters the cluster default
of a real KRaft Kafka and of kopfka the same way, and both accept the same keys and refuse the
same ones with the same error; DescribeConfigs marks the same keys read-only."""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka_ref import KafkaCluster, run_tool
from kopfka.client.connection import KafkaConnection
from kopfka_process import KopfkaProcess

DEFAULT = ("--entity-type", "brokers", "--entity-default")
INVALID_REQUEST = 42

# accepted by both (values within what the running brokers allow)
ACCEPTED = [
    "log.cleaner.threads=2",
    "log.cleaner.io.max.bytes.per.second=10000000",
    "log.retention.ms=86400000",
    "message.max.bytes=2000000",
    "num.io.threads=12",
    "num.replica.fetchers=2",
    "background.threads=12",
    "max.connections.per.ip=1000",
    "producer.id.expiration.ms=3600000",
    "transaction.partition.verification.enable=true",
    "compression.type=lz4",
]
# refused by both, each with Kafka's message
REFUSED = [
    "num.partitions=3,log.retention.hours=1",
    "log.roll.hours=1",
    "log.cleaner.enable=false",
    "ssl.keystore.location=/tmp/x",
    "listener.name.plaintext.ssl.keystore.location=/tmp/x",
    "num.io.threads=100",
    "num.network.threads=1000",
    "log.cleaner.threads=3",
    "max.connections=0",
    "max.connections.per.ip=0",
]


def alter(bootstrap: str, text: str, op: str = "--add-config") -> subprocess.CompletedProcess[str]:
    return run_tool("kafka-configs", "--bootstrap-server", bootstrap, *DEFAULT, "--alter", op, text, check=False)


def send(bootstrap: str, ops: list[tuple[str, int, str | None]]) -> Any:
    """IncrementalAlterConfigs on the cluster default, on the wire (a JVM start per case would cost
    seconds each; librdkafka refuses the empty resource name). ops: (key, 0 set / 1 delete, value)."""

    async def go() -> Any:
        conn = await KafkaConnection.open(bootstrap)
        try:
            configs = [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]
            body = {
                "resources": [{"resource_type": 4, "resource_name": "", "configs": configs}],
                "validate_only": False,
            }
            return (await conn.request(44, 1, body)).responses[0]
        finally:
            await conn.close()

    return asyncio.run(go())


def refusal(bootstrap: str, text: str) -> str:
    r = send(bootstrap, [(k, 0, v) for k, _, v in (i.partition("=") for i in text.split(","))])
    assert r.error_code == INVALID_REQUEST, (bootstrap, text, r.error_code, r.error_message)
    return str(r.error_message)


def test_same_keys_accepted_and_refused_with_kafkas_errors(kafka: KafkaCluster, kopfka_session: KopfkaProcess) -> None:
    keys = ",".join(text.split("=")[0] for text in ACCEPTED)
    for bootstrap in (kafka.bootstrap, kopfka_session.bootstrap):
        res = alter(bootstrap, ",".join(ACCEPTED))
        assert res.returncode == 0, (bootstrap, res.stdout + res.stderr)
        res = alter(bootstrap, keys, "--delete-config")
        assert res.returncode == 0, (bootstrap, res.stdout + res.stderr)
    for text in REFUSED:
        theirs, ours = refusal(kafka.bootstrap, text), refusal(kopfka_session.bootstrap, text)
        # Kafka wraps a component's refusal as "Invalid value <exception: message> for configuration ..."
        assert ours in theirs, (text, ours, theirs)

    # deleting a key is checked too: from 32 back to the static 8 is less than half. Each step is
    # checked against the broker's current value, which follows the metadata a moment later.
    def step(bootstrap: str, value: str | None) -> None:
        deadline = time.monotonic() + 10
        while (r := send(bootstrap, [("num.io.threads", 0 if value else 1, value)])).error_code != 0:
            assert time.monotonic() < deadline, (bootstrap, value, r.error_message)
            time.sleep(0.2)

    for bootstrap in (kafka.bootstrap, kopfka_session.bootstrap):
        step(bootstrap, "16")
        step(bootstrap, "32")
        time.sleep(1)
        r = send(bootstrap, [("num.io.threads", 1, None)])
        assert r.error_code == INVALID_REQUEST and "at least half the current value 32" in r.error_message, bootstrap
        step(bootstrap, "16")
        step(bootstrap, "8")
        step(bootstrap, None)


@pytest.mark.timeout(120)
def test_describe_configs_read_only_as_kafka(kafka: KafkaCluster, kopfka_session: KopfkaProcess) -> None:
    def read_only(bootstrap: str) -> dict[str, bool]:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        res = ConfigResource(ResourceType.BROKER, "1")
        return {k: v.is_read_only for k, v in admin.describe_configs([res])[res].result(30).items()}

    theirs, ours = read_only(kafka.bootstrap), read_only(kopfka_session.bootstrap)
    common = set(theirs) & set(ours)
    assert len(common) > 150
    differ = sorted(k for k in common if theirs[k] != ours[k])
    assert differ == [], {k: (theirs[k], ours[k]) for k in differ}
    assert not ours["log.cleaner.threads"] and ours["num.partitions"]
