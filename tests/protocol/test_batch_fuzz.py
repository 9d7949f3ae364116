"""Hypothesis fuzzing: whatever bytes a client sends, the codec and the LogValidator answer
with a result or a KafkaError — never another exception."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kopfka.config.log_config import LogConfig
from kopfka.protocol import compression as c
from kopfka.protocol.errors import CorruptRecordError, KafkaError
from kopfka.protocol.record_codec import (
    Record,
    decode_records,
    encode_batch,
    records_payload,
    scan_records,
)
from kopfka.protocol.records import iter_batches, read_header, rewrite_crc
from kopfka.storage.log_validator import validate_and_assign_offsets

NOW = 1_700_000_000_000
FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

configs = st.fixed_dictionaries(
    {
        "compression.type": st.sampled_from(
            ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]
        ),
        "message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"]),
        "cleanup.policy": st.sampled_from([["delete"], ["compact"], ["compact", "delete"]]),
    }
)

record_st = st.builds(
    Record,
    offset=st.just(0),
    timestamp=st.integers(NOW - 10_000, NOW + 10_000),
    key=st.one_of(st.none(), st.binary(max_size=20)),
    value=st.one_of(st.none(), st.binary(max_size=200)),
    headers=st.lists(
        st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=10))),
        max_size=3,
    ).map(tuple),
)


@st.composite
def batches(draw: Any) -> bytes:
    rs = draw(st.lists(record_st, min_size=1, max_size=8))
    rs = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(rs)]
    return encode_batch(
        rs,
        compression_type=draw(st.sampled_from(list(range(5)))),
        **draw(
            st.sampled_from(
                [
                    {},
                    {"producer_id": 5, "producer_epoch": 0, "base_sequence": 0},
                    {"producer_id": 5, "producer_epoch": 2, "base_sequence": 2**31 - 3},
                ]
            )
        ),
    )


def run_validator(data: bytes, cfg: dict[str, Any], **kw: Any) -> None:
    try:
        res = validate_and_assign_offsets(
            data,
            offset_counter=10,
            config=LogConfig.defaults(**cfg),
            now_ms=NOW,
            leader_epoch=1,
            **kw,
        )
    except KafkaError:
        return
    # whatever was accepted is a well-formed log entry
    headers = list(iter_batches(res.records))
    assert headers and headers[0].base_offset == 10
    assert res.last_offset == headers[-1].last_offset
    if res.recompressed:
        for h in headers:
            decode_records(res.records, h)


@FUZZ
@given(data=st.binary(max_size=300), cfg=configs)
def test_arbitrary_bytes(data: bytes, cfg: dict[str, Any]) -> None:
    run_validator(data, cfg)


@FUZZ
@given(
    batch=batches(),
    cfg=configs,
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    cut=st.integers(0, 10_000),
    fix_crc=st.booleans(),
    deep=st.booleans(),
)
def test_mutated_batches(
    batch: bytes,
    cfg: dict[str, Any],
    edits: list[tuple[int, int]],
    cut: int,
    fix_crc: bool,
    deep: bool,
) -> None:
    buf = bytearray(batch)
    for pos, val in edits:
        buf[pos % len(buf)] = val
    if cut % 4 == 0:
        del buf[cut % len(buf) :]
    if fix_crc and len(buf) >= 61:
        try:
            rewrite_crc(buf, read_header(buf))
        except CorruptRecordError:
            pass
    run_validator(bytes(buf), cfg, deep_validation=deep, from_client=not (cut % 3 == 0))


@FUZZ
@given(batch=batches(), cfg=configs)
def test_valid_batches_round_trip(batch: bytes, cfg: dict[str, Any]) -> None:
    src = read_header(batch)
    original = decode_records(batch, src)
    try:
        res = validate_and_assign_offsets(
            batch, offset_counter=0, config=LogConfig.defaults(**cfg), now_ms=NOW,
            leader_epoch=0,
        )
    except KafkaError as exc:
        # only the compacted-null-key rule can reject these
        assert "compact" in cfg["cleanup.policy"] and any(r.key is None for r in original)
        assert exc.code.name == "invalid_record"
        return
    (h,) = list(iter_batches(res.records))
    got = decode_records(res.records, h)
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [
        (r.offset, r.key, r.value, r.headers) for r in original
    ]


@FUZZ
@given(codec=st.sampled_from([1, 2, 3, 4]), data=st.binary(max_size=400))
def test_decompress_arbitrary_bytes(codec: int, data: bytes) -> None:
    try:
        out = c.decompress(codec, data, max_size=1 << 20)
    except CorruptRecordError:
        return
    assert len(out) <= 1 << 20


@FUZZ
@given(
    codec=st.sampled_from([1, 2, 3, 4]),
    payload=st.binary(max_size=2000),
    edits=st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_decompress_mutated_streams(
    codec: int, payload: bytes, edits: list[tuple[int, int]]
) -> None:
    z = bytearray(c.compress(codec, payload))
    for pos, val in edits:
        z[pos % len(z)] = val
    try:
        c.decompress(codec, bytes(z), max_size=1 << 20)
    except CorruptRecordError:
        pass


@FUZZ
@given(payload=st.binary(max_size=300), count=st.integers(0, 50))
def test_scan_and_decode_arbitrary_payloads(payload: bytes, count: int) -> None:
    batch = bytearray(encode_batch([Record(0, NOW, b"k", b"v")]))
    del batch[61:]
    batch += payload
    batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
    batch[57:61] = count.to_bytes(4, "big")
    h = read_header(batch)
    for fn in (
        lambda: scan_records(records_payload(batch, h), count, collect_null_keys=True),
        lambda: decode_records(batch, h),
    ):
        try:
            fn()
        except CorruptRecordError:
            pass


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_bomb_in_a_batch_is_rejected_quickly(codec: int) -> None:
    import time

    # 150 MiB of zeros; snappy needs ~7 MiB for it, so allow 10 MiB batches: the cap is then
    # 10 x max.message.bytes = 100 MiB
    bomb = encode_batch([Record(0, NOW, b"k", bytes(150 << 20))], compression_type=codec)
    t0 = time.perf_counter()
    with pytest.raises(KafkaError) as info:
        validate_and_assign_offsets(
            bomb,
            offset_counter=0,
            config=LogConfig.defaults(
                **{"compression.type": "uncompressed", "max.message.bytes": 10 << 20}
            ),
            now_ms=NOW,
            leader_epoch=0,
        )
    assert info.value.code.name == "corrupt_message"
    assert time.perf_counter() - t0 < 5
