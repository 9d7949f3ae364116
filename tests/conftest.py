"""Shared fixtures: a real `kopfka serve` process per test (or per module) on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kopfka_process import KopfkaProcess

# Modules that assert a throughput at least some fraction of a limit, or a deadline for work on
# the CPU: on two cores, a second test worker running beside them starves them (measured with
# `-n 2` under load: byte-rate quotas at 0.59-0.74 of 1 MB/s, a 4 MB/s throttle at 2.4 MB/s, the
# kopf lifecycle past its waits; two Java KIP-848 consumers that never settled their split within
# 60 s). ./scripts/test runs the rest on two workers, then these alone.
SERIAL_MODULES = {
    "tests/quotas/test_byte_rate_quotas.py",
    "tests/quotas/test_quota_admin_e2e.py",
    "tests/quotas/test_request_quota_work_time.py",
    "tests/kraft/test_quotas_on_cluster.py",
    "tests/replication/test_reassign_throttle.py",
    "tests/replication/test_data_mover.py",
    "tests/operator/test_autoscale_metrics.py",
    "tests/operator/test_operator_kopf.py",
    "tests/kafkaref/test_java_clients.py",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        if item.path.relative_to(root).as_posix() in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)


@pytest.fixture
def kopfka(tmp_path: Path) -> Iterator[KopfkaProcess]:
    """A fresh single-node kopfka (embedded-default style) for one test."""
    proc = KopfkaProcess(tmp_path / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture(scope="module")
def kopfka_shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    """One kopfka shared by a module's tests (use distinct topic names per test)."""
    proc = KopfkaProcess(tmp_path_factory.mktemp("kopfka") / "data").start()
    try:
        yield proc
    finally:
        proc.kill()


from java_clients import java_admin  # noqa: E402, F401  (Kafka's Java admin client, a session fixture)
