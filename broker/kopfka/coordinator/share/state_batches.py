"""Combining share-partition state batches, as Kafka's PersisterStateBatchCombiner does.

The share coordinator keeps, per share-partition, a list of non-overlapping state batches
above the start offset. An update's batches are laid over the current ones: where two batches
cover the same offset, the one further along wins — the higher delivery count, then the higher
state (Available 0 < Acknowledged 2 < Archived 4) — because a record's state only ever moves
forward. Batches wholly below the start offset are dropped, a batch straddling it is clipped,
and adjacent batches with the same state and count are merged.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from kopfka.coordinator.share.records import StateBatch


def combine(so_far: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int = -1) -> list[StateBatch]:
    batches = [b for b in (*so_far, *new) if b.last_offset >= b.first_offset]
    if start_offset != -1:
        batches = [
            b
            if b.first_offset >= start_offset
            else StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in batches
            if b.last_offset >= start_offset
        ]
    if not batches:
        return []
    batches.sort()
    bounds = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    out: list[StateBatch] = []
    active: list[tuple[int, int, int]] = []  # (-count, -state, last_offset) — a max-heap on (count, state)
    i = 0
    for lo, hi in itertools.pairwise(bounds):
        while i < len(batches) and batches[i].first_offset <= lo:
            b = batches[i]
            heapq.heappush(active, (-b.delivery_count, -b.delivery_state, b.last_offset))
            i += 1
        while active and active[0][2] < lo:
            heapq.heappop(active)
        if not active:
            continue  # a gap between batches
        count, state = -active[0][0], -active[0][1]
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.last_offset == lo - 1
            and (prev.delivery_count, prev.delivery_state)
            == (
                count,
                state,
            )
        ):
            out[-1] = StateBatch(prev.first_offset, hi - 1, state, count)
        else:
            out.append(StateBatch(lo, hi - 1, state, count))
    return out
