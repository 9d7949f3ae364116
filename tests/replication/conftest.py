from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import new_cluster


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Any]:
    """Build (format) and start clusters of 1 controller + N brokers; SIGKILLed on teardown."""
    made: list[Any] = []

    def make(brokers: int = 3, props: dict[str, str] | None = None, start: bool = True, dirs: int = 1) -> Any:
        c = new_cluster(tmp_path / f"c{len(made)}", brokers, props, dirs=dirs)
        made.append(c)
        if start:
            c.start()
        return c

    yield make
    for c in made:
        for b in c.nodes:
            if b.proc is not None and b.proc.poll() is None:
                try:
                    b.proc.send_signal(18)  # SIGCONT: a stopped process cannot die
                except ProcessLookupError:
                    pass
        c.stop()
