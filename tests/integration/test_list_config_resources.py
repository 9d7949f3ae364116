"""ListConfigResources (KIP-1142) and, as its v0, ListClientMetricsResources (KIP-714): what
Kafka's `kafka-client-metrics --list` and the Java admin client's listConfigResources see."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from java_clients import JavaAdmin
from kafka_ref import run_tool
from kopfka.client.connection import KafkaConnection
from kopfka_process import KopfkaProcess

UNSUPPORTED_VERSION = 35


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(tmp_path_factory.mktemp("lcr") / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        for fut in admin.create_topics([NewTopic(n, 1, 1) for n in ("lcr-b", "lcr-a")]).values():
            fut.result(30)
        yield proc
    finally:
        proc.kill()


def list_config_resources(bootstrap: str, version: int, types: list[int]) -> Any:
    async def call() -> Any:
        conn = await KafkaConnection.open(bootstrap)
        try:
            return await conn.request(74, version, {"resource_types": types})
        finally:
            await conn.close()

    return asyncio.run(call())


@pytest.mark.timeout(180)
def test_kafka_tools_and_java_admin_list_config_resources(broker: KopfkaProcess, java_admin: JavaAdmin) -> None:
    for name in ("sub-2", "sub-1"):
        run_tool(
            "kafka-client-metrics", "--bootstrap-server", broker.bootstrap, "--alter", "--name", name,
            "--metrics", "org.apache.kafka.producer.", "--interval", "5000",
        )  # fmt: skip
    listed = run_tool("kafka-client-metrics", "--bootstrap-server", broker.bootstrap, "--list").stdout.split()
    assert listed == ["sub-1", "sub-2"]
    every, some, v0 = java_admin.run(
        broker.bootstrap,
        ["list-config-resources"],
        ["list-config-resources", "TOPIC,CLIENT_METRICS"],
        ["list-client-metrics-resources"],
    )
    assert every["ok"] == [
        ["CLIENT_METRICS", "sub-1"],
        ["CLIENT_METRICS", "sub-2"],
        ["BROKER_LOGGER", "1"],
        ["BROKER", "1"],
        ["TOPIC", "lcr-a"],
        ["TOPIC", "lcr-b"],
    ]
    assert some["ok"] == [
        ["CLIENT_METRICS", "sub-1"],
        ["CLIENT_METRICS", "sub-2"],
        ["TOPIC", "lcr-a"],
        ["TOPIC", "lcr-b"],
    ]
    assert sorted(v0["ok"]) == ["sub-1", "sub-2"]


def test_unsupported_resource_type(broker: KopfkaProcess) -> None:
    resp = list_config_resources(broker.bootstrap, 1, [2, 99])
    assert int(resp.error_code) == UNSUPPORTED_VERSION and resp.config_resources == ()
    resp = list_config_resources(broker.bootstrap, 1, [4])
    assert int(resp.error_code) == 0 and [(r.resource_type, r.resource_name) for r in resp.config_resources] == [
        (4, "1")
    ]
