"""kio's native reader pre-allocates arrays by their declared count, so a fuzzed count aborts the
process (no exception). request_guard must refuse such bodies first, for every API and version
the broker answers, and must pass every well-formed body."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
import uuid

from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer
from kopfka.protocol.entity_builder import build
from kopfka.protocol.request_guard import BodyError, check_body
from request_bodies import sample_entity

FUZZ = textwrap.dedent(
    """
    import random
    from kio.index import load_request_schema
    from kio.serial import entity_reader
    from kopfka.protocol.api_versions import supported_apis
    from kopfka.protocol.request_guard import BodyError, check_body
    from kopfka.server.apis import load_all
    load_all()
    rnd = random.Random(17)
    checked = refused = 0
    for key, (lo, hi) in sorted(supported_apis().items()):
        if key == 0:
            continue  # Produce is decoded by kopfka's own parser
        for version in range(lo, hi + 1):
            schema = load_request_schema(key, version)
            for _ in range(400):
                body = bytes(rnd.getrandbits(8) for _ in range(rnd.choice([1, 2, 3, 4, 5, 8, 13, 40])))
                try:
                    check_body(schema, body, 0)
                except BodyError:
                    refused += 1
                    continue
                checked += 1
                try:
                    entity_reader(schema)(body, 0)
                except Exception:
                    pass
    print(checked, refused)
    """
)


def test_random_bodies_never_reach_an_aborting_read() -> None:
    """Without the guard this child dies with 'memory allocation of ... bytes failed'."""
    out = subprocess.run([sys.executable, "-c", FUZZ], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    checked, refused = map(int, out.stdout.split())
    assert refused > 1000 and checked > 1000


def _encode(api_key: int, version: int, body: dict) -> bytes:
    schema = load_request_schema(api_key, version)
    buf = io.BytesIO()
    entity_writer(schema)(buf, build(schema, body))
    return buf.getvalue()


def test_well_formed_bodies_pass() -> None:
    samples = [
        (
            3,
            12,
            {
                "topics": [{"name": "t", "topic_id": uuid.uuid4()}],
                "allow_auto_topic_creation": True,
                "include_topic_authorized_operations": True,
            },
        ),
        (3, 4, {"topics": None, "allow_auto_topic_creation": False}),
        (
            1,
            12,
            {
                "replica_id": -1,
                "max_wait": 100,
                "min_bytes": 1,
                "max_bytes": 100,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": "a",
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": 5,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": 9,
                            }
                        ]
                        * 3,
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "r",
            },
        ),
        (
            30,
            3,
            {
                "creations": [
                    {
                        "resource_type": 2,
                        "resource_name": "t",
                        "resource_pattern_type": 3,
                        "principal": "User:a",
                        "host": "*",
                        "operation": 3,
                        "permission_type": 3,
                    }
                ]
                * 4
            },
        ),
        (
            51,
            0,
            {
                "deletions": [{"name": "a", "mechanism": 1}],
                "upsertions": [
                    {"name": "b", "mechanism": 2, "iterations": 4096, "salt": b"s" * 32, "salted_password": b"p" * 64}
                ],
            },
        ),
        (36, 0, {"auth_bytes": b"\0user\0pw"}),
        (36, 2, {"auth_bytes": b"n,,n=u,r=abc"}),
        (17, 1, {"mechanism": "SCRAM-SHA-512"}),
        (75, 0, {"topics": [{"name": "a"}], "response_partition_limit": 10, "cursor": None}),
        (75, 0, {"topics": [], "response_partition_limit": 10, "cursor": {"topic_name": "a", "partition_index": 3}}),
        (
            1,
            17,
            {
                "replica_id": -1,
                "replica_state": {"replica_id": 2, "replica_epoch": 5},
                "max_wait": 1,
                "min_bytes": 1,
                "max_bytes": 9,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        ),
    ]
    for key, version, body in samples:
        data = _encode(key, version, body)
        schema = load_request_schema(key, version)
        check_body(schema, data, 0)
        entity_reader(schema)(data, 0)


def test_lying_array_count_is_refused() -> None:
    data = bytearray(_encode(50, 0, {"users": [{"name": "u"}]}))
    data[0] = 0xFF  # compact array length varint → huge
    data[1:1] = b"\xff\xff\xff\x0f"
    try:
        check_body(load_request_schema(50, 0), bytes(data), 0)
    except BodyError as exc:
        assert "elements" in str(exc) or "past the end" in str(exc)
    else:
        raise AssertionError("a 2^32-element array in a few bytes was accepted")


def test_guard_passes_every_request_kio_writes() -> None:
    """For every API and version the broker or controller answers: a populated body passes."""
    from kopfka.protocol.api_versions import CONTROLLER_APIS, supported_apis
    from kopfka.server.apis import load_all

    load_all()
    import kopfka.server.controller_server  # noqa: F401  (registers the controller-only APIs)

    checked = 0
    for key, (lo, hi) in sorted({**CONTROLLER_APIS, **supported_apis()}.items()):
        if key == 0:
            continue
        for version in range(lo, hi + 1):
            schema = load_request_schema(key, version)
            for present in (True, False):
                buf = io.BytesIO()
                try:
                    entity_writer(schema)(buf, sample_entity(schema, present))
                except Exception:
                    continue  # a sample kio cannot write (a constrained field): nothing to check
                check_body(schema, buf.getvalue(), 0)
                checked += 1
    assert checked > 300
