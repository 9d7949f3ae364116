"""The hand-written ProduceResponse encoder writes, for every version the broker answers, the
bytes kio's generic path (build + encode_response) wrote for the same answer, for any values
(KIP-951's tagged leader hints included); an answer with a field it does not know goes to kio."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.entity_builder import build
from kopfka.protocol.errors import ErrorCode
from kopfka.protocol.framing import encode_response
from kopfka.protocol.produce_response import FIRST_VERSION, LAST_VERSION, encode_produce_response
from kopfka.protocol.schemas import load_response_schema

i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
texts = st.text(max_size=20)
codes = st.sampled_from([ErrorCode.none, ErrorCode.not_leader_or_follower, ErrorCode.invalid_record, 87])
leaders = st.fixed_dictionaries({"leader_id": st.integers(-1, 5), "leader_epoch": st.integers(-1, 9)})
partitions = st.fixed_dictionaries(
    {
        "index": i32s,
        "error_code": codes,
        "base_offset": i64s,
        "log_append_time": st.one_of(st.just(-1), st.integers(0, 2**41)),
        "log_start_offset": i64s,
        "record_errors": st.lists(
            st.fixed_dictionaries({"batch_index": i32s, "batch_index_error_message": st.one_of(st.none(), texts)}),
            max_size=2,
        ),
        "error_message": st.one_of(st.none(), texts),
    },
    optional={"current_leader": leaders},
)
topics = st.fixed_dictionaries(
    {"name": texts, "topic_id": st.uuids(), "partition_responses": st.lists(partitions, max_size=3)}
)
endpoints = st.lists(
    st.fixed_dictionaries(
        {
            "node_id": st.integers(0, 5),
            "host": texts,
            "port": st.integers(0, 65535),
            "rack": st.one_of(st.none(), texts),
        }
    ),
    max_size=2,
)
bodies = st.fixed_dictionaries(
    {"responses": st.lists(topics, max_size=3), "throttle_time": st.integers(0, 2**31 - 1)},
    optional={"node_endpoints": endpoints},
)


def kio_bytes(version: int, corr: int, body: dict[str, Any]) -> bytes:
    return encode_response(0, version, corr, build(load_response_schema(0, version), body))


@settings(max_examples=300, deadline=None)
@given(version=st.integers(FIRST_VERSION, LAST_VERSION), corr=i32s, body=bodies)
def test_the_bytes_kio_writes(version: int, corr: int, body: dict[str, Any]) -> None:
    assert encode_produce_response(version, corr, body) == kio_bytes(version, corr, body)


def test_a_typical_answer_reads_back() -> None:
    body = {
        "responses": [
            {
                "name": "orders",
                "partition_responses": [
                    {
                        "index": 2,
                        "error_code": ErrorCode.none,
                        "base_offset": 1234,
                        "log_append_time": -1,
                        "log_start_offset": 0,
                        "record_errors": [],
                        "error_message": None,
                    },
                    {
                        "index": 3,
                        "error_code": ErrorCode.not_leader_or_follower,
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                        "error_message": "Leader not local",
                        "current_leader": {"leader_id": 1, "leader_epoch": 4},
                    },
                ],
            }
        ],
        "throttle_time": 0,
        "node_endpoints": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
    }
    frame = encode_produce_response(11, 42, body)
    assert frame is not None and frame == kio_bytes(11, 42, body)
    resp = KafkaConnection._parse(0, 11, frame[4:])
    p = resp.responses[0].partition_responses
    assert resp.responses[0].name == "orders" and p[0].base_offset == 1234
    assert p[1].current_leader.leader_id == 1 and resp.node_endpoints[0].port == 9092


def test_an_unknown_field_goes_to_kio() -> None:
    part = {"index": 0, "error_code": 0, "base_offset": 0, "record_errors": [], "new_field": 1}
    assert encode_produce_response(9, 1, {"responses": [{"name": "t", "partition_responses": [part]}]}) is None
    assert encode_produce_response(9, 1, {"responses": [], "something": 1}) is None
    assert encode_produce_response(14, 1, {"responses": []}) is None
