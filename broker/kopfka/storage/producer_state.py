"""ProducerStateManager: per-producer idempotence state, transactions and snapshots.

For each producer id the last 5 appended batches (sequence range, offsets) are kept, which is
what an idempotent producer may have in flight; a retried batch matching one of them is a
duplicate answered with the original offsets. The state is periodically snapshotted to
`<offset>.snapshot` (taken at every roll) so recovery only replays the log after the latest
snapshot.

Snapshot layout (ProducerSnapshot v1, big-endian):
  version int16 @0 | crc uint32 @2 (CRC32C over bytes 6..EOF) | entries int32 count @6 |
  46-byte entries: producerId i64, epoch i16, lastSequence i32, lastOffset i64,
  offsetDelta i32, timestamp i64, coordinatorEpoch i32, currentTxnFirstOffset i64 (-1 = none)
"""

from __future__ import annotations

import bisect
import enum
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from crc32c import crc32c

from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from kopfka.storage import log_file_utils as lfu
from kopfka.storage.checkpoint import fsync_dir

if TYPE_CHECKING:
    from kopfka.storage.log_segment import LogSegment

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_SNAPSHOT_VERSION = 1
PRODUCER_ENTRIES_OFFSET = 6
INT_MAX = 0x7FFFFFFF
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

_SNAPSHOT_HEADER = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_ENTRY_SIZE = _ENTRY.size  # 46


class CorruptSnapshotError(Exception):
    """A producer snapshot failed its version/CRC/length checks; it is discarded."""


class AppendOrigin(enum.Enum):
    REPLICATION = "replication"
    COORDINATOR = "coordinator"
    CLIENT = "client"
    RAFT_LEADER = "raft_leader"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Sequence arithmetic with wrap-around at INT_MAX (DefaultRecordBatch.decrementSequence)."""
    if sequence < decrement:
        return sequence - decrement + INT_MAX + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Sequence range, offsets and timestamp of one retained batch of a producer, for duplicate detection."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """Kafka's ProducerStateEntry: one producer id's epoch, last batches and ongoing transaction start."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def is_empty(self) -> bool:
        return not self.batch_metadata

    def add_batch(
        self,
        producer_epoch: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self._add_batch_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch resets the retained batches (sequences restart at 0)."""
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def _add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def update(self, next_entry: ProducerStateEntry) -> None:
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.last_timestamp = next_entry.last_timestamp
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        for batch in next_entry.batch_metadata:
            self._add_batch_metadata(batch)

    def find_duplicate_batch(self, batch: BatchHeader) -> BatchMetadata | None:
        if batch.producer_epoch != self.producer_epoch:
            return None
        first_seq, last_seq = batch.base_sequence, batch.last_sequence
        for metadata in self.batch_metadata:
            if metadata.first_seq == first_seq and metadata.last_seq == last_seq:
                return metadata
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker: its producer, first offset, marker offset and whether it aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    """An ongoing transaction in this log: producer and first offset; last offset once its marker is written."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


class ProducerAppendInfo:
    """Validates one append's batches of a single producer against its current state."""

    def __init__(
        self,
        topic_partition: str,
        producer_id: int,
        current_entry: ProducerStateEntry,
        origin: AppendOrigin,
    ) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.transactions: list[TxnMetadata] = []
        self.saw_marker = False
        self.updated_entry = ProducerStateEntry(
            producer_id,
            current_entry.producer_epoch,
            current_entry.coordinator_epoch,
            current_entry.last_timestamp,
            current_entry.current_txn_first_offset,
        )

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        if producer_epoch < self.updated_entry.producer_epoch:
            if self.origin == AppendOrigin.REPLICATION:
                return
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is "
                f"{producer_epoch}, which is smaller than the last seen epoch "
                f"{self.updated_entry.producer_epoch}",
            )

    def _check_sequence(self, producer_epoch: int, append_first_seq: int, offset: int) -> None:
        updated = self.updated_entry
        if producer_epoch != updated.producer_epoch:
            if append_first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} "
                    f"in {self.topic_partition}: {producer_epoch} (request epoch), "
                    f"{append_first_seq} (seq. number), "
                    f"{updated.producer_epoch} (current producer epoch)",
                )
            return
        if not updated.is_empty():
            current_last_seq = updated.last_seq
        elif producer_epoch == self.current_entry.producer_epoch:
            current_last_seq = self.current_entry.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # no epoch known (all data removed by retention/DeleteRecords): accept any sequence
        if not (
            self.current_entry.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(current_last_seq, append_first_seq)
        ):
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in "
                f"{self.topic_partition}: {append_first_seq} (incoming seq. number), "
                f"{current_last_seq} "
                f"(current end sequence number)",
            )

    def append(self, batch: BatchHeader, control_marker: tuple[int, int] | None = None) -> CompletedTxn | None:
        """Apply one batch. Control batches need `control_marker` = (control type,
        coordinator epoch)."""
        if batch.is_control:
            if control_marker is None:
                return None  # an empty control batch: its transaction was cleaned away
            control_type, coordinator_epoch = control_marker
            return self.append_end_txn_marker(
                control_type,
                coordinator_epoch,
                batch.producer_epoch,
                batch.base_offset,
                batch.max_timestamp,
            )
        self.append_data_batch(
            batch.producer_epoch,
            batch.base_sequence,
            batch.last_sequence,
            batch.max_timestamp,
            batch.base_offset,
            batch.base_offset + batch.last_offset_delta,
            batch.is_transactional,
        )
        return None

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin == AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated_entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        current_txn = self.updated_entry.current_txn_first_offset
        if current_txn is not None and not is_transactional:
            raise KafkaError(
                ErrorCode.invalid_txn_state,
                f"expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} "
                f"in partition {self.topic_partition}",
            )
        if current_txn is None and is_transactional:
            self.updated_entry.current_txn_first_offset = first_offset
            self.transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self,
        control_type: int,
        coordinator_epoch: int,
        producer_epoch: int,
        offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        self._check_producer_epoch(producer_epoch, offset)
        self.saw_marker = True
        if self.updated_entry.coordinator_epoch > coordinator_epoch and self.origin != AppendOrigin.REPLICATION:
            raise KafkaError(
                ErrorCode.transaction_coordinator_fenced,
                f"invalid coordinator epoch for producer {self.producer_id} at offset {offset}: "
                f"{coordinator_epoch} (zombie), {self.updated_entry.coordinator_epoch} (current)",
            )
        first = self.updated_entry.current_txn_first_offset
        completed = None if first is None else CompletedTxn(self.producer_id, first, offset, control_type == 0)
        self.updated_entry.maybe_update_producer_epoch(producer_epoch)
        self.updated_entry.current_txn_first_offset = None
        self.updated_entry.coordinator_epoch = coordinator_epoch
        self.updated_entry.last_timestamp = timestamp
        return completed


def read_end_txn_marker(data: bytes) -> tuple[int, int] | None:
    """(control type, coordinator epoch) of the first record of a control batch, or None."""
    from kopfka.protocol.record_codec import decode_records
    from kopfka.protocol.records import read_header

    records = decode_records(data, read_header(data, 0))
    if not records or records[0].key is None or len(records[0].key) < 4:
        return None
    _version, control_type = struct.unpack_from(">hh", records[0].key, 0)
    coordinator_epoch = 0
    value = records[0].value
    if value is not None and len(value) >= 6:
        coordinator_epoch = struct.unpack_from(">i", value, 2)[0]
    return control_type, coordinator_epoch


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], sync: bool = True) -> None:
    body = bytearray()
    items = list(entries)
    body += _COUNT.pack(len(items))
    for e in items:
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
    data = _SNAPSHOT_HEADER.pack(PRODUCER_SNAPSHOT_VERSION, crc32c(body)) + body
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    data = path.read_bytes()
    if len(data) < PRODUCER_ENTRIES_OFFSET + 4:
        raise CorruptSnapshotError(f"snapshot {path} is truncated")
    version, crc = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot {path} contained an unknown file version {version}")
    if crc32c(memoryview(data)[PRODUCER_ENTRIES_OFFSET:]) != crc:
        raise CorruptSnapshotError(f"snapshot {path} failed CRC check")
    (count,) = _COUNT.unpack_from(data, PRODUCER_ENTRIES_OFFSET)
    if count < 0 or len(data) != PRODUCER_ENTRIES_OFFSET + 4 + count * SNAPSHOT_ENTRY_SIZE:
        raise CorruptSnapshotError(f"snapshot {path} has an inconsistent entry count {count}")
    out: list[ProducerStateEntry] = []
    pos = PRODUCER_ENTRIES_OFFSET + 4
    for _ in range(count):
        pid, epoch, seq, offset, delta, ts, coord, txn_first = _ENTRY.unpack_from(data, pos)
        pos += SNAPSHOT_ENTRY_SIZE
        entry = ProducerStateEntry(pid, epoch, coord, ts, None if txn_first == -1 else txn_first)
        if offset >= 0:
            entry.batch_metadata.append(BatchMetadata(seq, offset, delta, ts))
        out.append(entry)
    return out


class ProducerStateManager:
    def __init__(
        self,
        topic_partition: str,
        log_dir: Path,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        time: Callable[[], int],
    ) -> None:
        self.topic_partition = topic_partition
        self.log_dir = log_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.time = time
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, TxnMetadata] = {}  # first offset -> txn
        # completed, but the marker is not yet below the high watermark: still unstable
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        # KIP-890: producer id -> (guard, epoch) of a transaction verification in flight
        self.verification_guards: dict[int, tuple[object, int]] = {}
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._snapshot_offsets: list[int] = []
        self._load_snapshots()

    # -- snapshots on disk -------------------------------------------------------------------

    def _load_snapshots(self) -> None:
        offsets = []
        for path in self.log_dir.glob("*" + lfu.PRODUCER_SNAPSHOT_FILE_SUFFIX):
            try:
                offsets.append(lfu.offset_from_file(path))
            except ValueError:
                continue
        self._snapshot_offsets = sorted(offsets)

    def _snapshot_path(self, offset: int) -> Path:
        return lfu.producer_snapshot_file(self.log_dir, offset)

    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshot_offsets)

    def latest_snapshot_offset(self) -> int | None:
        return self._snapshot_offsets[-1] if self._snapshot_offsets else None

    def oldest_snapshot_offset(self) -> int | None:
        return self._snapshot_offsets[0] if self._snapshot_offsets else None

    def snapshot_file_for_offset(self, offset: int) -> Path | None:
        i = bisect.bisect_left(self._snapshot_offsets, offset)
        if i < len(self._snapshot_offsets) and self._snapshot_offsets[i] == offset:
            return self._snapshot_path(offset)
        return None

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        i = bisect.bisect_left(self._snapshot_offsets, offset)
        if i < len(self._snapshot_offsets) and self._snapshot_offsets[i] == offset:
            del self._snapshot_offsets[i]
        try:
            self._snapshot_path(offset).unlink()
        except FileNotFoundError:
            pass

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Rename the snapshot at `offset` to .deleted (deleted with its segment); returns
        the new path."""
        i = bisect.bisect_left(self._snapshot_offsets, offset)
        if i < len(self._snapshot_offsets) and self._snapshot_offsets[i] == offset:
            del self._snapshot_offsets[i]
            path = self._snapshot_path(offset)
            target = path.with_name(path.name + lfu.DELETED_FILE_SUFFIX)
            try:
                os.replace(path, target)
                return target
            except FileNotFoundError:
                return None
        return None

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in [o for o in self._snapshot_offsets if o < offset]:
            self._remove_and_delete_snapshot(snap)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Keep snapshots at segment base offsets plus the latest one."""
        bases = set(segment_base_offsets)
        latest = self.latest_snapshot_offset()
        for offset in list(self._snapshot_offsets):
            if offset not in bases and offset != latest:
                self._remove_and_delete_snapshot(offset)

    def take_snapshot(self, sync: bool = True) -> Path | None:
        """Snapshot the producer table at the map end offset if it moved since the last one."""
        if self._last_map_offset > self._last_snap_offset:
            path = self._snapshot_path(self._last_map_offset)
            write_snapshot(path, self.producers.values(), sync)
            if sync:
                fsync_dir(self.log_dir)
            if self._last_map_offset not in self._snapshot_offsets:
                bisect.insort(self._snapshot_offsets, self._last_map_offset)
            self._last_snap_offset = self._last_map_offset
            return path
        return None

    def flush_snapshot(self, path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- state -------------------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        self._last_map_offset = offset

    def is_empty(self) -> bool:
        return not self.producers and not self.ongoing_txns

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return self.producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.topic_partition, producer_id, current, origin)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return (
            entry is not None and entry.current_txn_first_offset is not None and entry.producer_epoch == producer_epoch
        )

    def start_verification(self, producer_id: int, producer_epoch: int) -> object | None:
        """KIP-890: a guard for verifying a first transactional append with the coordinator,
        or None when the producer's transaction is already open here (nothing to verify).

        A marker or the transaction's first append clears the guard, so a verification that
        raced with an abort cannot let a stale append open a transaction the coordinator does
        not know about (the ABA problem a plain flag would have)."""
        if self.has_ongoing_transaction(producer_id, producer_epoch):
            return None
        current = self.verification_guards.get(producer_id)
        if current is not None and current[1] == producer_epoch:
            return current[0]
        guard = object()
        self.verification_guards[producer_id] = (guard, producer_epoch)
        return guard

    def is_verified(self, producer_id: int, guard: object | None) -> bool:
        current = self.verification_guards.get(producer_id)
        return guard is not None and current is not None and current[0] is guard

    def update(self, append_info: ProducerAppendInfo) -> None:
        pid = append_info.producer_id
        updated = append_info.updated_entry
        if append_info.saw_marker or updated.current_txn_first_offset is not None:
            self.verification_guards.pop(pid, None)
        current = self.producers.get(pid)
        if current is None:
            self.producers[pid] = updated
        else:
            current.update(updated)
        for txn in append_info.transactions:
            self.ongoing_txns[txn.first_offset] = txn

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is not None:
            txn.last_offset = completed.last_offset
            self.unreplicated_txns[completed.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is replicated stop holding the LSO back."""
        if self.unreplicated_txns:
            for first in [
                f
                for f, t in self.unreplicated_txns.items()
                if t.last_offset is not None and t.last_offset < high_watermark
            ]:
                del self.unreplicated_txns[first]

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        others = [o for o, t in self.ongoing_txns.items() if t.producer_id != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def first_unstable_offset(self) -> int | None:
        if not self.ongoing_txns and not self.unreplicated_txns:
            return None
        return min(*self.ongoing_txns, *self.unreplicated_txns, 1 << 63)

    def _is_expired(self, now: int, entry: ProducerStateEntry) -> bool:
        return entry.current_txn_first_offset is None and now - entry.last_timestamp >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now: int) -> None:
        for pid in [p for p, e in self.producers.items() if self._is_expired(now, e)]:
            del self.producers[pid]

    def _clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self.verification_guards.clear()

    def _load_from_snapshot(self, log_start_offset: int, now: int) -> None:
        while True:
            latest = self.latest_snapshot_offset()
            if latest is None:
                self._last_snap_offset = self._last_map_offset = log_start_offset
                return
            try:
                entries = read_snapshot(self._snapshot_path(latest))
            except (CorruptSnapshotError, OSError):
                self._remove_and_delete_snapshot(latest)
                continue
            for entry in entries:
                if not self._is_expired(now, entry):
                    self.producers[entry.producer_id] = entry
                    if entry.current_txn_first_offset is not None:
                        self.ongoing_txns[entry.current_txn_first_offset] = TxnMetadata(
                            entry.producer_id, entry.current_txn_first_offset
                        )
            self._last_snap_offset = self._last_map_offset = latest
            return

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now: int) -> None:
        """Drop snapshots above the log end and reload the latest remaining one."""
        for offset in [o for o in self._snapshot_offsets if o > log_end_offset]:
            self._remove_and_delete_snapshot(offset)
        if log_end_offset != self._last_map_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset, now)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear()
        for snap in list(self._snapshot_offsets):
            self._remove_and_delete_snapshot(snap)
        self._last_snap_offset = 0
        self._last_map_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = latest if latest is not None else log_start_offset

    # -- replay ------------------------------------------------------------------------------

    def update_from_recovered_batch(
        self, segment: LogSegment | None, batch: BatchHeader, data: bytes | None = None
    ) -> None:
        """Replay one batch from disk (recovery, rebuild): no sequence checks, markers
        complete txns."""
        if batch.producer_id >= 0:
            info = self.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
            marker = None
            if batch.is_control and segment is not None:
                raw = data if data is not None else segment.log.pread(batch.position, batch.size)
                marker = read_end_txn_marker(raw)
            completed = info.append(batch, marker)
            self.update(info)
            if completed is not None:
                lso = self.last_stable_offset(completed)
                if completed.is_aborted and segment is not None:
                    from kopfka.storage.transaction_index import AbortedTxn

                    try:
                        segment.update_txn_index(
                            AbortedTxn(
                                completed.producer_id,
                                completed.first_offset,
                                completed.last_offset,
                                lso,
                            )
                        )
                    except ValueError:
                        pass
                self.complete_txn(completed)
        self._last_map_offset = batch.base_offset + batch.last_offset_delta + 1
