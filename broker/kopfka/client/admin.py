"""Admin operations over one connection (enough for the CLI and the operator's reconcilers)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka.security.client import ClientSecurity


class AdminError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        self.code = code
        super().__init__(f"{code.name.upper()}: {message or code.name}")


def _check(code: Any, message: str | None = None) -> None:
    error = _error(code, message)
    if error is not None:
        raise error


def _error(code: Any, message: str | None = None) -> AdminError | None:
    """A per-item result of a batch call: None when it succeeded."""
    code = ErrorCode(int(code))
    return None if code == ErrorCode.none else AdminError(code, message)


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error: ErrorCode


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID | None
    internal: bool
    partitions: list[PartitionInfo]


@dataclass
class NewTopic:
    name: str
    partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class CreatedTopic:
    name: str
    topic_id: uuid.UUID | None
    partitions: int
    replication_factor: int


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: int  # DescribeConfigs config_source: 1 DYNAMIC_TOPIC_CONFIG, 5 DEFAULT_CONFIG, ...
    read_only: bool
    sensitive: bool


@dataclass
class Reassignment:
    replicas: list[int]
    adding: list[int]
    removing: list[int]


@dataclass
class ReplicaLog:
    """One replica's log in a log dir (DescribeLogDirs): a future log is an intra-broker move
    under way; its offset lag is how far it trails the current log."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDirInfo:
    """One log dir of the broker asked (DescribeLogDirs v5): an offline dir has an error and
    no replicas; sizes are -1 when unknown."""

    path: str
    error: ErrorCode
    total_bytes: int
    usable_bytes: int
    cordoned: bool
    replicas: dict[tuple[str, int], ReplicaLog] = field(default_factory=dict)


def _topic_info(t: Any) -> TopicInfo | AdminError:
    """A Metadata answer's topic, or its error."""
    code = ErrorCode(int(t.error_code))
    if code != ErrorCode.none:
        return AdminError(code, f"topic {t.name}")
    parts = [
        PartitionInfo(
            p.partition_index,
            p.leader_id,
            p.leader_epoch,
            list(p.replica_nodes),
            list(p.isr_nodes),
            list(p.offline_replicas),
            ErrorCode(int(p.error_code)),
        )
        for p in t.partitions
    ]
    return TopicInfo(t.name or "", t.topic_id, t.is_internal, sorted(parts, key=lambda p: p.partition))


class Admin:
    def __init__(self, conn: KafkaConnection, security: ClientSecurity | None = None) -> None:
        self.conn = conn
        self.security = security

    @classmethod
    async def connect(cls, bootstrap: str, security: ClientSecurity | None = None) -> Admin:
        return cls(await KafkaConnection.open(bootstrap, security=security), security)

    async def _config_request(self, resource_type: int, name: str, api_key: int, version: int, body: Any) -> Any:
        """A configs request, sent as Kafka's admin client sends it: a broker's own configs
        (BROKER "<id>") to that broker, anything else to the connected one."""
        if resource_type != 4 or not name:
            return await self.conn.request(api_key, version, body)
        brokers, _, _ = await self.metadata([])
        if int(name) not in brokers:
            raise AdminError(ErrorCode.broker_not_available, f"broker {name} is not in the cluster metadata")
        host, port, _rack = brokers[int(name)]
        conn = await KafkaConnection.open(f"{host}:{port}", security=self.security)
        try:
            return await conn.request(api_key, version, body)
        finally:
            await conn.close()

    async def close(self) -> None:
        await self.conn.close()

    async def metadata(
        self, topics: list[str] | None = None
    ) -> tuple[dict[int, tuple[str, int, str | None]], list[TopicInfo], str | None]:
        resp = await self._metadata(topics)
        brokers = {b.node_id: (b.host, b.port, b.rack) for b in resp.brokers}
        infos = []
        for t in resp.topics:
            info = _topic_info(t)
            if isinstance(info, AdminError):
                raise info
            infos.append(info)
        return brokers, infos, resp.cluster_id

    async def _metadata(self, topics: list[str] | None) -> Any:
        return await self.conn.request(
            3,
            12,
            {
                "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> None:
        topic = NewTopic(name, partitions, replication_factor, configs or {})
        result = (await self.create_topics([topic], validate_only)).get(name)
        if isinstance(result, AdminError):
            raise result

    async def delete_topic(self, name: str) -> None:
        error = (await self.delete_topics([name])).get(name)
        if error is not None:
            raise error

    async def create_partitions(self, name: str, count: int) -> None:
        error = (await self.create_partitions_many({name: count})).get(name)
        if error is not None:
            raise error

    async def describe_topics(self, names: list[str]) -> dict[str, TopicInfo | AdminError]:
        """Metadata of the named topics; a topic that does not exist (or fails) maps to its error
        instead of failing the whole answer."""
        if not names:
            return {}
        resp = await self._metadata(names)
        return {t.name or "": _topic_info(t) for t in resp.topics}

    async def create_topics(
        self, topics: list[NewTopic], validate_only: bool = False, timeout_ms: int = 30000
    ) -> dict[str, CreatedTopic | AdminError]:
        """One CreateTopics for all of them; each topic's own outcome (Kafka's error message)."""
        if not topics:
            return {}
        resp = await self.conn.request(
            19,
            7,
            {
                "topics": [
                    {
                        "name": t.name,
                        "num_partitions": t.partitions,
                        "replication_factor": t.replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                    }
                    for t in topics
                ],
                "timeout": timeout_ms,
                "validate_only": validate_only,
            },
        )
        out: dict[str, CreatedTopic | AdminError] = {}
        for r in resp.topics:
            code = ErrorCode(int(r.error_code))
            if code != ErrorCode.none:
                out[r.name] = AdminError(code, r.error_message)
            else:
                out[r.name] = CreatedTopic(r.name, r.topic_id, int(r.num_partitions), int(r.replication_factor))
        return out

    async def delete_topics(
        self, names: Sequence[str] = (), ids: Sequence[uuid.UUID] = (), timeout_ms: int = 30000
    ) -> dict[str | uuid.UUID, AdminError | None]:
        """Delete by name, or by topic id (exactly that topic, not a namesake created since);
        results keyed the way each topic was named."""
        if not names and not ids:
            return {}
        topics = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
        topics += [{"name": None, "topic_id": i} for i in ids]
        resp = await self.conn.request(20, 6, {"topics": topics, "timeout": timeout_ms})
        wanted_ids = set(ids)
        out: dict[str | uuid.UUID, AdminError | None] = {}
        for r in resp.responses:
            key: str | uuid.UUID = r.topic_id if r.topic_id in wanted_ids else (r.name or "")
            out[key] = _error(r.error_code, r.error_message)
        return out

    async def create_partitions_many(
        self, counts: dict[str, int], validate_only: bool = False, timeout_ms: int = 30000
    ) -> dict[str, AdminError | None]:
        """Raise each topic's partition count to the given total (new replicas placed by Kafka)."""
        if not counts:
            return {}
        resp = await self.conn.request(
            37,
            3,
            {
                "topics": [{"name": n, "count": c, "assignments": None} for n, c in counts.items()],
                "timeout": timeout_ms,
                "validate_only": validate_only,
            },
        )
        return {r.name: _error(r.error_code, r.error_message) for r in resp.results}

    async def describe_config_entries(
        self, resources: list[tuple[int, str]], keys: list[str] | None = None
    ) -> dict[tuple[int, str], list[ConfigEntry] | AdminError]:
        """Several resources in one DescribeConfigs, each entry with its source (an override
        is DYNAMIC_TOPIC_CONFIG for a topic); a resource's error does not fail the others."""
        if not resources:
            return {}
        resp = await self.conn.request(
            32,
            4,
            {
                "resources": [
                    {"resource_type": rtype, "resource_name": name, "configuration_keys": keys}
                    for rtype, name in resources
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        out: dict[tuple[int, str], list[ConfigEntry] | AdminError] = {}
        for r in resp.results:
            key = (int(r.resource_type), r.resource_name)
            err = _error(r.error_code, r.error_message)
            out[key] = (
                err
                if err is not None
                else [
                    ConfigEntry(c.name, c.value, int(c.config_source), bool(c.read_only), bool(c.is_sensitive))
                    for c in r.configs
                ]
            )
        return out

    async def incremental_alter_configs_many(
        self, changes: dict[tuple[int, str], list[tuple[str, int, str | None]]], validate_only: bool = False
    ) -> dict[tuple[int, str], AdminError | None]:
        """(resource type, name) -> [(key, op, value)], one request; each resource is applied
        whole or not at all (Kafka validates all its operations first)."""
        if not changes:
            return {}
        resp = await self.conn.request(
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": rtype,
                        "resource_name": name,
                        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                    }
                    for (rtype, name), ops in changes.items()
                ],
                "validate_only": validate_only,
            },
        )
        return {(int(r.resource_type), r.resource_name): _error(r.error_code, r.error_message) for r in resp.responses}

    async def alter_partition_reassignments(
        self, moves: Mapping[tuple[str, int], list[int] | None], timeout_ms: int = 30000
    ) -> dict[tuple[str, int], AdminError | None]:
        """Start (target replicas) or cancel (None) the reassignment of each partition."""
        if not moves:
            return {}
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, part), replicas in moves.items():
            topics.setdefault(topic, []).append({"partition_index": part, "replicas": replicas})
        resp = await self.conn.request(
            45, 0, {"timeout": timeout_ms, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        )
        _check(resp.error_code, resp.error_message)
        return {
            (t.name, p.partition_index): _error(p.error_code, p.error_message)
            for t in resp.responses
            for p in t.partitions
        }

    async def list_partition_reassignments(
        self, topics: dict[str, list[int]] | None = None, timeout_ms: int = 30000
    ) -> dict[tuple[str, int], Reassignment]:
        """The ongoing reassignments (of the given partitions, or all)."""
        body = {
            "timeout": timeout_ms,
            "topics": None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
        }
        resp = await self.conn.request(46, 0, body)
        _check(resp.error_code, resp.error_message)
        return {
            (t.name, p.partition_index): Reassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
            for t in resp.topics
            for p in t.partitions
        }

    async def describe_configs(self, resource_type: int, name: str, keys: list[str] | None = None) -> list[Any]:
        resp = await self._config_request(
            resource_type,
            name,
            32,
            4,
            {
                "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
                "include_synonyms": True,
                "include_documentation": False,
            },
        )
        r = resp.results[0]
        _check(r.error_code, r.error_message)
        return list(r.configs)

    async def incremental_alter_configs(
        self, resource_type: int, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False
    ) -> None:
        resp = await self._config_request(
            resource_type,
            name,
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": resource_type,
                        "resource_name": name,
                        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                    }
                ],
                "validate_only": validate_only,
            },
        )
        r = resp.responses[0]
        _check(r.error_code, r.error_message)

    async def list_offsets(self, topic: str, partitions: list[int], timestamp: int) -> dict[int, tuple[int, int]]:
        resp = await self.conn.request(
            2,
            8,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                            for p in partitions
                        ],
                    }
                ],
            },
        )
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                _check(p.error_code)
                out[p.partition_index] = (p.offset, p.timestamp)
        return out

    async def describe_configs_many(
        self, resources: list[tuple[int, str]], keys: list[str] | None = None
    ) -> dict[tuple[int, str], dict[str, str | None]]:
        """Several resources in one DescribeConfigs; per resource, key -> value (errors raise)."""
        out: dict[tuple[int, str], dict[str, str | None]] = {}
        for key, entries in (await self.describe_config_entries(resources, keys)).items():
            if isinstance(entries, AdminError):
                raise entries
            out[key] = {c.name: c.value for c in entries}
        return out

    async def describe_quorum(self) -> Any:
        """DescribeQuorum of __cluster_metadata (a broker forwards it to the active controller)."""
        resp = await self.conn.request(
            55,
            2,
            {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        )
        _check(resp.error_code, getattr(resp, "error_message", None))
        p = resp.topics[0].partitions[0]
        _check(p.error_code, getattr(p, "error_message", None))
        return p

    async def elect_leaders(
        self, partitions: dict[str, list[int]] | None, election_type: int = 0
    ) -> dict[tuple[str, int], ErrorCode]:
        """ElectLeaders (0: preferred, 1: unclean); per partition its error code
        (ELECTION_NOT_NEEDED when the preferred replica already leads)."""
        resp = await self.conn.request(
            43,
            2,
            {
                "election_type": election_type,
                "topic_partitions": None
                if partitions is None
                else [{"topic": t, "partitions": ps} for t, ps in sorted(partitions.items())],
                "timeout": 30000,
            },
        )
        _check(resp.error_code)
        return {
            (r.topic, p.partition_id): ErrorCode(int(p.error_code))
            for r in resp.replica_election_results
            for p in r.partition_result
        }

    async def update_feature(self, name: str, level: int, upgrade_type: int = 1) -> None:
        """UpdateFeatures for one feature (upgrade_type 1: upgrade)."""
        resp = await self.conn.request(
            57,
            1,
            {
                "timeout": 30000,
                "feature_updates": [{"feature": name, "max_version_level": level, "upgrade_type": upgrade_type}],
                "validate_only": False,
            },
        )
        _check(resp.error_code, resp.error_message)
        for r in resp.results:
            _check(r.error_code, r.error_message)

    async def features(self) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
        """ApiVersions: (supported feature -> (min, max) of the broker asked, finalized levels)."""
        resp = await self.conn.request(18, 3, {"client_software_name": "kopfka", "client_software_version": "0"})
        supported = {f.name: (int(f.min_version), int(f.max_version)) for f in resp.supported_features}
        finalized = {f.name: int(f.max_version_level) for f in resp.finalized_features}
        return supported, finalized

    async def remove_raft_voter(self, cluster_id: str | None, voter_id: int, directory_id: uuid.UUID) -> None:
        """RemoveRaftVoter (KIP-853; a broker forwards it to the active controller)."""
        resp = await self.conn.request(
            81, 0, {"cluster_id": cluster_id, "voter_id": voter_id, "voter_directory_id": directory_id}
        )
        _check(resp.error_code, resp.error_message)

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker: the broker's registration goes (it must be shut down)."""
        resp = await self.conn.request(64, 0, {"broker_id": broker_id})
        _check(resp.error_code, resp.error_message)

    async def describe_log_dirs(self, topics: Mapping[str, Sequence[int]] | None = None) -> list[LogDirInfo]:
        """DescribeLogDirs of the broker this connection is to (every partition, or the given
        ones): its dirs with their space, cordoning and the replicas (current and future) in each."""
        body = {
            "topics": None if topics is None else [{"topic": t, "partitions": list(ps)} for t, ps in topics.items()]
        }
        resp = await self.conn.request(35, 5, body)
        _check(resp.error_code)
        out = []
        for r in resp.results:
            replicas = {
                (t.name, int(p.partition_index)): ReplicaLog(
                    int(p.partition_size), int(p.offset_lag), bool(p.is_future_key)
                )
                for t in r.topics
                for p in t.partitions
            }
            out.append(
                LogDirInfo(
                    r.log_dir,
                    ErrorCode(int(r.error_code)),
                    int(r.total_bytes),
                    int(r.usable_bytes),
                    bool(getattr(r, "is_cordoned", False)),
                    replicas,
                )
            )
        return out

    async def alter_replica_log_dirs(
        self, moves: Mapping[tuple[str, int], str]
    ) -> dict[tuple[str, int], AdminError | None]:
        """AlterReplicaLogDirs on the broker this connection is to: (topic, partition) -> the dir
        its replica is to live in. REPLICA_NOT_AVAILABLE: the broker does not host it yet, and
        will create it in that dir when it arrives."""
        if not moves:
            return {}
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (topic, part), path in sorted(moves.items()):
            by_dir.setdefault(path, {}).setdefault(topic, []).append(part)
        body = {
            "dirs": [
                {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                for path, topics in by_dir.items()
            ]
        }
        resp = await self.conn.request(34, 2, body)
        return {
            (r.topic_name, int(p.partition_index)): _error(p.error_code) for r in resp.results for p in r.partitions
        }
