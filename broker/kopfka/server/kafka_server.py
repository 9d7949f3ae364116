"""KafkaServer: start and stop one node (broker, controller or both) on the shared machinery.

Every node runs the same KRaft code (kopfka.server.kraft_node): the embedded default is a combined
node whose quorum has one voter, itself, with the same raft client, snapshots, metadata-log
retention, broker lifecycle, dir-failure reporting and AssignmentsManager as a cluster's nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import signal
from collections.abc import Callable, Iterable
from typing import Any

from kopfka import dataclass_cache
from kopfka.config.definitions import ConfigError
from kopfka.config.server_config import KafkaConfig
from kopfka.log import meta_properties
from kopfka.log.log_manager import LogManager
from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataImage
from kopfka.metadata.loader import InitialMetadataLoadError, MetadataLoader
from kopfka.security import scram
from kopfka.security.acls import EMPTY_ACLS
from kopfka.security.authorizer import StandardAuthorizer
from kopfka.security.client import ClientSecurity
from kopfka.security.listeners import ListenerSecurity, listener_protocol, listener_security
from kopfka.server.broker_lifecycle import BrokerLifecycleManager, BrokerState
from kopfka.server.broker_services import BrokerServices
from kopfka.server.coordinator_slots import CoordinatorSlot
from kopfka.server.dynamic_config import DynamicBrokerConfig, broker_reconfigurables, read_local_dynamic_configs
from kopfka.server.health import HealthServer
from kopfka.server.heap import STARTUP_FREEZE_DELAY_S, freeze_startup_heap
from kopfka.server.network import KafkaNetworkServer
from kopfka.server.replica_manager import ReplicaManager
from kopfka.server.replication_trace import TRACE
from kopfka.server.scheduler import KafkaScheduler
from kopfka.timeouts import wait_quietly

log = logging.getLogger(__name__)


class StartupError(Exception):
    """A problem that stops the node from starting; the message names the fix."""


class KafkaServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self._stopped = asyncio.Event()
        self.lifecycle: BrokerLifecycleManager | None = None
        self.network: KafkaNetworkServer | None = None
        self.health: HealthServer | None = None
        self.kraft: Any = None  # the KRaftNode parts: raft client, controller, broker channel
        self.loader: MetadataLoader | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.services: BrokerServices | None = None  # once the publishers are installed
        self.scheduler = KafkaScheduler(int(config["background.threads"]))
        # the broker's current config: server.properties overlaid by the dynamic broker configs
        self.dynamic_config = DynamicBrokerConfig(config)
        self.listener_security: dict[str, ListenerSecurity] = {}
        self.inter_broker_security: ClientSecurity | None = None
        self.controller_security: ClientSecurity | None = None

    @property
    def state(self) -> str:
        if self.lifecycle is None and self.kraft is not None:
            return BrokerState.RUNNING.name if self.kraft.controller_ready() else BrokerState.STARTING.name
        return self.lifecycle.state.name if self.lifecycle else BrokerState.NOT_RUNNING.name

    def _check_formatted(self) -> str:
        dirs = list(dict.fromkeys([*self.config.log_dirs, self.config.metadata_log_dir]))
        try:
            metas = meta_properties.verify(dirs, self.node_id)
        except meta_properties.MetaPropertiesError as exc:
            raise StartupError(str(exc)) from exc
        return next(iter(metas.values())).cluster_id

    def _load_security(self) -> None:
        """Every listener's TLS/SASL settings, the client side of the broker's own connections
        and the authorizer, resolved before anything starts: a bad key stops the node with its name."""
        cfg = self.config
        try:
            self.listener_security = {lst.name: listener_security(cfg, lst.name) for lst in cfg.listeners}
            if cfg.is_broker:
                self.inter_broker_security = ClientSecurity.inter_broker(cfg)
            self.controller_security = ClientSecurity.controller(cfg)
            StandardAuthorizer.from_config(cfg.values, lambda: EMPTY_ACLS)  # checks authorizer.class.name, super.users
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc

    def bind_security(self, image: Callable[[], MetadataImage], listeners: Iterable[str]) -> StandardAuthorizer | None:
        """Point the given listeners' SCRAM lookups at a metadata image and make the authorizer over it."""
        for name in listeners:
            self.listener_security[name].scram_lookup = lambda user, mech: image().scram.get(
                (user, scram.MECHANISMS[mech][0])
            )
        return StandardAuthorizer.from_config(self.config.values, lambda: image().acls)

    def endpoints(self) -> tuple[mr.Endpoint, ...]:
        """The advertised broker endpoints, each with its listener's security protocol."""
        cfg = self.config
        return tuple(
            mr.Endpoint(lst.name, lst.host, lst.port, listener_protocol(cfg, lst.name))
            for lst in cfg.advertised_listeners
        )

    async def start(self) -> None:
        cfg = self.config
        self._load_security()  # config mistakes first: they name the key to fix
        cluster_id = self._check_formatted()
        if str(cfg.originals.get("internal.replication.trace.enable", "")).lower() == "true":
            TRACE.enable(self.node_id)  # benchmark-only stage stamps (benchmarks/replication.py)
        http = cfg["kopfka.http.listener"]
        if http:
            host, _, port = http.rpartition(":")
            self.health = HealthServer(lambda: self.state, self._ready)
            await self.health.start(host or "0.0.0.0", int(port))
        try:
            from kopfka.server.kraft_node import start_kraft_node

            await start_kraft_node(self, cluster_id)
        except InitialMetadataLoadError as exc:  # fatal, as Kafka's initial broker metadata load fault
            raise StartupError(f"initial broker metadata loading failed: {exc}") from exc

    def _ready(self) -> bool:
        if self.lifecycle is None and self.kraft is not None:
            return self.kraft.controller_ready()
        return self.state == BrokerState.RUNNING.name

    def initialize_dynamic_config(self) -> None:
        """Start with the dynamic broker configs of the local metadata log, so the logs are loaded
        (and recovered: num.recovery.threads.per.data.dir) with the values last set."""
        self.dynamic_config.initialize(*read_local_dynamic_configs(self.config.metadata_log_dir, self.node_id))

    def _install_publishers(self, loader: MetadataLoader, services: BrokerServices) -> None:
        """The broker's metadata publishers, in order, installed once the loader holds the
        caught-up image."""
        assert self.replica_manager is not None and self.log_manager is not None
        self.loader = loader
        self.services = services
        # logs the image says this broker must not serve (deleted topics, moved replicas) become strays
        self.log_manager.rename_stray_logs(loader.image, self.node_id)
        self.replica_manager.start_replication(
            self.config,
            services.controller,
            lambda: services.lifecycle.broker_epoch if services.lifecycle else -1,
            self.inter_broker_security,
        )
        # dynamic broker configs first: the other publishers see the current config
        services.dynamic_config = self.dynamic_config
        self.dynamic_config.add(*broker_reconfigurables(self, services))
        loader.install_publishers([self.dynamic_config, self.replica_manager])
        if services.lifecycle is not None:  # reports its offset at once when a peer shuts down
            loader.install_publishers([services.lifecycle])
        from kopfka.server.inter_broker import InterBrokerClient
        from kopfka.server.txn_verification import TransactionVerifier

        services.inter_broker = InterBrokerClient(services, self.inter_broker_security)
        services.txn_verifier = TransactionVerifier(services)
        # the coordinators, each built on first need, in Kafka's order (after the replicas)
        slots: list[CoordinatorSlot] = [
            CoordinatorSlot("group_coordinator", lambda: _group_coordinator(services), loader, "__consumer_offsets"),
            CoordinatorSlot("txn_coordinator", lambda: _txn_coordinator(services), loader, "__transaction_state"),
            CoordinatorSlot("share_coordinator", lambda: _share_coordinator(services), loader, "__share_group_state"),
            CoordinatorSlot("share_partitions", lambda: _share_partitions(services), loader),
            CoordinatorSlot("share_persister", lambda: _share_persister(services), None),
        ]
        services.slots.update((s.name, s) for s in slots)
        loader.install_publishers([*slots[:4]])

    async def shutdown(self) -> None:
        log.info("[KafkaServer id=%d] shutting down", self.node_id)
        if self.lifecycle is not None:
            await self.lifecycle.controlled_shutdown()
        if self.network is not None:
            await self.network.close()
        if self.lifecycle is not None:
            await self.lifecycle.close()
        services = self.services
        if services is not None:
            for name in ("group_coordinator", "share_partitions", "share_coordinator", "txn_coordinator"):
                built = services.built(name)
                if built is not None:
                    built.shutdown()
            if services.inter_broker is not None:
                await services.inter_broker.close()
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        await self.scheduler.shutdown()
        if self.log_manager is not None:
            await asyncio.to_thread(self.log_manager.shutdown)
        if self.kraft is not None:
            await self.kraft.close()
        if self.health is not None:
            await self.health.stop()
        if self.lifecycle is not None:
            self.lifecycle.set_state(BrokerState.NOT_RUNNING)
        log.info("[KafkaServer id=%d] shut down completed", self.node_id)

    async def run_until_signalled(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopped.set)
        try:
            starting = asyncio.create_task(self.start(), name="kafka-server-start")
            stopping = asyncio.create_task(self._stopped.wait())
            await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if starting.done():
                stopping.cancel()
                starting.result()  # StartupError propagates to `kopfka serve` (exit 1)
                # full collections no longer walk the startup heap; the one collection before the
                # freeze (~40 ms over it) comes a moment after the start, not before the first
                # requests the new listeners receive
                if not await wait_quietly(self._stopped.wait(), STARTUP_FREEZE_DELAY_S):
                    frozen = freeze_startup_heap()
                    log.info(
                        "[KafkaServer id=%d] %d startup objects frozen out of garbage collection", self.node_id, frozen
                    )
                    cached = dataclass_cache.stats()
                    if cached is not None:
                        log.info(
                            "[KafkaServer id=%d] %d dataclass methods compiled at start, %d from the cache",
                            self.node_id,
                            *cached,
                        )
                    dataclass_cache.save()  # what this start compiled, for the next one (if allowed)
                await self._stopped.wait()
            else:
                log.info("[KafkaServer id=%d] signalled while starting up", self.node_id)
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
        finally:
            await self.shutdown()
            await self._stop_leftover_tasks()

    async def _stop_leftover_tasks(self, timeout_s: float = 10.0) -> None:
        """Cancel whatever still runs once shutdown is complete and wait for it, bounded.

        asyncio.run would cancel these too, but wait for them without limit: a task that survives
        cancellation would keep the process alive after SIGTERM. The state on disk is final by
        now, so such a task is logged with its stack, as the bug it is, and the process exits."""
        rest = asyncio.all_tasks() - {asyncio.current_task()}
        for t in rest:
            t.cancel()
        if not rest:
            return
        _, stuck = await asyncio.wait(rest, timeout=timeout_s)
        if not stuck:
            return
        for t in stuck:
            buf = io.StringIO()
            t.print_stack(file=buf)
            log.error(
                "[KafkaServer id=%d] task %s did not stop when cancelled:\n%s",
                self.node_id,
                t.get_name(),
                buf.getvalue(),
            )
        logging.shutdown()
        os._exit(0)


def _group_coordinator(services: BrokerServices) -> Any:
    from kopfka.coordinator.group.coordinator import GroupCoordinator  # consumer groups + offsets

    return GroupCoordinator(services)


def _txn_coordinator(services: BrokerServices) -> Any:
    from kopfka.coordinator.transaction.coordinator import TransactionCoordinator

    return TransactionCoordinator(services)


def _share_coordinator(services: BrokerServices) -> Any:
    from kopfka.coordinator.share.coordinator import ShareCoordinator  # share-partition state (KIP-932)

    return ShareCoordinator(services)


def _share_partitions(services: BrokerServices) -> Any:
    from kopfka.server.share.manager import SharePartitionManager  # share-partition leaders

    return SharePartitionManager(services)


def _share_persister(services: BrokerServices) -> Any:
    from kopfka.server.share.persister import ShareStatePersister

    return ShareStatePersister(services)
