"""The record walk that validates produced batches: aiokafka's private C parser (pinned) and the
pure-Python fallback must give the same results on the same batches, good or malformed, and the
verdict is Kafka's (DefaultRecord.readFrom) where the C parser is stricter.

`rc._scan_records_c` is the C path alone, `rc.scan_records_py` the fallback alone,
`rc.scan_records` / `rc.scan_batch_records` what the validator calls.
"""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kopfka.protocol import record_codec as rc
from kopfka.protocol.errors import CorruptRecordError
from kopfka.protocol.records import read_header, rewrite_crc

pytestmark = pytest.mark.skipif(rc._c_parser() is None, reason="aiokafka's C record parser is not installed")


def _result(fn: Any, payload: bytes, count: int) -> Any:
    try:
        return fn(payload, count, collect_null_keys=True)
    except CorruptRecordError:
        return "corrupt"


def _c_only(payload: bytes, count: int, collect_null_keys: bool) -> rc.RecordScan:
    return rc._scan_records_c(payload, count, collect_null_keys)


def _all_paths(payload: bytes, count: int) -> tuple[Any, Any, Any]:
    return (
        _result(_c_only, payload, count),
        _result(rc.scan_records_py, payload, count),
        _result(rc.scan_records, payload, count),
    )


def _records(draw_bytes: Any, n: int, rnd: random.Random) -> list[rc.Record]:
    return [
        rc.Record(
            i,
            1_000 + rnd.randint(-300, 300),
            None if rnd.random() < 0.3 else draw_bytes(rnd.randint(0, 90)),
            None if rnd.random() < 0.2 else draw_bytes(rnd.randint(0, 200)),
            tuple(
                (f"h{j}", None if rnd.random() < 0.3 else draw_bytes(rnd.randint(0, 70)))
                for j in range(rnd.randint(0, 3))
            ),
        )
        for i in range(n)
    ]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**32))
def test_good_batches_scan_alike_on_every_path(n: int, seed: int) -> None:
    """Any bytes in keys, values and headers, multi-byte varints (lengths > 63, wide timestamp
    deltas), null keys, a gap in the offsets: the C walk, the Python walk, the combined walk and
    the in-place batch walk report the same thing."""
    rnd = random.Random(seed)
    recs = _records(rnd.randbytes, n, rnd)
    if n > 2 and rnd.random() < 0.3:
        recs[1] = rc.Record(recs[1].offset + 5, recs[1].timestamp, recs[1].key, recs[1].value)
    batch = rc.encode_batch(recs, base_offset=rnd.randint(0, 10**9))
    h = read_header(batch)
    payload = bytes(rc.records_payload(batch, h))
    c, py, combined = _all_paths(payload, n)
    assert py != "corrupt"
    assert c == py == combined
    assert rc.scan_batch_records(batch, h, collect_null_keys=True) == py


def _mutations(payload: bytes, count: int, rnd: random.Random, low_bytes_only: bool) -> list[tuple[bytes, int]]:
    """Truncations, padding and wrong counts for any payload; byte flips and insertions too when
    every byte stays below 0x80 (so no varint or attribute byte can change its width)."""
    top = 0x80 if low_bytes_only else 0x100
    out = [(payload[:cut], count) for cut in {0, 1, len(payload) // 2, len(payload) - 1}]
    out += [(payload + bytes([rnd.randrange(top)]), count), (payload, count + 1), (payload, max(1, count - 1))]
    if low_bytes_only:
        for _ in range(12):
            p = bytearray(payload)
            pos = rnd.randrange(len(p))
            if rnd.random() < 0.5:
                p[pos] = rnd.randrange(top)
            else:
                p[pos:pos] = bytes(rnd.randrange(top) for _ in range(rnd.randint(1, 3)))
            out.append((bytes(p), count))
    return out


def test_malformed_batches_scan_alike_on_every_path() -> None:
    """Thousands of malformed payloads: the C walk and the Python walk agree on every verdict
    and every result, and so does what the validator calls."""
    rnd = random.Random(20)
    checked = rejected = 0
    for round_ in range(400):
        ascii_only = round_ % 2 == 0  # every byte < 0x80: flips and insertions are fair too
        n = rnd.randint(1, 6)

        def draw(k: int, ascii_only: bool = ascii_only) -> bytes:
            return bytes(rnd.randrange(0x20, 0x7F) for _ in range(min(k, 50))) if ascii_only else rnd.randbytes(k)

        recs = _records(draw, n, rnd)
        if ascii_only:  # keep timestamp deltas one varint byte
            recs = [rc.Record(r.offset, 1_000 + rnd.randint(-30, 30), r.key, r.value, r.headers) for r in recs]
        batch = rc.encode_batch(recs)
        payload = bytes(rc.records_payload(batch, read_header(batch)))
        for bad, count in _mutations(payload, n, rnd, ascii_only):
            c, py, combined = _all_paths(bad, count)
            assert c == py == combined, (bad.hex(), count, c, py)
            checked += 1
            rejected += py == "corrupt"
    assert checked > 5000 and rejected > checked // 2, (checked, rejected)


def _payload(*records: bytes) -> bytes:
    out = bytearray()
    for body in records:
        rc.write_varint(out, len(body))
        out += body
    return bytes(out)


def _v(n: int) -> bytes:
    out = bytearray()
    rc.write_varint(out, n)
    return bytes(out)


# record body: attributes, timestampDelta, offsetDelta, key, value, headers
OK_BODY = b"\x00" + _v(0) + _v(0) + _v(1) + b"k" + _v(1) + b"v" + _v(0)


@pytest.mark.parametrize(
    ("name", "payload", "count", "kafka_accepts"),
    [
        ("good", _payload(OK_BODY), 1, True),
        ("key length -5 is a null key", _payload(b"\x00" + _v(0) + _v(0) + _v(-5) + _v(1) + b"v" + _v(0)), 1, True),
        ("value length -9 is a null value", _payload(b"\x00" + _v(0) + _v(0) + _v(1) + b"k" + _v(-9) + _v(0)), 1, True),
        (
            "header value -3 is a null value",
            _payload(b"\x00" + _v(0) + _v(0) + _v(-1) + _v(-1) + _v(1) + _v(1) + b"h" + _v(-3)),
            1,
            True,
        ),
        (
            "header key that is not UTF-8",
            _payload(b"\x00" + _v(0) + _v(0) + _v(-1) + _v(-1) + _v(1) + _v(2) + b"\xff\xfe" + _v(0)),
            1,
            True,
        ),
        ("attributes byte set", _payload(b"\x7f" + OK_BODY[1:]), 1, True),
        ("null header key", _payload(b"\x00" + _v(0) + _v(0) + _v(-1) + _v(-1) + _v(1) + _v(-1) + _v(0)), 1, False),
        ("negative header count", _payload(b"\x00" + _v(0) + _v(0) + _v(-1) + _v(-1) + _v(-2)), 1, False),
        ("header count past the batch", _payload(b"\x00" + _v(0) + _v(0) + _v(-1) + _v(-1) + _v(100)), 1, False),
        ("record longer than declared", _payload(OK_BODY + b"\x00")[:-1] + b"", 1, False),
        ("record shorter than declared", bytes([len(OK_BODY) * 2 - 2]) + OK_BODY[:-1] + b"\x00\x00", 1, False),
        ("key runs past the batch", _payload(b"\x00" + _v(0) + _v(0) + _v(50) + b"k"), 1, False),
        ("trailing bytes", _payload(OK_BODY) + b"\x00", 1, False),
        ("fewer records than declared", _payload(OK_BODY), 2, False),
        ("more records than declared", _payload(OK_BODY, OK_BODY), 1, False),
        ("empty", b"", 1, False),
    ],
)
def test_kafka_rules_decide(name: str, payload: bytes, count: int, kafka_accepts: bool) -> None:
    """Hand-made cases with Kafka's verdict: the Python walk gives it and so does the combined
    walk, even where aiokafka's C parser alone is stricter (a header key that is not UTF-8)."""
    py = _result(rc.scan_records_py, payload, count)
    combined = _result(rc.scan_records, payload, count)
    assert (py != "corrupt") == kafka_accepts, (name, py)
    assert combined == py, name
    # the in-place batch walk agrees too (a batch the C parser rejects is walked again)
    batch = bytearray(
        rc._pack_batch(
            payload,
            base_offset=0,
            partition_leader_epoch=-1,
            attributes=0,
            last_offset_delta=count - 1,
            base_timestamp=0,
            max_timestamp=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            records_count=count,
        )
    )
    h = read_header(batch)
    rewrite_crc(batch, h)
    fast = rc.scan_batch_records(batch, h, collect_null_keys=True)
    assert fast is None or fast == py, name


def test_overlong_varint_is_rejected_by_the_python_walk() -> None:
    """Kafka reads int32 varints of at most 5 bytes. (aiokafka's parser accepts up to 10: one of
    the crafted encodings, documented in record_codec, that no Kafka client writes.)"""
    overlong_zero = b"\x80\x80\x80\x80\x80\x00"
    body = b"\x00" + _v(0) + overlong_zero + _v(-1) + _v(-1) + _v(0)
    with pytest.raises(CorruptRecordError, match="longer than 5 bytes"):
        rc.scan_records_py(_payload(body), 1)


def test_log_append_time_batches_report_their_own_deltas() -> None:
    """aiokafka substitutes maxTimestamp for every record of a LogAppendTime batch: the in-place
    walk is not used for those, so the deltas are the records' own on every path."""
    recs = [rc.Record(i, 5_000 + i * 10, b"k", b"v") for i in range(5)]
    batch = rc.encode_batch(recs, log_append_time=True, max_timestamp=9_999)
    h = read_header(batch)
    assert rc.scan_batch_records(batch, h) is None
    scan = rc.scan_records(rc.records_payload(batch, h), 5)
    assert (scan.min_timestamp_delta, scan.max_timestamp_delta) == (0, 40)


def test_without_the_c_parser_validation_is_unchanged() -> None:
    """An interpreter where aiokafka's private module cannot be imported: the fallback is used
    and the log validator accepts and rejects exactly the same batches."""
    script = r"""
import sys
sys.modules["aiokafka.record._crecords.default_records"] = None  # the private module is gone
from kopfka.config.log_config import LogConfig
from kopfka.protocol import record_codec as rc
from kopfka.protocol.errors import KafkaError
from kopfka.storage.log_validator import validate_and_assign_offsets as validate_records
assert rc._c_parser() is None
cfg = LogConfig.defaults()
good = rc.encode_batch([rc.Record(i, 1_700_000_000_000, b"k", b"v" * i) for i in range(10)])
bad = bytearray(good[:-1])
import struct
struct.pack_into(">i", bad, 8, len(bad) - 12)
h = rc.read_header(bad, 0)
rc.rewrite_crc(bad, h)
out = []
for data in (good, bad):
    try:
        validate_records(bytearray(data), offset_counter=0, config=cfg, now_ms=1_700_000_000_000, leader_epoch=0)
        out.append("ok")
    except KafkaError as exc:
        out.append(exc.code.name)
print(",".join(out))
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok,corrupt_message"
