"""LogValidator rules: one test (or more) per rule, on batches built by our codec and by
kafka-python's builder."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kopfka.config.log_config import LogConfig
from kopfka.protocol import compression as c
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import (
    CONTROL_FLAG,
    is_crc_valid,
    iter_batches,
    read_header,
    rewrite_crc,
)
from kopfka.storage.log_validator import (
    RecordValidationError,
    ValidationResult,
    validate_and_assign_offsets,
)

NOW = 1_700_000_000_000
CODECS = [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
TARGETS = ["uncompressed", "gzip", "snappy", "lz4", "zstd"]


def recs(n: int = 5, *, ts: int = NOW, keys: bool = True) -> list[Record]:
    return [
        Record(i, ts + i, b"k%d" % i if keys else None, b"value-%d" % i, (("h", b"x"),))
        for i in range(n)
    ]


def validate(data: bytes | bytearray | memoryview, **kw: Any) -> ValidationResult:
    config = kw.pop("config", None) or LogConfig.defaults(**kw.pop("cfg", {}))
    args: dict[str, Any] = {"offset_counter": 100, "now_ms": NOW, "leader_epoch": 4}
    args.update(kw)
    return validate_and_assign_offsets(data, config=config, **args)


def code_of(data: bytes | bytearray, **kw: Any) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        validate(data, **kw)
    return info.value.code


def patched(batch: bytes, fmt: str, offset: int, value: int, crc: bool = True) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    if crc:
        rewrite_crc(buf, read_header(buf))
    return bytes(buf)


# --- the happy paths --------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_in_place_assigns_offsets_and_epoch(codec: int) -> None:
    data = encode_batch(recs(5), compression_type=codec, producer_id=3, producer_epoch=1,
                        base_sequence=0)
    res = validate(data)
    assert (res.first_offset, res.last_offset, res.record_count) == (100, 104, 5)
    assert not res.recompressed and res.compression == codec
    (h,) = list(iter_batches(res.records))  # CRC still valid
    assert h.base_offset == 100 and h.partition_leader_epoch == 4
    assert res.batches[0].base_offset == 100
    assert res.max_timestamp == NOW + 4 and res.shallow_offset_of_max_timestamp == 104
    assert res.log_append_time_ms == -1
    # records region untouched: same bytes after the header
    assert bytes(res.records[61:]) == data[61:]
    assert [r.offset for r in decode_records(res.records, h)] == [100, 101, 102, 103, 104]


def test_in_place_does_not_touch_the_input() -> None:
    data = bytearray(encode_batch(recs()))
    before = bytes(data)
    validate(data)
    assert bytes(data) == before


def test_writable_memoryview_is_stamped_in_place() -> None:
    """The produce hot path hands a view into the receive buffer: no copy is made."""
    frame = bytearray(b"xx" + encode_batch(recs()))
    res = validate(memoryview(frame)[2:])
    assert isinstance(res.records, memoryview)
    assert read_header(frame, 2).base_offset == 100  # the frame itself carries the offsets


def test_accepts_memoryview_input() -> None:
    data = encode_batch(recs())
    res = validate(memoryview(data))
    assert res.first_offset == 100


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", TARGETS)
def test_compression_type_recompresses_when_codec_differs(source: int, target: str) -> None:
    data = encode_batch(recs(20), compression_type=source, producer_id=9, producer_epoch=2,
                        base_sequence=5, transactional=True)
    res = validate(data, cfg={"compression.type": target})
    want = c.CONFIG_CODECS[target]
    (h,) = list(iter_batches(res.records))
    assert h.compression == want and res.compression == want
    assert res.recompressed == (want != source)
    assert (h.base_offset, h.partition_leader_epoch, h.records_count) == (100, 4, 20)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (9, 2, 5, True)
    got = decode_records(res.records, h)
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [
        (100 + r.offset, r.key, r.value, r.headers) for r in recs(20)
    ]
    assert res.batches[0].compression == want


def test_recompression_uses_configured_level() -> None:
    data = encode_batch([Record(i, NOW, b"k", (b"abcdefgh%d" % (i % 7)) * 50) for i in range(200)])
    small = validate(data, cfg={"compression.type": "zstd", "compression.zstd.level": 19})
    big = validate(data, cfg={"compression.type": "zstd", "compression.zstd.level": -50})
    assert len(small.records) < len(big.records)
    g1 = validate(data, cfg={"compression.type": "gzip", "compression.gzip.level": 1})
    g9 = validate(data, cfg={"compression.type": "gzip", "compression.gzip.level": 9})
    assert len(g9.records) < len(g1.records)


def test_kafka_python_snappy_batch_recompressed_to_lz4() -> None:
    b = KpBuilder(2, c.SNAPPY, False, -1, -1, -1, 1 << 20)
    for i in range(100):
        b.append(i, NOW + i, b"key", b"v" * i, [])
    res = validate(bytes(b.build()), cfg={"compression.type": "lz4"})
    batch = KpBatch(bytearray(res.records))
    assert batch.compression_type == c.LZ4 and batch.validate_crc()
    assert [r.value for r in batch] == [b"v" * i for i in range(100)]
    assert [r.offset for r in KpBatch(bytearray(res.records))] == list(range(100, 200))


# --- LogAppendTime --------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_patches_header_only(codec: int) -> None:
    data = encode_batch(recs(5, ts=NOW - 50_000), compression_type=codec)
    res = validate(data, cfg={"message.timestamp.type": "LogAppendTime"}, now_ms=NOW)
    (h,) = list(iter_batches(res.records))
    assert h.is_log_append_time and h.max_timestamp == NOW
    assert res.log_append_time_ms == NOW and res.max_timestamp == NOW
    assert not res.recompressed
    assert bytes(res.records[61:]) == data[61:]  # no rebuild
    # a reader uses maxTimestamp for every record of a LogAppendTime batch
    assert all(r.timestamp == NOW for r in KpBatch(bytearray(res.records)))


def test_log_append_time_with_recompression() -> None:
    data = encode_batch(recs(5, ts=NOW - 50_000), compression_type=c.GZIP)
    res = validate(data, cfg={"message.timestamp.type": "LogAppendTime",
                              "compression.type": "zstd"})
    (h,) = list(iter_batches(res.records))
    assert h.is_log_append_time and h.max_timestamp == NOW and h.compression == c.ZSTD


def test_log_append_time_ignores_timestamp_bounds() -> None:
    data = encode_batch(recs(2, ts=NOW + 10 * 3_600_000))
    res = validate(data, cfg={"message.timestamp.type": "LogAppendTime"})
    assert res.max_timestamp == NOW


def test_create_time_topic_clears_a_client_log_append_time_bit() -> None:
    data = encode_batch(recs(3), log_append_time=True)
    res = validate(data)
    (h,) = list(iter_batches(res.records))
    assert not h.is_log_append_time and h.max_timestamp == NOW + 2


# --- timestamps ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_timestamp_too_far_in_future(codec: int) -> None:
    data = encode_batch(recs(3, ts=NOW + 3_600_001), compression_type=codec)
    assert code_of(data) == ErrorCode.invalid_timestamp


def test_timestamp_before_bound() -> None:
    data = encode_batch(recs(3, ts=NOW - 10_000))
    assert code_of(data, cfg={"message.timestamp.before.max.ms": 5_000}) == (
        ErrorCode.invalid_timestamp
    )
    validate(data, cfg={"message.timestamp.before.max.ms": 20_000})


def test_timestamp_within_bounds_at_the_edges() -> None:
    validate(encode_batch(recs(1, ts=NOW + 3_600_000)))
    validate(encode_batch(recs(1, ts=NOW - 5_000)), cfg={"message.timestamp.before.max.ms": 5_000})


def test_record_timestamps_checked_when_records_are_walked() -> None:
    # header claims a sane maxTimestamp, but one record is far in the future
    rs = recs(3)
    rs[1] = Record(1, NOW + 10 * 3_600_000, b"k", b"v")
    data = encode_batch(rs, max_timestamp=NOW, compression_type=c.GZIP)
    with pytest.raises(KafkaError) as info:
        validate(data, cfg={"compression.type": "zstd"})
    assert info.value.code == ErrorCode.invalid_timestamp


def test_walked_records_fix_a_wrong_max_timestamp() -> None:
    data = encode_batch(recs(3), max_timestamp=NOW - 1, compression_type=c.LZ4)
    res = validate(data, cfg={"compression.type": "gzip"})
    assert res.max_timestamp == NOW + 2 and res.batches[0].max_timestamp == NOW + 2


# --- structural rules ---------------------------------------------------------------------


def test_corrupt_crc() -> None:
    data = bytearray(encode_batch(recs()))
    data[-1] ^= 0xFF
    assert code_of(bytes(data)) == ErrorCode.corrupt_message


def test_message_too_large() -> None:
    data = encode_batch([Record(0, NOW, b"k", b"x" * 2000)])
    assert code_of(data, cfg={"max.message.bytes": 1000}) == ErrorCode.message_too_large
    validate(data, cfg={"max.message.bytes": len(data)})


def test_message_too_large_after_recompression() -> None:
    import os

    data = encode_batch([Record(0, NOW, b"k", os.urandom(5000))], compression_type=c.NONE)
    # gzip of random bytes grows a little; allow exactly the input size
    assert code_of(data, cfg={"max.message.bytes": len(data),
                              "compression.type": "gzip"}) == ErrorCode.message_too_large


def test_record_count_must_match_last_offset_delta() -> None:
    data = encode_batch(recs(5))
    assert code_of(patched(data, ">i", 57, 4)) in (ErrorCode.invalid_record,)
    assert code_of(patched(data, ">i", 23, 5)) == ErrorCode.invalid_record
    assert code_of(patched(patched(data, ">i", 23, -1), ">i", 57, 0)) == ErrorCode.invalid_record


def test_control_batches_rejected_from_clients() -> None:
    data = encode_batch(recs(1), control=True, transactional=True, producer_id=1,
                        producer_epoch=0)
    assert code_of(data) == ErrorCode.invalid_record
    # the broker's own appends (e.g. transaction markers) may carry them
    res = validate(data, from_client=False)
    assert res.batches[0].attributes & CONTROL_FLAG


def test_producer_id_without_sequence_rejected() -> None:
    data = encode_batch(recs(1), producer_id=5, producer_epoch=0, base_sequence=-1)
    assert code_of(data) == ErrorCode.invalid_record


def test_non_zero_base_offset_from_client_rejected() -> None:
    data = encode_batch(recs(2), base_offset=7)
    assert code_of(data) == ErrorCode.invalid_record
    assert validate(data, from_client=False).first_offset == 100


def test_exactly_one_batch_per_partition() -> None:
    two = encode_batch(recs(2)) + encode_batch(recs(3))
    assert code_of(two) == ErrorCode.invalid_record
    res = validate(two, from_client=False)
    assert (res.first_offset, res.last_offset, len(res.batches)) == (100, 104, 2)
    assert [h.base_offset for h in iter_batches(res.records)] == [100, 102]


def test_no_batch_at_all() -> None:
    assert code_of(b"") == ErrorCode.invalid_record
    data = encode_batch(recs(2))
    assert code_of(data[:-1]) == ErrorCode.invalid_record  # partial batch is no batch


def test_trailing_partial_batch_is_dropped() -> None:
    data = encode_batch(recs(2))
    res = validate(data + data[:30])
    assert bytes(res.records[8:12]) == data[8:12] and len(res.records) == len(data)


def test_batch_length_below_header_size_is_corrupt() -> None:
    data = patched(encode_batch(recs(2)), ">i", 8, 10, crc=False)
    assert code_of(data) == ErrorCode.corrupt_message


def test_old_magic_rejected() -> None:
    data = patched(encode_batch(recs(2)), ">b", 16, 1, crc=False)
    assert code_of(data) == ErrorCode.invalid_record


def test_unknown_codec_is_corrupt() -> None:
    data = patched(encode_batch(recs(2)), ">h", 21, 6)
    assert code_of(data) == ErrorCode.corrupt_message


def test_zstd_needs_produce_v7() -> None:
    data = encode_batch(recs(2), compression_type=c.ZSTD)
    assert code_of(data, produce_version=6) == ErrorCode.unsupported_compression_type
    validate(data, produce_version=7)
    validate(encode_batch(recs(2), compression_type=c.GZIP), produce_version=3)


# --- compacted topics --------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_compacted_topic_requires_keys(codec: int) -> None:
    rs = recs(6)
    rs[2] = Record(2, NOW, None, b"no key")
    rs[4] = Record(4, NOW, None, None)
    data = encode_batch(rs, compression_type=codec)
    with pytest.raises(RecordValidationError) as info:
        validate(data, cfg={"cleanup.policy": ["compact"]})
    assert info.value.code == ErrorCode.invalid_record
    assert [i for i, _ in info.value.record_errors] == [2, 4]
    # fine on a delete-only topic, and with keys on a compacted one
    validate(data)
    validate(encode_batch(recs(6), compression_type=codec),
             cfg={"cleanup.policy": ["compact", "delete"]})


def test_walked_records_must_have_sequential_offset_deltas() -> None:
    rs = [Record(i * 2, NOW, b"k", b"v") for i in range(3)]
    data = encode_batch(rs, last_offset_delta=2)
    assert code_of(data, cfg={"cleanup.policy": ["compact"]}) == ErrorCode.invalid_record
    # client batches are always walked (as Kafka does); only an explicit opt-out skips it
    assert code_of(data) == ErrorCode.invalid_record
    validate(data, deep_validation=False)


def test_corrupt_compressed_payload() -> None:
    data = bytearray(encode_batch(recs(20), compression_type=c.GZIP))
    data[70:80] = b"\0" * 10
    rewrite_crc(data, read_header(data))
    assert code_of(bytes(data), cfg={"compression.type": "lz4"}) == ErrorCode.corrupt_message
    # producer codec kept: still decompressed and walked, so the corruption is caught
    assert code_of(bytes(data)) == ErrorCode.corrupt_message
    validate(bytes(data), deep_validation=False)


def test_decompression_bomb_rejected() -> None:
    bomb = encode_batch([Record(0, NOW, b"k", bytes(40 << 20))], compression_type=c.ZSTD)
    assert len(bomb) < 100_000
    assert code_of(bomb, cfg={"compression.type": "gzip"}) == ErrorCode.corrupt_message
    assert code_of(bomb, cfg={"compression.type": "gzip"},
                   max_decompressed_bytes=1 << 20) == ErrorCode.corrupt_message


def test_result_headers_match_output_bytes() -> None:
    for cfg in ({}, {"compression.type": "lz4"}):
        res = validate(encode_batch(recs(4), compression_type=c.GZIP), cfg=cfg)
        (h,) = list(iter_batches(res.records))
        assert res.batches[0] == h and is_crc_valid(res.records, h)
