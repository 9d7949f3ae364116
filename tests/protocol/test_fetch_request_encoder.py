"""The replica fetcher's hand-written FetchRequest v17 reads back, with kio, as the request the
fetcher built with kio's generic writer before (field by field, for any values), and it is
what the broker's own request reader accepts."""

from __future__ import annotations

import io
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from kio.static.primitive import i16, i32
from kopfka import uuids
from kopfka.protocol.entity_builder import build
from kopfka.protocol.fetch_request import FetchPartition, encode_replica_fetch
from kopfka.protocol.framing import decode_request

i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
partitions = st.lists(st.tuples(i32s, i32s, i64s, i32s, i64s, i32s), min_size=1, max_size=5)
topics = st.lists(st.tuples(st.uuids(), partitions), max_size=4)


def kio_frame(corr: int, replica: int, epoch: int, wait: int, mn: int, mx: int, ts: list) -> bytes:  # type: ignore[type-arg]
    """What ReplicaFetcher sent through kio (and KafkaConnection's header) before."""
    schema = load_request_schema(1, 17)
    body = {
        "cluster_id": None,
        "replica_state": {"replica_id": replica, "replica_epoch": epoch},
        "max_wait": wait,
        "min_bytes": mn,
        "max_bytes": mx,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": tid,
                "partitions": [
                    {
                        "partition": p[0],
                        "current_leader_epoch": p[1],
                        "fetch_offset": p[2],
                        "last_fetched_epoch": p[3],
                        "log_start_offset": p[4],
                        "partition_max_bytes": p[5],
                        "replica_directory_id": uuids.ZERO_UUID,
                    }
                    for p in ps
                ],
            }
            for tid, ps in ts
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    buf = io.BytesIO()
    entity_writer(RequestHeader)(
        buf,
        RequestHeader(
            request_api_key=i16(1), request_api_version=i16(17), correlation_id=i32(corr), client_id="kopfka-cli"
        ),
    )
    entity_writer(schema)(buf, build(schema, body))
    return buf.getvalue()


@settings(max_examples=200, deadline=None)
@given(
    corr=i32s,
    replica=st.integers(0, 2**31 - 1),
    epoch=i64s,
    wait=st.integers(0, 2**31 - 1),
    mn=i32s,
    mx=i32s,
    ts=topics,
)
def test_reads_back_as_the_kio_request(
    corr: int, replica: int, epoch: int, wait: int, mn: int, mx: int, ts: list[tuple[uuid.UUID, list[FetchPartition]]]
) -> None:
    frame = encode_replica_fetch(corr, "kopfka-cli", replica, epoch, wait, mn, mx, ts)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    ours = decode_request(frame[4:])
    theirs = decode_request(kio_frame(corr, replica, epoch, wait, mn, mx, ts))
    assert ours.header == theirs.header
    assert ours.body == theirs.body


def test_a_typical_request_is_a_few_bytes_shorter_than_kios() -> None:
    """Default tagged fields stay out, as Kafka's writer leaves them out: the zero replica
    directory id costs kio 18 bytes per partition."""
    ts = [(uuid.uuid4(), [(0, 3, 1234, 3, 0, 1 << 20), (1, 3, 99, 3, 0, 1 << 20)])]
    frame = encode_replica_fetch(7, "kopfka-cli", 2, 11, 500, 1, 10 << 20, ts)
    assert len(frame) - 4 == len(kio_frame(7, 2, 11, 500, 1, 10 << 20, ts)) - 2 * 18
