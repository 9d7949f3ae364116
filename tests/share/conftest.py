"""Fixtures of the share-group tests: a broker with short share-group timings, Kafka's share
consumer (SharePeer.java) and its tools."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from java_clients import share_peer  # noqa: F401  (KafkaShareConsumer scenarios, a session fixture)
from kopfka_process import KopfkaProcess

# lock timeouts and the delivery limit short enough to test, heartbeats frequent enough that
# members see a new assignment within a second
SHARE_OVERRIDES = {
    "group.share.record.lock.duration.ms": "3000",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": "3",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "500",
    "share.coordinator.state.topic.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
}


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    """One broker shared by a module's tests (each uses its own groups and topics)."""
    proc = KopfkaProcess(tmp_path_factory.mktemp("share") / "data", overrides=SHARE_OVERRIDES).start()
    try:
        yield proc
    finally:
        proc.kill()
