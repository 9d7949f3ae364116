"""Startup of a node on the KRaft quorum: controller, broker, or both; the one startup path, the
embedded default's single-voter quorum included.

A controller runs the raft client as a voter (or as an observer until it is added to a dynamic
voter set), the QuorumController on top of it and the controller listener. A broker runs the
raft client as an observer feeding its MetadataLoader, talks to the active controller through
RemoteController, and opens its client listeners only once it has caught up with the metadata
log, installed its publishers and been unfenced by the controller (seed 000's catch-up gate).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kopfka.config.server_config import KafkaConfig, parse_listeners
from kopfka.controller.quorum_controller import QuorumController
from kopfka.log import meta_properties
from kopfka.log.log_manager import LogManager
from kopfka.metadata import bootstrap
from kopfka.metadata import records as mr
from kopfka.metadata.features import cordoned_log_dirs_supported
from kopfka.metadata.image import METADATA_VERSION
from kopfka.metadata.loader import MetadataLoader
from kopfka.metrics.broker_metrics import BrokerMetrics
from kopfka.raft.kafka_raft import KafkaRaftClient
from kopfka.raft.metadata_log import check_metadata_files, metadata_log_dir
from kopfka.raft.snapshot_generator import SnapshotGenerator
from kopfka.server.assignments_manager import AssignmentsManager
from kopfka.server.broker_lifecycle import BrokerLifecycleManager, RegistrationError
from kopfka.server.broker_services import BrokerServices, make_config_for
from kopfka.server.controller_server import ControllerNetworkServer, ControllerServices
from kopfka.server.fetch_session import FetchSessionCache
from kopfka.server.network import KafkaNetworkServer
from kopfka.server.node_to_controller import RemoteController
from kopfka.server.producer_id_manager import ProducerIdManager
from kopfka.server.replica_manager import ReplicaManager

if TYPE_CHECKING:
    from kopfka.server.kafka_server import KafkaServer

log = logging.getLogger(__name__)


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    return host.strip("[]"), int(port)


def controller_endpoint(cfg: KafkaConfig) -> tuple[str, int] | None:
    """Where other nodes reach this controller: its advertised CONTROLLER listener."""
    names = cfg.controller_listener_names
    adv = {lst.name: lst for lst in parse_listeners("advertised.listeners", cfg["advertised.listeners"])}
    for lst in cfg.listeners:
        if lst.name in names:
            a = adv.get(lst.name, lst)
            return (a.host or lst.host or socket.getfqdn(), a.port or lst.port)
    return None


def _cordoned_report(log_manager: LogManager, loader: MetadataLoader) -> tuple[str, ...] | None:
    """The cordoned dir ids a heartbeat reports (KIP-1066): once the metadata version supports
    them always (an empty set uncordons), before that only if a dir was ever cordoned."""
    if log_manager.cordoning_used or cordoned_log_dirs_supported(loader.image.features):
        return log_manager.cordoned_directory_ids()
    return None


def _online_dir_ids(log_manager: LogManager, log_dirs: list[Path], node_id: int) -> tuple[str, ...]:
    """Directory ids the broker registers with: its online log dirs (KIP-858), in config order."""
    ids = tuple(i for i in log_manager.directory_ids.values() if i)
    return ids or tuple(m.directory_id for m in meta_properties.verify(log_dirs, node_id).values())


def _metadata_segment_bytes(cfg: KafkaConfig) -> int:
    """metadata.log.segment.bytes, or the undocumented `internal.metadata.log.segment.bytes`
    (tests only: small segments without the 8 MiB floor, so snapshot-driven truncation shows)."""
    internal = cfg.originals.get("internal.metadata.log.segment.bytes")
    return int(internal) if internal else int(cfg["metadata.log.segment.bytes"])


@dataclass
class KRaftNode:
    """The KRaft side of one node: raft client, metadata loader, snapshot generator and, by role,
    the controller with its listener or the channel to the active controller."""

    raft: KafkaRaftClient
    loader: MetadataLoader
    controller: QuorumController | None = None
    controller_server: ControllerNetworkServer | None = None
    remote: RemoteController | None = None
    snapshotter: SnapshotGenerator | None = None
    extra: list[Any] = field(default_factory=list)

    def controller_ready(self) -> bool:
        """A controller-only node is ready once it is a voter that knows the leader and the log."""
        r = self.raft
        return (
            r.is_voter and r.leader_id >= 0 and r.high_watermark > 0 and METADATA_VERSION in self.loader.image.features
        )

    async def close(self) -> None:
        for part in self.extra:
            closer = getattr(part, "close", None)
            if closer is not None:
                await closer()
        if self.remote is not None:
            await self.remote.close()
        if self.controller is not None:
            await self.controller.close()
        if self.controller_server is not None:
            await self.controller_server.close()
        await self.raft.close()


async def start_kraft_node(server: KafkaServer, cluster_id: str) -> None:
    from kopfka.server.kafka_server import StartupError

    cfg = server.config
    node_id = server.node_id
    meta = meta_properties.read(cfg.metadata_log_dir)
    assert meta is not None  # _check_formatted ran
    boot = bootstrap.read_bootstrap(cfg.metadata_log_dir) or bootstrap.bootstrap_records()
    check_metadata_files(metadata_log_dir(cfg.metadata_log_dir))  # unreadable records: one clear line
    if cfg.is_broker:  # before the raft client touches the metadata log
        server.initialize_dynamic_config()
    boot_voters: tuple[tuple[int, str, str, int], ...] = ()
    for rec in boot:
        if isinstance(rec, mr.VotersRecord):
            boot_voters = rec.voters
    static = {int(v.split("@")[0]): _hostport(v.split("@")[1]) for v in cfg["controller.quorum.voters"]}
    if static and boot_voters:
        raise StartupError(
            "the metadata dir was formatted with --standalone/--initial-controllers (a dynamic "
            "quorum) but controller.quorum.voters is set: use controller.quorum.bootstrap.servers"
        )
    local_ep = controller_endpoint(cfg) if cfg.is_controller else None
    raft = KafkaRaftClient(
        node_id=node_id,
        cluster_id=cluster_id,
        metadata_dir=cfg.metadata_log_dir,
        directory_id=meta.directory_id,
        static_voters=static or None,
        bootstrap_servers=[_hostport(b) for b in cfg["controller.quorum.bootstrap.servers"]],
        bootstrap_voters=boot_voters if cfg.is_controller else (),
        local_endpoint=local_ep,
        election_timeout_ms=int(cfg["controller.quorum.election.timeout.ms"]),
        fetch_timeout_ms=int(cfg["controller.quorum.fetch.timeout.ms"]),
        request_timeout_ms=int(cfg["controller.quorum.request.timeout.ms"]),
        election_backoff_max_ms=int(cfg["controller.quorum.election.backoff.max.ms"]),
        retry_backoff_ms=int(cfg["controller.quorum.retry.backoff.ms"]),
        segment_bytes=_metadata_segment_bytes(cfg),
        retention_bytes=int(cfg["metadata.max.retention.bytes"]),
        retention_ms=int(cfg["metadata.max.retention.ms"]),
        isolation_file=Path(cfg.originals["internal.raft.isolation.file"])
        if cfg.originals.get("internal.raft.isolation.file")
        else None,
        auto_join=cfg.is_controller
        and not static
        and str(cfg.originals.get("controller.quorum.auto.join.enable", "true")).lower() == "true",
        security=server.controller_security,
    )
    if static and cfg.is_controller and node_id not in static:
        raise StartupError(f"node.id {node_id} is a controller but is not in controller.quorum.voters")
    loader = MetadataLoader("broker" if cfg.is_broker else "controller")
    raft.register(loader)
    raft.record_features = lambda: loader.image.features or None  # the record versions to write
    node = KRaftNode(raft, loader)
    server.kraft = node
    server.loader = loader
    node.snapshotter = SnapshotGenerator(
        raft,
        max_bytes=int(cfg["metadata.log.max.record.bytes.between.snapshots"]),
        max_interval_ms=int(cfg["metadata.log.max.snapshot.interval.ms"]),
    )
    raft.register(node.snapshotter)
    if cfg.is_controller:
        node.controller = QuorumController(raft, node_id=node_id, cluster_id=cluster_id, static_config=cfg.values)
        node.controller.bootstrap_records = boot
        controller = node.controller
        authorizer = server.bind_security(lambda: controller.image, cfg.controller_listener_names)
        node.controller_server = ControllerNetworkServer(
            ControllerServices(node_id, cluster_id, raft, node.controller, authorizer=authorizer),
            int(cfg["socket.request.max.bytes"]),
            server.listener_security,
        )
        for lst in cfg.listeners:
            if lst.name in cfg.controller_listener_names:
                try:
                    await node.controller_server.start_listener(lst.name, lst.host, lst.port)
                except OSError as exc:
                    raise StartupError(
                        f"cannot bind the controller listener {lst.name} on {lst.host}:{lst.port}: {exc}"
                    ) from exc
    raft.start()
    if not cfg.is_broker:
        log.info("[KafkaServer id=%d] controller started (cluster id %s)", node_id, cluster_id)
        return
    await _start_broker(server, node, cluster_id)


async def _wait(cond: Any, what: str, timeout: float, node: KRaftNode) -> None:
    from kopfka.server.kafka_server import StartupError

    deadline = time.monotonic() + timeout
    while not cond():
        if node.raft.fatal_error:
            raise StartupError(node.raft.fatal_error)
        if time.monotonic() > deadline:
            raise StartupError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.005)


async def _start_broker(server: KafkaServer, node: KRaftNode, cluster_id: str) -> None:
    from kopfka.server.kafka_server import StartupError

    cfg = server.config
    node_id = server.node_id
    loader, raft = node.loader, node.raft
    server.scheduler.bind(asyncio.get_running_loop())
    server.log_manager = LogManager(
        cfg.log_dirs, make_config_for(cfg, loader), scheduler=server.scheduler, server_config=cfg.values
    )
    server.log_manager.lock_dirs()
    BrokerMetrics.shared().bind_log_manager(server.log_manager)  # recovery progress on /metrics
    await asyncio.to_thread(server.log_manager.load_logs)
    reg_timeout = int(cfg["initial.broker.registration.timeout.ms"]) / 1000
    node.remote = RemoteController(
        raft,
        node_id=node_id,
        cluster_id=cluster_id,
        image=lambda: loader.image,
        timeout_s=max(5.0, int(cfg["request.timeout.ms"]) / 1000),
        security=server.controller_security,
    )
    remote = node.remote
    server.replica_manager = ReplicaManager(node_id, server.log_manager)
    services = BrokerServices(
        config=cfg,
        node_id=node_id,
        cluster_id=cluster_id,
        metadata=loader,
        controller=remote,
        replica_manager=server.replica_manager,
        log_manager=server.log_manager,
        fetch_sessions=FetchSessionCache(int(cfg["max.incremental.fetch.session.cache.slots"])),
        producer_ids=ProducerIdManager(
            lambda: remote.allocate_producer_ids(node_id, server.lifecycle.broker_epoch if server.lifecycle else -1)
        ),
        local_controller=node.controller,
    )
    from kopfka.quota.install import install as install_quotas

    install_quotas(services, loader)  # quotas, broker metrics, client telemetry
    services.authorizer = server.bind_security(lambda: loader.image, [lst.name for lst in cfg.broker_listeners])
    log_manager = server.log_manager
    server.lifecycle = BrokerLifecycleManager(
        node_id,
        cluster_id,
        remote,
        endpoints=server.endpoints(),
        rack=cfg["broker.rack"],
        log_dirs=_online_dir_ids(server.log_manager, cfg.log_dirs, node_id),
        metadata_offset=lambda: loader.last_applied_offset,
        heartbeat_interval_ms=int(cfg["broker.heartbeat.interval.ms"]),
        registration_timeout_ms=int(cfg["initial.broker.registration.timeout.ms"]),
        ready_to_unfence=False,
        cordoned_log_dirs=lambda: _cordoned_report(log_manager, loader),
        offline_dir_timeout_ms=int(cfg.originals.get("log.dir.failure.timeout.ms", 30000)),
        on_offline_dir_timeout=server.log_manager.halt,
        previous_broker_epoch=server.log_manager.previous_broker_epoch,
    )
    services.lifecycle = server.lifecycle
    lifecycle = server.lifecycle
    server.log_manager.dir_failure_listeners.append(
        lambda _d, dir_id: lifecycle.propagate_directory_failure(dir_id) if dir_id else None
    )
    server.log_manager.broker_epoch = -1
    # STARTING: register with the active controller (bounded by initial.broker.registration.timeout.ms)
    registering = asyncio.create_task(server.lifecycle.start())
    while not registering.done():
        if raft.fatal_error:
            registering.cancel()
            raise StartupError(raft.fatal_error)
        await asyncio.wait({registering}, timeout=0.02)  # back at once when registered
    try:
        registering.result()
    except RegistrationError as exc:
        raise StartupError(str(exc)) from exc
    # catch-up gate: replay the metadata log up to the high watermark before publishing
    await _wait(
        lambda: (
            raft.leader_id >= 0
            and raft.high_watermark > 0
            and loader.last_applied_offset >= raft.high_watermark - 1
            and METADATA_VERSION in loader.image.features
        ),
        "the metadata log to catch up",
        reg_timeout,
        node,
    )
    log.info("[KafkaServer id=%d] caught up with the metadata log at offset %d", node_id, loader.last_applied_offset)
    server._install_publishers(loader, services)
    # background log tasks (retention, checkpoints, cleaner, dir-failure handler) once the image
    # with every topic's config is published, as Kafka's first broker metadata publish does
    server.log_manager.startup()
    assignments = AssignmentsManager(
        node_id,
        server.log_manager,
        remote,
        broker_epoch=lambda: lifecycle.broker_epoch,
        image=lambda: loader.image,
    )
    loader.install_publishers([assignments])
    assignments.start()
    node.extra.append(assignments)
    server.lifecycle.set_ready_to_unfence()
    await server.lifecycle.wait_unfenced()
    server.log_manager.broker_epoch = server.lifecycle.broker_epoch
    server.network = KafkaNetworkServer(services, int(cfg["socket.request.max.bytes"]), server.listener_security)
    for lst in cfg.broker_listeners:
        await server.network.start_listener(lst.name, lst.host, lst.port)
    log.info("[KafkaServer id=%d] started (cluster id %s)", node_id, cluster_id)


__all__ = ["KRaftNode", "start_kraft_node"]
