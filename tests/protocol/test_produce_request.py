"""The hand-written ProduceRequest decoder agrees with kio field for field, for every version,
and fails cleanly on truncated or malformed input."""

from __future__ import annotations

import io
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer
from kopfka.protocol.entity_builder import build
from kopfka.protocol.produce_request import ProduceDecodeError, decode_produce_request


def encode(version: int, body: dict) -> bytes:
    schema = load_request_schema(0, version)
    buf = io.BytesIO()
    entity_writer(schema)(buf, build(schema, body))
    return buf.getvalue()


topics_strategy = st.lists(
    st.tuples(
        st.text("abcxyz-._", min_size=1, max_size=12),
        st.lists(st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.binary(max_size=300))), max_size=4),
    ),
    max_size=4,
)


@pytest.mark.parametrize("version", range(3, 14))
@settings(max_examples=40, deadline=None)
@given(txn=st.one_of(st.none(), st.text(max_size=10)), acks=st.sampled_from([-1, 0, 1]), topics=topics_strategy)
def test_matches_kio(version: int, txn: str | None, acks: int, topics: list) -> None:
    body = {
        "transactional_id": txn,
        "acks": acks,
        "timeout": 1234,
        "topic_data": [
            {"name": name, "topic_id": uuid.uuid5(uuid.NAMESPACE_DNS, name),
             "partition_data": [{"index": i, "records": r} for i, r in parts]}
            for name, parts in topics
        ],
    }
    data = encode(version, body)
    ref, size = entity_reader(load_request_schema(0, version))(data, 0)
    ours = decode_produce_request(memoryview(bytearray(data)), 0, version)
    assert size == len(data)
    assert ours.transactional_id == ref.transactional_id and ours.acks == ref.acks
    assert ours.timeout == int(ref.timeout.total_seconds() * 1000)
    assert len(ours.topic_data) == len(ref.topic_data)
    for t_ours, t_ref in zip(ours.topic_data, ref.topic_data, strict=True):
        if version >= 13:
            assert t_ours.topic_id == t_ref.topic_id
        else:
            assert t_ours.name == t_ref.name
        for p_ours, p_ref in zip(t_ours.partition_data, t_ref.partition_data, strict=True):
            assert p_ours.index == p_ref.index
            assert (None if p_ours.records is None else bytes(p_ours.records)) == p_ref.records


def test_records_are_views_into_the_frame() -> None:
    data = bytearray(encode(9, {"transactional_id": None, "acks": 1, "timeout": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}]}))
    req = decode_produce_request(memoryview(data), 0, 9)
    view = req.topic_data[0].partition_data[0].records
    assert view is not None and not view.readonly
    view[0] = ord("X")
    assert b"Xbc" in data  # patched in place: no copy was made


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(3, 13))
def test_garbage_fails_cleanly(data: bytes, version: int) -> None:
    try:
        decode_produce_request(memoryview(data), 0, version)
    except ProduceDecodeError:
        pass


def test_truncation_at_every_byte_fails_cleanly() -> None:
    data = encode(9, {"transactional_id": "x", "acks": -1, "timeout": 5, "topic_data": [
        {"name": "topic", "partition_data": [{"index": 3, "records": b"0123456789"}]}]})
    for cut in range(len(data) - 1):
        with pytest.raises(ProduceDecodeError):
            decode_produce_request(memoryview(data[:cut]), 0, 9)
