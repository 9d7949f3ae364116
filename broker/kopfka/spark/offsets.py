"""Offset bookkeeping: checkpoint JSON, offset ranges, splitting and read limits.

Pure functions (no broker access) so planning is deterministic and unit-testable: Spark replays
an uncommitted micro-batch after a restart by re-planning the same (start, end) offsets, and
exactly-once output depends on that producing the same records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kopfka.spark.options import TopicPartition

PartitionOffsets = dict[TopicPartition, int]


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form, the same shape Spark's Kafka source writes: {topic: {"p": offset}}.

    Sorted, because Spark compares offsets by their JSON text to decide whether there is new data.
    """
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(off)
    return out


def from_json(doc: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def ranges_between(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
                   ) -> list[OffsetRange]:
    """Non-empty ranges for every partition in ``end`` (``start`` must cover them)."""
    out = []
    for tp in sorted(end):
        s, e = start[tp], end[tp]
        if e > s:
            out.append(OffsetRange(tp[0], tp[1], s, e))
    return out


def split_ranges(ranges: Iterable[OffsetRange], *, min_partitions: int | None = None,
                 max_records: int | None = None) -> list[OffsetRange]:
    """Split large ranges so no single Spark task carries a whole busy partition.

    ``max_records`` caps each piece; ``min_partitions`` (as in Spark) splits the biggest ranges
    until there are at least that many pieces, in proportion to size.
    """
    pieces: list[OffsetRange] = []
    for r in ranges:
        if r.size == 0:
            continue
        n = 1 if not max_records else -(-r.size // max_records)
        pieces.extend(_split_even(r, n))
    if min_partitions and len(pieces) < min_partitions:
        total = sum(p.size for p in pieces)
        refined: list[OffsetRange] = []
        for p in pieces:
            want = max(1, round(min_partitions * p.size / total)) if total else 1
            refined.extend(_split_even(p, min(want, p.size)))
        pieces = refined
    return pieces


def _split_even(r: OffsetRange, n: int) -> list[OffsetRange]:
    n = max(1, min(n, r.size))
    base, extra = divmod(r.size, n)
    out, s = [], r.start
    for i in range(n):
        e = s + base + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.partition, s, e))
        s = e
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int) -> PartitionOffsets:
    """End offsets reading at most ``limit`` records, shared in proportion to each backlog.

    Unlike Spark's floor/ceil rounding the shares add up to exactly ``min(limit, backlog)``
    (largest remainders get the leftover records), so micro-batch sizes are predictable.
    """
    backlog = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    shares: dict[TopicPartition, int] = {}
    remainders: list[tuple[int, TopicPartition]] = []
    for tp, size in backlog.items():
        q, r = divmod(size * limit, total)
        shares[tp] = q
        remainders.append((-r, tp))
    left = limit - sum(shares.values())
    for _, tp in sorted(remainders)[:left]:
        shares[tp] += 1
    return {tp: start[tp] + shares[tp] for tp in latest}
