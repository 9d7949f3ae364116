"""Fixtures for the transaction tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from transactions.eos import Worker


@pytest.fixture
def workers() -> Iterator[Callable[..., Worker]]:
    """Start eos_worker processes; whatever happens in the test, none outlives it."""
    started: list[Worker] = []

    def start(bootstrap: str, root: Path, label: str, *args: Any) -> Worker:
        w = Worker(bootstrap, root, label, *args)
        started.append(w)
        return w

    yield start
    for w in started:
        if w.proc.poll() is None:
            w.kill()
