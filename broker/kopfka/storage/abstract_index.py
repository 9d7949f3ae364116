"""AbstractIndex: a memory-mapped, pre-allocated, sparse index file.

The file is pre-allocated to `max_index_size` rounded down to the entry size so appends are
plain stores into the mapping; it is trimmed to its valid entries when the segment becomes
inactive or is closed, so a trimmed file's length tells how many entries it holds. The mmap is
created lazily on first use (LazyIndex, KIP-263): brokers with many segments start fast.

Lookups use the warm-section binary search: the last 8192 bytes of entries are searched first
because tailing readers and the append path only touch those pages.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

WARM_SECTION_BYTES = 8192


class CorruptIndexError(Exception):
    """An index file is inconsistent; the segment must be recovered to rebuild it."""


class IndexOffsetOverflowError(Exception):
    """An offset does not fit in 4 bytes relative to the segment base offset."""


def round_down_to_exact_multiple(n: int, factor: int) -> int:
    return factor * (n // factor)


class AbstractIndex:
    ENTRY_SIZE = 8

    def __init__(
        self, file: Path, base_offset: int, max_index_size: int = -1, writable: bool = True
    ) -> None:
        self.file = file
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._fd = -1
        self._mmap: mmap.mmap | None = None
        self._length = 0
        self._entries = 0
        self._max_entries = 0
        self._loaded = False

    # -- lazy open -------------------------------------------------------------------------

    def _load(self) -> None:
        newly_created = not self.file.exists()
        flags = os.O_RDWR | os.O_CREAT if self.writable else os.O_RDONLY
        fd = os.open(self.file, flags, 0o644)
        try:
            if newly_created:
                if self.max_index_size < self.ENTRY_SIZE and self.max_index_size != 0:
                    raise ValueError(f"invalid max index size {self.max_index_size}")
                os.ftruncate(fd, round_down_to_exact_multiple(self.max_index_size, self.ENTRY_SIZE))
            length = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._map(length)
        # a trimmed (inactive or cleanly closed) file holds exactly its entries
        self._entries = 0 if newly_created else length // self.ENTRY_SIZE
        self._loaded = True

    def _map(self, length: int) -> None:
        self._length = length
        if length > 0:
            access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
            self._mmap = mmap.mmap(self._fd, length, access=access)
        else:
            self._mmap = None
        self._max_entries = length // self.ENTRY_SIZE

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._load()

    @property
    def is_loaded(self) -> bool:
        return self._loaded

    # -- sizes -----------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return self._entries

    @property
    def max_entries(self) -> int:
        self._ensure_loaded()
        return self._max_entries

    def is_full(self) -> bool:
        self._ensure_loaded()
        return self._entries >= self._max_entries

    def size_in_bytes(self) -> int:
        self._ensure_loaded()
        return self._entries * self.ENTRY_SIZE

    def length(self) -> int:
        """Current file length (pre-allocated size while active)."""
        self._ensure_loaded()
        return self._length

    # -- mutation --------------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Set the file length to `new_size` rounded down to the entry size; True if it changed."""
        self._ensure_loaded()
        rounded = round_down_to_exact_multiple(new_size, self.ENTRY_SIZE)
        if rounded == self._length:
            return False
        self._unmap()
        os.ftruncate(self._fd, rounded)
        self._map(rounded)
        self._entries = min(self._entries, self._max_entries)
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self._entries_if_loaded() * self.ENTRY_SIZE)

    def _entries_if_loaded(self) -> int:
        self._ensure_loaded()
        return self._entries

    def reset(self) -> None:
        """Drop all entries and re-grow to the max size (used before recovery rebuilds it)."""
        self._ensure_loaded()
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def truncate(self) -> None:
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        self._ensure_loaded()
        self._entries = entries

    def flush(self) -> None:
        if self._mmap is not None:
            self._mmap.flush()

    def close(self) -> None:
        """Trim and unmap; the file stays on disk."""
        if not self._loaded:
            return
        self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        """Unmap and close without trimming (explicit unmap rather than waiting for GC)."""
        self._unmap()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._loaded = False

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            self.file.unlink()
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, new_file: Path) -> None:
        try:
            os.replace(self.file, new_file)
        except FileNotFoundError:
            pass
        self.file = new_file

    def relative_offset(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > 0x7FFFFFFF:
            raise IndexOffsetOverflowError(
                f"integer overflow for offset {offset} (base offset {self.base_offset}) in "
                f"{self.file}"
            )
        return rel

    def can_append_offset(self, offset: int) -> bool:
        rel = offset - self.base_offset
        return 0 <= rel <= 0x7FFFFFFF

    # -- search ----------------------------------------------------------------------------

    def _key_at(self, buf: mmap.mmap, n: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _largest_lower_bound_slot(self, target: int) -> int:
        """Slot of the greatest entry whose key is <= target, or -1 (warm-section search)."""
        self._ensure_loaded()
        entries = self._entries
        buf = self._mmap
        if entries == 0 or buf is None:
            return -1
        key_at = self._key_at
        first_hot = max(0, entries - 1 - WARM_SECTION_BYTES // self.ENTRY_SIZE)
        if key_at(buf, first_hot) <= target:
            lo, hi = first_hot, entries - 1
        else:
            if first_hot == 0 or key_at(buf, 0) > target:
                return -1
            lo, hi = 0, first_hot
        # invariant: key(lo) <= target
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if key_at(buf, mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _smallest_upper_bound_slot(self, target: int) -> int:
        """Slot of the smallest entry whose key is >= target, or -1."""
        self._ensure_loaded()
        entries = self._entries
        buf = self._mmap
        if entries == 0 or buf is None:
            return -1
        lo, hi = 0, entries - 1
        key_at = self._key_at
        if key_at(buf, hi) < target:
            return -1
        while lo < hi:
            mid = (lo + hi) >> 1
            if key_at(buf, mid) >= target:
                hi = mid
            else:
                lo = mid + 1
        return lo
