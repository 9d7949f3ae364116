"""Fixtures holding kopfka against Apache Kafka: the install (skip when impossible), one shared
single-node Kafka per session and one shared kopfka per session (tests use distinct names)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kafka_ref import KafkaCluster, KafkaUnavailable, kafka_home
from kopfka_process import KopfkaProcess


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """The installed Kafka home, or skip: every test here needs Kafka's jars."""
    try:
        return kafka_home()
    except KafkaUnavailable as exc:
        pytest.skip(f"Apache Kafka unavailable: {exc}")


@pytest.fixture(scope="session")
def kafka(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One single-node KRaft Kafka shared by the whole session."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-ref")).format()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.kill()


@pytest.fixture(scope="session")
def kopfka_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    """One kopfka shared by the session's Kafka-tool tests."""
    proc = KopfkaProcess(
        tmp_path_factory.mktemp("kopfka-ref") / "data", overrides={"group.initial.rebalance.delay.ms": "0"}
    ).start()
    try:
        yield proc
    finally:
        proc.kill()
