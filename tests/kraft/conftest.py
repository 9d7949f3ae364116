from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cluster import Cluster


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Any]:
    """Build (format) clusters; every process is SIGKILLed on teardown."""
    made: list[Cluster] = []

    def make(controllers: int = 3, brokers: int = 3, **kw: Any) -> Cluster:
        c = Cluster(tmp_path / f"c{len(made)}", controllers, brokers, **kw)
        made.append(c)
        c.format_all()
        return c

    yield make
    for c in made:
        c.stop()
