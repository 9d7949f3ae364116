"""Cleaner (seed 001): the two-pass compaction of one log.

Pass 1 maps MD5(key) -> latest offset over the dirty section into a fixed-size
`SkimpyOffsetMap` (bounded by log.cleaner.dedupe.buffer.size; when it fills, this clean stops
there and the next one continues: multi-pass). Pass 2 recopies the segments below the map's
end, grouped so a group fits one segment, keeping for every record only the latest offset of
its key, into `.cleaned` segments that `UnifiedLog.replace_segments` swaps in.

Both passes are blocking file I/O and run on a worker thread; they only read inactive
segments (through positional reads, so concurrent appends and fetches are undisturbed) and
write new `.cleaned` files. The swap itself runs on the event loop (see LogCleaner).
"""

from __future__ import annotations

import hashlib
import logging
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from crc32c import crc32c

from kopfka.log.cleaned_txn_metadata import CleanedTransactionMetadata
from kopfka.protocol import compression
from kopfka.protocol.record_codec import Record, control_record_type, decode_records, read_varint, rebuild_batch
from kopfka.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    DELETE_HORIZON_FLAG,
    LOG_OVERHEAD,
    BatchHeader,
    read_header,
)
from kopfka.storage import log_file_utils as lfu
from kopfka.storage.fault_injection import crash_point
from kopfka.storage.log_segment import LogSegment
from kopfka.storage.transaction_index import AbortedTxn
from kopfka.storage.unified_log import UnifiedLog

log = logging.getLogger(__name__)

MAX_MAP_BYTES = 2 * 1024 * 1024 * 1024 - 1
INT_MAX = 0x7FFFFFFF


class LogCleaningAbortedError(Exception):
    """The partition's cleaning was aborted (deletion, truncation, move, shutdown)."""


# --- the offset map -----------------------------------------------------------------------


class SkimpyOffsetMap:
    """Open-addressing hash table of MD5(key) (16 bytes) -> offset (8 bytes) in one buffer.

    Stores hashes, not keys, so memory is 24 bytes per entry whatever the key size; a
    (vanishingly rare) MD5 collision makes the older of two keys look superseded. No deletes;
    `clear()` between cleanings.
    """

    HASH_SIZE = 16
    BYTES_PER_ENTRY = HASH_SIZE + 8

    def __init__(self, memory: int) -> None:
        self.slots = max(1, min(memory, MAX_MAP_BYTES) // self.BYTES_PER_ENTRY)
        self._buf = bytearray(self.slots * self.BYTES_PER_ENTRY)
        self.size = 0
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    def _position(self, digest: bytes, attempt: int) -> int:
        # the first four probes use successive 4-byte words of the hash, then go linear
        if attempt < 4:
            probe = int.from_bytes(digest[attempt * 4 : attempt * 4 + 4], "big")
        else:
            probe = int.from_bytes(digest[12:16], "big") + attempt - 3
        return (probe % self.slots) * self.BYTES_PER_ENTRY

    def put(self, key: bytes, offset: int) -> None:
        digest = hashlib.md5(key).digest()
        buf = self._buf
        attempt = 0
        self.lookups += 1
        while True:
            pos = self._position(digest, attempt)
            stored = buf[pos : pos + self.HASH_SIZE]
            if stored == digest:
                break
            if not any(stored) and not any(buf[pos + 16 : pos + 24]):
                if self.size >= self.slots:
                    raise OverflowError("attempt to add a new entry to a full offset map")
                self.size += 1
                buf[pos : pos + self.HASH_SIZE] = digest
                break
            attempt += 1
            self.probes += 1
            if attempt > self.slots + 4:
                raise OverflowError("attempt to add a new entry to a full offset map")
        struct.pack_into(">q", buf, pos + self.HASH_SIZE, offset)
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset stored for `key`, or -1."""
        digest = hashlib.md5(key).digest()
        buf = self._buf
        attempt = 0
        while True:
            pos = self._position(digest, attempt)
            stored = buf[pos : pos + self.HASH_SIZE]
            if stored == digest:
                return int(struct.unpack_from(">q", buf, pos + self.HASH_SIZE)[0])
            if not any(stored) and not any(buf[pos + 16 : pos + 24]):
                return -1
            attempt += 1
            if attempt > self.slots + 4:
                return -1

    def clear(self) -> None:
        self._buf[:] = bytes(len(self._buf))
        self.size = 0
        self.latest_offset = -1

    @property
    def utilization(self) -> float:
        return self.size / self.slots


# --- throttling ---------------------------------------------------------------------------


class Throttler:
    """Shared by all cleaner threads: keeps cleaner I/O under
    log.cleaner.io.max.bytes.per.second by sleeping the caller. The rate can change while the
    cleaner runs (a dynamic config change); a sleeper then wakes and goes on at the new rate."""

    def __init__(self, bytes_per_second: float, check_interval_ms: int = 100) -> None:
        self.rate = bytes_per_second
        self.check_interval = check_interval_ms / 1000
        self._lock = threading.Lock()
        self._wake = threading.Condition()
        self._start = time.monotonic()
        self._observed = 0.0
        self.sleeps = 0  # how often a cleaner slept to keep the rate
        self.throttled_s = 0.0  # for how long, in total (a sleep counts once it ended)

    def update_rate(self, bytes_per_second: float) -> None:
        """Kafka's updateDesiredRatePerSec: the new rate applies from now on."""
        with self._lock:
            self.rate = bytes_per_second
            self._start, self._observed = time.monotonic(), 0.0
        self.interrupt()

    def interrupt(self) -> None:
        """Wake every thread sleeping in maybe_throttle (a rate change or a cleaner stopping)."""
        with self._wake:
            self._wake.notify_all()

    def maybe_throttle(self, observed: float) -> bool:
        """Account `observed` bytes; sleep while over the rate. True if it slept."""
        if self.rate >= 1e300:
            return False
        with self._lock:
            self._observed += observed
            now = time.monotonic()
            elapsed = now - self._start
            if elapsed < self.check_interval:
                return False
            desired = self._observed / self.rate
            sleep = desired - elapsed
            self._start, self._observed = now, 0.0
        if sleep <= 0:
            return False
        with self._wake:
            self.sleeps += 1
            self._wake.wait(sleep)
        with self._lock:
            self.throttled_s += time.monotonic() - now
            self._start = time.monotonic()
        return True


# --- record scanning ----------------------------------------------------------------------


def iter_file_batches(
    segment: LogSegment, chunk_size: int, end_position: int | None = None
) -> Iterator[tuple[BatchHeader, bytes | memoryview]]:
    """(header, bytes of the batch) for every complete batch of the segment file, read in
    chunks of `chunk_size` (grown when one batch is larger)."""
    records = segment.log
    limit = records.size_in_bytes() if end_position is None else end_position
    pos = 0
    while pos + LOG_OVERHEAD <= limit:
        buf = records.pread(pos, min(chunk_size, limit - pos))
        off = 0
        view = memoryview(buf)
        n = len(buf)
        while n - off >= BATCH_HEADER_SIZE:
            header = read_header(buf, off)
            if off + header.size > n:
                break
            header.position = 0
            yield header, view[off : off + header.size]
            off += header.size
        if off == 0:
            if n < BATCH_HEADER_SIZE:
                return
            header = read_header(buf, 0)
            if pos + header.size > limit:
                return
            whole = records.pread(pos, header.size)
            header.position = 0
            yield header, whole
            off = header.size
        pos += off


def iter_keys(batch: bytes | memoryview, header: BatchHeader) -> Iterator[tuple[int, bytes | None, bool]]:
    """(offset, key, has_value) of each record, without copying values or headers."""
    body: bytes | memoryview = memoryview(batch)[BATCH_HEADER_SIZE:]
    if header.compression:
        body = compression.decompress(header.compression, body, compression.DEFAULT_MAX_DECOMPRESSED)
    pos = 0
    base = header.base_offset
    for _ in range(header.records_count):
        length, pos = read_varint(body, pos)
        end = pos + length
        p = pos + 1  # attributes
        _ts, p = read_varint(body, p)
        off_delta, p = read_varint(body, p)
        klen, p = read_varint(body, p)
        if klen < 0:
            key = None
        else:
            key = bytes(body[p : p + klen])
            p += klen
        vlen, p = read_varint(body, p)
        yield base + off_delta, key, vlen >= 0
        pos = end


def _empty_batch(header: BatchHeader, batch: bytes | memoryview) -> bytearray:
    """The batch's header alone with no records: keeps its offsets (and producer sequence)
    in the log when compaction removed every record of it."""
    out = bytearray(batch[:BATCH_HEADER_SIZE])
    struct.pack_into(">i", out, 8, BATCH_HEADER_SIZE - LOG_OVERHEAD)
    struct.pack_into(">i", out, BATCH_HEADER_SIZE - 4, 0)
    out[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = struct.pack(">h", (header.attributes & ~0x07))
    struct.pack_into(">I", out, 17, crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return out


def _in_aborted_txn(header: BatchHeader, aborted: list[AbortedTxn]) -> bool:
    if not header.is_transactional or header.is_control:
        return False
    pid = header.producer_id
    return any(a.producer_id == pid and a.first_offset <= header.base_offset <= a.last_offset for a in aborted)


# --- the cleaning itself -----------------------------------------------------------------


@dataclass
class CleanerStats:
    """Byte and message counters of the current clean, for the cleaner's log line and its last-clean stats."""

    bytes_read: int = 0  # by the recopy pass (the denominator of cleaner-recopy-percent)
    bytes_written: int = 0
    map_bytes_read: int = 0  # by the offset-map pass
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    map_messages_read: int = 0
    start: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return max(time.monotonic() - self.start, 1e-9)


@dataclass
class CleanResult:
    """The outcome of recopying one group of segments: the `.cleaned` segment and the earliest delete horizon."""

    segment: LogSegment | None  # the `.cleaned` segment, None if cancelled
    min_delete_horizon: int  # earliest horizon of a retained tombstone batch, or -1


class Cleaner:
    """Compacts logs; one per cleaner task, owning its offset map and I/O buffer size."""

    def __init__(
        self,
        cleaner_id: int,
        map_memory: int,
        io_buffer_size: int,
        load_factor: float,
        throttler: Throttler,
        check_done: Callable[[str], None],
        time_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.id = cleaner_id
        self.map_memory = min(map_memory, MAX_MAP_BYTES)
        self.io_buffer_size = max(io_buffer_size, 64 * 1024)
        self.load_factor = load_factor
        self.throttler = throttler
        self.check_done = check_done
        self.time_ms = time_ms
        self.offset_map: SkimpyOffsetMap | None = None
        self.stats = CleanerStats()
        self._unchecked = 0  # bytes read since the last check_done

    def _map_for(self, dirty_bytes: int) -> SkimpyOffsetMap:
        """The map, never above the configured memory; a small dirty section gets a smaller
        buffer so a 128 MiB table is not zeroed to clean a few KiB."""
        want = min(self.map_memory, max(dirty_bytes * 3, 64 * 1024))
        current = self.offset_map
        if current is None or current.slots * SkimpyOffsetMap.BYTES_PER_ENTRY < want:
            current = self.offset_map = SkimpyOffsetMap(want)
        else:
            current.clear()
        return current

    # -- pass 1 --------------------------------------------------------------------------

    def build_offset_map(
        self,
        tp: str,
        segments: list[LogSegment],
        start: int,
        end: int,
        aborted: list[AbortedTxn],
    ) -> tuple[SkimpyOffsetMap, int]:
        """Map the dirty range [start, end); returns the map and the offset the clean
        covers up to (`end`, or less if the map filled: the next clean continues there)."""
        dirty_bytes = sum(s.size for s in segments)
        offset_map = self._map_for(dirty_bytes)
        max_entries = max(1, int(offset_map.slots * self.load_factor))
        stats = self.stats
        for segment in segments:
            self.check_done(tp)
            for header, batch in iter_file_batches(segment, self.io_buffer_size):
                if header.last_offset < start:
                    continue
                if header.base_offset >= end:
                    break
                stats.map_bytes_read += header.size
                self._progress(tp, header.size)
                if header.is_control or _in_aborted_txn(header, aborted):
                    continue
                for offset, key, _has_value in iter_keys(batch, header):
                    if offset < start or offset >= end or key is None:
                        continue
                    if offset_map.size >= max_entries and offset_map.get(key) < 0:
                        log.debug("%s: offset map full at %d", tp, offset_map.latest_offset)
                        return offset_map, offset_map.latest_offset + 1
                    offset_map.put(key, offset)
                    stats.map_messages_read += 1
        return offset_map, end

    # -- pass 2 --------------------------------------------------------------------------

    def clean_segments(
        self,
        ulog: UnifiedLog,
        group: list[LogSegment],
        offset_map: SkimpyOffsetMap,
        end_offset: int,
        delete_retention_ms: int,
        txn_meta: CleanedTransactionMetadata,
        active_producers: dict[int, tuple[int, int]],
    ) -> CleanResult:
        """Recopy a group of segments into one `.cleaned` segment. `active_producers` maps
        producer id -> (offset of its last data batch or -1, epoch): their last batch stays."""
        tp = ulog.topic_partition
        directory = ulog.dir
        base = group[0].base_offset
        for suffix_file in (
            lfu.log_file(directory, base, lfu.CLEANED_FILE_SUFFIX),
            lfu.offset_index_file(directory, base, lfu.CLEANED_FILE_SUFFIX),
            lfu.time_index_file(directory, base, lfu.CLEANED_FILE_SUFFIX),
            lfu.transaction_index_file(directory, base, lfu.CLEANED_FILE_SUFFIX),
        ):
            suffix_file.unlink(missing_ok=True)
        cleaned = LogSegment.open(directory, base, ulog.config, ulog.time, file_suffix=lfu.CLEANED_FILE_SUFFIX)
        now = self.time_ms()
        min_horizon = -1
        try:
            for i, old in enumerate(group):
                self.check_done(tp)
                last_of_group = i == len(group) - 1
                min_horizon = self._clean_into(
                    tp,
                    old,
                    cleaned,
                    offset_map,
                    end_offset,
                    now,
                    delete_retention_ms,
                    txn_meta,
                    active_producers,
                    last_of_group,
                    min_horizon,
                )
                for txn in txn_meta.retained_aborted:  # aborts whose marker and data remain
                    cleaned.update_txn_index(txn)
                txn_meta.retained_aborted.clear()
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            crash_point("cleaner-after-cleaned-written")
            self.check_done(tp)
        except Exception:
            cleaned.close()
            cleaned.delete_if_exists()
            raise
        return CleanResult(cleaned, min_horizon)

    def _clean_into(
        self,
        tp: str,
        source: LogSegment,
        dest: LogSegment,
        offset_map: SkimpyOffsetMap,
        end_offset: int,
        now: int,
        delete_retention_ms: int,
        txn_meta: CleanedTransactionMetadata,
        active_producers: dict[int, tuple[int, int]],
        last_of_group: bool,
        min_horizon: int,
    ) -> int:
        stats = self.stats
        out = bytearray()
        out_headers: list[BatchHeader] = []
        batches = iter_file_batches(source, self.io_buffer_size)
        current = next(batches, None)
        while current is not None:
            header, batch = current
            current = next(batches, None)
            stats.bytes_read += header.size
            stats.messages_read += header.records_count
            self._progress(tp, header.size)
            is_last_batch = last_of_group and current is None
            new = self._filter_batch(
                header,
                batch,
                offset_map,
                end_offset,
                now,
                delete_retention_ms,
                txn_meta,
                active_producers,
                is_last_batch,
            )
            if new is None:
                continue
            data, horizon = new
            if horizon >= 0 and (min_horizon < 0 or horizon < min_horizon):
                min_horizon = horizon
            h = read_header(data, 0)
            h.position = len(out)
            out += data
            out_headers.append(h)
            stats.messages_written += h.records_count
            if len(out) >= self.io_buffer_size:
                self._flush_out(dest, out, out_headers)
                out = bytearray()
                out_headers = []
        if out:
            self._flush_out(dest, out, out_headers)
        return min_horizon

    def _progress(self, tp: str, nbytes: int) -> None:
        """Throttle, and check whether to stop (an abort, or the cleaner stopping for a
        reconfiguration) every io-buffer's worth of bytes, as Kafka checks per read chunk."""
        slept = self.throttler.maybe_throttle(nbytes)
        self._unchecked += nbytes
        if slept or self._unchecked >= self.io_buffer_size:
            self._unchecked = 0
            self.check_done(tp)

    def _flush_out(self, dest: LogSegment, out: bytearray, headers: list[BatchHeader]) -> None:
        dest.append(headers[-1].last_offset, out, headers)
        self.stats.bytes_written += len(out)
        self.throttler.maybe_throttle(len(out))

    def _filter_batch(
        self,
        header: BatchHeader,
        batch: bytes | memoryview,
        offset_map: SkimpyOffsetMap,
        end_offset: int,
        now: int,
        delete_retention_ms: int,
        txn_meta: CleanedTransactionMetadata,
        active_producers: dict[int, tuple[int, int]],
        is_last_batch: bool,
    ) -> tuple[bytes | bytearray | memoryview, int] | None:
        """The batch to write (verbatim, re-encoded or emptied) and its delete horizon."""
        horizon = header.base_timestamp if header.has_delete_horizon else -1
        if header.is_control:
            control_type = control_record_type(batch, header) if header.records_count > 0 else None
            can_discard = txn_meta.on_control_batch_read(header, control_type)
            discard = can_discard and 0 <= horizon <= now
        else:
            can_discard = txn_meta.on_batch_read(header)
            discard = can_discard
        retain_empty = is_last_batch or self._last_of_active_producer(header, active_producers)
        if discard:
            return (_empty_batch(header, batch), -1) if retain_empty else None
        if header.is_control:
            if can_discard and horizon < 0:  # its transaction is empty: retained like a tombstone
                horizon = now + delete_retention_ms
                h = replace(header, base_timestamp=horizon, attributes=header.attributes | DELETE_HORIZON_FLAG)
                return rebuild_batch(batch, h, records=decode_records(batch, header)), horizon
            return batch, horizon if can_discard else -1
        keep_all = True
        keep: list[int] = []
        has_tombstone = False
        for i, (offset, key, has_value) in enumerate(iter_keys(batch, header)):
            retained = self._should_retain(offset, key, has_value, offset_map, end_offset, now, horizon)
            if retained:
                keep.append(i)
                if not has_value:
                    has_tombstone = True
            else:
                keep_all = False
                if key is None:
                    self.stats.invalid_messages += 1
        stamp = has_tombstone and horizon < 0
        if keep_all and not stamp:
            return batch, horizon if has_tombstone else -1
        if not keep:
            return (_empty_batch(header, batch), -1) if retain_empty else None
        records = decode_records(batch, header)
        kept: list[Record] = [records[i] for i in keep]
        h = header
        if stamp:
            horizon = now + delete_retention_ms
            h = replace(header, base_timestamp=horizon, attributes=header.attributes | DELETE_HORIZON_FLAG)
        return rebuild_batch(batch, h, records=kept), horizon if has_tombstone else -1

    @staticmethod
    def _last_of_active_producer(header: BatchHeader, active: dict[int, tuple[int, int]]) -> bool:
        """The batch carrying an active producer's last sequence (or, when its last entry is a
        marker, that marker with its epoch) stays, even emptied, so its state survives a reload."""
        last = active.get(header.producer_id) if header.producer_id >= 0 else None
        if last is None:
            return False
        last_data_offset, epoch = last
        if last_data_offset >= 0:
            return header.last_offset == last_data_offset
        return header.is_control and header.producer_epoch == epoch

    @staticmethod
    def _should_retain(
        offset: int,
        key: bytes | None,
        has_value: bool,
        offset_map: SkimpyOffsetMap,
        end_offset: int,
        now: int,
        horizon: int,
    ) -> bool:
        if offset >= end_offset:
            return True  # beyond what this clean deduplicated
        if key is None:
            return False  # a keyless record is invalid in a compacted log
        found = offset_map.get(key)
        if found > offset:
            return False  # superseded
        if has_value:
            return True
        # a tombstone lives until its batch's delete horizon (stamped on its first clean)
        return horizon < 0 or now < horizon


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Consecutive segments whose combined log and index bytes fit one segment and whose
    offsets fit 32-bit deltas: merging keeps repeatedly cleaned segments from shrinking."""
    groups: list[list[LogSegment]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        index_size = group[0].offset_index().size_in_bytes()
        while rest:
            nxt = rest[0]
            nxt_index = nxt.offset_index().size_in_bytes()
            following = rest[1].base_offset if len(rest) > 1 else first_uncleanable
            if (
                log_size + nxt.size > max_size
                or index_size + nxt_index > max_index_size
                or following - 1 - group[0].base_offset > INT_MAX
            ):
                break
            group.append(rest.pop(0))
            log_size += nxt.size
            index_size += nxt_index
        groups.append(group)
    return groups
