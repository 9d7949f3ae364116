"""Shared fixtures: a real `kopfka serve` process per test (or per module) on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kopfka_process import KopfkaProcess

# Modules that assert a throughput at least some fraction of a limit: on two cores, another test
# worker running beside them starves them (measured with `-n 2` under load: byte-rate quotas at
# 0.59-0.74 of 1 MB/s, a 4 MB/s throttle at 2.4 MB/s). ./scripts/test runs the rest on three
# workers, then these alone. The kopf lifecycle module (past its waits beside a second worker)
# and the Java clients' module (a KIP-848 probe that judged a live map: fixed) ran here until
# 2026-11-29; both then passed twice on three workers beside the heaviest modules.
SERIAL_MODULES = {
    "tests/quotas/test_byte_rate_quotas.py",
    "tests/quotas/test_quota_admin_e2e.py",
    "tests/quotas/test_request_quota_work_time.py",
    "tests/kraft/test_quotas_on_cluster.py",
    "tests/replication/test_reassign_throttle.py",
    "tests/replication/test_data_mover.py",
    "tests/operator/test_autoscale_metrics.py",
}


def _module_seconds() -> dict[str, float]:
    """Measured worker-seconds per slow module (tests/module_seconds.txt)."""
    table = Path(__file__).with_name("module_seconds.txt")
    out = {}
    for line in table.read_text().splitlines() if table.exists() else []:
        if line.strip() and not line.startswith("#"):
            secs, path = line.split()
            out[path] = float(secs)
    return out


# Modules that share one session fixture too costly to start on every worker: the Spark session
# (~30 s of JVM start). The workers are handed each group whole.
WORKER_GROUPS = ("tests/spark/",)


def work_unit(module: str) -> str:
    """The unit of work a test worker is handed: its module, or the module's group."""
    return next((group for group in WORKER_GROUPS if module.startswith(group)), module)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with the modules of a WORKER_GROUPS entry kept on one worker."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GroupedLoadFile(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid.split("::", 1)[0])

    return GroupedLoadFile(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        if item.path.relative_to(root).as_posix() in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
    # Slowest units of work first (a stable sort: a module's tests keep their order). With
    # `--dist loadfile --no-loadscope-reorder` the workers take them in this order, so the long ones
    # start early instead of one of them running alone at the end.
    seconds: dict[str, float] = {}
    for module, secs in _module_seconds().items():
        unit = work_unit(module)
        seconds[unit] = seconds.get(unit, 0.0) + secs
    items.sort(key=lambda item: -seconds.get(work_unit(item.path.relative_to(root).as_posix()), 0.0))


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
