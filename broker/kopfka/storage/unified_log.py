"""UnifiedLog: the façade of one partition log used by the broker.

Owns the semantics layered over LocalLog: offset assignment through the LogValidator, the
high watermark and log start offset, producer (idempotence/transaction) state, the
leader-epoch cache and the partition.metadata topic-id binding. Everything runs on the
event loop; the only blocking calls are fsyncs, taken when flush.messages asks for them or
handed to the optional scheduler at roll.

Offsets invariant: log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset.
"""

from __future__ import annotations

import logging
import time as _time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kopfka.config.log_config import LogConfig
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.records import NO_TIMESTAMP, BatchHeader, iter_batches
from kopfka.storage import log_file_utils as lfu
from kopfka.storage.fault_injection import crash_point
from kopfka.storage.file_records import TimestampAndOffset
from kopfka.storage.leader_epoch_cache import LeaderEpochFileCache
from kopfka.storage.local_log import LocalLog, Scheduler, delete_segment_files
from kopfka.storage.log_loader import LogLoader, rebuild_producer_state
from kopfka.storage.log_segment import FetchDataInfo, LogOffsetMetadata, LogSegment, RollParams
from kopfka.storage.log_segments import LogSegments
from kopfka.storage.log_validator import validate_and_assign_offsets
from kopfka.storage.partition_metadata import InconsistentTopicIdError, PartitionMetadataFile
from kopfka.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
    read_end_txn_marker,
)
from kopfka.storage.transaction_index import AbortedTxn

logger = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

ISOLATION_LOG_END = "log_end"
ISOLATION_HIGH_WATERMARK = "high_watermark"
ISOLATION_TXN_COMMITTED = "txn_committed"

_NO_CHECK = object()  # no KIP-890 verification required for this append


def now_ms() -> int:
    return _time.time_ns() // 1_000_000


@dataclass(slots=True)
class LogAppendInfo:
    """Kafka's LogAppendInfo: the offsets, timestamps and size of one append; duplicate: a retried batch's originals."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    record_count: int
    valid_bytes: int
    duplicate: bool = False


class UnifiedLog:
    def __init__(
        self,
        log_start_offset: int,
        local_log: LocalLog,
        leader_epoch_cache: LeaderEpochFileCache,
        producer_state_manager: ProducerStateManager,
        topic_id: uuid.UUID | None,
        time: Callable[[], int],
    ) -> None:
        self.local_log = local_log
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state_manager = producer_state_manager
        self.time = time
        self._log_start_offset = log_start_offset
        self._high_watermark_metadata = LogOffsetMetadata(log_start_offset)
        self._first_unstable_offset_metadata: LogOffsetMetadata | None = None
        self.partition_metadata_file = PartitionMetadataFile(local_log.dir)
        # set when the log's dir goes offline: requests get KAFKA_STORAGE_ERROR
        self.offline = False
        # wall clock of the last flush, for the flush.ms scheduler
        self.last_flush_time = time()
        self.topic_id = topic_id
        self._initialize_topic_id()
        self._update_log_start_offset(log_start_offset)
        self._maybe_increment_first_unstable_offset()

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        dir: Path,
        config: LogConfig,
        *,
        topic_id: uuid.UUID | None = None,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        time: Callable[[], int] = now_ms,
        scheduler: Scheduler | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> UnifiedLog:
        """Open (creating if needed) and recover the partition log in `dir`
        (`<topic>-<partition>`)."""
        dir.mkdir(parents=True, exist_ok=True)
        topic, partition = lfu.parse_topic_partition_name(dir.name)
        tp = f"{topic}-{partition}"
        segments = LogSegments()
        epoch_cache = LeaderEpochFileCache.for_dir(tp, dir)
        psm = ProducerStateManager(tp, dir, producer_id_expiration_ms=producer_id_expiration_ms, time=time)
        offsets = LogLoader(
            dir,
            tp,
            config,
            time,
            had_clean_shutdown,
            segments,
            log_start_offset,
            recovery_point,
            epoch_cache,
            psm,
            producer_id_expiration_ms,
        ).load()
        local = LocalLog(
            dir,
            config,
            segments,
            offsets.recovery_point,
            offsets.next_offset_metadata,
            time,
            topic,
            partition,
            scheduler,
        )
        return cls(offsets.log_start_offset, local, epoch_cache, psm, topic_id, time)

    def _initialize_topic_id(self) -> None:
        pmf = self.partition_metadata_file
        if pmf.exists():
            try:
                on_disk = pmf.read()
            except ValueError:
                on_disk = None
            if on_disk is not None:
                if self.topic_id is not None and self.topic_id != on_disk:
                    raise InconsistentTopicIdError(
                        f"tried to assign topic id {self.topic_id} to log for "
                        f"{self.topic_partition}, "
                        f"but log already contained topic id {on_disk}"
                    )
                self.topic_id = on_disk
                return
        if self.topic_id is not None:
            pmf.record(self.topic_id)
            self._schedule_metadata_flush()

    def _schedule_metadata_flush(self) -> None:
        """Kafka's "flush-metadata-file" task; without a scheduler (tools, tests) it is written now."""
        scheduler = self.local_log.scheduler
        if scheduler is None:
            self.partition_metadata_file.maybe_flush()
        else:
            scheduler("flush-metadata-file", 0, self.partition_metadata_file.flush_if_dir_exists)

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        if self.topic_id is not None and self.topic_id != topic_id:
            raise InconsistentTopicIdError(f"log {self.topic_partition} already has topic id {self.topic_id}")
        if self.topic_id is None:
            self.topic_id = topic_id
            self.partition_metadata_file.record(topic_id)
            self._schedule_metadata_flush()

    # -- identity and offsets ----------------------------------------------------------------

    @property
    def topic(self) -> str:
        return self.local_log.topic

    @property
    def partition(self) -> int:
        return self.local_log.partition

    @property
    def topic_partition(self) -> str:
        return self.local_log.topic_partition

    @property
    def dir(self) -> Path:
        return self.local_log.dir

    @property
    def config(self) -> LogConfig:
        return self.local_log.config

    def update_config(self, new_config: LogConfig) -> None:
        """Dynamic topic config change: applies to future appends and new segments."""
        self.local_log.update_config(new_config)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.local_log.log_end_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self.local_log.next_offset_metadata

    @property
    def high_watermark(self) -> int:
        return self._high_watermark_metadata.message_offset

    @property
    def recovery_point(self) -> int:
        return self.local_log.recovery_point

    @property
    def last_stable_offset(self) -> int:
        fuo = self._first_unstable_offset_metadata
        if fuo is not None and fuo.message_offset < self.high_watermark:
            return fuo.message_offset
        return self.high_watermark

    @property
    def producer_state(self) -> ProducerStateManager:
        return self.producer_state_manager

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) for OffsetsForLeaderEpoch; None when the epoch is unknown."""
        epoch, offset = self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
        if offset == -1 and epoch == -1:
            return None
        return epoch, offset

    @property
    def size_in_bytes(self) -> int:
        return self.local_log.segments.size_in_bytes()

    @property
    def num_segments(self) -> int:
        return len(self.local_log.segments)

    def log_segments(self) -> list[LogSegment]:
        return self.local_log.segments.values()

    @property
    def active_segment(self) -> LogSegment:
        return self.local_log.segments.active_segment

    # -- high watermark / log start offset ---------------------------------------------------

    def _update_high_watermark_metadata(self, metadata: LogOffsetMetadata) -> None:
        if metadata.message_offset < 0:
            raise ValueError("high watermark offset should be non-negative")
        self._high_watermark_metadata = metadata
        self._maybe_increment_first_unstable_offset()

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped into [log start, LEO]; returns the value set."""
        end = self.local_log.next_offset_metadata
        if offset < self._log_start_offset:
            metadata = LogOffsetMetadata(self._log_start_offset)
        elif offset >= end.message_offset:
            metadata = end
        else:
            metadata = LogOffsetMetadata(offset)
        self._update_high_watermark_metadata(metadata)
        return metadata.message_offset

    def maybe_increment_high_watermark(self, offset: int) -> int | None:
        """Advance the HW if `offset` is higher (or the same offset on a newer segment);
        returns the old HW."""
        leo = self.log_end_offset
        if offset > leo:
            raise ValueError(f"high watermark {offset} update exceeds current log end offset {leo}")
        new = self.local_log.next_offset_metadata if offset == leo else LogOffsetMetadata(offset)
        old = self._high_watermark_metadata
        if old.message_offset < new.message_offset or (
            old.message_offset == new.message_offset
            and not new.message_offset_only
            and old.segment_base_offset < new.segment_base_offset
        ):
            self._update_high_watermark_metadata(new)
            return old.message_offset
        return None

    def _update_high_watermark_with_log_end_offset(self) -> None:
        end = self.local_log.next_offset_metadata
        if self.high_watermark >= end.message_offset:
            self._update_high_watermark_metadata(end)

    def _update_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        if self.high_watermark < offset:
            self.update_high_watermark(offset)
        if self.local_log.recovery_point < offset:
            self.local_log.update_recovery_point(offset)

    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str = "") -> bool:
        """Raise the log start offset (DeleteRecords, retention); must not pass the HW."""
        if new_log_start_offset > self.high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"cannot increment the log start offset to {new_log_start_offset} of partition "
                f"{self.topic_partition} since it is larger than the high watermark "
                f"{self.high_watermark}",
            )
        if new_log_start_offset > self._log_start_offset:
            self._update_log_start_offset(new_log_start_offset)
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producer_state_manager.on_log_start_offset_incremented(new_log_start_offset)
            self._maybe_increment_first_unstable_offset()
            return True
        return False

    def _maybe_increment_first_unstable_offset(self) -> None:
        psm = self.producer_state_manager
        psm.on_high_watermark_updated(self.high_watermark)
        fuo = psm.first_unstable_offset()
        self._first_unstable_offset_metadata = None if fuo is None else LogOffsetMetadata(fuo)

    # -- append ------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        *,
        require_verification: bool = False,
        verification_guard: object | None = None,
    ) -> LogAppendInfo:
        """Validate, assign offsets and append client batches. Raises KafkaError on bad input.

        With `require_verification` (transaction.partition.verification.enable), a client's
        transactional batch that does not continue an open transaction here must carry the
        guard of a successful coordinator verification (KIP-890), else INVALID_TXN_STATE."""
        self.partition_metadata_file.maybe_flush()
        local = self.local_log
        config = local.config
        now = self.time()
        result = validate_and_assign_offsets(
            records,
            offset_counter=local.log_end_offset,
            config=config,
            now_ms=now,
            leader_epoch=leader_epoch,
            from_client=origin == AppendOrigin.CLIENT,
        )
        data = result.records
        batches = result.batches
        info = LogAppendInfo(
            result.first_offset,
            result.last_offset,
            result.max_timestamp,
            result.shallow_offset_of_max_timestamp,
            result.log_append_time_ms,
            self._log_start_offset,
            result.record_count,
            len(data),
        )
        if leader_epoch >= 0 and self.leader_epoch_cache.latest_epoch != leader_epoch:
            self.leader_epoch_cache.assign(leader_epoch, result.first_offset)
        if len(data) > config.segment_bytes:
            raise KafkaError(
                ErrorCode.record_list_too_large,
                f"message batch size is {len(data)} bytes in append to partition "
                f"{self.topic_partition} "
                f"which exceeds the maximum configured segment size of {config.segment_bytes}",
            )
        segment = self._maybe_roll(len(data), info, now)
        updated, completed, duplicate = self._analyze_and_validate_producer_state(
            batches, origin, data, verification_guard if require_verification else _NO_CHECK
        )
        if duplicate is not None:
            info.first_offset = duplicate.first_offset
            info.last_offset = duplicate.last_offset
            info.max_timestamp = duplicate.timestamp
            info.duplicate = True
            info.record_count = 0
            return info
        self._append_to_local(segment, info.last_offset, data, batches, updated, completed)
        return info

    def append_as_follower(self, records: bytes | bytearray, leader_epoch: int = -1) -> LogAppendInfo:
        """Append batches with the offsets the leader assigned (replication)."""
        local = self.local_log
        batches = list(iter_batches(records))
        if not batches:
            raise KafkaError(ErrorCode.invalid_record, "append carries no record batch")
        first = batches[0].base_offset
        if first < local.log_end_offset:
            raise KafkaError(
                ErrorCode.unknown_server_error,
                f"unexpected offset in append to {self.topic_partition}: first offset {first} "
                "is less than "
                f"the next offset {local.log_end_offset}",
            )
        max_ts, max_off, count, expected = NO_TIMESTAMP, -1, 0, first
        for b in batches:
            if b.base_offset < expected:
                raise KafkaError(ErrorCode.invalid_record, "out of order offsets in replicated batches")
            expected = b.next_offset
            count += b.records_count
            if b.max_timestamp > max_ts:
                max_ts, max_off = b.max_timestamp, b.last_offset
        last = batches[-1].last_offset
        info = LogAppendInfo(first, last, max_ts, max_off, NO_TIMESTAMP, self._log_start_offset, count, len(records))
        for b in batches:
            if b.partition_leader_epoch >= 0 and b.partition_leader_epoch != self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(b.partition_leader_epoch, b.base_offset)
        if len(records) > local.config.segment_bytes:
            raise KafkaError(ErrorCode.record_list_too_large, "replicated batches exceed segment.bytes")
        segment = self._maybe_roll(len(records), info, self.time())
        updated, completed, _ = self._analyze_and_validate_producer_state(batches, AppendOrigin.REPLICATION, records)
        self._append_to_local(segment, last, records, batches, updated, completed)
        return info

    def _append_to_local(
        self,
        segment: LogSegment,
        last_offset: int,
        data: bytes | bytearray | memoryview,
        batches: list[BatchHeader],
        updated: dict[int, ProducerAppendInfo],
        completed: list[CompletedTxn],
    ) -> None:
        local = self.local_log
        local.append(last_offset, data, batches)
        self._update_high_watermark_with_log_end_offset()
        psm = self.producer_state_manager
        for append_info in updated.values():
            psm.update(append_info)
        for txn in completed:
            lso = psm.last_stable_offset(txn)
            if txn.is_aborted:
                segment.update_txn_index(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
            psm.complete_txn(txn)
        psm.update_map_end_offset(last_offset + 1)
        if updated or completed:
            self._maybe_increment_first_unstable_offset()
        if local.unflushed_messages >= local.config.flush_messages:
            self.flush()

    def _analyze_and_validate_producer_state(
        self,
        batches: list[BatchHeader],
        origin: AppendOrigin,
        data: bytes | bytearray | memoryview,
        verification_guard: object | None = _NO_CHECK,
    ) -> tuple[dict[int, ProducerAppendInfo], list[CompletedTxn], BatchMetadata | None]:
        updated: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        psm = self.producer_state_manager
        for batch in batches:
            pid = batch.producer_id
            if pid < 0:
                continue
            if origin == AppendOrigin.CLIENT:
                last = psm.last_entry(pid)
                if last is not None:
                    dup = last.find_duplicate_batch(batch)
                    if dup is not None:
                        return updated, completed, dup
                if (
                    verification_guard is not _NO_CHECK
                    and batch.is_transactional
                    and not batch.is_control
                    and not psm.has_ongoing_transaction(pid, batch.producer_epoch)
                    and not psm.is_verified(pid, verification_guard)
                ):
                    raise KafkaError(
                        ErrorCode.invalid_txn_state,
                        f"record of producer {pid} in {self.topic_partition} is not part of an "
                        "ongoing transaction the coordinator verified",
                    )
            info = updated.get(pid)
            if info is None:
                info = updated[pid] = psm.prepare_update(pid, origin)
            marker = None
            if batch.is_control:
                # transaction markers are rare: decode their one record
                marker = read_end_txn_marker(bytes(data[batch.position : batch.position + batch.size]))
            txn = info.append(batch, marker)
            if txn is not None:
                completed.append(txn)
        return updated, completed, None

    # -- roll --------------------------------------------------------------------------------

    def _maybe_roll(self, messages_size: int, info: LogAppendInfo, now: int) -> LogSegment:
        segment = self.local_log.segments.active_segment
        config = self.local_log.config
        params = RollParams(
            config.segment_ms,
            config.segment_bytes,
            info.max_timestamp,
            info.last_offset,
            messages_size,
            now,
        )
        if segment.should_roll(params):
            return self.roll(info.first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment; snapshot producer state at its base offset."""
        new_segment = self.local_log.roll(expected_next_offset)
        psm = self.producer_state_manager
        psm.update_map_end_offset(new_segment.base_offset)
        snapshot = psm.take_snapshot(sync=False)
        self._update_high_watermark_with_log_end_offset()
        base = new_segment.base_offset

        def flush_task() -> None:
            if snapshot is not None:
                psm.flush_snapshot(snapshot)
            self.flush_upto_offset_exclusive(base)

        scheduler = self.local_log.scheduler
        if scheduler is not None:
            scheduler("flush-log", 0, flush_task)
        else:
            flush_task()
        return new_segment

    # -- flush -------------------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync up to `offset` (exclusive; default: the LEO) and advance the recovery point."""
        self.flush_upto_offset_exclusive(self.log_end_offset if offset is None else offset)

    def flush_upto_offset_exclusive(self, offset: int) -> None:
        if offset > self.local_log.recovery_point:
            self.local_log.flush(offset)
            self.local_log.mark_flushed(offset)
        self.last_flush_time = self.time()

    def remove_expired_producers(self, now: int) -> None:
        """Forget idle producers (no open transaction) older than producer.id.expiration.ms:
        Kafka's PeriodicProducerExpirationCheck, so their state does not grow without bound."""
        self.producer_state_manager.remove_expired_producers(now)

    def take_producer_snapshot(self) -> None:
        self.producer_state_manager.take_snapshot()

    # -- read --------------------------------------------------------------------------------

    def _offset_metadata(self, metadata: LogOffsetMetadata) -> LogOffsetMetadata:
        if metadata.message_offset_only:
            return self.local_log.convert_to_offset_metadata_or_throw(metadata.message_offset)
        return metadata

    def read(
        self,
        start_offset: int,
        max_length: int,
        isolation: str = ISOLATION_HIGH_WATERMARK,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Zero-copy slice of whole batches from `start_offset` up to the isolation bound."""
        if start_offset < self._log_start_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"received request for offset {start_offset} for partition {self.topic_partition}, "
                f"but the log start offset is {self._log_start_offset}",
            )
        if isolation == ISOLATION_LOG_END:
            max_meta = self.local_log.next_offset_metadata
        elif isolation == ISOLATION_HIGH_WATERMARK:
            max_meta = self._high_watermark_metadata
            if max_meta.message_offset_only and start_offset < max_meta.message_offset:
                max_meta = self._high_watermark_metadata = self._offset_metadata(max_meta)
        elif isolation == ISOLATION_TXN_COMMITTED:
            lso = self.last_stable_offset
            if lso == self.high_watermark:
                max_meta = self._high_watermark_metadata
            else:
                max_meta = LogOffsetMetadata(lso)
            if max_meta.message_offset_only and start_offset < max_meta.message_offset:
                max_meta = self._offset_metadata(max_meta)
        else:
            raise ValueError(f"unknown isolation {isolation!r}")
        return self.local_log.read(
            start_offset,
            max_length,
            min_one_message,
            max_meta,
            isolation == ISOLATION_TXN_COMMITTED,
        )

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        segments = self.local_log.segments
        seg = segments.floor_segment(start_offset)
        out: list[AbortedTxn] = []
        while seg is not None:
            result = seg.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(result.aborted_transactions)
            if result.is_complete:
                break
            seg = segments.higher_segment(seg.base_offset)
        return out

    # -- timestamps --------------------------------------------------------------------------

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: first offset with timestamp >= target, or a special target (-1..-5)."""
        cache = self.leader_epoch_cache
        if target_timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            earliest = cache.earliest_entry
            epoch = earliest.epoch if earliest is not None and earliest.start_offset <= self._log_start_offset else None
            return TimestampAndOffset(NO_TIMESTAMP, self._log_start_offset, epoch)
        if target_timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self.log_end_offset, cache.latest_epoch)
        if target_timestamp == LATEST_TIERED_TIMESTAMP:
            # no remote storage: Kafka answers offset -1 with epoch -1
            return TimestampAndOffset(NO_TIMESTAMP, -1, -1)
        segments = self.local_log.segments.values()
        if target_timestamp == MAX_TIMESTAMP:
            best = max(segments, key=lambda s: s.max_timestamp_so_far, default=None)
            if best is None or best.max_timestamp_so_far < 0:
                return None
            max_ts, offset = best.max_timestamp_so_far, best.shallow_offset_of_max_timestamp_so_far
            position = best.offset_index().lookup(offset).position
            for header in best.log.batch_headers(position):
                if header.max_timestamp == max_ts:
                    return self._offset_of_max_timestamp(best, header)
            return None
        for segment in segments:
            if segment.largest_timestamp() >= target_timestamp:
                found = segment.find_offset_by_timestamp(target_timestamp, self._log_start_offset)
                if found is not None:
                    return found
        return None

    @staticmethod
    def _offset_of_max_timestamp(segment: LogSegment, header: BatchHeader) -> TimestampAndOffset:
        """KIP-734: the offset of the record carrying the batch's max timestamp (decodes one
        batch)."""
        from kopfka.protocol.record_codec import decode_records
        from kopfka.protocol.records import read_header

        epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None
        if header.is_log_append_time:
            return TimestampAndOffset(header.max_timestamp, header.base_offset, epoch)
        data = segment.log.pread(header.position, header.size)
        for record in decode_records(data, read_header(data, 0)):
            if record.timestamp == header.max_timestamp:
                return TimestampAndOffset(header.max_timestamp, record.offset, epoch)
        return TimestampAndOffset(header.max_timestamp, header.last_offset, epoch)

    # -- truncation --------------------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at or above `target_offset` (follower divergence); True if
        truncated."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate partition {self.topic_partition} to a negative offset")
        local = self.local_log
        if target_offset >= local.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(local.log_end_offset)
            return False
        first = local.segments.first_segment()
        if first is not None and first.base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        deleted = local.truncate_to(target_offset)
        self._delete_producer_snapshots(deleted)
        self.leader_epoch_cache.truncate_from_end(target_offset)
        self._log_start_offset = min(target_offset, self._log_start_offset)
        rebuild_producer_state(
            self.producer_state_manager,
            local.segments,
            self._log_start_offset,
            target_offset,
            False,
            self.time(),
        )
        if self.high_watermark >= local.log_end_offset:
            self._update_high_watermark_metadata(local.next_offset_metadata)
        self._maybe_increment_first_unstable_offset()
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete all segments and restart the log empty at `new_offset`."""
        deleted = self.local_log.truncate_fully_and_start_at(new_offset)
        self._delete_producer_snapshots(deleted)
        self.leader_epoch_cache.clear_and_flush()
        self.producer_state_manager.truncate_fully_and_start_at(new_offset)
        self._log_start_offset = new_offset
        rebuild_producer_state(
            self.producer_state_manager,
            self.local_log.segments,
            new_offset,
            new_offset,
            False,
            self.time(),
        )
        self._update_high_watermark_metadata(self.local_log.next_offset_metadata)
        self._maybe_increment_first_unstable_offset()

    def _delete_producer_snapshots(self, segments: list[LogSegment]) -> None:
        for s in segments:
            self.producer_state_manager.remove_and_mark_snapshot_for_deletion(s.base_offset)
        # the renamed snapshots go with the .deleted segment files
        for f in self.dir.glob("*" + lfu.PRODUCER_SNAPSHOT_FILE_SUFFIX + lfu.DELETED_FILE_SUFFIX):
            f.unlink(missing_ok=True)

    def delete_segments(self, segments: list[LogSegment]) -> None:
        """Remove whole old segments (retention): rename to .deleted, unlink later."""
        local = self.local_log
        snapshots = []
        for s in segments:
            local.segments.remove(s.base_offset)
            snap = self.producer_state_manager.remove_and_mark_snapshot_for_deletion(s.base_offset)
            if snap is not None:
                snapshots.append(snap)
        delete_segment_files(segments, True, local.config.file_delete_delay_ms, local.scheduler)

        def delete_snapshots() -> None:
            for path in snapshots:
                path.unlink(missing_ok=True)

        if snapshots:
            if local.scheduler is not None:
                local.scheduler("delete-file", local.config.file_delete_delay_ms, delete_snapshots)
            else:
                delete_snapshots()

    # -- retention (seed 001) -----------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Retention: delete whole old segments; returns how many were deleted.

        cleanup.policy=delete runs the log-start-offset, retention.bytes and retention.ms
        predicates in that order; a compact-only log only drops segments wholly below the
        log start offset (DeleteRecords).
        """
        if self.config.delete:
            return (
                self._delete_log_start_offset_breached_segments()
                + self._delete_retention_size_breached_segments()
                + self._delete_retention_ms_breached_segments()
            )
        return self._delete_log_start_offset_breached_segments()

    def _delete_log_start_offset_breached_segments(self) -> int:
        start = self._log_start_offset
        return self._delete_old(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= start,
            f"log start offset {start} breach",
        )

    def _delete_retention_size_breached_segments(self) -> int:
        retention = self.config.retention_bytes
        size = self.size_in_bytes
        if retention < 0 or size < retention:
            return 0
        diff = size - retention

        def over(seg: LogSegment, nxt: LogSegment | None) -> bool:
            nonlocal diff
            if diff - seg.size >= 0:
                diff -= seg.size
                return True
            return False

        return self._delete_old(over, f"retention size {retention} breach (log size {size})")

    def _delete_retention_ms_breached_segments(self) -> int:
        retention = self.config.retention_ms
        if retention < 0:
            return 0
        now = self.time()

        def expired(seg: LogSegment, nxt: LogSegment | None) -> bool:
            largest = seg.largest_timestamp()
            if largest > now:
                logger.warning(
                    "%s: segment %d has a future timestamp %d; it cannot expire until then",
                    self.topic_partition,
                    seg.base_offset,
                    largest,
                )
            return now - largest > retention

        return self._delete_old(expired, f"retention time {retention}ms breach")

    def deletable_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> list[LogSegment]:
        """Oldest-first prefix of segments passing `predicate`, below the high watermark,
        never including an empty last segment."""
        segments = self.local_log.segments.values()
        out: list[LogSegment] = []
        hw = self.high_watermark
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            last_and_empty = nxt is None and seg.size == 0
            if hw >= upper and not last_and_empty and predicate(seg, nxt):
                out.append(seg)
            else:
                break
        return out

    def _delete_old(self, predicate: Callable[[LogSegment, LogSegment | None], bool], reason: str) -> int:
        deletable = self.deletable_segments(predicate)
        if not deletable:
            return 0
        if len(deletable) == self.num_segments:
            # never leave the log without a segment: roll a fresh active one first
            self.roll()
        survivors = self.local_log.segments.higher_segment(deletable[-1].base_offset)
        assert survivors is not None
        new_start = max(self._log_start_offset, survivors.base_offset)
        logger.info(
            "%s: deleting segments %s due to %s",
            self.topic_partition,
            [s.base_offset for s in deletable],
            reason,
        )
        if new_start > self._log_start_offset:
            self.maybe_increment_log_start_offset(new_start, "segment deletion")
        crash_point("retention-before-delete")
        self.delete_segments(deletable)
        crash_point("retention-after-delete")
        return len(deletable)

    # -- compaction ----------------------------------------------------------------------------

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """Swap cleaned segments in (see LocalLog.replace_segments)."""
        retired = self.local_log.replace_segments(new_segments, old_segments)
        new_bases = {s.base_offset for s in new_segments}
        psm = self.producer_state_manager
        for s in retired:
            if s.base_offset not in new_bases:
                psm.remove_and_mark_snapshot_for_deletion(s.base_offset)
        for f in self.dir.glob("*" + lfu.PRODUCER_SNAPSHOT_FILE_SUFFIX + lfu.DELETED_FILE_SUFFIX):
            f.unlink(missing_ok=True)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Snapshot producer state at the LEO and close files (callers flush first for
        durability)."""
        self.partition_metadata_file.maybe_flush()
        self.producer_state_manager.take_snapshot()
        self.local_log.close()

    def close_handlers(self) -> None:
        self.local_log.close_handlers()

    def delete(self) -> None:
        """Delete every file of the log and its directory."""
        self.local_log.delete_all_segments()
        self.producer_state_manager.delete_snapshots_before(1 << 63)
        self.local_log.delete_empty_dir()

    def rename_dir(self, new_dir_name: str) -> None:
        new_dir = self.local_log.rename_dir(new_dir_name)
        self.producer_state_manager.log_dir = new_dir
        self.leader_epoch_cache.checkpoint.path = new_dir / self.leader_epoch_cache.checkpoint.path.name
        self.partition_metadata_file.path = new_dir / self.partition_metadata_file.path.name
        topic, partition = lfu.parse_topic_partition_name(new_dir_name)
        self.local_log.topic, self.local_log.partition = topic, partition

    def __repr__(self) -> str:
        return (
            f"UnifiedLog({self.topic_partition}, start={self.log_start_offset}, "
            f"hw={self.high_watermark}, "
            f"leo={self.log_end_offset}, segments={self.num_segments})"
        )
