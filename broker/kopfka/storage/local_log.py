"""LocalLog: the on-disk segment set of one partition, its LEO and its recovery point.

UnifiedLog layers semantics (high watermark, producer state, epochs) on top; LocalLog only
knows segments and offsets: append to the active segment, multi-segment read, roll,
truncate, flush, and the rename-then-delete of segment files.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from kopfka.config.log_config import LogConfig
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.records import BatchHeader
from kopfka.storage import log_file_utils as lfu
from kopfka.storage.checkpoint import fsync_dir
from kopfka.storage.fault_injection import crash_point
from kopfka.storage.log_segment import FetchDataInfo, LogOffsetMetadata, LogSegment
from kopfka.storage.log_segments import LogSegments

# (task name, delay ms, task): runs `task` later; None runs it inline.
Scheduler = Callable[[str, int, Callable[[], None]], None]


class LocalLog:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: LogSegments,
        recovery_point: int,
        next_offset_metadata: LogOffsetMetadata,
        time: Callable[[], int],
        topic: str,
        partition: int,
        scheduler: Scheduler | None = None,
    ) -> None:
        self.dir = directory
        self.config = config
        self.segments = segments
        self.recovery_point = recovery_point
        self.next_offset_metadata = next_offset_metadata
        self.time = time
        self.topic = topic
        self.partition = partition
        self.scheduler = scheduler
        self.is_memory_mapped_buffer_closed = False

    @property
    def topic_partition(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_end_offset(self) -> int:
        return self.next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self.next_offset_metadata

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def update_log_end_offset(self, end_offset: int) -> None:
        active = self.segments.active_segment
        self.next_offset_metadata = LogOffsetMetadata(end_offset, active.base_offset, active.size)
        if self.recovery_point > end_offset:
            self.recovery_point = end_offset

    def update_recovery_point(self, offset: int) -> None:
        self.recovery_point = offset

    def mark_flushed(self, offset: int) -> None:
        if offset > self.recovery_point:
            self.recovery_point = offset

    # -- append / flush ----------------------------------------------------------------------

    def append(self, last_offset: int, records: bytes | bytearray | memoryview, batches: list[BatchHeader]) -> None:
        self.segments.active_segment.append(last_offset, records, batches)
        self.update_log_end_offset(last_offset + 1)

    def flush(self, offset: int) -> None:
        """fsync every segment that may hold offsets in [recovery point, offset)."""
        current = self.recovery_point
        if current <= offset:
            to_flush = self.segments.values(current, offset) if offset > current else []
            for segment in to_flush:
                segment.flush()
            if any(s.base_offset >= current for s in to_flush):
                fsync_dir(self.dir)

    # -- read --------------------------------------------------------------------------------

    def convert_to_offset_metadata_or_throw(self, offset: int) -> LogOffsetMetadata:
        info = self.read(offset, 1, False, self.next_offset_metadata, False)
        return info.fetch_offset_metadata

    def read(
        self,
        start_offset: int,
        max_length: int,
        min_one_message: bool,
        max_offset_metadata: LogOffsetMetadata,
        include_aborted_txns: bool,
    ) -> FetchDataInfo:
        end_offset_metadata = self.next_offset_metadata
        end_offset = end_offset_metadata.message_offset
        segment = self.segments.floor_segment(start_offset)
        if start_offset > end_offset or segment is None:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"received request for offset {start_offset} for partition {self.topic_partition}, "
                f"but we only have log segments up to {end_offset}",
            )
        if start_offset == max_offset_metadata.message_offset:
            return self._empty(max_offset_metadata, include_aborted_txns)
        if start_offset > max_offset_metadata.message_offset:
            return self._empty(LogOffsetMetadata(start_offset), include_aborted_txns)
        while segment is not None:
            if max_offset_metadata.segment_base_offset == segment.base_offset:
                max_position = max_offset_metadata.relative_position_in_segment
            else:
                max_position = segment.size
            info = segment.read(start_offset, max_length, max_position, min_one_message)
            if info is not None:
                if include_aborted_txns:
                    self._add_aborted_transactions(start_offset, segment, info)
                return info
            segment = self.segments.higher_segment(segment.base_offset)
        return FetchDataInfo(self.next_offset_metadata, None)

    def _empty(self, metadata: LogOffsetMetadata, include_aborted_txns: bool) -> FetchDataInfo:
        return FetchDataInfo(metadata, None, False, [] if include_aborted_txns else None)

    def _add_aborted_transactions(self, start_offset: int, segment: LogSegment, info: FetchDataInfo) -> None:
        later = self.segments.higher_segments(segment.base_offset)
        if segment.txn_index.is_empty and all(seg.txn_index.is_empty for seg in later):
            info.aborted_transactions = []  # no transaction was ever aborted here: nothing to bound
            return
        fetch_size = info.records.size if info.records is not None else 0
        start_position = info.fetch_offset_metadata.relative_position_in_segment
        upper = segment.offset_index().fetch_upper_bound_offset(start_position, fetch_size)
        if upper is not None:
            upper_bound = upper.offset
        else:
            nxt = self.segments.higher_segment(segment.base_offset)
            upper_bound = nxt.base_offset if nxt is not None else self.log_end_offset
        aborted = []
        for seg in [segment, *later]:
            result = seg.txn_index.collect_aborted_txns(start_offset, upper_bound)
            aborted.extend(result.aborted_transactions)
            if result.is_complete:
                break
        info.aborted_transactions = aborted

    # -- roll --------------------------------------------------------------------------------

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments.last_segment()
        if self.segments.contains(new_offset):
            if active is not None and active.base_offset == new_offset and active.size == 0:
                # KAFKA-6388: an empty active segment reported a full index; recreate it in place
                self.remove_and_delete_segments([active], async_delete=True)
            else:
                raise KafkaError(
                    ErrorCode.kafka_storage_error,
                    f"trying to roll a new log segment for {self.topic_partition} with start "
                    "offset "
                    f"{new_offset} while it already exists",
                )
        elif active is not None and new_offset < active.base_offset:
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"trying to roll a new log segment for {self.topic_partition} with start "
                f"offset {new_offset} "
                f"lower than start offset of the active segment {active}",
            )
        else:
            for f in (
                lfu.log_file(self.dir, new_offset),
                lfu.offset_index_file(self.dir, new_offset),
                lfu.time_index_file(self.dir, new_offset),
                lfu.transaction_index_file(self.dir, new_offset),
            ):
                if f.exists():
                    f.unlink()
            if active is not None:
                active.on_become_inactive_segment()
        segment = LogSegment.open(
            self.dir,
            new_offset,
            self.config,
            self.time,
            init_file_size=self.config.segment_bytes if self.config.preallocate else 0,
            preallocate=self.config.preallocate,
        )
        self.segments.add(segment)
        self.update_log_end_offset(self.next_offset_metadata.message_offset)
        return segment

    # -- truncation / deletion ---------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> list[LogSegment]:
        deletable = [s for s in self.segments.values() if s.base_offset > target_offset]
        self.remove_and_delete_segments(deletable, async_delete=True)
        self.segments.active_segment.truncate_to(target_offset)
        self.update_log_end_offset(target_offset)
        return deletable

    def truncate_fully_and_start_at(self, new_offset: int) -> list[LogSegment]:
        to_delete = self.segments.values()
        self.remove_and_delete_segments(to_delete, async_delete=True)
        self.segments.add(
            LogSegment.open(
                self.dir,
                new_offset,
                self.config,
                self.time,
                init_file_size=self.config.segment_bytes if self.config.preallocate else 0,
                preallocate=self.config.preallocate,
            )
        )
        self.update_log_end_offset(new_offset)
        self.recovery_point = new_offset
        return to_delete

    def remove_and_delete_segments(self, segments: Iterable[LogSegment], async_delete: bool) -> None:
        to_delete = list(segments)
        for s in to_delete:
            self.segments.remove(s.base_offset)
        delete_segment_files(to_delete, async_delete, self.config.file_delete_delay_ms, self.scheduler)

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> list[LogSegment]:
        """Swap cleaned segments in for the segments they replace, recoverable at any crash.

        The new segments carry the `.cleaned` suffix. Order (seed 001): rename them `.swap`
        in descending offset order, add them to the index, retire every old segment
        (remove from the index, rename `.deleted`, unlink after file.delete.delay.ms), then
        drop the `.swap` suffix and fsync the dir. LogLoader finishes or rolls back a swap
        interrupted at any of these points. Returns the retired segments.
        """
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        new_bases = {s.base_offset for s in new_sorted}
        old_sorted = [
            s for s in sorted(old_segments, key=lambda s: s.base_offset) if self.segments.get(s.base_offset) is s
        ]
        for s in reversed(new_sorted):
            if s.has_suffix(lfu.CLEANED_FILE_SUFFIX):
                s.change_file_suffixes(lfu.CLEANED_FILE_SUFFIX, lfu.SWAP_FILE_SUFFIX)
        fsync_dir(self.dir)
        crash_point("cleaner-after-swap-rename")
        for s in new_sorted:
            self.segments.add(s)
        for s in old_sorted:
            if s.base_offset not in new_bases:
                self.segments.remove(s.base_offset)
        for i, s in enumerate(old_sorted):
            s.change_file_suffixes("", lfu.DELETED_FILE_SUFFIX)
            if i == 0:
                crash_point("cleaner-after-first-old-deleted")
        crash_point("cleaner-after-old-deleted")
        delete_segment_files(old_sorted, True, self.config.file_delete_delay_ms, self.scheduler)
        for s in new_sorted:
            s.change_file_suffixes(lfu.SWAP_FILE_SUFFIX, "")
        crash_point("cleaner-after-swap-live")
        fsync_dir(self.dir)
        return old_sorted

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self.segments.close()

    def close_handlers(self) -> None:
        for s in self.segments.values():
            s.close_handlers()
        self.is_memory_mapped_buffer_closed = True

    def delete_all_segments(self) -> list[LogSegment]:
        deleted = self.segments.values()
        for s in deleted:
            s.delete_if_exists()
        self.segments.clear()
        return deleted

    def delete_empty_dir(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def rename_dir(self, new_name: str) -> Path:
        new_dir = self.dir.parent / new_name
        os.rename(self.dir, new_dir)
        fsync_dir(self.dir.parent)
        self.dir = new_dir
        for s in self.segments.values():
            s.update_parent_dir(new_dir)
        return new_dir


def delete_segment_files(
    segments: list[LogSegment], async_delete: bool, delay_ms: int, scheduler: Scheduler | None
) -> None:
    """Rename each segment's files to `.deleted`, then unlink them (now, or after delay_ms)."""
    for s in segments:
        if not s.has_suffix(lfu.DELETED_FILE_SUFFIX):
            s.change_file_suffixes("", lfu.DELETED_FILE_SUFFIX)

    def delete() -> None:
        for s in segments:
            s.delete_if_exists()

    if async_delete and scheduler is not None:
        scheduler("delete-file", delay_ms, delete)
    else:
        delete()
