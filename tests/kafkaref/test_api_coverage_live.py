"""docs/api-coverage.md against the live brokers: its Kafka column is what Kafka 4.3 answers to
ApiVersions, its kopfka column what kopfka answers (tests/protocol/test_api_coverage.py checks
the reasons without needing Kafka)."""

from __future__ import annotations

import asyncio

from api_coverage import coverage_table
from kafka_ref import KafkaCluster
from kopfka.client.connection import KafkaConnection
from kopfka_process import KopfkaProcess


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    async def call() -> dict[int, tuple[int, int]]:
        conn = await KafkaConnection.open(bootstrap.split(",")[0])
        try:
            r = await conn.request(18, 3, {"client_software_name": "kopfka-tests", "client_software_version": "1"})
        finally:
            await conn.close()
        assert r.error_code == 0
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}

    return asyncio.run(call())


def test_table_matches_live_kafka_and_kopfka(kafka: KafkaCluster, kopfka_session: KopfkaProcess) -> None:
    table = coverage_table()
    assert api_versions(kafka.bootstrap) == {k: r[1] for k, r in table.items() if r[1] is not None}
    assert api_versions(kopfka_session.bootstrap) == {k: r[2] for k, r in table.items() if r[2] is not None}
