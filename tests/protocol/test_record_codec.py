"""Record codec: round trips, interop with kafka-python's and aiokafka's batch builders and
readers, control records, rebuild_batch and scan_records."""

from __future__ import annotations

import os

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kopfka.protocol import compression as c
from kopfka.protocol.errors import CorruptRecordError
from kopfka.protocol.record_codec import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    Record,
    build_end_txn_marker_batch,
    control_record_type,
    decode_control_key,
    decode_end_txn_marker,
    decode_records,
    encode_batch,
    read_varint,
    rebuild_batch,
    records_payload,
    scan_records,
    write_varint,
)
from kopfka.protocol.records import is_crc_valid, iter_batches, read_header

CODECS = [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
NOW = 1_700_000_000_000


def sample_records(n: int = 20, base: int = 0) -> list[Record]:
    out = []
    for i in range(n):
        key = None if i % 3 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 6 else os.urandom(i * 13 % 300)
        headers = tuple((f"h{j}", None if j == 1 else f"v{j}".encode()) for j in range(i % 3))
        out.append(Record(base + i, NOW + (i * 17) % 50 - 10, key, value, headers))
    return out


def test_varint_round_trip_edges() -> None:
    for n in (0, 1, -1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)):
        out = bytearray()
        write_varint(out, n)
        assert read_varint(bytes(out), 0) == (n, len(out))
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff" * 11, 0)
    with pytest.raises(CorruptRecordError):
        read_varint(b"\x80", 0)


@pytest.mark.parametrize("codec", CODECS)
def test_encode_decode_round_trip(codec: int) -> None:
    recs = sample_records()
    batch = encode_batch(recs, compression_type=codec, producer_id=7, producer_epoch=2, base_sequence=40)
    (h,) = list(iter_batches(batch))
    assert h.compression == codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 40)
    assert h.records_count == 20 and h.last_offset_delta == 19
    assert h.max_timestamp == max(r.timestamp for r in recs)
    assert decode_records(batch, h) == recs


# --- interop: batches built by other clients ------------------------------------------------


def _client_batch(builder_cls: type, codec: int, n: int = 50) -> tuple[bytes, list[Record]]:
    b = builder_cls(2, codec, False, 11, 3, 100, 1 << 20)
    expected = []
    for i in range(n):
        key = None if i % 4 == 0 else b"k%d" % i
        value = os.urandom(200) if i % 2 else b"v" * i
        headers = [("trace", b"t%d" % i)] if i % 5 == 0 else []
        b.append(i, NOW + i, key, value, headers)
        expected.append(Record(i, NOW + i, key, value, tuple(headers)))
    return bytes(b.build()), expected


@pytest.mark.parametrize("builder", [KpBuilder, AioBuilder], ids=["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", CODECS)
def test_decode_batches_built_by_clients(builder: type, codec: int) -> None:
    data, expected = _client_batch(builder, codec)
    (h,) = list(iter_batches(data))
    assert h.compression == codec
    assert decode_records(data, h) == expected
    scan = scan_records(records_payload(data, h), h.records_count, collect_null_keys=True)
    assert scan.count == 50 and scan.first_bad_offset_delta == -1
    assert scan.null_key_indexes == list(range(0, 50, 4))
    assert (scan.min_timestamp_delta, scan.max_timestamp_delta) == (0, 49)


@pytest.mark.parametrize("reader", [KpBatch, AioBatch], ids=["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", CODECS)
def test_clients_read_batches_we_build_and_rebuild(reader: type, codec: int) -> None:
    recs = sample_records(30)
    for data in (
        encode_batch(recs, compression_type=codec),
        bytes(
            rebuild_batch(encode_batch(recs), read_header(encode_batch(recs)), compression_type=codec, base_offset=500)
        ),
    ):
        batch = reader(bytearray(data) if reader is KpBatch else data)
        assert batch.validate_crc()
        got = [(r.key, r.value, tuple(r.headers), r.timestamp) for r in batch]
        assert got == [(r.key, r.value, r.headers, r.timestamp) for r in recs]


# --- rebuild_batch ------------------------------------------------------------------------


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("dest", CODECS)
def test_rebuild_preserves_identity_fields(source: int, dest: int) -> None:
    recs = sample_records()
    batch = encode_batch(
        recs,
        compression_type=source,
        producer_id=99,
        producer_epoch=5,
        base_sequence=1234,
        transactional=True,
        partition_leader_epoch=3,
    )
    h = read_header(batch)
    out = rebuild_batch(
        batch,
        h,
        compression_type=dest,
        base_offset=1000,
        partition_leader_epoch=8,
        log_append_time=True,
        max_timestamp=NOW + 999,
    )
    h2 = read_header(out)
    assert is_crc_valid(out, h2)
    assert h2.compression == dest
    assert (h2.producer_id, h2.producer_epoch, h2.base_sequence) == (99, 5, 1234)
    assert h2.is_transactional and not h2.is_control
    assert h2.is_log_append_time and h2.max_timestamp == NOW + 999
    assert (h2.base_offset, h2.partition_leader_epoch) == (1000, 8)
    assert (h2.last_offset_delta, h2.records_count) == (19, 20)
    assert h2.base_timestamp == h.base_timestamp
    got = decode_records(out, h2)
    assert [(r.offset - 1000, r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (r.offset, r.key, r.value, r.headers, r.timestamp) for r in recs
    ]


def test_rebuild_with_retained_records_keeps_last_offset() -> None:
    recs = sample_records(10, base=0)
    batch = encode_batch(
        recs, base_offset=200, compression_type=c.ZSTD, producer_id=1, producer_epoch=0, base_sequence=0
    )
    h = read_header(batch)
    kept = [Record(200 + r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs[2:7]]
    out = rebuild_batch(batch, h, records=kept)
    h2 = read_header(out)
    assert h2.last_offset == 209 and h2.records_count == 5 and h2.base_offset == 200
    assert [r.offset for r in decode_records(out, h2)] == [202, 203, 204, 205, 206]


def test_encode_batch_overrides() -> None:
    recs = sample_records(3)
    batch = encode_batch(recs, last_offset_delta=9, base_timestamp=NOW - 100)
    h = read_header(batch)
    assert h.last_offset_delta == 9 and h.base_timestamp == NOW - 100
    assert [r.timestamp for r in decode_records(batch, h)] == [r.timestamp for r in recs]


# --- control records ----------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_marker_batch(commit: bool) -> None:
    data = build_end_txn_marker_batch(
        commit=commit, producer_id=42, producer_epoch=7, coordinator_epoch=13, timestamp=NOW
    )
    h = read_header(data)
    assert h.is_control and h.is_transactional and h.producer_id == 42
    assert h.producer_epoch == 7 and h.base_sequence == -1 and h.records_count == 1
    (rec,) = decode_records(data, h)
    assert rec.key == b"\x00\x00\x00" + (b"\x01" if commit else b"\x00")
    assert decode_control_key(rec.key) == (0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    assert decode_end_txn_marker(rec.value) == (0, 13)
    assert control_record_type(data, h) == (CONTROL_COMMIT if commit else CONTROL_ABORT)
    # clients recognise it as a control batch
    assert KpBatch(bytearray(data)).is_control_batch


def test_control_record_errors() -> None:
    with pytest.raises(CorruptRecordError):
        decode_control_key(b"\x00")
    with pytest.raises(CorruptRecordError):
        decode_control_key(None)
    with pytest.raises(CorruptRecordError):
        decode_end_txn_marker(b"\x00\x00\x00")
    # newer versions may carry more bytes: only the known prefix is read
    assert decode_control_key(b"\x00\x01\x00\x00extra") == (1, 0)
    assert control_record_type(encode_batch(sample_records(1)), read_header(encode_batch(sample_records(1)))) is None


# --- scan_records / decode_records on malformed payloads ---------------------------------


def test_scan_detects_bad_framing_and_offsets() -> None:
    recs = sample_records(5)
    batch = encode_batch(recs)
    h = read_header(batch)
    payload = bytes(records_payload(batch, h))
    with pytest.raises(CorruptRecordError):
        scan_records(payload, 6)  # count larger than the records
    with pytest.raises(CorruptRecordError):
        scan_records(payload, 4)  # trailing bytes
    with pytest.raises(CorruptRecordError):
        scan_records(payload[:-1], 5)
    with pytest.raises(CorruptRecordError):
        decode_records(batch[:-1], h)
    skipped = [Record(r.offset * 2, r.timestamp, r.key, r.value) for r in recs]
    b2 = encode_batch(skipped)
    h2 = read_header(b2)
    assert scan_records(records_payload(b2, h2), 5).first_bad_offset_delta == 1
