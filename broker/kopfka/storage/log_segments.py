"""LogSegments: the segments of a log ordered by base offset (floor/higher/last navigation)."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from kopfka.storage.log_segment import LogSegment


class LogSegments:
    def __init__(self) -> None:
        self._by_offset: dict[int, LogSegment] = {}
        self._offsets: list[int] = []  # sorted base offsets

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Insert or replace the segment at its base offset; returns a replaced one."""
        base = segment.base_offset
        previous = self._by_offset.get(base)
        if previous is None:
            if not self._offsets or base > self._offsets[-1]:
                self._offsets.append(base)
            else:
                bisect.insort(self._offsets, base)
        self._by_offset[base] = segment
        return previous

    def remove(self, base_offset: int) -> None:
        if self._by_offset.pop(base_offset, None) is not None:
            i = bisect.bisect_left(self._offsets, base_offset)
            del self._offsets[i]

    def clear(self) -> None:
        self._by_offset.clear()
        self._offsets.clear()

    def close(self) -> None:
        for segment in self.values():
            segment.close()

    def __len__(self) -> int:
        return len(self._offsets)

    def __bool__(self) -> bool:
        return bool(self._offsets)

    def is_empty(self) -> bool:
        return not self._offsets

    def contains(self, base_offset: int) -> bool:
        return base_offset in self._by_offset

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_offset.get(base_offset)

    def base_offsets(self) -> list[int]:
        return list(self._offsets)

    def values(
        self, from_offset: int | None = None, to_offset: int | None = None
    ) -> list[LogSegment]:
        """All segments, or those that may hold offsets in [from_offset, to_offset)."""
        if from_offset is None or to_offset is None:
            return [self._by_offset[o] for o in self._offsets]
        if from_offset == to_offset:
            return []
        if to_offset < from_offset:
            raise ValueError(f"invalid log segment range: from {from_offset} to {to_offset}")
        i = bisect.bisect_right(self._offsets, from_offset) - 1
        i = max(i, 0)
        j = bisect.bisect_left(self._offsets, to_offset)
        return [self._by_offset[o] for o in self._offsets[i:j]]

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def floor_segment(self, offset: int) -> LogSegment | None:
        i = bisect.bisect_right(self._offsets, offset)
        return self._by_offset[self._offsets[i - 1]] if i else None

    def lower_segment(self, offset: int) -> LogSegment | None:
        i = bisect.bisect_left(self._offsets, offset)
        return self._by_offset[self._offsets[i - 1]] if i else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        i = bisect.bisect_right(self._offsets, offset)
        return self._by_offset[self._offsets[i]] if i < len(self._offsets) else None

    def first_segment(self) -> LogSegment | None:
        return self._by_offset[self._offsets[0]] if self._offsets else None

    def last_segment(self) -> LogSegment | None:
        return self._by_offset[self._offsets[-1]] if self._offsets else None

    @property
    def active_segment(self) -> LogSegment:
        seg = self.last_segment()
        if seg is None:
            raise LookupError("log has no segments")
        return seg

    def non_active_log_segments_from(self, offset: int) -> list[LogSegment]:
        active = self.active_segment
        return [s for s in self.values() if s.base_offset >= offset and s is not active]

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._by_offset.values())

    def higher_segments(self, offset: int) -> list[LogSegment]:
        i = bisect.bisect_right(self._offsets, offset)
        return [self._by_offset[o] for o in self._offsets[i:]]
