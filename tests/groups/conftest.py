"""Fixtures for the group tests: a broker with short group timeouts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kopfka_process import KopfkaProcess

GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.heartbeat.interval.ms": "300",
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(tmp_path / "data", overrides=GROUP_OVERRIDES).start()
    try:
        yield proc
    finally:
        proc.kill()
