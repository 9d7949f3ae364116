"""OffsetIndex: sparse map from offset to byte position in the segment's .log.

Entry (8 bytes, big-endian): relativeOffset int32 (= offset - baseOffset), position int32.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from kopfka.storage.abstract_index import AbstractIndex, CorruptIndexError

_ENTRY = struct.Struct(">ii")
_REL = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    """An offset index entry: an absolute offset and its byte position in the segment's .log."""

    offset: int
    position: int


class InvalidOffsetError(Exception):
    """An index append that would break the strictly-increasing invariant."""


class OffsetIndex(AbstractIndex):
    ENTRY_SIZE = 8

    def __init__(self, file: Path, base_offset: int, max_index_size: int = -1, writable: bool = True) -> None:
        super().__init__(file, base_offset, max_index_size, writable)
        self._last_offset = base_offset

    def _load(self) -> None:
        super()._load()
        self._last_offset = self._read_last_offset()

    def _read_last_offset(self) -> int:
        if self._entries == 0 or self._mmap is None:
            return self.base_offset
        return self.base_offset + _REL.unpack_from(self._mmap, (self._entries - 1) * 8)[0]

    def _key_at(self, buf: mmap.mmap, n: int) -> int:
        return int(_REL.unpack_from(buf, n * 8)[0])

    @property
    def last_offset(self) -> int:
        self._ensure_loaded()
        return self._last_offset

    def entry(self, n: int) -> OffsetPosition:
        self._ensure_loaded()
        if n >= self._entries or self._mmap is None:
            raise IndexError(f"attempt to fetch entry {n} of {self._entries} from {self.file}")
        rel, pos = _ENTRY.unpack_from(self._mmap, n * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Greatest indexed (offset, position) with offset <= target; (baseOffset, 0) if none."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        assert self._mmap is not None
        rel, pos = _ENTRY.unpack_from(self._mmap, slot * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def fetch_upper_bound_offset(self, fetch_position: int, fetch_size: int) -> OffsetPosition | None:
        """First indexed entry whose position is beyond fetch_position + fetch_size.

        Every read_committed fetch asks (its aborted-transaction range ends there): a binary
        search over the positions, which grow with the slot, as Kafka's fetchUpperBoundOffset."""
        self._ensure_loaded()
        target = fetch_position + fetch_size
        buf = self._mmap
        if buf is None:
            return None
        lo, hi = 0, self._entries  # the answer is the first slot in [lo, hi) past the target
        while lo < hi:
            mid = (lo + hi) >> 1
            if _ENTRY.unpack_from(buf, mid * 8)[1] > target:
                hi = mid
            else:
                lo = mid + 1
        if lo == self._entries:
            return None
        rel, pos = _ENTRY.unpack_from(buf, lo * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def append(self, offset: int, position: int) -> None:
        self._ensure_loaded()
        if self._entries and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} no larger than the last offset {self._last_offset} to {self.file}"
            )
        if self._entries >= self._max_entries:
            raise InvalidOffsetError(f"attempt to append to a full index {self.file}")
        assert self._mmap is not None
        _ENTRY.pack_into(self._mmap, self._entries * 8, self.relative_offset(offset), position)
        self._entries += 1
        self._last_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= `offset`."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset)
        if slot < 0:
            new_entries = 0
        elif self._key_at(self._mmap, slot) == offset - self.base_offset:  # type: ignore[arg-type]
            new_entries = slot
        else:
            new_entries = slot + 1
        self._truncate_to_entries(new_entries)

    def _truncate_to_entries(self, entries: int) -> None:
        super()._truncate_to_entries(entries)
        self._last_offset = self._read_last_offset()

    def resize(self, new_size: int) -> bool:
        changed = super().resize(new_size)
        self._last_offset = self._read_last_offset()
        return changed

    def sanity_check(self, log_size: int | None = None) -> None:
        """Cheap structural checks; CorruptIndexError means the segment needs recovery."""
        self._ensure_loaded()
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"index file {self.file} length {self._length} is not a multiple of {self.ENTRY_SIZE}"
            )
        if self._entries and self._mmap is not None:
            rel, pos = _ENTRY.unpack_from(self._mmap, (self._entries - 1) * 8)
            if rel < 0 or (self._entries > 1 and rel == 0):
                raise CorruptIndexError(f"corrupt index {self.file}: last offset {rel} not above base")
            first_rel, first_pos = _ENTRY.unpack_from(self._mmap, 0)
            if first_rel < 0 or first_pos < 0 or pos < first_pos or rel < first_rel:
                raise CorruptIndexError(f"corrupt index {self.file}: entries not increasing")
            if log_size is not None and pos >= log_size:
                raise CorruptIndexError(f"corrupt index {self.file}: position {pos} beyond log size {log_size}")
