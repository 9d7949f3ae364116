"""LogValidator: validate produced batches and assign offsets, timestamps and leader epoch.

Follows Kafka's ProduceRequest.validateRecords + UnifiedLog.analyzeAndValidateRecords +
LogValidator for magic-2 batches, and picks the cheapest strategy:

* in place — the topic keeps the producer's codec (`compression.type=producer`, or the same
  codec): patch baseOffset, partitionLeaderEpoch and, when they change, attributes /
  maxTimestamp (+ CRC) in the one copy of the request bytes. The records of client batches are
  walked (in C) to check their framing, offsets, timestamps and, on compacted topics, keys.
* recompress — the topic forces another codec: decompress (bounded), walk the records to
  validate them, and recompress the records region as is (offset and timestamp deltas stay
  valid, so records are never re-encoded one by one).

LogAppendTime is a header patch on both paths: readers take a LogAppendTime batch's
maxTimestamp as every record's timestamp, so record deltas are left alone.

Every failure is a KafkaError carrying Kafka's error code; nothing else escapes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kopfka.config.log_config import LogConfig
from kopfka.protocol import compression
from kopfka.protocol.errors import CorruptRecordError, ErrorCode, InvalidRecordError, KafkaError
from kopfka.protocol.record_codec import (
    RecordScan,
    rebuild_batch,
    records_payload,
    scan_batch_records,
    scan_records,
)
from kopfka.protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    COMPRESSION_ZSTD,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_TIMESTAMP,
    BatchHeader,
    is_crc_valid,
    read_header,
    set_base_offset,
    set_max_timestamp_and_type,
    set_partition_leader_epoch,
)

__all__ = ["RecordValidationError", "ValidationResult", "validate_and_assign_offsets"]

_I32 = struct.Struct(">i")
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
# floor of the decompression cap: legitimate, very compressible batches can be many times
# max.message.bytes, but no client builds 32 MiB of uncompressed records in one batch
_MIN_DECOMPRESSED_CAP = 32 * 1024 * 1024


class RecordValidationError(KafkaError):
    """A broken rule pinned to specific records: Produce v8+ reports `record_errors`
    (batch index, message) next to the partition's error code."""

    def __init__(
        self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]]
    ) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


@dataclass
class ValidationResult:
    """One append after validation: the bytes to write, their batches, assigned offsets, timestamps and counts."""

    records: bytearray | memoryview
    batches: list[BatchHeader] = field(default_factory=list)
    first_offset: int = -1
    last_offset: int = -1
    max_timestamp: int = NO_TIMESTAMP
    shallow_offset_of_max_timestamp: int = -1
    log_append_time_ms: int = NO_TIMESTAMP
    record_count: int = 0
    # True when the batch was re-encoded (sizes changed; Kafka's messageSizeMaybeChanged)
    recompressed: bool = False
    # codec of the batches as written (the producer's, or compression.type's)
    compression: int = 0


def validate_and_assign_offsets(
    records: bytes | bytearray | memoryview,
    *,
    offset_counter: int,
    config: LogConfig,
    now_ms: int,
    leader_epoch: int,
    produce_version: int | None = None,
    from_client: bool = True,
    max_decompressed_bytes: int | None = None,
    deep_validation: bool | None = None,
) -> ValidationResult:
    """Validate client batches and stamp offsets/epoch/timestamps into a mutable copy.

    Raises KafkaError with CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
    INVALID_TIMESTAMP or UNSUPPORTED_COMPRESSION_TYPE; nothing is appended when it raises.

    `produce_version` enables the version-dependent rule (zstd needs Produce v7+).
    `from_client=False` is for the broker's own appends (coordinators): several batches,
    control batches and non-zero base offsets are then allowed.
    `deep_validation` walks the records of in-place batches too. Like Kafka, it defaults to on
    for client batches: a batch with a valid CRC but malformed records would otherwise be stored
    and stall every consumer that reaches it. The walk runs in C (aiokafka's record parser).
    """
    if deep_validation is None:
        deep_validation = from_client
    try:
        return _validate(
            records,
            offset_counter=offset_counter,
            config=config,
            now_ms=now_ms,
            leader_epoch=leader_epoch,
            produce_version=produce_version,
            from_client=from_client,
            max_decompressed_bytes=max_decompressed_bytes,
            deep_validation=deep_validation,
        )
    except KafkaError:
        raise
    except Exception as exc:  # defence in depth: a bad batch must never crash the broker
        raise CorruptRecordError(message=f"invalid record batch: {exc!r}") from exc


def _validate(
    records: bytes | bytearray | memoryview,
    *,
    offset_counter: int,
    config: LogConfig,
    now_ms: int,
    leader_epoch: int,
    produce_version: int | None,
    from_client: bool,
    max_decompressed_bytes: int | None,
    deep_validation: bool,
) -> ValidationResult:
    view = memoryview(records).cast("B")
    positions, valid_bytes = _frame_batches(view, from_client)
    # A writable memoryview (a view into the connection's own receive buffer, which nothing
    # else holds) is stamped in place: zero copies
    # from socket to segment. Otherwise this is the one copy of the request bytes. A partial
    # trailing batch is dropped like Kafka does (slicing a memoryview copies nothing).
    in_place = isinstance(records, memoryview) and not records.readonly
    buf: bytearray | memoryview = view[:valid_bytes] if in_place else bytearray(view[:valid_bytes])
    max_message_bytes = config.max_message_bytes
    log_append_time = config.message_timestamp_type == "LogAppendTime"
    target = compression.codec_for_config(config.compression_type)
    cap = max_decompressed_bytes
    if cap is None:
        cap = max(_MIN_DECOMPRESSED_CAP, 10 * max_message_bytes)

    headers: list[BatchHeader] = []
    for pos in positions:
        header = read_header(buf, pos)
        if from_client and header.base_offset != 0:
            raise InvalidRecordError(
                message="the baseOffset of a produced record batch must be 0, "
                f"not {header.base_offset}"
            )
        if header.size > max_message_bytes:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"record batch of {header.size} bytes exceeds max.message.bytes "
                f"{max_message_bytes}",
            )
        if not is_crc_valid(buf, header):
            raise CorruptRecordError(message=f"record batch is corrupt (stored crc {header.crc})")
        _check_batch_header(header, from_client, produce_version)
        headers.append(header)

    result = ValidationResult(buf)
    result.first_offset = offset_counter
    rebuilt: list[bytearray | None] = []  # per batch, only when something was recompressed
    for header in headers:
        source = header.compression
        dest = source if target is None else target
        recompress = dest != source
        scan: RecordScan | None = None
        payload: bytes | memoryview | None = None
        if recompress or config.compact or deep_validation:
            fast = None if recompress else scan_batch_records(buf, header, collect_null_keys=config.compact)
            if fast is not None:
                scan = _check_scan(fast, config.compact)
            else:
                payload = records_payload(buf, header, max_decompressed=cap)
                scan = _scan(payload, header, config.compact)
        base_offset = offset_counter
        offset_counter += header.records_count

        # timestamps: LogAppendTime -> now; CreateTime -> checked against the bounds
        if log_append_time:
            max_ts = now_ms
            result.log_append_time_ms = now_ms
        else:
            if scan is not None:
                _check_record_timestamps(header, scan, now_ms, config)
                max_ts = header.base_timestamp + scan.max_timestamp_delta
            else:
                _check_timestamp(header.base_timestamp, now_ms, config)
                max_ts = header.max_timestamp
                _check_timestamp(max_ts, now_ms, config)

        if recompress:
            assert payload is not None
            level = _level_for(dest, config)
            new = rebuild_batch(
                buf,
                header,
                compression_type=dest,
                compression_level=level,
                base_offset=base_offset,
                partition_leader_epoch=leader_epoch,
                log_append_time=log_append_time,
                max_timestamp=max_ts,
                payload=payload,
            )
            if len(new) > max_message_bytes:
                raise KafkaError(
                    ErrorCode.message_too_large,
                    f"record batch recompressed to {len(new)} bytes exceeds max.message.bytes "
                    f"{max_message_bytes}",
                )
            rebuilt.append(new)
            result.recompressed = True
        else:
            set_base_offset(buf, header, base_offset)
            set_partition_leader_epoch(buf, header, leader_epoch)
            if header.max_timestamp != max_ts or header.is_log_append_time != log_append_time:
                set_max_timestamp_and_type(buf, header, max_ts, log_append_time)
            rebuilt.append(None)
        result.compression = dest
        result.record_count += header.records_count
        last_offset = base_offset + header.last_offset_delta
        if max_ts > result.max_timestamp or result.shallow_offset_of_max_timestamp < 0:
            result.max_timestamp = max_ts
            result.shallow_offset_of_max_timestamp = last_offset

    if result.recompressed:
        if len(rebuilt) == 1 and rebuilt[0] is not None:
            out = rebuilt[0]
        else:
            out = bytearray()
            for header, piece in zip(headers, rebuilt, strict=True):
                if piece is None:
                    out += memoryview(buf)[header.position : header.position + header.size]
                else:
                    out += piece
        result.records = out
        result.batches = []
        pos = 0
        while pos < len(out):
            h = read_header(out, pos)
            result.batches.append(h)
            pos += h.size
    else:
        result.batches = headers
    result.last_offset = offset_counter - 1
    return result


def _frame_batches(
    view: bytes | bytearray | memoryview, from_client: bool
) -> tuple[list[int], int]:
    """Batch positions and the byte count they cover, from the length fields alone.

    Mirrors Kafka's batch iterator: a trailing partial batch is not a batch; a length below
    the header size is CORRUPT_MESSAGE; a non-v2 magic is INVALID_RECORD (Produce v3+).
    """
    end = len(view)
    pos = 0
    positions: list[int] = []
    while end - pos >= LOG_OVERHEAD:
        (length,) = _I32.unpack_from(view, pos + 8)
        if length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                message=f"record batch length {length} is below the minimum {_MIN_BATCH_LENGTH}"
            )
        if pos + LOG_OVERHEAD + length > end:
            break
        magic = view[pos + 16]
        if magic != MAGIC_V2:
            raise InvalidRecordError(
                message=f"produce requests may only contain magic 2 record batches, not {magic}"
            )
        positions.append(pos)
        pos += LOG_OVERHEAD + length
    if not positions:
        raise InvalidRecordError(message="produce request must have at least one record batch")
    if from_client and len(positions) > 1:
        raise InvalidRecordError(
            message="produce requests may only contain exactly one record batch per partition"
        )
    return positions, pos


def _check_batch_header(
    header: BatchHeader, from_client: bool, produce_version: int | None
) -> None:
    codec = header.attributes & COMPRESSION_MASK
    if codec > COMPRESSION_ZSTD:
        raise CorruptRecordError(message=f"unknown compression codec id {codec}")
    if codec == COMPRESSION_ZSTD and produce_version is not None and produce_version < 7:
        raise KafkaError(
            ErrorCode.unsupported_compression_type,
            f"zstd compression needs Produce v7 or later, not v{produce_version}",
        )
    # offsets are assigned from the count, so it must agree with the header for every origin
    count = header.records_count
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecordError(
            message=f"record batch has an invalid last offset delta {header.last_offset_delta}"
        )
    if count <= 0:
        raise InvalidRecordError(message=f"invalid record count {count} in record batch")
    if count != count_from_offsets:
        raise InvalidRecordError(
            message=f"record count {count} does not match the batch's offset range "
            f"of {count_from_offsets}"
        )
    if not from_client:
        return
    if header.is_control:
        raise InvalidRecordError(message="clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(
            message=f"invalid sequence number {header.base_sequence} in a record batch "
            f"with producerId {header.producer_id}"
        )


def _scan(payload: bytes | memoryview, header: BatchHeader, compact: bool) -> RecordScan:
    return _check_scan(scan_records(payload, header.records_count, collect_null_keys=compact), compact)


def _check_scan(scan: RecordScan, compact: bool) -> RecordScan:
    if scan.first_bad_offset_delta >= 0:
        i = scan.first_bad_offset_delta
        raise RecordValidationError(
            ErrorCode.invalid_record,
            f"record {i} of the batch has an offset delta other than {i}",
            [(i, "invalid offset delta")],
        )
    if compact and scan.null_key_indexes:
        why = "Compacted topic cannot accept message without key."
        errors = [(i, why) for i in scan.null_key_indexes]
        raise RecordValidationError(
            ErrorCode.invalid_record,
            "compacted topic cannot accept a record without a key "
            f"(records {scan.null_key_indexes[:10]})",
            errors,
        )
    return scan


def _level_for(codec: int, config: LogConfig) -> int | None:
    key = {
        compression.GZIP: "compression.gzip.level",
        compression.LZ4: "compression.lz4.level",
        compression.ZSTD: "compression.zstd.level",
    }.get(codec)
    if key is None:
        return None
    try:
        return int(config[key])
    except (KeyError, TypeError, ValueError):
        return None


def _bounds(config: LogConfig) -> tuple[int, int]:
    return (
        int(config["message.timestamp.before.max.ms"]),
        int(config["message.timestamp.after.max.ms"]),
    )


def _check_timestamp(timestamp: int, now_ms: int, config: LogConfig) -> None:
    if timestamp == NO_TIMESTAMP:
        return
    before, after = _bounds(config)
    if now_ms - timestamp > before or timestamp - now_ms > after:
        raise RecordValidationError(
            ErrorCode.invalid_timestamp,
            f"timestamp {timestamp} of a record is out of range relative to broker time "
            f"{now_ms} (message.timestamp.before.max.ms={before}, "
            f"message.timestamp.after.max.ms={after})",
            [],
        )


def _check_record_timestamps(
    header: BatchHeader, scan: RecordScan, now_ms: int, config: LogConfig
) -> None:
    """Per-record CreateTime bounds, from the min/max the record walk found."""
    _check_timestamp(header.base_timestamp + scan.min_timestamp_delta, now_ms, config)
    _check_timestamp(header.base_timestamp + scan.max_timestamp_delta, now_ms, config)
