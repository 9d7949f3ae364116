"""The controller's whole-request error responses (Kafka's `getErrorResponse`): every API the
controller listener serves behind an authorization check has one, for every version it serves,
that kio can write and read back, with the error code at the top level or on every item, and with
the items mirroring the request's (each topic of a CreateTopics, each resource of an AlterConfigs)."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import kopfka.server.controller_server  # noqa: F401  (adds the controller-only APIs to CONTROLLER_APIS)
import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kopfka.protocol.api_versions import CONTROLLER_APIS
from kopfka.protocol.entity_builder import build
from kopfka.protocol.errors import ErrorCode
from kopfka.server.controller_errors import controller_error_response
from kopfka.server.controller_server import OPEN_CONTROLLER_APIS
from request_bodies import sample_entity

CAF = ErrorCode.cluster_authorization_failed
GUARDED = [
    (key, version)
    for key, (lo, hi) in sorted(CONTROLLER_APIS.items())
    if key not in OPEN_CONTROLLER_APIS
    for version in range(lo, hi + 1)
]
# request items -> response items that must correspond one to one (paths through nested arrays)
MIRRORED = {
    19: ("topics.name", "topics.name"),
    33: ("resources.resource_name", "responses.resource_name"),
    44: ("resources.resource_name", "responses.resource_name"),
    37: ("topics.name", "results.name"),
    30: ("creations", "results"),
    31: ("filters", "filter_results"),
    43: ("topic_partitions.partitions", "replica_election_results.partition_result.partition_id"),
    45: ("topics.partitions.partition_index", "responses.partitions.partition_index"),
    46: ("topics.partition_indexes", "topics.partitions.partition_index"),
    49: ("entries.entity.entity_name", "entries.entity.entity_name"),
}


def walk(obj: Any, path: str) -> list[Any]:
    """The values at a dotted path, flattened through arrays (a null array holds nothing)."""
    values = [obj]
    for name in path.split("."):
        out: list[Any] = []
        for v in values:
            got = getattr(v, name)
            out.extend(got if isinstance(got, tuple) else () if got is None else (got,))
        values = out
    return values


def error_codes(entity: Any) -> list[ErrorCode]:
    codes = []
    for f in dataclasses.fields(entity):
        v = getattr(entity, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            codes.append(v)
        for x in v if isinstance(v, tuple) else (v,):
            if dataclasses.is_dataclass(x):
                codes.extend(error_codes(x))
    return codes


def test_the_guarded_apis_include_every_controller_rpc() -> None:
    keys = {k for k, _ in GUARDED}
    assert {1, 19, 20, 44, 52, 56, 62, 63, 67, 80} <= keys
    assert len(GUARDED) > 60


@pytest.mark.parametrize("present", [True, False], ids=["nullables-present", "nullables-null"])
def test_every_guarded_controller_api_and_version_has_an_error_response(present: bool) -> None:
    for key, version in GUARDED:
        req = sample_entity(load_request_schema(key, version), present)
        body = controller_error_response(key, version, req, CAF, "Request is not authorized.")
        schema = load_response_schema(key, version)
        buf = io.BytesIO()
        entity_writer(schema)(buf, build(schema, body))
        resp, size = entity_reader(schema)(buf.getvalue(), 0)
        assert size == len(buf.getvalue()), (key, version)
        codes = error_codes(resp)
        assert codes and set(codes) == {CAF}, (key, version, codes)
        if key in MIRRORED:
            asked, answered = MIRRORED[key]
            want, got = walk(req, asked), walk(resp, answered)
            assert len(got) == len(want), (key, version, want, got)
            if want and not dataclasses.is_dataclass(want[0]):
                assert got == want, (key, version)


def test_topic_deletions_mirror_names_or_ids() -> None:
    for version in range(1, 7):
        req = sample_entity(load_request_schema(20, version), True)
        resp = build(load_response_schema(20, version), controller_error_response(20, version, req, CAF, None))
        if version >= 6:
            assert [(r.name, r.topic_id) for r in resp.responses] == [(t.name, t.topic_id) for t in req.topics]
        else:
            assert [r.name for r in resp.responses] == list(req.topic_names)


def test_scram_alterations_answer_each_user_once() -> None:
    req = build(
        load_request_schema(51, 0),
        {
            "deletions": [{"name": "zed", "mechanism": 1}, {"name": "amy", "mechanism": 1}],
            "upsertions": [{"name": "zed", "mechanism": 2, "iterations": 4096, "salt": b"s", "salted_password": b"p"}],
        },
    )
    resp = controller_error_response(51, 0, req, CAF, None)
    assert [r["user"] for r in resp["results"]] == ["amy", "zed"]


def test_an_api_without_an_error_response_is_named() -> None:
    with pytest.raises(KeyError, match="no error response for controller API 18"):
        controller_error_response(18, 3, None, CAF, None)


def test_a_refused_snapshot_fetch_is_a_failed_fetch_not_a_crash(tmp_path: Any, caplog: Any) -> None:
    """The raft client asking a controller that refuses it (FetchSnapshot's error response names
    no partition) logs the failure and returns, as for a partition-level error."""
    import asyncio

    from kopfka.raft.kafka_raft import KafkaRaftClient
    from kopfka.raft.snapshots import SnapshotId

    async def scenario() -> None:
        raft = KafkaRaftClient(
            node_id=2,
            cluster_id="c",
            metadata_dir=tmp_path,
            directory_id="",
            static_voters={1: ("127.0.0.1", 1), 2: ("127.0.0.1", 1)},
        )
        asked: list[int] = []

        async def refuse(host: str, port: int, key: int, version: int, body: Any, **kw: Any) -> Any:
            asked.append(key)
            req = build(load_request_schema(key, version), body)
            return build(load_response_schema(key, version), controller_error_response(key, version, req, CAF, None))

        raft.peers.request = refuse  # type: ignore[method-assign]
        try:
            await raft._fetch_snapshot(("127.0.0.1", 1), SnapshotId(100, 3))
        finally:
            await raft.close()
        assert asked == [59]

    asyncio.run(scenario())
    assert "FetchSnapshot failed: cluster_authorization_failed" in caplog.text


def test_a_controller_level_error_answers_every_item_of_the_request() -> None:
    """A handler whose controller call fails as a whole (NOT_CONTROLLER on a follower: the broker
    retries at the active controller) answers with the same error response: a topic deleted by id
    is answered by id (it was left out), an election names each partition (it named none)."""
    import asyncio
    import uuid

    from kopfka.protocol.errors import KafkaError
    from kopfka.server.controller_server import CONTROLLER_HANDLERS, ControllerServices

    class Follower:
        def __getattr__(self, name: str) -> Any:
            async def refuse(*args: Any, **kw: Any) -> Any:
                raise KafkaError(ErrorCode.not_controller, "not the active controller")

            return refuse

    svc = ControllerServices(1, "c", None, Follower())  # type: ignore[arg-type]
    tid = uuid.uuid4()

    def answer(key: int, version: int, body: dict[str, Any]) -> Any:
        req = build(load_request_schema(key, version), body)
        out = asyncio.run(CONTROLLER_HANDLERS[key](svc, version, req))
        return build(load_response_schema(key, version), out)

    deleted = answer(
        20, 6, {"topics": [{"name": "a", "topic_id": uuid.UUID(int=0)}, {"name": None, "topic_id": tid}], "timeout": 1}
    )
    assert [(r.name, r.topic_id, r.error_code) for r in deleted.responses] == [
        ("a", uuid.UUID(int=0), ErrorCode.not_controller),
        (None, tid, ErrorCode.not_controller),
    ]
    elected = answer(
        43, 2, {"election_type": 0, "topic_partitions": [{"topic": "a", "partitions": [0, 1]}], "timeout": 1}
    )
    assert elected.error_code == ErrorCode.not_controller
    assert [(p.partition_id, p.error_code) for r in elected.replica_election_results for p in r.partition_result] == [
        (0, ErrorCode.not_controller),
        (1, ErrorCode.not_controller),
    ]
    created = answer(
        19,
        7,
        {
            "topics": [{"name": "b", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": 1,
        },
    )
    assert [(t.name, t.error_code, t.error_message) for t in created.topics] == [
        ("b", ErrorCode.not_controller, "not the active controller")
    ]
