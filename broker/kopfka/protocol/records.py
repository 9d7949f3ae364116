"""Zero-copy views of v2 record batches (magic 2), the unit the log stores.

Batches travel as bytes from the producer's request to the segment file and out again in
fetch responses. This module reads the fixed 61-byte batch header, checks size, magic and the
CRC32C, and patches the fields that sit *before* the CRC-covered range (base offset, partition
leader epoch) in place. Records themselves are decoded only by `kopfka.protocol.record_codec`
where a conversion (compression change, LogAppendTime, compaction) needs them.

Layout (offsets in bytes):
  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 |
  17 crc u32 | 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64 |
  35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32 |
  57 recordsCount i32 | 61 records...   CRC32C covers [21, end).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from kopfka.protocol.errors import CorruptRecordError

LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
BATCH_HEADER_SIZE = 61
MAGIC_V2 = 2
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

# attribute bits
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = range(5)

_HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclass(slots=True)
class BatchHeader:
    """The decoded fixed header of one batch, plus where it sits in its buffer."""

    position: int  # byte position of the batch in the buffer it was read from
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def first_batch_is_transactional(records: bytes | bytearray | memoryview | None) -> bool:
    """The transactional bit of the first batch (Kafka's RequestUtils looks at that one only;
    a v3+ produce carries exactly one batch per partition)."""
    if records is None or len(records) < ATTRIBUTES_OFFSET + 2 or records[16] != MAGIC_V2:
        return False
    return bool(records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG)


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Decode the header at `position`; checks only that it fits and is magic 2."""
    if len(buf) - position < BATCH_HEADER_SIZE:
        raise CorruptRecordError(message="record batch header truncated")
    fields = _HEADER.unpack_from(buf, position)
    header = BatchHeader(position, *fields)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(message=f"unsupported record batch magic {header.magic} (only v2)")
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(message=f"record batch length {header.batch_length} too small")
    return header


def compute_crc(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    start = header.position + ATTRIBUTES_OFFSET
    return crc32c(memoryview(buf)[start : header.position + header.size])


def is_crc_valid(buf: bytes | bytearray | memoryview, header: BatchHeader) -> bool:
    return compute_crc(buf, header) == header.crc


def iter_batches(
    buf: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
) -> Iterator[BatchHeader]:
    """Yield every batch header in `buf`, in order.

    Raises CorruptRecordError on a bad header, a length running past the buffer, or a CRC
    mismatch. With `allow_partial_tail`, a final incomplete batch ends iteration silently
    (fetch responses may be cut mid-batch; recovery wants the valid prefix).
    """
    end = len(buf)
    pos = 0
    while pos < end:
        if allow_partial_tail and end - pos < LOG_OVERHEAD:
            return
        try:
            header = read_header(buf, pos)
        except CorruptRecordError:
            if allow_partial_tail and end - pos < BATCH_HEADER_SIZE:
                return
            raise
        if pos + header.size > end:
            if allow_partial_tail:
                return
            raise CorruptRecordError(message="record batch extends past the end of the data")
        if verify_crc and not is_crc_valid(buf, header):
            raise CorruptRecordError(message=f"record batch at byte {pos} failed its CRC32C check")
        yield header
        pos += header.size


def set_base_offset(buf: bytearray | memoryview, header: BatchHeader, base_offset: int) -> None:
    """Patch baseOffset in place (outside the CRC-covered range: no CRC update needed)."""
    struct.pack_into(">q", buf, header.position, base_offset)
    header.base_offset = base_offset


def set_partition_leader_epoch(buf: bytearray | memoryview, header: BatchHeader, epoch: int) -> None:
    """Patch partitionLeaderEpoch in place (also outside the CRC-covered range)."""
    struct.pack_into(">i", buf, header.position + 12, epoch)
    header.partition_leader_epoch = epoch


def set_max_timestamp_and_type(
    buf: bytearray | memoryview, header: BatchHeader, max_timestamp: int, log_append_time: bool
) -> None:
    """Set maxTimestamp and the timestamp-type bit, then recompute the CRC (both are covered)."""
    attributes = header.attributes
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    else:
        attributes &= ~TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", buf, header.position + ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">q", buf, header.position + MAX_TIMESTAMP_OFFSET, max_timestamp)
    header.attributes = attributes
    header.max_timestamp = max_timestamp
    rewrite_crc(buf, header)


def rewrite_crc(buf: bytearray | memoryview, header: BatchHeader) -> None:
    crc = compute_crc(buf, header)
    struct.pack_into(">I", buf, header.position + CRC_OFFSET, crc)
    header.crc = crc
