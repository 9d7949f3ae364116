"""Differential conformance: the same request sequence to Apache Kafka and to kopfka, responses
compared field by field.

Each `Step` is one API with a body builder; it runs at every version that kopfka and Kafka both
advertise (and kio can encode), in order, against a fresh single-node cluster of each. Bodies
name their resources per version where a request changes state (so each version meets the same
state on both sides), and steps may capture values from a response (topic ids, member ids,
producer ids) for later steps: each server keeps its own captures, so ids never need to match.

Responses are turned into plain values; what is legitimately different between two clusters
(ids, hosts/ports, throttle times, error message wording, disk sizes and paths) is masked, and
repeated fields are compared as sets (kopfka and Kafka order some lists differently, which no
client relies on). Every remaining difference is reported; `KNOWN` lists those that are
understood and documented (docs/kafka-differences.md) with the reason, so a new difference
fails the test and a known one that disappears is noticed.

Usage: python tests/kafkaref/conformance.py  (starts both servers, prints the report)
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import fnmatch
import json
import struct
import subprocess
import sys
import tempfile
import time
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.entity_builder import _entity_class_of
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import iter_batches

State = dict[str, Any]
Body = Callable[[State, int], dict[str, Any]]

# Field names whose values legitimately differ between two clusters.
MASKED_FIELDS = frozenset(
    {
        "throttle_time",
        "cluster_id",
        "topic_id",
        "host",
        "port",
        "member_id",
        "leader",
        "producer_id",
        "session_id",
        "error_message",
        "log_append_time",
        "client_instance_id",
        "subscription_id",
        "total_bytes",
        "usable_bytes",
        "log_dir",
        "path",
        "directory_id",
        "replica_directory_id",
        "leader_id_and_epoch",
        "node_endpoints",
        "incarnation_id",
        "push_interval",
        "last_fetch_timestamp",
        "last_caught_up_timestamp",
        "finalized_features_epoch",
        "coordinator_key",
        "transaction_start_time_ms",
        "last_timestamp",
        "instance_id",
        "group_epoch",
        "assignment_epoch",
    }
)
# Broker configs whose values are this cluster's ports and paths.
MASKED_CONFIGS = frozenset(
    {"listeners", "advertised.listeners", "controller.quorum.voters", "log.dirs", "log.dir", "metadata.log.dir"}
)
# List items are matched by the first of these fields they have (else compared as a set).
ITEM_KEYS = (
    "name",
    "topic",
    "topic_name",
    "group_id",
    "partition_index",
    "partition",
    "api_key",
    "config_name",
    "resource_name",
    "key",
    "node_id",
    "broker_id",
    "replica_id",
    "transactional_id",
)

RETRIABLE = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available}

# Understood and documented differences (docs/kafka-differences.md): fnmatch patterns over
# "step vN path: kafka=... kopfka=..." -> the reason. ([[] matches a literal "[".)
TOKENS = "delegation tokens (KIP-48) are not implemented"
SECURITY = "SSL/SASL settings are reconfigurable per listener in Kafka, not in kopfka (branch security)"
NOT_PLANNED = "not implemented: streams groups (KIP-1071)"
METADATA_LOG = "the metadata logs hold different records (kopfka's own record set)"
SHARE_INIT = (
    "Kafka answers a share group's first heartbeat (epoch 2) before initializing its share-partitions, so "
    "members get them a heartbeat later; kopfka initializes within the heartbeat and answers with them (epoch 1)"
)
NODE_DEFAULTS = (
    "kopfka gives node.id, process.roles and controller.listener.names defaults (-1, empty) that Kafka leaves "
    "undefined, so a DEFAULT_CONFIG synonym follows the static one"
)
# Kafka's answers here depend on whether its share-partition has finished initializing when the
# request arrives (one run: a partition entry with error NONE, the next: UNKNOWN_SERVER_ERROR, both
# without records; or no offsets yet), so they differ in some runs only; kopfka's share-partition
# is ready at once and it leaves out a partition with nothing to say.
SHARE_TIMING = (
    "share_fetch open v* responses: kafka=[[]{*}[]] kopfka=[[][]]",
    "describe_share_group_offsets v* groups[[]*].topics: kafka=[[][]] kopfka=*",
)
SOMETIMES = frozenset(SHARE_TIMING)  # never reported as stale
# fmt: off
KNOWN: dict[str, str] = {
    **{f"api_versions v* api_keys[[]api_key={k}]: kafka={{* kopfka='<absent>'": TOKENS for k in (38, 39, 40, 41)},
    **{f"api_versions v* api_keys[[]api_key={k}]: kafka={{* kopfka='<absent>'": NOT_PLANNED
       for k in (88, 89)},
    "api_versions v* api_keys[[]api_key=45].max_version: kafka=1 kopfka=0":
        "AlterPartitionReassignments v1 (KIP-1075 replication factor changes) is not served",
    "api_versions v* api_keys[[]api_key=7[12]]: kafka='<absent>' *":
        "kopfka always serves client telemetry (KIP-714); Kafka only with a telemetry reporter configured",
    "api_versions v* *_features[[]name=streams.version]*": NOT_PLANNED,
    "metadata auto create v* topics[[]name=c-auto-v*]*":
        "Kafka creates auto-created topics asynchronously (its first answer is UNKNOWN_TOPIC_OR_PARTITION); "
        "kopfka creates them before answering",
    "describe_quorum v* *.high_watermark: *": METADATA_LOG,
    "describe_quorum v* *.log_end_offset: *": METADATA_LOG,
    "share_group_heartbeat join v* assignment.topic_partitions: kafka=[[][]] kopfka=*": SHARE_INIT,
    "share_group_describe v* *.assignment.topic_partitions: kafka=[[][]] kopfka=*": SHARE_INIT,
    "share_group_* v* *member_epoch: kafka=2 kopfka=1": SHARE_INIT,
    **{p: SHARE_INIT for p in SHARE_TIMING},
    "consumer_group_* v* *member_epoch: kafka=2 kopfka=1":
        "a new KIP-848 group's first member gets epoch 2 in Kafka (a subscription-metadata bump), 1 in kopfka",
    "describe_topic_partitions v* *.topic_authorized_operations: kafka=3576 kopfka=-2147483648":
        "DescribeTopicPartitions always reports authorized operations in Kafka: branch gaps / security",
    "remove_raft_voter v0 error_code: kafka='unsupported_version' kopfka='invalid_request'":
        "a broker answers RemoveRaftVoter (Kafka: UNSUPPORTED_VERSION): branch kraft",
    "describe_configs broker all v* *.configs[[]name=principal.builder.class].*":
        "kopfka's principal builder is built in: no class name, not reconfigurable (branch security)",
    "describe_configs broker all v* *.configs[[]name=*]: kafka='<absent>' kopfka={*":
        "kopfka lists configs Kafka keeps out of its broker config definition: the replication throttles and "
        "the log-dir move rate (dynamic-only in Kafka), kopfka.http.listener, log.initial.task.delay.ms, "
        "producer.id.expiration.check.interval.ms (internal in Kafka)",
    "describe_configs broker all v* *.configs[[]name=controller.quorum.auto.join.enable].*":
        "controller.quorum.auto.join.enable defaults to true in kopfka, false in Kafka: branch kraft",
    "describe_configs broker all v* *.configs[[]name=node.id].synonyms: *": NODE_DEFAULTS,
    "describe_configs broker all v* *.configs[[]name=process.roles].synonyms: *": NODE_DEFAULTS,
    "describe_configs broker all v* *.configs[[]name=controller.listener.names].synonyms: *": NODE_DEFAULTS,
    "describe_configs broker all v* *.configs[[]name=listener.security.protocol.map].*":
        "kopfka's listener.security.protocol.map is a list whose default also maps CONTROLLER; Kafka's is a "
        "string without it",
    "describe_configs broker all v* *.configs[[]name=log.dir].config_type: kafka=7 kopfka=2":
        "log.dir is a LIST in Kafka's config definition, a STRING in kopfka's",
    "describe_configs broker all v* *.configs[[]name=*]: kafka={* kopfka='<absent>'":
        "a Kafka broker config kopfka does not define (SASL/SSL, tiered storage, share groups, ...)",
}
# fmt: on


# --- request bodies --------------------------------------------------------------------------
def batch(values: list[bytes], *, ts: int = 1_700_000_000_000, key: bytes | None = b"k") -> bytes:
    return encode_batch([Record(i, ts + i, key, v) for i, v in enumerate(values)])


def produce_body(topic: str, partition: int, records: bytes, state: State, acks: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 10000,
        "topic_data": [
            {
                "name": topic,
                "topic_id": state["ids"].get(topic, uuid.UUID(int=0)),
                "partition_data": [{"index": partition, "records": records}],
            }
        ],
    }


def fetch_body(topic: str, partition: int, offset: int, state: State, max_wait: int = 0) -> dict[str, Any]:
    from request_bodies import consumer_fetch_body  # tests/ is on sys.path under pytest and in main()

    topic_id = state["ids"].get(topic, uuid.UUID(int=1))
    return consumer_fetch_body(
        topic, topic_id=topic_id, partition=partition, offset=offset, max_wait=max_wait, min_bytes=1
    )


def list_offsets_body(topic: str, partition: int, ts: int) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "timeout": 10000,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": partition, "current_leader_epoch": -1, "timestamp": ts, "max_num_offsets": 1}
                ],
            }
        ],
    }


def create_topic_body(
    name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None, validate_only: bool = False
) -> dict[str, Any]:
    return {
        "timeout": 10000,
        "validate_only": validate_only,
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": rf,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
    }


def metadata_body(topics: list[str] | None, auto_create: bool = False) -> dict[str, Any]:
    return {
        "topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
        "allow_auto_topic_creation": auto_create,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def join_body(group: str, member_id: str = "") -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": 30000,
        "rebalance_timeout": 30000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "reason": None,
        "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"}],
    }


def describe_configs_body(rtype: int, name: str, keys: list[str] | None) -> dict[str, Any]:
    return {
        "resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True,
        "include_documentation": False,
    }


def share_body(state: State, partition: dict[str, Any], group: str = "c-share") -> dict[str, Any]:
    return {
        "group_id": group,
        "topics": [
            {"topic_id": state["ids"].get("c-data", uuid.UUID(int=9)), "partitions": [{"partition": 0, **partition}]}
        ],
    }


def fill_required(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """Give every required field the builder would miss a neutral value (0, "", empty, zero uuid)."""
    hints = typing.get_type_hints(cls)
    out = dict(data)
    for f in dataclasses.fields(cls):
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        nested = _entity_class_of(hints[f.name])
        if f.name in out:
            v = out[f.name]
            if nested is not None and isinstance(v, list):
                out[f.name] = [fill_required(nested, x) if isinstance(x, dict) else x for x in v]
            elif nested is not None and isinstance(v, dict):
                out[f.name] = fill_required(nested, v)
            continue
        if has_default:
            continue
        kt = f.metadata.get("kafka_type", "")
        origin = typing.get_origin(hints[f.name])
        if origin is tuple:
            out[f.name] = []
        elif nested is not None:
            out[f.name] = fill_required(nested, {})
        elif kt == "uuid":
            out[f.name] = uuid.UUID(int=0)
        elif kt in ("string",):
            out[f.name] = ""
        elif kt == "bool":
            out[f.name] = False
        elif kt in ("bytes", "records"):
            out[f.name] = b""
        else:
            out[f.name] = 0
    return out


# --- share groups (KIP-932) -------------------------------------------------------------------
SHARE_MEMBER = "c0nf0rmance-member-0000000000"


def share_key(state: State, group: str) -> str:
    """A FindCoordinator(SHARE) key, "group:topicId:partition" (the topic need not exist)."""
    from kopfka import uuids

    return f"{group}:{uuids.to_str(uuid.UUID(int=12345))}:0"  # the same key on both (topic ids differ)


def share_fetch_body(state: State, epoch: int) -> dict[str, Any]:
    return {
        "group_id": "c-sg",
        "member_id": SHARE_MEMBER,
        "share_session_epoch": epoch,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 100,
        "batch_size": 100,
        "topics": [
            {
                "topic_id": state["ids"].get("c-data", uuid.UUID(int=0)),
                "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
            }
        ],
        "forgotten_topics_data": [],
    }


def share_ack_body(state: State, epoch: int) -> dict[str, Any]:
    return {
        "group_id": "c-sg",
        "member_id": SHARE_MEMBER,
        "share_session_epoch": epoch,
        "topics": [
            {
                "topic_id": state["ids"].get("c-data", uuid.UUID(int=0)),
                "partitions": [
                    {
                        "partition_index": 0,
                        "acknowledgement_batches": [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}],
                    }
                ],
            }
        ],
    }


# --- steps ------------------------------------------------------------------------------------
@dataclass
class Step:
    name: str
    api_key: int
    body: Body
    capture: Callable[[State, int, Any], None] | None = None
    versions: Callable[[list[int]], list[int]] = lambda vs: vs  # which of the common versions
    raw: bytes | None = None  # a raw frame (wrong versions): compared as "response or closed"


def only_max(vs: list[int]) -> list[int]:
    return vs[-1:]


def capture_topic_ids(state: State, v: int, resp: Any) -> None:
    for t in getattr(resp, "topics", ()) or ():
        tid = getattr(t, "topic_id", None)
        if tid is not None and tid.int != 0:
            state["ids"][t.name] = tid


def capture_member(state: State, v: int, resp: Any) -> None:
    state["member"][v] = resp.member_id
    state["generation"][v] = resp.generation_id


def capture_main_member(state: State, v: int, resp: Any) -> None:
    if resp.member_id:
        state["main_member"] = resp.member_id
    state["main_generation"] = resp.generation_id


def capture_pid(state: State, v: int, resp: Any) -> None:
    state["pid"][v] = (resp.producer_id, resp.producer_epoch)


def S(name: str, key: int, body: Body, **kw: Any) -> Step:
    return Step(name, key, body, **kw)


BIG = b"x" * (1024 * 1024 + 200)  # over message.max.bytes (1048588) in one record


def corrupt(b: bytes) -> bytes:
    out = bytearray(b)
    out[-1] ^= 0xFF  # a payload byte: the CRC no longer matches
    return bytes(out)


STEPS: list[Step] = [
    S("api_versions", 18, lambda s, v: {"client_software_name": "conformance", "client_software_version": "1.0"}),
    S("create_topics", 19, lambda s, v: create_topic_body(f"c-create-v{v}", 2, configs={"retention.ms": "3600000"})),
    S("create_topics existing", 19, lambda s, v: create_topic_body("c-create-v2")),
    S("create_topics bad rf", 19, lambda s, v: create_topic_body(f"c-rf-v{v}", 1, rf=3)),
    S("create_topics bad name", 19, lambda s, v: create_topic_body("bad/name")),
    S("create_topics bad config", 19, lambda s, v: create_topic_body(f"c-cfg-v{v}", configs={"no.such": "1"})),
    S("create_topics bad value", 19, lambda s, v: create_topic_body(f"c-val-v{v}", configs={"retention.ms": "x"})),
    S("create_topics zero partitions", 19, lambda s, v: create_topic_body(f"c-zero-v{v}", 0)),
    S("create_topics validate only", 19, lambda s, v: create_topic_body(f"c-val-only-v{v}", 3, validate_only=True)),
    S("create_topics data", 19, lambda s, v: create_topic_body("c-data", 2), versions=only_max),
    S("metadata all", 3, lambda s, v: metadata_body(None), capture=capture_topic_ids, versions=only_max),
    S("metadata", 3, lambda s, v: metadata_body(["c-data"]), capture=capture_topic_ids),
    S("metadata unknown", 3, lambda s, v: metadata_body(["c-nope"]), versions=lambda vs: [v for v in vs if v >= 4]),
    # v0-v3 always ask for auto-creation (auto.create.topics.enable is true on both)
    S("metadata auto create", 3, lambda s, v: metadata_body([f"c-auto-v{v}"], auto_create=True)),
    S("metadata invalid name", 3, lambda s, v: metadata_body(["bad/name"])),
    S("produce", 0, lambda s, v: produce_body("c-data", 0, batch([b"v%d-a" % v, b"v%d-b" % v]), s)),
    S("produce acks=1", 0, lambda s, v: produce_body("c-data", 1, batch([b"one-%d" % v]), s, acks=1)),
    S("produce unknown topic", 0, lambda s, v: produce_body("c-nope", 0, batch([b"x"]), s)),
    S("produce bad partition", 0, lambda s, v: produce_body("c-data", 99, batch([b"x"]), s)),
    S("produce too large", 0, lambda s, v: produce_body("c-data", 0, batch([BIG]), s), versions=only_max),
    S("produce corrupt", 0, lambda s, v: produce_body("c-data", 0, corrupt(batch([b"crc"])), s)),
    S("produce bad acks", 0, lambda s, v: produce_body("c-data", 0, batch([b"acks"]), s, acks=2)),
    S("fetch", 1, lambda s, v: fetch_body("c-data", 0, 0, s)),
    S("fetch middle", 1, lambda s, v: fetch_body("c-data", 0, 3, s)),
    S("fetch out of range", 1, lambda s, v: fetch_body("c-data", 0, 10_000, s)),
    S("fetch bad partition", 1, lambda s, v: fetch_body("c-data", 99, 0, s)),
    S("fetch unknown topic", 1, lambda s, v: fetch_body("c-nope", 0, 0, s)),
    S("list_offsets latest", 2, lambda s, v: list_offsets_body("c-data", 0, -1)),
    S("list_offsets earliest", 2, lambda s, v: list_offsets_body("c-data", 0, -2)),
    S("list_offsets by time", 2, lambda s, v: list_offsets_body("c-data", 0, 1_700_000_000_001)),
    S("list_offsets max timestamp", 2, lambda s, v: list_offsets_body("c-data", 0, -3)),
    S("list_offsets bad partition", 2, lambda s, v: list_offsets_body("c-data", 99, -1)),
    S("list_offsets unknown topic", 2, lambda s, v: list_offsets_body("c-nope", 0, -1)),
    S(
        "offset_for_leader_epoch",
        23,
        lambda s, v: {
            "replica_id": -1,
            "topics": [
                {
                    "topic": "c-data",
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                        {"partition": 99, "leader_epoch": 0},
                    ],
                }
            ],
        },
    ),
    S(
        "describe_configs topic",
        32,
        lambda s, v: describe_configs_body(2, "c-create-v2", ["retention.ms", "cleanup.policy"]),
    ),
    S("describe_configs topic all", 32, lambda s, v: describe_configs_body(2, "c-data", None)),
    S("describe_configs unknown topic", 32, lambda s, v: describe_configs_body(2, "c-nope", None)),
    S(
        "describe_configs broker",
        32,
        lambda s, v: describe_configs_body(4, "1", ["log.retention.hours", "num.partitions"]),
    ),
    S("describe_configs broker all", 32, lambda s, v: describe_configs_body(4, "1", None), versions=only_max),
    S("describe_configs other broker", 32, lambda s, v: describe_configs_body(4, "7", None)),
    S(
        "alter_configs",
        33,
        lambda s, v: {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "c-data",
                    "configs": [{"name": "retention.ms", "value": str(1000 * (v + 100))}],
                }
            ],
            "validate_only": False,
        },
    ),
    S(
        "alter_configs bad",
        33,
        lambda s, v: {
            "resources": [
                {"resource_type": 2, "resource_name": "c-data", "configs": [{"name": "retention.ms", "value": "soon"}]}
            ],
            "validate_only": False,
        },
    ),
    S(
        "incremental_alter_configs",
        44,
        lambda s, v: {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "c-data",
                    "configs": [
                        {"name": "segment.ms", "config_operation": 0, "value": "600000"},
                        {"name": "retention.ms", "config_operation": 1, "value": None},
                    ],
                }
            ],
            "validate_only": False,
        },
    ),
    S(
        "incremental_alter_configs unknown",
        44,
        lambda s, v: {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "c-data",
                    "configs": [{"name": "no.such", "config_operation": 0, "value": "1"}],
                }
            ],
            "validate_only": False,
        },
    ),
    S(
        "incremental_alter_configs unknown topic",
        44,
        lambda s, v: {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "c-nope",
                    "configs": [{"name": "segment.ms", "config_operation": 0, "value": "1"}],
                }
            ],
            "validate_only": False,
        },
    ),
    S(
        "describe_configs after alter",
        32,
        lambda s, v: describe_configs_body(2, "c-data", ["segment.ms", "retention.ms"]),
    ),
    S(
        "create_partitions",
        37,
        lambda s, v: {
            "topics": [{"name": f"c-create-v{max(2, v)}", "count": 4 + v, "assignments": None}],
            "timeout": 10000,
            "validate_only": False,
        },
    ),
    S(
        "create_partitions fewer",
        37,
        lambda s, v: {
            "topics": [{"name": "c-data", "count": 1, "assignments": None}],
            "timeout": 10000,
            "validate_only": False,
        },
    ),
    S(
        "create_partitions unknown",
        37,
        lambda s, v: {
            "topics": [{"name": "c-nope", "count": 3, "assignments": None}],
            "timeout": 10000,
            "validate_only": False,
        },
    ),
    S(
        "delete_records",
        21,
        lambda s, v: {
            "topics": [{"name": "c-data", "partitions": [{"partition_index": 1, "offset": v}]}],
            "timeout": 10000,
        },
    ),
    S(
        "delete_records beyond hw",
        21,
        lambda s, v: {
            "topics": [{"name": "c-data", "partitions": [{"partition_index": 1, "offset": 10_000}]}],
            "timeout": 10000,
        },
    ),
    S(
        "delete_records unknown",
        21,
        lambda s, v: {
            "topics": [{"name": "c-nope", "partitions": [{"partition_index": 0, "offset": 1}]}],
            "timeout": 10000,
        },
    ),
    S(
        "describe_cluster",
        60,
        lambda s, v: {
            "include_cluster_authorized_operations": False,
            "endpoint_type": 1,
            "include_fenced_brokers": False,
        },
    ),
    S("describe_log_dirs", 35, lambda s, v: {"topics": [{"topic": "c-data", "partitions": [0, 1]}]}),
    S(
        "alter_replica_log_dirs unknown dir",
        34,
        lambda s, v: {"dirs": [{"path": "/nonexistent", "topics": [{"name": "c-data", "partitions": [0]}]}]},
    ),
    S(
        "elect_leaders",
        43,
        lambda s, v: {
            "election_type": 0,
            "timeout": 10000,
            "topic_partitions": [{"topic": "c-data", "partitions": [0]}],
        },
    ),
    S(
        "elect_leaders unknown",
        43,
        lambda s, v: {
            "election_type": 0,
            "timeout": 10000,
            "topic_partitions": [{"topic": "c-nope", "partitions": [0]}],
        },
    ),
    S("list_partition_reassignments", 46, lambda s, v: {"timeout": 10000, "topics": None}),
    S(
        "alter_partition_reassignments unknown",
        45,
        lambda s, v: {
            "timeout": 10000,
            "topics": [{"name": "c-nope", "partitions": [{"partition_index": 0, "replicas": [1]}]}],
        },
    ),
    S("find_coordinator", 10, lambda s, v: {"key": "c-group", "key_type": 0, "coordinator_keys": ["c-group"]}),
    S("find_coordinator txn", 10, lambda s, v: {"key": "c-txn", "key_type": 1, "coordinator_keys": ["c-txn"]}),
    S("join_group needs member id", 11, lambda s, v: join_body(f"c-join-v{v}"), capture=capture_member),
    S("join_group", 11, lambda s, v: join_body(f"c-join-v{v}", s["member"].get(v, "")), capture=capture_member),
    S("join_group main", 11, lambda s, v: join_body("c-group"), capture=capture_main_member, versions=only_max),
    S(
        "join_group main again",
        11,
        lambda s, v: join_body("c-group", s["main_member"]),
        capture=capture_main_member,
        versions=only_max,
    ),
    S(
        "sync_group",
        14,
        lambda s, v: {
            "group_id": "c-group",
            "generation_id": s["main_generation"],
            "member_id": s["main_member"],
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": s["main_member"], "assignment": b"\x00\x01"}],
        },
    ),
    S(
        "sync_group unknown member",
        14,
        lambda s, v: {
            "group_id": "c-group",
            "generation_id": s["main_generation"],
            "member_id": "nobody",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [],
        },
    ),
    S(
        "heartbeat",
        12,
        lambda s, v: {
            "group_id": "c-group",
            "generation_id": s["main_generation"],
            "member_id": s["main_member"],
            "group_instance_id": None,
        },
    ),
    S(
        "heartbeat bad generation",
        12,
        lambda s, v: {
            "group_id": "c-group",
            "generation_id": 99,
            "member_id": s["main_member"],
            "group_instance_id": None,
        },
    ),
    S(
        "offset_commit",
        8,
        lambda s, v: {
            "group_id": "c-group",
            "generation_id_or_member_epoch": s["main_generation"],
            "member_id": s["main_member"],
            "group_instance_id": None,
            "retention_time": -1,
            "topics": [
                {
                    "name": "c-data",
                    "topic_id": s["ids"].get("c-data"),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": v,
                            "committed_leader_epoch": -1,
                            "committed_metadata": f"m{v}",
                            "commit_timestamp": -1,
                        }
                    ],
                }
            ],
        },
    ),
    S(
        "offset_commit unknown topic",
        8,
        lambda s, v: {
            "group_id": "c-group-2",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time": -1,
            "topics": [
                {
                    "name": "c-nope",
                    "topic_id": uuid.UUID(int=5),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                            "commit_timestamp": -1,
                        }
                    ],
                }
            ],
        },
    ),
    S(
        "offset_fetch",
        9,
        lambda s, v: {
            "group_id": "c-group",
            "topics": [{"name": "c-data", "partition_indexes": [0, 1]}],
            "groups": [
                {
                    "group_id": "c-group",
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [{"name": "c-data", "topic_id": s["ids"].get("c-data"), "partition_indexes": [0, 1]}],
                }
            ],
            "require_stable": False,
        },
    ),
    S("describe_groups", 15, lambda s, v: {"groups": ["c-group", "c-none"], "include_authorized_operations": False}),
    S("list_groups", 16, lambda s, v: {"states_filter": [], "types_filter": []}),
    S(
        "consumer_group_heartbeat join",
        68,
        lambda s, v: {
            "group_id": f"c-848-v{v}",
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "rebalance_timeout": 30000,
            "subscribed_topic_names": ["c-data"],
            "topic_partitions": [],
        },
    ),
    S(
        "consumer_group_heartbeat bad epoch",
        68,
        lambda s, v: {
            "group_id": f"c-848-v{v}",
            "member_id": "nobody",
            "member_epoch": 5,
            "rebalance_timeout": 30000,
            "subscribed_topic_names": ["c-data"],
        },
    ),
    S(
        "consumer_group_describe",
        69,
        lambda s, v: {"group_ids": [f"c-848-v{v}", "c-group", "c-none"], "include_authorized_operations": False},
    ),
    S(
        "leave_group",
        13,
        lambda s, v: {
            "group_id": "c-group",
            "member_id": "nobody",
            "members": [{"member_id": "nobody", "group_instance_id": None}],
        },
    ),
    S(
        "offset_delete",
        47,
        lambda s, v: {"group_id": "c-group", "topics": [{"name": "c-data", "partitions": [{"partition_index": 0}]}]},
    ),
    S("delete_groups", 42, lambda s, v: {"groups_names": ["c-group", "c-none", f"c-join-v{v}"]}),
    # --- share groups (KIP-932) ---
    S(
        "find_coordinator share",
        10,
        lambda s, v: {"key_type": 2, "coordinator_keys": [share_key(s, "c-sstate")]},
        versions=lambda vs: [v for v in vs if v >= 6],
    ),
    S(
        "share_group_heartbeat join",
        76,
        lambda s, v: {
            "group_id": "c-sg",
            "member_id": SHARE_MEMBER,
            "member_epoch": 0,
            "subscribed_topic_names": ["c-data"],
        },
    ),
    S(
        "share_group_heartbeat unknown member",
        76,
        lambda s, v: {"group_id": "c-sg", "member_id": "nobody", "member_epoch": 5, "subscribed_topic_names": None},
    ),
    S(
        "share_group_heartbeat no member id",
        76,
        lambda s, v: {"group_id": "c-sg", "member_id": "", "member_epoch": 0, "subscribed_topic_names": ["c-data"]},
    ),
    S(
        "share_group_heartbeat not a share group",
        76,
        lambda s, v: {
            "group_id": "c-group",
            "member_id": SHARE_MEMBER,
            "member_epoch": 0,
            "subscribed_topic_names": ["c-data"],
        },
    ),
    S(
        "share_group_describe",
        77,
        lambda s, v: {"group_ids": ["c-sg", "c-group", "c-none"], "include_authorized_operations": False},
    ),
    S(
        "list_groups share",
        16,
        lambda s, v: {"states_filter": [], "types_filter": ["share"]},
        versions=lambda vs: [v for v in vs if v >= 5],
    ),
    S("share_fetch open", 78, lambda s, v: share_fetch_body(s, 0)),
    S("share_fetch no session", 78, lambda s, v: share_fetch_body(s, 5)),
    S("share_fetch no group", 78, lambda s, v: {**share_fetch_body(s, 0), "group_id": None}),
    S("share_acknowledge epoch 0", 79, lambda s, v: share_ack_body(s, 0)),
    S("share_acknowledge no session", 79, lambda s, v: share_ack_body(s, 3)),
    S(
        "describe_share_group_offsets",
        90,
        lambda s, v: {
            "groups": [
                {"group_id": "c-sg", "topics": None},
                {"group_id": "c-none", "topics": [{"topic_name": "c-data", "partitions": [0]}]},
                {"group_id": "c-sg", "topics": [{"topic_name": "c-nope", "partitions": [0]}]},
            ]
        },
    ),
    S(
        "alter_share_group_offsets",
        91,
        lambda s, v: {
            "group_id": "c-sg-alter",
            "topics": [
                {
                    "topic_name": "c-data",
                    "partitions": [
                        {"partition_index": 0, "start_offset": 1},
                        {"partition_index": 99, "start_offset": 0},
                    ],
                },
                {"topic_name": "c-nope", "partitions": [{"partition_index": 0, "start_offset": 0}]},
            ],
        },
    ),
    S(
        "alter_share_group_offsets non-empty group",
        91,
        lambda s, v: {
            "group_id": "c-sg",
            "topics": [{"topic_name": "c-data", "partitions": [{"partition_index": 0, "start_offset": 0}]}],
        },
    ),
    S(
        "delete_share_group_offsets",
        92,
        lambda s, v: {"group_id": "c-sg-alter", "topics": [{"topic_name": "c-data"}, {"topic_name": "c-nope"}]},
    ),
    S("read_share_group_state uninitialized", 84, lambda s, v: share_body(s, {"leader_epoch": 0}, "c-sstate")),
    S(
        "initialize_share_group_state",
        83,
        lambda s, v: share_body(s, {"state_epoch": 1, "start_offset": 2}, "c-sstate"),
    ),
    S("read_share_group_state", 84, lambda s, v: share_body(s, {"leader_epoch": 0}, "c-sstate")),
    S(
        "write_share_group_state",
        85,
        lambda s, v: share_body(
            s,
            {
                "state_epoch": 1,
                "leader_epoch": 0,
                "start_offset": -1,
                "delivery_complete_count": 1,
                "state_batches": [{"first_offset": 2, "last_offset": 2, "delivery_state": 2, "delivery_count": 1}],
            },
            "c-sstate",
        ),
    ),
    S(
        "write_share_group_state fenced",
        85,
        lambda s, v: share_body(
            s, {"state_epoch": 0, "leader_epoch": 0, "start_offset": -1, "state_batches": []}, "c-sstate"
        ),
    ),
    S("read_share_group_state_summary", 87, lambda s, v: share_body(s, {"leader_epoch": 0}, "c-sstate")),
    S("read_share_group_state after", 84, lambda s, v: share_body(s, {"leader_epoch": 0}, "c-sstate")),
    S("delete_share_group_state", 86, lambda s, v: share_body(s, {}, "c-sstate")),
    S("read_share_group_state deleted", 84, lambda s, v: share_body(s, {"leader_epoch": 0}, "c-sstate")),
    S(
        "share_group_heartbeat leave",
        76,
        lambda s, v: {
            "group_id": "c-sg",
            "member_id": SHARE_MEMBER,
            "member_epoch": -1,
            "subscribed_topic_names": None,
        },
        versions=only_max,
    ),
    S("delete_groups share", 42, lambda s, v: {"groups_names": ["c-sg", "c-sg-alter"]}, versions=only_max),
    S(
        "init_producer_id",
        22,
        lambda s, v: {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1},
        capture=capture_pid,
    ),
    S(
        "init_producer_id txn",
        22,
        lambda s, v: {
            "transactional_id": f"c-txn-v{v}",
            "transaction_timeout": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        capture=capture_pid,
    ),
    S(
        "init_producer_id bad timeout",
        22,
        lambda s, v: {
            "transactional_id": f"c-txn-bad-v{v}",
            "transaction_timeout": 10**9,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    ),
    S(
        "add_partitions_to_txn unknown pid",
        24,
        lambda s, v: {
            "v3_and_below_transactional_id": "c-txn-v4",
            "v3_and_below_producer_id": 424242,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "c-data", "partitions": [0]}],
            "transactions": [
                {
                    "transactional_id": "c-txn-v4",
                    "producer_id": 424242,
                    "producer_epoch": 0,
                    "verify_only": False,
                    "topics": [{"name": "c-data", "partitions": [0]}],
                }
            ],
        },
    ),
    S(
        "add_offsets_to_txn unknown pid",
        25,
        lambda s, v: {
            "transactional_id": "c-txn-v4",
            "producer_id": 424242,
            "producer_epoch": 0,
            "group_id": "c-group",
        },
    ),
    S(
        "end_txn unknown pid",
        26,
        lambda s, v: {"transactional_id": "c-txn-v4", "producer_id": 424242, "producer_epoch": 0, "committed": True},
    ),
    S(
        "txn_offset_commit unknown pid",
        28,
        lambda s, v: {
            "transactional_id": "c-txn-v4",
            "group_id": "c-group",
            "producer_id": 424242,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [],
        },
    ),
    S("describe_transactions", 65, lambda s, v: {"transactional_ids": ["c-txn-v4", "c-txn-none"]}),
    S(
        "list_transactions",
        66,
        lambda s, v: {
            "state_filters": [],
            "producer_id_filters": [],
            "duration_filter": -1,
            "transactional_id_pattern": None,
        },
    ),
    S("describe_producers", 61, lambda s, v: {"topics": [{"name": "c-data", "partition_indexes": [0, 99]}]}),
    S(
        "describe_client_quotas",
        48,
        lambda s, v: {"components": [{"entity_type": "client-id", "match_type": 1, "match": None}], "strict": False},
    ),
    S(
        "alter_client_quotas",
        49,
        lambda s, v: {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": f"c-client-v{v}"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
                }
            ],
            "validate_only": False,
        },
    ),
    S(
        "alter_client_quotas bad key",
        49,
        lambda s, v: {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": "c"}],
                    "ops": [{"key": "no_such_quota", "value": 1.0, "remove": False}],
                }
            ],
            "validate_only": False,
        },
    ),
    S(
        "describe_client_quotas after",
        48,
        lambda s, v: {
            "components": [{"entity_type": "client-id", "match_type": 0, "match": "c-client-v1"}],
            "strict": True,
        },
    ),
    S(
        "describe_quorum",
        55,
        lambda s, v: {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
    ),
    S(
        "update_features validate",
        57,
        lambda s, v: {
            "timeout": 10000,
            "validate_only": True,
            "feature_updates": [
                {"feature": "metadata.version", "max_version_level": 30, "upgrade_type": 1, "allow_downgrade": False}
            ],
        },
    ),
    S(
        "update_features unknown",
        57,
        lambda s, v: {
            "timeout": 10000,
            "validate_only": True,
            "feature_updates": [
                {"feature": "no.such.feature", "max_version_level": 1, "upgrade_type": 1, "allow_downgrade": False}
            ],
        },
    ),
    S(
        "describe_topic_partitions",
        75,
        lambda s, v: {
            "topics": [{"name": "c-data"}, {"name": "c-nope"}],
            "response_partition_limit": 2000,
            "cursor": None,
        },
    ),
    S("list_config_resources", 74, lambda s, v: {"resource_types": [2] if v >= 1 else []}),
    S("get_telemetry_subscriptions", 71, lambda s, v: {"client_instance_id": uuid.UUID(int=0)}),
    S(
        "push_telemetry unknown",
        72,
        lambda s, v: {
            "client_instance_id": uuid.UUID(int=7),
            "subscription_id": 1,
            "terminating": False,
            "compression_type": 0,
            "metrics": b"",
        },
    ),
    S("unregister_broker", 64, lambda s, v: {"broker_id": 99}),
    S(
        "add_raft_voter",
        80,
        lambda s, v: {
            "cluster_id": None,
            "timeout": 1000,
            "voter_id": 42,
            "voter_directory_id": uuid.UUID(int=1),
            "listeners": [],
            "ack_when_committed": True,
        },
    ),
    S(
        "remove_raft_voter",
        81,
        lambda s, v: {"cluster_id": None, "voter_id": 42, "voter_directory_id": uuid.UUID(int=1)},
    ),
    # security on a PLAINTEXT listener without an authorizer: both refuse, the same way
    S("sasl_handshake", 17, lambda s, v: {"mechanism": "PLAIN"}),
    S("sasl_authenticate", 36, lambda s, v: {"auth_bytes": b"\x00alice\x00secret"}),
    S(
        "describe_acls",
        29,
        lambda s, v: {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
    ),
    S(
        "create_acls",
        30,
        lambda s, v: {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": "c-data",
                    "resource_pattern_type": 3,
                    "principal": "User:alice",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
        },
    ),
    S(
        "delete_acls",
        31,
        lambda s, v: {
            "filters": [
                {
                    "resource_type_filter": 1,
                    "resource_name_filter": None,
                    "pattern_type_filter": 1,
                    "principal_filter": None,
                    "host_filter": None,
                    "operation": 1,
                    "permission_type": 1,
                }
            ]
        },
    ),
    S("describe_user_scram_credentials", 50, lambda s, v: {"users": [{"name": "alice"}]}),
    S("describe_user_scram_credentials all", 50, lambda s, v: {"users": None}),
    S(
        "alter_user_scram_credentials",
        51,
        lambda s, v: {
            "deletions": [],
            "upsertions": [
                {
                    "name": f"alice-v{v}",
                    "mechanism": 2,
                    "iterations": 8192,
                    "salt": b"salt",
                    "salted_password": bytes(64),
                }
            ],
        },
    ),
    S(
        "alter_user_scram_credentials bad iterations",
        51,
        lambda s, v: {
            "deletions": [],
            "upsertions": [
                {"name": "bob", "mechanism": 2, "iterations": 1, "salt": b"salt", "salted_password": bytes(64)}
            ],
        },
    ),
    S("describe_user_scram_credentials after", 50, lambda s, v: {"users": [{"name": "alice-v0"}]}),
    # the share coordinator's state RPCs (KIP-932), on a topic both know
    S("initialize_share_group_state", 83, lambda s, v: share_body(s, {"state_epoch": 0, "start_offset": 0})),
    S("read_share_group_state", 84, lambda s, v: share_body(s, {"leader_epoch": 0})),
    S(
        "write_share_group_state",
        85,
        lambda s, v: share_body(
            s,
            {
                "state_epoch": 0,
                "leader_epoch": 0,
                "start_offset": 0,
                "state_batches": [{"first_offset": 0, "last_offset": 1, "delivery_state": 2, "delivery_count": 1}],
            },
        ),
    ),
    S("read_share_group_state_summary", 87, lambda s, v: share_body(s, {"leader_epoch": 0})),
    S("delete_share_group_state", 86, lambda s, v: share_body(s, {})),
    S("read_share_group_state unknown group", 84, lambda s, v: share_body(s, {"leader_epoch": 0}, "c-no-share")),
    S("write_txn_markers", 27, lambda s, v: {"markers": []}),
    S(
        "delete_topics",
        20,
        lambda s, v: {
            "topic_names": [f"c-create-v{max(2, v)}"],
            "topics": [{"name": f"c-create-v{max(2, v)}", "topic_id": None}],
            "timeout": 10000,
        },
    ),
    S(
        "delete_topics unknown",
        20,
        lambda s, v: {"topic_names": ["c-nope"], "topics": [{"name": "c-nope", "topic_id": None}], "timeout": 10000},
    ),
    S(
        "metadata after delete",
        3,
        lambda s, v: metadata_body(["c-create-v2", "c-data"]),
        versions=lambda vs: [v for v in vs if v >= 4],
    ),
    # wrong versions: a version beyond every schema, an unknown API key
    Step("api_versions v127", 18, lambda s, v: {}, versions=only_max, raw=b"v127"),
    Step("metadata v99", 3, lambda s, v: {}, versions=only_max, raw=b"v99"),
    Step("unknown api 999", 999, lambda s, v: {}, raw=b"v0"),
]


# --- running ------------------------------------------------------------------------------------
def raw_frame(api_key: int, version: int) -> bytes:
    """A request for a version no schema has: header v1 and no body, except ApiVersions, which a
    client sends in its newest form (header v2, software name and version) to any broker."""
    client = b"conformance"
    body = struct.pack(">hhih", api_key, version, 7, len(client)) + client
    if api_key == 18:
        body += b"\x00" + b"\x0cconformance" + b"\x041.0" + b"\x00"  # tags; compact strings; tags
    return struct.pack(">i", len(body)) + body


async def send_raw(bootstrap: str, api_key: int, frame: bytes) -> Any:
    host, _, port = bootstrap.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(frame)
        await writer.drain()
        try:
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
            data = await asyncio.wait_for(reader.readexactly(size), 10)
        except (asyncio.IncompleteReadError, ConnectionError):
            return "connection closed"
        (corr,) = struct.unpack_from(">i", data, 0)
        if api_key == 18:  # KIP-511: answered in v0 whatever the version asked
            resp, _ = _read_api_versions_v0(data[4:])
            return {"correlation_id": corr, **resp}
        return {"correlation_id": corr, "bytes": len(data)}
    finally:
        writer.close()


def _read_api_versions_v0(data: bytes) -> tuple[dict[str, Any], int]:
    from kio.serial import entity_reader

    resp, size = entity_reader(load_response_schema(18, 0))(data, 0)
    return {"error_code": ErrorCode(resp.error_code).name, "api_key_count": len(resp.api_keys)}, size


def plain(value: Any, name: str = "") -> Any:
    """A kio response as comparable plain data (records decoded, masks applied)."""
    if name in MASKED_FIELDS:
        return "<masked>"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: plain(getattr(value, f.name), f.name) for f in dataclasses.fields(value)}
        if out.get("name") in MASKED_CONFIGS:  # a config entry whose value is a port or a path
            out.update({k: "<masked>" for k in ("value", "synonyms") if k in out})
        return out
    if isinstance(value, tuple | list):
        items = [plain(x, name) for x in value]
        return sorted(items, key=lambda x: json.dumps(x, sort_keys=True, default=str))
    if isinstance(value, ErrorCode):
        return value.name
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return "ZERO" if value.int == 0 else "<uuid>"
    if isinstance(value, bytes | bytearray | memoryview):
        return decoded_records(bytes(value)) if name == "records" else value.hex()
    return value


def decoded_records(data: bytes) -> Any:
    try:
        return [
            [r.offset, r.timestamp, (r.key or b"").decode(), (r.value or b"").decode()]
            for h in iter_batches(data, allow_partial_tail=True)
            for r in decode_records(data, h)
        ]
    except Exception as exc:  # a difference worth seeing, not a crash of the harness
        return f"<undecodable: {exc}>"


@dataclass
class Difference:
    step: str
    api_key: int
    version: int
    path: str
    kafka: Any
    kopfka: Any
    known: str | None = None
    pattern: str | None = None

    def __str__(self) -> str:
        return f"{self.step} v{self.version} {self.path}: kafka={self.kafka!r} kopfka={self.kopfka!r}"


def diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}" if path else k)
        return out
    if isinstance(a, list) and isinstance(b, list):
        key = next(
            (
                k
                for k in ITEM_KEYS
                if a
                and all(isinstance(x, dict) and k in x for x in a + b)
                and len({str(x[k]) for x in a}) == len(a)
                and len({str(x[k]) for x in b}) == len(b)
            ),
            None,
        )  # a field that names each item uniquely on both sides
        if key is not None:
            am, bm = {str(x[key]): x for x in a}, {str(x[key]): x for x in b}
            out = []
            for k in sorted(set(am) | set(bm)):
                out += diff(am.get(k, "<absent>"), bm.get(k, "<absent>"), f"{path}[{key}={k}]")
            return out
        if len(a) == len(b) and all(isinstance(x, dict) for x in a + b):
            out = []
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                out += diff(x, y, f"{path}[{i}]")
            return out
    return [] if a == b else [(path, a, b)]


@dataclass
class Report:
    pairs: set[tuple[int, int]] = field(default_factory=set)
    requests: int = 0
    differences: list[Difference] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def unknown(self) -> list[Difference]:
        return [d for d in self.differences if d.known is None]

    def stale(self) -> list[str]:
        """KNOWN patterns no difference matched any more (fixed: drop them from KNOWN and the docs)."""
        used = {d.pattern for d in self.differences}
        return [p for p in KNOWN if p not in used and p not in SOMETIMES]

    def text(self) -> str:
        lines = [
            f"API/version pairs compared: {len(self.pairs)} over {len({k for k, _ in self.pairs})} APIs "
            f"({self.requests} requests to each server)",
            f"differences: {len(self.differences)} ({len(self.unknown())} not yet documented), "
            f"{len({d.pattern for d in self.differences if d.pattern})} documented kinds",
        ]
        lines += [f"  skipped: {s}" for s in self.skipped]
        for d in self.differences:
            lines.append(f"  {'KNOWN' if d.known else 'NEW  '} {d}" + (f"  -- {d.known}" if d.known else ""))
        return "\n".join(lines)


async def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    conn = await KafkaConnection.open(bootstrap)
    try:
        resp = await conn.request(18, 3, {"client_software_name": "conformance", "client_software_version": "1"})
        return {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}
    finally:
        await conn.close()


def kio_versions(api_key: int) -> set[int]:
    out = set()
    for v in range(0, 20):
        try:
            load_request_schema(api_key, v)
            out.add(v)
        except Exception:
            pass
    return out


async def run_one(bootstrap: str, step: Step, version: int, state: State) -> Any:
    if step.raw is not None:
        wanted = int(step.raw[1:])
        return await send_raw(bootstrap, step.api_key, raw_frame(step.api_key, wanted))
    schema = load_request_schema(step.api_key, version)
    body = fill_required(schema, step.body(state, version))
    deadline = time.monotonic() + 15
    while True:
        conn = await KafkaConnection.open(bootstrap)
        try:
            resp = await conn.request(step.api_key, version, body, timeout=30)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            return f"connection closed ({type(exc).__name__})"
        finally:
            await conn.close()
        # retry what a client retries (a coordinator still loading), as both sides may need it
        if getattr(resp, "error_code", None) not in RETRIABLE or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    if step.capture is not None:
        step.capture(state, version, resp)
    return resp


async def compare(kafka: str, kopfka: str, steps: list[Step] = STEPS) -> Report:
    """Run every step at every common version against both; collect the differences."""
    report = Report()
    ka, ko = await advertised(kafka), await advertised(kopfka)
    states: dict[str, State] = {
        s: {"ids": {}, "member": {}, "generation": {}, "pid": {}, "main_member": "", "main_generation": -1}
        for s in (kafka, kopfka)
    }
    for step in steps:
        if step.raw is not None:
            versions = [0]
        elif step.api_key not in ko:
            report.skipped.append(f"{step.name}: kopfka does not advertise API {step.api_key}")
            continue
        elif step.api_key not in ka:
            report.skipped.append(
                f"{step.name}: Kafka does not advertise API {step.api_key} (only with a telemetry reporter)"
            )
            continue
        else:
            lo, hi = max(ka[step.api_key][0], ko[step.api_key][0]), min(ka[step.api_key][1], ko[step.api_key][1])
            common = sorted(v for v in kio_versions(step.api_key) if lo <= v <= hi)
            versions = step.versions(common)
        for v in versions:
            responses = []
            for server in (kafka, kopfka):
                try:
                    resp = await run_one(server, step, v, states[server])
                except Exception as exc:  # report, don't stop: one bad step must not hide the rest
                    resp = f"harness error: {type(exc).__name__}: {exc}"
                responses.append(plain(resp))
            report.requests += 1
            if step.raw is None:
                report.pairs.add((step.api_key, v))
            for path, a, b in diff(*responses):
                d = Difference(step.name, step.api_key, v, path, a, b)
                d.pattern = next((pat for pat in KNOWN if fnmatch.fnmatchcase(str(d), pat)), None)
                d.known = KNOWN[d.pattern] if d.pattern is not None else None
                report.differences.append(d)
    return report


def covered_apis() -> set[int]:
    return {s.api_key for s in STEPS if s.raw is None}


def kopfka_config(data_dir: Path, port: int) -> Path:
    """A server.properties for kopfka written as the reference Kafka's is (roles, listeners, quorum,
    the same non-default settings where kopfka knows them), so both describe the same setup."""
    from kafka_ref import BASE_PROPS, free_port
    from kopfka.config.server_config import SERVER_CONFIG

    controller = free_port()
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "log.dirs": str(data_dir),
        **{k: v for k, v in BASE_PROPS.items() if k in SERVER_CONFIG.keys},
    }
    path = data_dir.parent / "server.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def start_pair(root: Path) -> tuple[Any, Any]:
    """A fresh single-node reference Kafka and a fresh kopfka configured alike."""
    from kafka_ref import KafkaCluster, free_port
    from kopfka_process import KopfkaProcess

    kafka = KafkaCluster(root / "kafka").format().start()
    port = free_port()
    data = root / "kopfka" / "data"
    try:
        config = kopfka_config(data, port)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "kopfka.cli.main",
                "storage",
                "format",
                "--cluster-id",
                kafka.cluster_id,
                "--config",
                str(config),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        kop = KopfkaProcess(data, port=port, config_file=config).start()
    except Exception:
        kafka.kill()
        raise
    return kafka, kop


def main() -> int:  # pragma: no cover - a manual report
    here = Path(__file__).parent
    sys.path.insert(0, str(here))
    sys.path.insert(0, str(here.parent))
    kafka, kop = start_pair(Path(tempfile.mkdtemp(prefix="conformance-")))
    try:
        report = asyncio.run(compare(kafka.bootstrap, kop.bootstrap))
    finally:
        kop.kill()
        kafka.kill()
    print(report.text())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
