"""Admin operations over one connection (enough for the CLI and the operator's reconcilers)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka.security.client import ClientSecurity


class AdminError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        self.code = code
        super().__init__(f"{code.name.upper()}: {message or code.name}")


def _check(code: Any, message: str | None = None) -> None:
    code = ErrorCode(int(code))
    if code != ErrorCode.none:
        raise AdminError(code, message)


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
        resp = await self.conn.request(
            3,
            12,
            {
                "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        brokers = {b.node_id: (b.host, b.port, b.rack) for b in resp.brokers}
        infos = []
        for t in resp.topics:
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
            if ErrorCode(int(t.error_code)) != ErrorCode.none:
                raise AdminError(ErrorCode(int(t.error_code)), f"topic {t.name}")
            infos.append(TopicInfo(t.name or "", t.topic_id, t.is_internal, sorted(parts, key=lambda p: p.partition)))
        return brokers, infos, resp.cluster_id

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> None:
        resp = await self.conn.request(
            19,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                    }
                ],
                "timeout": 30000,
                "validate_only": validate_only,
            },
        )
        t = resp.topics[0]
        _check(t.error_code, t.error_message)

    async def delete_topic(self, name: str) -> None:
        resp = await self.conn.request(
            20, 6, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}], "timeout": 30000}
        )
        r = resp.responses[0]
        _check(r.error_code, r.error_message)

    async def create_partitions(self, name: str, count: int) -> None:
        resp = await self.conn.request(
            37,
            3,
            {"topics": [{"name": name, "count": count, "assignments": None}], "timeout": 30000, "validate_only": False},
        )
        r = resp.results[0]
        _check(r.error_code, r.error_message)

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
        out: dict[tuple[int, str], dict[str, str | None]] = {}
        for r in resp.results:
            _check(r.error_code, r.error_message)
            out[(int(r.resource_type), r.resource_name)] = {c.name: c.value for c in r.configs}
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
