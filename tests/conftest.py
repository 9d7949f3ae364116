"""Shared fixtures: a real `kopfka serve` process per test (or per module) on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kopfka_process import KopfkaProcess


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
