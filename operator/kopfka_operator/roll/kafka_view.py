"""What the roller reads from (and the few things it asks of) a running cluster, over the Kafka
protocol with the project's own admin client (kopfka.client.admin: asyncio, kio-typed, already
covers every call needed; no second Kafka client in the operator image).

`KafkaView` is the seam: the roller only talks to it, so tests can hand the roller a scripted
view, and the real one connects to the cluster's bootstrap Service.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Protocol

from kopfka.client.admin import Admin, TopicInfo
from kopfka.protocol.errors import ErrorCode
from kopfka.security.client import ClientSecurity

from .gates import ClusterSnapshot, PartitionState, QuorumSnapshot, ReplicaProgress

TOPIC, BROKER = 2, 4  # DescribeConfigs / IncrementalAlterConfigs resource types
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
CORDONED_LOG_DIRS = "cordoned.log.dirs"


class KafkaView(Protocol):
    async def quorum(self) -> QuorumSnapshot: ...
    async def cluster(self) -> ClusterSnapshot: ...
    async def elect_preferred(self, partitions: dict[str, list[int]]) -> dict[tuple[str, int], str]: ...
    async def alter_cluster_config(self, set_: dict[str, str], delete: list[str]) -> None: ...
    async def features(self) -> tuple[dict[str, tuple[int, int]], dict[str, int]]: ...
    async def update_feature(self, name: str, level: int) -> None: ...
    async def leadership(self, avoid: int) -> tuple[frozenset[int], dict[int, int]]: ...


def _uuid_text(value: object) -> str:
    if value is None:
        return ""
    import kopfka.uuids as uuids

    try:
        return uuids.to_str(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, AttributeError):
        return str(value)


class AdminKafkaView:
    """A KafkaView over one admin connection per call (the bootstrap Service picks a live
    broker each time: the one asked last may be the one being restarted)."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.security = security  # the operator's credentials for a secured cluster
        self._brokers: dict[int, str] = {}  # node id -> host:port, from the last Metadata

    @contextlib.asynccontextmanager
    async def _admin(self, avoid: int | None = None) -> AsyncIterator[Admin]:
        """A connection through the bootstrap servers, or (avoid=node) to a broker other than
        that node: a broker that is shutting down answers with what it knows, late."""
        last: Exception | None = None
        servers = self.bootstrap.split(",")
        if avoid is not None:
            servers = [addr for node, addr in sorted(self._brokers.items()) if node != avoid] or servers
        for server in servers:
            try:
                admin = await Admin.connect(server, self.security)
            except (OSError, TimeoutError) as exc:
                last = exc
                continue
            try:
                yield admin
            finally:
                await admin.close()
            return
        raise ConnectionError(f"no broker reachable at {self.bootstrap}: {last}")

    async def quorum(self) -> QuorumSnapshot:
        async with self._admin() as admin:
            p = await admin.describe_quorum()

        def progress(r: object) -> ReplicaProgress:
            return ReplicaProgress(
                int(r.replica_id),  # type: ignore[attr-defined]
                int(r.log_end_offset),  # type: ignore[attr-defined]
                int(r.last_fetch_timestamp),  # type: ignore[attr-defined]
                _uuid_text(getattr(r, "replica_directory_id", None)),
            )

        return QuorumSnapshot(
            int(p.leader_id),
            int(p.leader_epoch),
            int(p.high_watermark),
            tuple(progress(v) for v in p.current_voters),
            int(time.time() * 1000),
            tuple(progress(o) for o in p.observers),
        )

    async def cluster(self) -> ClusterSnapshot:
        async with self._admin() as admin:
            brokers, topics, _ = await admin.metadata(None)
            self._brokers = {n: f"{host}:{port}" for n, (host, port, _rack) in brokers.items()}
            defaults = await admin.describe_configs_many([(BROKER, "")], ["min.insync.replicas"])
            names = [t.name for t in topics]
            configs = await admin.describe_configs_many([(TOPIC, n) for n in names], ["min.insync.replicas"])
        default_min = int(defaults.get((BROKER, ""), {}).get("min.insync.replicas") or 1)
        parts = []
        for t in topics:
            raw = configs.get((TOPIC, t.name), {}).get("min.insync.replicas")
            min_isr = int(raw) if raw else default_min
            for p in t.partitions:
                parts.append(PartitionState(t.name, p.partition, p.leader, tuple(p.replicas), tuple(p.isr), min_isr))
        return ClusterSnapshot(tuple(parts), frozenset(brokers))

    async def metadata(self) -> tuple[dict[int, tuple[str, int, str | None]], list[TopicInfo]]:
        """Every topic's Metadata and the live brokers' addresses (node -> host, port, rack)."""
        async with self._admin() as admin:
            brokers, topics, _ = await admin.metadata(None)
        return brokers, topics

    async def leadership(self, avoid: int) -> tuple[frozenset[int], dict[int, int]]:
        """Live brokers and how many partitions each leads, asked of a broker other than `avoid`
        (Metadata only: cheap enough to poll while a broker stops)."""
        async with self._admin(avoid) as admin:
            brokers, topics, _ = await admin.metadata(None)
        led: dict[int, int] = {}
        for t in topics:
            for p in t.partitions:
                led[p.leader] = led.get(p.leader, 0) + 1
        return frozenset(brokers), led

    async def elect_preferred(self, partitions: dict[str, list[int]]) -> dict[tuple[str, int], str]:
        async with self._admin() as admin:
            result = await admin.elect_leaders(partitions, election_type=0)
        return {tp: code.name for tp, code in result.items() if code != ErrorCode.none}

    async def alter_cluster_config(self, set_: dict[str, str], delete: list[str]) -> None:
        """The cluster-wide dynamic broker config (the BROKER resource with an empty name)."""
        ops: list[tuple[str, int, str | None]] = [(k, SET, v) for k, v in sorted(set_.items())]
        ops += [(k, DELETE, None) for k in sorted(delete)]
        if not ops:
            return
        async with self._admin() as admin:
            await admin.incremental_alter_configs(BROKER, "", ops)

    async def features(self) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
        async with self._admin() as admin:
            return await admin.features()

    async def update_feature(self, name: str, level: int) -> None:
        async with self._admin() as admin:
            await admin.update_feature(name, level)

    async def remove_voter(self, node_id: int, directory_id: str) -> None:
        import kopfka.uuids as uuids

        async with self._admin() as admin:
            _, _, cluster_id = await admin.metadata([])
            await admin.remove_raft_voter(cluster_id, node_id, uuids.from_str(directory_id))

    async def set_cordoned_dirs(self, node_id: int, dirs: list[str]) -> bool:
        """cordoned.log.dirs of one broker (KIP-1066, its own BROKER resource, sent to it): the
        controller places no new replica in these dirs (`*`: any of its dirs); empty: uncordon.
        False when the finalized metadata.version predates cordoning (4.3-IV0): nothing is set."""
        from kopfka.metadata.features import cordoned_log_dirs_supported

        op: tuple[str, int, str | None] = (
            (CORDONED_LOG_DIRS, SET, ",".join(dirs)) if dirs else (CORDONED_LOG_DIRS, DELETE, None)
        )
        async with self._admin() as admin:
            _, finalized = await admin.features()
            if not cordoned_log_dirs_supported(finalized):
                return False
            await admin.incremental_alter_configs(BROKER, str(node_id), [op])
        return True

    async def unregister_broker(self, node_id: int) -> None:
        """Already unregistered (BROKER_ID_NOT_REGISTERED) counts as done."""
        from kopfka.client.admin import AdminError

        async with self._admin() as admin:
            try:
                await admin.unregister_broker(node_id)
            except AdminError as exc:
                if exc.code != ErrorCode.broker_id_not_registered:
                    raise
