"""LogSegment: one .log file plus its lazily mapped offset/time indexes and txn index.

Not safe for concurrent mutation; in kopfka every method runs on the partition's event loop
(or, during loading, on the one worker that owns the log dir).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kopfka.config.log_config import LogConfig
from kopfka.protocol.records import BatchHeader
from kopfka.storage import log_file_utils as lfu
from kopfka.storage.abstract_index import IndexOffsetOverflowError
from kopfka.storage.file_records import (
    FileRecords,
    FileSlice,
    LogOffsetPosition,
    TimestampAndOffset,
)
from kopfka.storage.offset_index import OffsetIndex
from kopfka.storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from kopfka.storage.transaction_index import AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from kopfka.storage.leader_epoch_cache import LeaderEpochFileCache
    from kopfka.storage.producer_state import ProducerStateManager

INT_MAX = 0x7FFFFFFF
RECENT_BATCHES = 32


class LogSegmentOffsetOverflowError(Exception):
    """A batch's offset cannot be stored relative to the segment's base offset."""


@dataclass(slots=True)
class LogOffsetMetadata:
    """An offset plus, when known, where it sits on disk (segment base and byte position)."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == -1

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        return not self.message_offset_only and self.segment_base_offset == other.segment_base_offset


@dataclass(slots=True)
class FetchDataInfo:
    """Kafka's FetchDataInfo: where a read starts, its byte slice (None: nothing to send),
    whether the first batch did not fit, and the aborted transactions a READ_COMMITTED fetch must skip."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice | None
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(frozen=True, slots=True)
class RollParams:
    """Kafka's RollParams: the config limits and the append's size, offsets and time that decide a segment roll."""

    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


def random_segment_jitter(config: LogConfig) -> int:
    jitter = config.segment_jitter_ms
    if jitter == 0:
        return 0
    return random.randrange(0, 1 << 31) % min(jitter, config.segment_ms)


class LogSegment:
    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        base_offset: int,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        time: Callable[[], int],
    ) -> None:
        self.log = log
        self._offset_index = offset_index
        self._time_index = time_index
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.time = time
        self.created = time()
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_ts_and_offset: TimestampOffset | None = None  # lazy, from the time index
        # (base offset, last offset, position, size) of the last batches appended, in order: the
        # followers and consumers at the tail read exactly these, and find them here instead of
        # by an index lookup and a scan of up to index.interval.bytes of batch headers
        self._recent: deque[tuple[int, int, int, int]] = deque(maxlen=RECENT_BATCHES)

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        time: Callable[[], int],
        *,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
        file_suffix: str = "",
    ) -> LogSegment:
        max_index_size = config.segment_index_bytes
        return cls(
            FileRecords.open(
                lfu.log_file(directory, base_offset, file_suffix),
                file_already_exists=file_already_exists,
                init_file_size=init_file_size,
                preallocate=preallocate,
            ),
            OffsetIndex(
                lfu.offset_index_file(directory, base_offset, file_suffix),
                base_offset,
                max_index_size,
            ),
            TimeIndex(
                lfu.time_index_file(directory, base_offset, file_suffix),
                base_offset,
                max_index_size,
            ),
            TransactionIndex(base_offset, lfu.transaction_index_file(directory, base_offset, file_suffix)),
            base_offset,
            config.index_interval_bytes,
            random_segment_jitter(config),
            time,
        )

    # -- accessors ---------------------------------------------------------------------------

    def offset_index(self) -> OffsetIndex:
        return self._offset_index

    def time_index(self) -> TimeIndex:
        return self._time_index

    @property
    def size(self) -> int:
        return self.log.size_in_bytes()

    def _max_so_far(self) -> TimestampOffset:
        if self._max_ts_and_offset is None:
            self._max_ts_and_offset = self._time_index.last_entry
        return self._max_ts_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_so_far().timestamp

    @property
    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        return self._max_so_far().offset

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT_MAX

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"detected offset overflow at offset {offset} in segment with base offset {self.base_offset}"
            )

    # -- append ------------------------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        records: bytes | bytearray | memoryview,
        batches: Sequence[BatchHeader],
    ) -> None:
        """Write validated batches and add sparse index entries every index.interval.bytes.

        `batches` are the headers of `records` (positions relative to `records`).
        """
        if not batches:
            return
        physical_position = self.log.size_in_bytes()
        if physical_position == 0:
            self._rolling_based_timestamp = max(b.max_timestamp for b in batches)
        self._ensure_offset_in_range(largest_offset)
        self.log.append(records)
        max_so_far = self._max_so_far()
        max_ts, max_off = max_so_far.timestamp, max_so_far.offset
        interval = self.index_interval_bytes
        since = self.bytes_since_last_index_entry
        recent = self._recent
        for batch in batches:
            batch_max_ts = batch.max_timestamp
            last_offset = batch.base_offset + batch.last_offset_delta
            if batch_max_ts > max_ts:
                max_ts, max_off = batch_max_ts, last_offset
            if since > interval:
                self._offset_index.append(last_offset, physical_position)
                self._time_index.maybe_append(max_ts, max_off)
                since = 0
            size = batch.batch_length + 12
            recent.append((batch.base_offset, last_offset, physical_position, size))
            physical_position += size
            since += size
        self.bytes_since_last_index_entry = since
        if max_ts != max_so_far.timestamp:
            self._max_ts_and_offset = TimestampOffset(max_ts, max_off)

    def update_txn_index(self, aborted: AbortedTxn) -> None:
        self.txn_index.append(aborted)

    # -- read --------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_file_position: int = 0) -> LogOffsetPosition | None:
        """The batch holding `offset` (or the first after it): index lookup + bounded
        forward scan, or the batches appended last when they hold it."""
        recent = self._recent
        if recent and recent[0][0] <= offset <= recent[-1][1]:
            # contiguous: every batch before the first here ends below its base offset
            for _, last, position, size in recent:
                if last >= offset and position >= starting_file_position:
                    return LogOffsetPosition(last, position, size)
        mapping = self._offset_index.lookup(offset)
        return self.log.search_for_offset_from_position(offset, max(mapping.position, starting_file_position))

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """A slice starting at the batch containing `start_offset`; None if beyond this segment."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for log read from segment {self.log.file}")
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        start_position = start.position
        metadata = LogOffsetMetadata(start_offset, self.base_offset, start_position)
        adjusted_max_size = max(max_size, start.size) if min_one_message else max_size
        if adjusted_max_size == 0:
            return FetchDataInfo(metadata, None)
        if max_position is None:
            max_position = self.size
        fetch_size = min(max_position - start_position, adjusted_max_size)
        if fetch_size <= 0:
            return FetchDataInfo(metadata, None)
        return FetchDataInfo(metadata, self.log.slice(start_position, fetch_size), adjusted_max_size < start.size)

    def read_next_offset(self) -> int:
        """The offset after the last batch of this segment (baseOffset if empty)."""
        position = self._offset_index.lookup(self._offset_index.last_offset).position
        next_offset = self.base_offset
        for header in self.log.batch_headers(position):
            next_offset = header.base_offset + header.last_offset_delta + 1
        return next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
        ts_offset = self._time_index.lookup(timestamp)
        position = self._offset_index.lookup(max(ts_offset.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime if none (retention uses this)."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return self.log.last_modified_ms()

    def last_modified_ms(self) -> int:
        return self.log.last_modified_ms()

    # -- roll --------------------------------------------------------------------------------

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            for header in self.log.batch_headers(0):
                self._rolling_based_timestamp = header.max_timestamp
                break

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self.created

    def should_roll(self, params: RollParams) -> bool:
        size = self.size
        reached_roll_ms = (
            size > 0
            and self.time_waited_for_roll(params.now, params.max_timestamp_in_messages)
            > params.max_segment_ms - self.roll_jitter_ms
        )
        return (
            size > params.max_segment_bytes - params.messages_size
            or reached_roll_ms
            or self._offset_index.is_full()
            or self._time_index.is_full()
            or not self.can_convert_to_relative_offset(params.max_offset_in_messages)
        )

    def on_become_inactive_segment(self) -> None:
        """Record the true max timestamp in the reserved slot, then trim the files."""
        self._time_index.maybe_append(
            self.max_timestamp_so_far,
            self.shallow_offset_of_max_timestamp_so_far,
            skip_full_check=True,
        )
        self._offset_index.trim_to_valid_size()
        self._time_index.trim_to_valid_size()
        self.log.trim()

    def resize_indexes(self, size: int) -> None:
        self._offset_index.resize(size)
        self._time_index.resize(size)

    # -- recovery / truncation ---------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise FileNotFoundError if an index is missing, CorruptIndexError if one is malformed.

        Cheaper than Kafka's nothing-but-txn check, it also catches a torn or overwritten
        offset/time index on segments below the recovery point (KAFKA-19200's concern).
        """
        if not self._offset_index.file.exists():
            raise FileNotFoundError(f"offset index {self._offset_index.file} is missing")
        if not self._time_index.file.exists():
            raise FileNotFoundError(f"time index {self._time_index.file} is missing")
        self._offset_index.sanity_check(self.log.size_in_bytes())
        self._time_index.sanity_check()
        self.txn_index.sanity_check()

    def recover(
        self,
        producer_state_manager: ProducerStateManager | None,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
    ) -> int:
        """Re-validate every batch, rebuild the indexes and truncate from the first bad byte.

        Returns the number of bytes truncated.
        """
        self._recent.clear()
        self._offset_index.reset()
        self._time_index.reset()
        self.txn_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        max_ts, max_off = NO_TIMESTAMP, self.base_offset
        interval = self.index_interval_bytes
        for batch in self.log.valid_batches(0):
            last_offset = batch.base_offset + batch.last_offset_delta
            if batch.base_offset < self.base_offset or not self.can_convert_to_relative_offset(last_offset):
                break
            if batch.max_timestamp > max_ts:
                max_ts, max_off = batch.max_timestamp, last_offset
            if valid_bytes - last_index_entry > interval:
                self._offset_index.append(last_offset, valid_bytes)
                self._time_index.maybe_append(max_ts, max_off)
                last_index_entry = valid_bytes
            valid_bytes += batch.size
            if leader_epoch_cache is not None and batch.partition_leader_epoch >= 0:
                latest = leader_epoch_cache.latest_epoch
                if latest is None or batch.partition_leader_epoch > latest:
                    leader_epoch_cache.assign(batch.partition_leader_epoch, batch.base_offset)
            if producer_state_manager is not None:
                producer_state_manager.update_from_recovered_batch(self, batch)
        self._max_ts_and_offset = TimestampOffset(max_ts, max_off)
        truncated = self.log.size_in_bytes() - valid_bytes
        if truncated > 0:
            self.log.truncate_to(valid_bytes)
        self._offset_index.trim_to_valid_size()
        self._time_index.maybe_append(max_ts, max_off, skip_full_check=True)
        self._time_index.trim_to_valid_size()
        self.bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._rolling_based_timestamp = None
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove all data with offsets >= `offset`; returns bytes removed."""
        mapping = self.translate_offset(offset)
        self._offset_index.truncate_to(offset)
        self._time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        max_index = self._offset_index.max_index_size
        self._offset_index.resize(max_index)
        self._time_index.resize(max_index)
        removed = 0 if mapping is None else self.log.truncate_to(mapping.position)
        self._recent.clear()
        if self.log.size_in_bytes() == 0:
            self.created = self.time()
            self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        self._max_ts_and_offset = self._read_largest_timestamp()
        return removed

    def _read_largest_timestamp(self) -> TimestampOffset:
        last = self._time_index.last_entry
        position = self._offset_index.lookup(last.offset).position
        after = self.log.largest_timestamp_after(position)
        if after.timestamp > last.timestamp:
            return TimestampOffset(after.timestamp, after.offset)
        return last

    # -- files -------------------------------------------------------------------------------

    def flush(self) -> None:
        self.log.flush()
        self._offset_index.flush()
        self._time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Record the final max timestamp, trim indexes and close the files."""
        if self._time_index.is_loaded or self._max_ts_and_offset is not None:
            try:
                self._time_index.maybe_append(
                    self.max_timestamp_so_far,
                    self.shallow_offset_of_max_timestamp_so_far,
                    skip_full_check=True,
                )
            except (IndexOffsetOverflowError, ValueError, OSError):
                pass
        self._offset_index.close()
        self._time_index.close()
        self.txn_index.close()
        self.log.close()

    def close_handlers(self) -> None:
        self._offset_index.close_handler()
        self._time_index.close_handler()
        self.log.close_handlers()

    def files(self) -> list[Path]:
        return [self.log.file, self._offset_index.file, self._time_index.file, self.txn_index.file]

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all files of the segment, e.g. '' -> '.deleted' or '.swap' -> ''."""

        def renamed(p: Path) -> Path:
            return p.with_name(lfu.strip_suffix(p.name, old_suffix) + new_suffix)

        self.log.rename_to(renamed(self.log.file))
        self._offset_index.rename_to(renamed(self._offset_index.file))
        self._time_index.rename_to(renamed(self._time_index.file))
        self.txn_index.rename_to(renamed(self.txn_index.file))

    def update_parent_dir(self, new_dir: Path) -> None:
        """Point the file paths at a renamed partition directory (open fds stay valid)."""
        self.log.file = new_dir / self.log.file.name
        self._offset_index.file = new_dir / self._offset_index.file.name
        self._time_index.file = new_dir / self._time_index.file.name
        self.txn_index.file = new_dir / self.txn_index.file.name

    def has_suffix(self, suffix: str) -> bool:
        return self.log.file.name.endswith(suffix)

    def delete_if_exists(self) -> None:
        self.log.delete_if_exists()
        self._offset_index.delete_if_exists()
        self._time_index.delete_if_exists()
        self.txn_index.delete_if_exists()

    def __repr__(self) -> str:
        name = self.log.file.name
        return f"LogSegment(baseOffset={self.base_offset}, size={self.size}, file={name})"
