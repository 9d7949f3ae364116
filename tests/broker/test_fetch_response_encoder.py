"""The hand-written FetchResponse encoder is byte-identical to kio's generic writer."""

from __future__ import annotations

import io
import uuid
from collections.abc import Sequence

import pytest
from kio.index import load_response_schema
from kio.serial import entity_writer
from kopfka.protocol.entity_builder import build
from kopfka.protocol.fetch_response import FetchPartitionOut, FetchTopicOut, encode_fetch_response
from kopfka.protocol.framing import response_header_bytes

Endpoint = tuple[int, str, int, str | None]


def kio_bytes(
    version: int, corr: int, topics: list[FetchTopicOut], session_id: int, node_endpoints: Sequence[Endpoint] = ()
) -> bytes:
    schema = load_response_schema(1, version)
    body = {
        "node_endpoints": [{"node_id": n, "host": h, "port": p, "rack": r} for n, h, p, r in node_endpoints],
        "throttle_time": 0,
        "error_code": 0,
        "session_id": session_id,
        "responses": [
            {
                "topic": t.name,
                "topic_id": t.topic_id,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset,
                        "log_start_offset": p.log_start_offset,
                        "aborted_transactions": None
                        if p.aborted_transactions is None
                        else [{"producer_id": a, "first_offset": b} for a, b in p.aborted_transactions],
                        "preferred_read_replica": p.preferred_read_replica,
                        "records": p.records,
                        **(
                            {"current_leader": {"leader_id": p.current_leader[0], "leader_epoch": p.current_leader[1]}}
                            if p.current_leader
                            else {}
                        ),
                    }
                    for p in t.partitions
                ],
            }
            for t in topics
        ],
    }
    buf = io.BytesIO()
    buf.write(response_header_bytes(1, version, corr))
    entity_writer(schema)(buf, build(schema, body))
    data = buf.getvalue()
    return len(data).to_bytes(4, "big") + data


@pytest.mark.parametrize("version", range(4, 19))
def test_matches_kio(version: int) -> None:
    tid = uuid.uuid4()
    topics = [
        FetchTopicOut(
            "orders",
            tid,
            [
                FetchPartitionOut(0, 0, 10, 10, 0, None, -1, b"\x01" * 37),
                FetchPartitionOut(1, 6, -1, -1, -1, None, -1, None, current_leader=(3, 7) if version >= 12 else None),
            ],
        ),
        FetchTopicOut("empty", uuid.uuid4(), [FetchPartitionOut(2, 0, 0, 0, 0, [(5, 1)], -1, b"")]),
    ]
    chunks, size = encode_fetch_response(version, 42, topics, session_id=9)
    ours = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)
    assert len(ours) == size
    assert ours == kio_bytes(version, 42, topics, 9)


@pytest.mark.parametrize("version", range(16, 19))
def test_leader_hints_match_kio(version: int) -> None:
    """KIP-951: partitions that are not led here name their leader; the response lists the leaders'
    endpoints (a rack or none), as kio writes them."""
    topics = [
        FetchTopicOut(
            "orders",
            uuid.uuid4(),
            [
                FetchPartitionOut(0, 6, -1, -1, -1, None, -1, b"", current_leader=(2, 11)),
                FetchPartitionOut(1, 74, -1, -1, -1, None, -1, b"", current_leader=(1, 4)),
                FetchPartitionOut(2, 0, 5, 5, 0, [], -1, b"\x02" * 9),
            ],
        )
    ]
    endpoints: list[Endpoint] = [(2, "broker-2.kafka.svc", 9092, "rack-b"), (1, "127.0.0.22", 40123, None)]
    chunks, size = encode_fetch_response(version, 7, topics, session_id=3, node_endpoints=endpoints)
    ours = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)
    assert len(ours) == size
    assert ours == kio_bytes(version, 7, topics, 3, endpoints)
