"""LogLoader: rebuild a partition log from its directory, recovering after a crash.

The passes follow Kafka's LogLoader.load: (1) delete stray .deleted and .cleaned files and
drop .swap files of an incomplete split; (2) delete segments superseded by surviving swaps and
rename the swaps live; (3) load segments in order, deleting orphan indexes and recovering
segments with missing/corrupt indexes; (4) unless the log was shut down cleanly, recover every
segment from the recovery point on, truncating a torn tail and deleting later segments;
(5) reconcile the log start offset, epoch cache and producer state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kopfka.config.log_config import LogConfig
from kopfka.storage import log_file_utils as lfu
from kopfka.storage.abstract_index import CorruptIndexError, IndexOffsetOverflowError
from kopfka.storage.leader_epoch_cache import LeaderEpochFileCache
from kopfka.storage.log_segment import LogOffsetMetadata, LogSegment
from kopfka.storage.log_segments import LogSegments
from kopfka.storage.offset_index import InvalidOffsetError
from kopfka.storage.producer_state import ProducerStateManager

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadedLogOffsets:
    """What loading a log settled on: log start offset, recovery point and next offset (with its position)."""

    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata


def rebuild_producer_state(
    psm: ProducerStateManager,
    segments: LogSegments,
    log_start_offset: int,
    last_offset: int,
    reload_from_clean_shutdown: bool,
    now: int,
) -> None:
    """Load the latest snapshot <= last_offset and replay the log from there to last_offset."""
    last_seg = segments.last_segment()
    if last_seg is not None:
        lower = segments.lower_segment(last_seg.base_offset)
        offsets_to_snapshot = [
            o
            for o in (lower.base_offset if lower else None, last_seg.base_offset, last_offset)
            if o is not None
        ]
    else:
        offsets_to_snapshot = [last_offset]
    if psm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        # upgrade path: skip the scan, write empty snapshots at the last two segments and the end
        for offset in offsets_to_snapshot:
            psm.update_map_end_offset(offset)
            psm.take_snapshot()
        return
    is_empty_before_truncation = psm.is_empty() and psm.map_end_offset >= last_offset
    psm.truncate_and_reload(log_start_offset, last_offset, now)
    if last_offset > psm.map_end_offset and not is_empty_before_truncation:
        segment_of_last = segments.floor_segment(last_offset)
        for segment in segments.values(psm.map_end_offset, last_offset):
            start_offset = max(psm.map_end_offset, segment.base_offset)
            psm.update_map_end_offset(start_offset)
            if segment.base_offset in offsets_to_snapshot:
                psm.take_snapshot()
            if segment is segment_of_last:
                pos = segment.translate_offset(last_offset)
                max_position = pos.position if pos is not None else segment.size
            else:
                max_position = segment.size
            start = segment.translate_offset(start_offset)
            if start is None:
                continue
            for header in segment.log.batch_headers(start.position, max_position):
                psm.update_from_recovered_batch(segment, header)
    psm.update_map_end_offset(last_offset)
    psm.take_snapshot()


class LogLoader:
    def __init__(
        self,
        directory: Path,
        topic_partition: str,
        config: LogConfig,
        time: Callable[[], int],
        had_clean_shutdown: bool,
        segments: LogSegments,
        log_start_offset_checkpoint: int,
        recovery_point_checkpoint: int,
        leader_epoch_cache: LeaderEpochFileCache,
        producer_state_manager: ProducerStateManager,
        producer_id_expiration_ms: int,
    ) -> None:
        self.dir = directory
        self.topic_partition = topic_partition
        self.config = config
        self.time = time
        self.had_clean_shutdown = had_clean_shutdown
        self.segments = segments
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state_manager = producer_state_manager
        self.producer_id_expiration_ms = producer_id_expiration_ms

    def load(self) -> LoadedLogOffsets:
        swap_files = self._remove_temp_files_and_collect_swap_files()
        min_swap, max_swap = None, None
        for swap in swap_files:
            if not lfu.is_log_file(Path(lfu.strip_suffix(swap.name, lfu.SWAP_FILE_SUFFIX))):
                continue
            base = lfu.offset_from_file(swap)
            seg = LogSegment.open(
                self.dir,
                base,
                self.config,
                self.time,
                file_already_exists=True,
                file_suffix=lfu.SWAP_FILE_SUFFIX,
            )
            nxt = seg.read_next_offset()
            seg.close_handlers()
            min_swap = base if min_swap is None else min(min_swap, base)
            max_swap = nxt if max_swap is None else max(max_swap, nxt)
        if min_swap is not None and max_swap is not None:
            for f in sorted(self.dir.iterdir()):
                if not f.is_file() or f.name.endswith(lfu.SWAP_FILE_SUFFIX):
                    continue
                if not (lfu.is_log_file(f) or lfu.is_index_file(f)):
                    continue
                offset = lfu.offset_from_file(f)
                if min_swap <= offset < max_swap:
                    log.info(
                        "%s: deleting segment file %s superseded by a swap",
                        self.topic_partition,
                        f.name,
                    )
                    f.unlink(missing_ok=True)
        for f in sorted(self.dir.iterdir()):
            if f.is_file() and f.name.endswith(lfu.SWAP_FILE_SUFFIX):
                os.replace(f, f.with_name(lfu.strip_suffix(f.name, lfu.SWAP_FILE_SUFFIX)))

        self._load_segment_files()

        if not self.dir.name.endswith(lfu.DELETE_DIR_SUFFIX):
            recovery_point, next_offset = self._recover_log()
            self.segments.active_segment.resize_indexes(self.config.segment_index_bytes)
        else:
            if self.segments.is_empty():
                self.segments.add(LogSegment.open(self.dir, 0, self.config, self.time))
            recovery_point, next_offset = 0, 0

        self.leader_epoch_cache.truncate_from_end(next_offset)
        if self.dir.name.endswith(lfu.DELETE_DIR_SUFFIX):
            new_log_start = self.log_start_offset_checkpoint
        else:
            first = self.segments.first_segment()
            new_log_start = max(self.log_start_offset_checkpoint, first.base_offset if first else 0)
        self.leader_epoch_cache.truncate_from_start(new_log_start)

        psm = self.producer_state_manager
        if not psm.is_empty():
            raise RuntimeError("producer state must be empty during log initialization")
        # the temporary managers used by segment recovery may have deleted snapshots
        psm._load_snapshots()
        psm.remove_stray_snapshots(self.segments.base_offsets())
        rebuild_producer_state(
            psm, self.segments, new_log_start, next_offset, self.had_clean_shutdown, self.time()
        )
        active = self.segments.active_segment
        return LoadedLogOffsets(
            new_log_start,
            recovery_point,
            LogOffsetMetadata(next_offset, active.base_offset, active.size),
        )

    def _remove_temp_files_and_collect_swap_files(self) -> list[Path]:
        swap_files: list[Path] = []
        cleaned_files: list[Path] = []
        min_cleaned = None
        for f in self.dir.iterdir():
            if not f.is_file():
                continue
            name = f.name
            if name.endswith(lfu.DELETED_FILE_SUFFIX):
                f.unlink(missing_ok=True)
            elif name.endswith(lfu.CLEANED_FILE_SUFFIX):
                offset = lfu.offset_from_file(f)
                min_cleaned = offset if min_cleaned is None else min(min_cleaned, offset)
                cleaned_files.append(f)
            elif name.endswith(lfu.SWAP_FILE_SUFFIX):
                swap_files.append(f)
        valid = []
        for f in swap_files:
            # KAFKA-6264: a swap at/after the smallest .cleaned offset is from an incomplete split
            if min_cleaned is not None and lfu.offset_from_file(f) >= min_cleaned:
                f.unlink(missing_ok=True)
            else:
                valid.append(f)
        for f in cleaned_files:
            f.unlink(missing_ok=True)
        return valid

    def _load_segment_files(self) -> None:
        for f in sorted(p for p in self.dir.iterdir() if p.is_file()):
            try:
                offset = lfu.offset_from_file(f)
            except ValueError:
                continue
            if lfu.is_index_file(f):
                if not lfu.log_file(self.dir, offset).exists():
                    log.warning("%s: deleting orphaned index file %s", self.topic_partition, f.name)
                    f.unlink(missing_ok=True)
            elif lfu.is_log_file(f):
                segment = LogSegment.open(
                    self.dir, offset, self.config, self.time, file_already_exists=True
                )
                try:
                    segment.sanity_check()
                except FileNotFoundError as e:
                    if (
                        self.had_clean_shutdown
                        or segment.base_offset < self.recovery_point_checkpoint
                    ):
                        log.error(
                            "%s: %s; recovering segment and rebuilding index files",
                            self.topic_partition,
                            e,
                        )
                    self._recover_segment(segment)
                except CorruptIndexError as e:
                    log.warning("%s: %s; recovering segment", self.topic_partition, e)
                    self._recover_segment(segment)
                self.segments.add(segment)

    def _recover_segment(self, segment: LogSegment) -> int:
        psm = ProducerStateManager(
            self.topic_partition,
            self.dir,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            time=self.time,
        )
        rebuild_producer_state(
            psm,
            self.segments,
            self.log_start_offset_checkpoint,
            segment.base_offset,
            False,
            self.time(),
        )
        truncated = segment.recover(psm, self.leader_epoch_cache)
        psm.take_snapshot()
        return truncated

    def _recover_log(self) -> tuple[int, int]:
        if not self.had_clean_shutdown:
            unflushed = self.segments.values(self.recovery_point_checkpoint, 1 << 63)
            for i, segment in enumerate(unflushed):
                log.info(
                    "%s: recovering unflushed segment %d", self.topic_partition, segment.base_offset
                )
                try:
                    truncated = self._recover_segment(segment)
                except (InvalidOffsetError, IndexOffsetOverflowError, CorruptIndexError):
                    log.warning(
                        "%s: invalid offset during recovery of %s; emptying it",
                        self.topic_partition,
                        segment,
                    )
                    truncated = segment.truncate_to(segment.base_offset)
                if truncated > 0:
                    log.warning(
                        "%s: corruption found in segment %d, truncating to offset %d",
                        self.topic_partition,
                        segment.base_offset,
                        segment.read_next_offset(),
                    )
                    self._remove_and_delete_segments(unflushed[i + 1 :])
                    break
        log_end_offset: int | None = None
        last = self.segments.last_segment()
        if last is not None:
            leo = last.read_next_offset()
            if leo >= self.log_start_offset_checkpoint:
                log_end_offset = leo
            else:
                log.warning(
                    "%s: deleting all segments because logEndOffset (%d) is smaller than "
                    "logStartOffsetCheckpoint (%d)",
                    self.topic_partition,
                    leo,
                    self.log_start_offset_checkpoint,
                )
                self._remove_and_delete_segments(self.segments.values())
                self.leader_epoch_cache.clear_and_flush()
                self.producer_state_manager.truncate_fully_and_start_at(
                    self.log_start_offset_checkpoint
                )
        if self.segments.is_empty():
            self.segments.add(
                LogSegment.open(
                    self.dir,
                    self.log_start_offset_checkpoint,
                    self.config,
                    self.time,
                    init_file_size=self.config.segment_bytes if self.config.preallocate else 0,
                    preallocate=self.config.preallocate,
                )
            )
        if self.had_clean_shutdown and log_end_offset is not None:
            return log_end_offset, log_end_offset
        leo = (
            log_end_offset
            if log_end_offset is not None
            else self.segments.active_segment.read_next_offset()
        )
        return min(self.recovery_point_checkpoint, leo), leo

    def _remove_and_delete_segments(self, segments: list[LogSegment]) -> None:
        from kopfka.storage.local_log import delete_segment_files

        for s in segments:
            self.segments.remove(s.base_offset)
        delete_segment_files(segments, False, 0, None)
