"""docs/api-coverage.md as data: the table of Kafka 4.3's broker APIs beside kopfka's."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api-coverage.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| ([\d-]+|—) \| ([\d-]+|—) \| (.+) \|$")
STATUSES = ("served", "in progress elsewhere", "left out", "served beyond Kafka")

Range = tuple[int, int] | None


def _range(text: str) -> Range:
    if text == "—":
        return None
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def coverage_table() -> dict[int, tuple[str, Range, Range, str]]:
    """key -> (name, Kafka 4.3 range, kopfka range, status) from docs/api-coverage.md."""
    rows = {}
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m:
            key = int(m.group(1))
            assert key not in rows, f"api key {key} listed twice"
            rows[key] = (m.group(2), _range(m.group(3)), _range(m.group(4)), m.group(5))
    return rows
