"""Whole-request error responses for the controller listener's APIs (sans-IO).

Kafka's ControllerApis answers a request it refuses (a principal without ClusterAction, say) with
the request's own `getErrorResponse`: the top-level error code where the response has one, and
one failed item per item of the request where the response lists items (each topic of a
CreateTopics, each resource of an AlterConfigs, ...). This module is that table for every API the
controller serves; `controller_error_response` returns the plain dict that `entity_builder.build`
turns into the version's kio response.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kopfka import uuids
from kopfka.protocol.errors import ErrorCode
from kopfka.server.apis.features import update_features_response

ErrorBuilder = Callable[[int, Any, ErrorCode, str | None], dict[str, Any]]
_BUILDERS: dict[int, ErrorBuilder] = {}


def controller_error_response(
    api_key: int, version: int, req: Any, code: ErrorCode, message: str | None
) -> dict[str, Any]:
    """The response to `req` (a decoded request of `api_key`/`version`) failing as a whole with `code`."""
    builder = _BUILDERS.get(api_key)
    if builder is None:
        raise KeyError(f"no error response for controller API {api_key}")
    return builder(version, req, code, message)


def has_error_response(api_key: int) -> bool:
    return api_key in _BUILDERS


def _top_level(code: ErrorCode, message: str | None, **extra: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, **extra}


def _error_for(*keys: int, **extra: Any) -> None:
    """APIs whose error response is the top-level error code alone (Errors.forException(e))."""

    def builder(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
        return _top_level(code, msg, **extra)

    for key in keys:
        _BUILDERS[key] = builder


# AlterPartition, Vote, Begin/EndQuorumEpoch, FetchSnapshot, AssignReplicasToDirs, UnregisterBroker,
# Add/RemoveRaftVoter: an error code (and message) only, no items
_error_for(56, 52, 53, 54, 59, topics=[])
_error_for(73, directories=[])
_error_for(64, 80, 81)
_error_for(55, topics=[], nodes=[])  # DescribeQuorum: the top-level error form
_error_for(62, broker_epoch=-1)  # BrokerRegistration
_error_for(63, is_caught_up=False, is_fenced=True, should_shut_down=False)  # BrokerHeartbeat
_error_for(67, producer_id_start=0, producer_id_len=0)  # AllocateProducerIds
_error_for(60, cluster_id="", brokers=[])  # DescribeCluster: Kafka's defaults otherwise


def _builder(key: int) -> Callable[[ErrorBuilder], ErrorBuilder]:
    def reg(fn: ErrorBuilder) -> ErrorBuilder:
        _BUILDERS[key] = fn
        return fn

    return reg


@_builder(1)
def _fetch(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    # v13+ (the controller serves the raft fetch, v17): the top-level code, no partitions
    return {"throttle_time": 0, "error_code": code, "session_id": req.session_id, "responses": []}


@_builder(19)
def _create_topics(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "topic_id": uuids.ZERO_UUID,
                "error_code": code,
                "error_message": msg,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": [],
            }
            for t in req.topics
        ],
    }


@_builder(20)
def _delete_topics(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    # v6+ names topics by name or id; before, by name only
    topics = [(t.name, t.topic_id) for t in req.topics] if v >= 6 else [(n, None) for n in req.topic_names]
    return {
        "throttle_time": 0,
        "responses": [
            {"name": n, "topic_id": tid or uuids.ZERO_UUID, "error_code": code, "error_message": msg}
            for n, tid in topics
        ],
    }


@_builder(33)  # AlterConfigs
@_builder(44)  # IncrementalAlterConfigs
def _alter_configs(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "responses": [
            {
                "error_code": code,
                "error_message": msg,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
            }
            for r in req.resources
        ],
    }


@_builder(37)
def _create_partitions(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "results": [{"name": t.name, "error_code": code, "error_message": msg} for t in req.topics],
    }


@_builder(30)
def _create_acls(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    return {"throttle_time": 0, "results": [{"error_code": code, "error_message": msg} for _ in req.creations]}


@_builder(31)
def _delete_acls(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "filter_results": [{"error_code": code, "error_message": msg, "matching_acls": []} for _ in req.filters],
    }


@_builder(43)
def _elect_leaders(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    wanted = req.topic_partitions or ()  # null: all partitions, none to name
    return {
        "throttle_time": 0,
        "error_code": code,  # v1+
        "replica_election_results": [
            {
                "topic": t.topic,
                "partition_result": [
                    {"partition_id": p, "error_code": code, "error_message": msg} for p in t.partitions
                ],
            }
            for t in wanted
        ],
    }


@_builder(45)
def _alter_reassignments(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    responses = [
        {
            "name": t.name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": code, "error_message": msg} for p in t.partitions
            ],
        }
        for t in req.topics
    ]
    return _top_level(code, msg, responses=responses)


@_builder(46)
def _list_reassignments(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    topics = [
        {"name": t.name, "partitions": [{"partition_index": p} for p in t.partition_indexes]} for t in req.topics or ()
    ]
    return _top_level(code, msg, topics=topics)


@_builder(49)
def _alter_client_quotas(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "entries": [
            {
                "error_code": code,
                "error_message": msg,
                "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity],
            }
            for entry in req.entries
        ],
    }


@_builder(51)
def _alter_scram(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    users = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
    return {"throttle_time": 0, "results": [{"user": u, "error_code": code, "error_message": msg} for u in users]}


@_builder(57)
def _update_features(v: int, req: Any, code: ErrorCode, msg: str | None) -> dict[str, Any]:
    return update_features_response([], code, msg)  # an error: no per-feature results
