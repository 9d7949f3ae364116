"""TimeIndex (KIP-33): sparse map from max timestamp to offset.

Entry (12 bytes, big-endian): timestamp int64, relativeOffset int32. An entry (T, O) asserts
that the largest timestamp at or before offset O is T; timestamps increase along the file.
`is_full` reserves the last slot so the segment's true max timestamp can always be recorded
when it becomes inactive.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from kopfka.storage.abstract_index import AbstractIndex, CorruptIndexError

_ENTRY = struct.Struct(">qi")
_TS = struct.Struct(">q")
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """Kafka's TimestampOffset: a time index entry (T, O), T the largest timestamp at or before offset O."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    ENTRY_SIZE = 12

    def __init__(
        self, file: Path, base_offset: int, max_index_size: int = -1, writable: bool = True
    ) -> None:
        super().__init__(file, base_offset, max_index_size, writable)
        self._last_entry = TimestampOffset(NO_TIMESTAMP, base_offset)

    def _load(self) -> None:
        super()._load()
        self._last_entry = self._read_last_entry()

    def _read_last_entry(self) -> TimestampOffset:
        if self._entries == 0 or self._mmap is None:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        ts, rel = _ENTRY.unpack_from(self._mmap, (self._entries - 1) * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def _key_at(self, buf: mmap.mmap, n: int) -> int:
        return int(_TS.unpack_from(buf, n * 12)[0])

    def is_full(self) -> bool:
        self._ensure_loaded()
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        self._ensure_loaded()
        return self._last_entry

    def entry(self, n: int) -> TimestampOffset:
        self._ensure_loaded()
        if n >= self._entries or self._mmap is None:
            raise IndexError(f"attempt to fetch entry {n} of {self._entries} from {self.file}")
        ts, rel = _ENTRY.unpack_from(self._mmap, n * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Greatest entry with timestamp <= target; (-1, baseOffset) if none."""
        slot = self._largest_lower_bound_slot(target_timestamp)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        assert self._mmap is not None
        ts, rel = _ENTRY.unpack_from(self._mmap, slot * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if timestamp exceeds the last entry's."""
        self._ensure_loaded()
        if not skip_full_check and self.is_full():
            raise CorruptIndexError(f"attempt to append to a full time index {self.file}")
        last = self._last_entry
        if self._entries and offset < last.offset:
            raise CorruptIndexError(
                f"attempt to append offset {offset} below the last offset {last.offset} to "
                f"{self.file}"
            )
        if self._entries and timestamp < last.timestamp:
            raise CorruptIndexError(
                f"attempt to append timestamp {timestamp} below the last {last.timestamp} to "
                f"{self.file}"
            )
        if timestamp > last.timestamp:
            if self._entries >= self._max_entries:
                if not skip_full_check:
                    raise CorruptIndexError(f"time index {self.file} is full")
                return
            assert self._mmap is not None
            _ENTRY.pack_into(
                self._mmap, self._entries * 12, timestamp, self.relative_offset(offset)
            )
            self._entries += 1
            self._last_entry = TimestampOffset(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is >= `offset` (offsets are also increasing)."""
        self._ensure_loaded()
        buf = self._mmap
        lo, hi = 0, self._entries  # find first slot with offset >= target
        while lo < hi and buf is not None:
            mid = (lo + hi) >> 1
            rel = struct.unpack_from(">i", buf, mid * 12 + 8)[0]
            if self.base_offset + rel >= offset:
                hi = mid
            else:
                lo = mid + 1
        self._truncate_to_entries(lo)

    def _truncate_to_entries(self, entries: int) -> None:
        super()._truncate_to_entries(entries)
        self._last_entry = self._read_last_entry()

    def resize(self, new_size: int) -> bool:
        changed = super().resize(new_size)
        self._last_entry = self._read_last_entry()
        return changed

    def sanity_check(self) -> None:
        self._ensure_loaded()
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"time index {self.file} length {self._length} is not a multiple of "
                f"{self.ENTRY_SIZE}"
            )
        if self._entries and self._mmap is not None:
            last = self._last_entry
            first_ts, first_rel = _ENTRY.unpack_from(self._mmap, 0)
            if last.offset < self.base_offset or first_rel < 0 or last.timestamp < first_ts:
                raise CorruptIndexError(f"corrupt time index {self.file}: entries not increasing")
