"""The broker's current config and who applies a dynamic change (Kafka's DynamicBrokerConfig
and DynamicConfigPublisher).

`DynamicBrokerConfig` is a metadata publisher, installed before the others: when the cluster
default (BROKER "") or this broker's own dynamic config changes, it computes the new effective
values (server.properties overlaid by both levels, see kopfka.config.dynamic_broker_config),
checks them with every component whose keys changed, updates `KafkaConfig.values` in place (so
every reader of the broker's config sees the current value, as Kafka's currentConfig) and asks
those components to reconfigure. A change a component refuses is logged and not applied, as
Kafka does. The same validation answers IncrementalAlterConfigs/AlterConfigs on the broker
before the change is forwarded to the controller (Kafka's ConfigAdminManager.preprocess).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopfka.config import dynamic_broker_config as dyn
from kopfka.config.dynamic_broker_config import (
    DynamicConfigError,
    InvalidConfigValue,
    effective_values,
    validate_keys,
)
from kopfka.config.server_config import KafkaConfig
from kopfka.metadata.image import BROKER_RESOURCE, MetadataDelta, MetadataImage
from kopfka.protocol.errors import KafkaError
from kopfka.quota.connection_quotas import UNLIMITED, parse_overrides

log = logging.getLogger(__name__)

Values = Mapping[str, Any]


@dataclass
class Reconfigurable:
    """A component's share of the dynamic config (Kafka's BrokerReconfigurable): its keys, a
    check of the new values against the current ones (the problem, or None) and the change."""

    name: str
    configs: frozenset[str]
    reconfigure: Callable[[Values, Values], Any]
    validate: Callable[[Values, Values], str | None] = lambda current, new: None
    error: type[DynamicConfigError] = DynamicConfigError  # InvalidConfigValue: INVALID_CONFIG


class DynamicBrokerConfig:
    name = "DynamicConfigPublisher"

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.static_values = dict(config.values)
        self.default_props: dict[str, str] = {}
        self.broker_props: dict[str, str] = {}
        self.reconfigurables: list[Reconfigurable] = []
        self.pending: list[asyncio.Task[Any]] = []  # asynchronous reconfigurations (the cleaner restart)

    @property
    def values(self) -> dict[str, Any]:
        return self.config.values

    def add(self, *reconfigurables: Reconfigurable) -> None:
        self.reconfigurables.extend(reconfigurables)

    # --- startup -------------------------------------------------------------------------
    def initialize(self, default_props: Mapping[str, str], broker_props: Mapping[str, str]) -> None:
        """The dynamic configs found in the local metadata before anything started (Kafka's
        readDynamicBrokerConfigsFromSnapshot): the values the logs are loaded and recovered with."""
        self.default_props, self.broker_props = dict(default_props), dict(broker_props)
        self.config.values.update(effective_values(self.static_values, default_props, broker_props))

    # --- validation (the broker side of Incremental/AlterConfigs) --------------------------
    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Raise DynamicConfigError if `props`, as the whole new dynamic config of the cluster
        default (per_broker False) or of this broker, cannot be applied."""
        validate_keys(props, per_broker)
        new = effective_values(
            self.static_values,
            self.default_props if per_broker else props,
            props if per_broker else self.broker_props,
        )
        self._check(self.values, new)

    def _changed(self, old: Values, new: Values) -> set[str]:
        return {k for k in set(old) | set(new) if old.get(k) != new.get(k)}

    def _check(self, old: Values, new: Values) -> list[Reconfigurable]:
        changed = self._changed(old, new)
        todo = [r for r in self.reconfigurables if r.configs & changed]
        for r in todo:
            problem = r.validate(old, new)
            if problem:
                raise r.error(problem)
        return todo

    # --- publisher -----------------------------------------------------------------------
    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        ours = {(BROKER_RESOURCE, ""), (BROKER_RESOURCE, str(self.node_id))}
        if not (ours & delta.changed_configs) and not delta.finished_snapshot:
            return
        self.update(
            image.configs.get((BROKER_RESOURCE, ""), {}), image.configs.get((BROKER_RESOURCE, str(self.node_id)), {})
        )

    def update(self, default_props: Mapping[str, str], broker_props: Mapping[str, str]) -> None:
        new = effective_values(self.static_values, default_props, broker_props)
        old = dict(self.values)
        try:
            todo = self._check(old, new)
        except DynamicConfigError as exc:
            log.error(
                "Failed to update broker configuration with configs %s (broker %s): %s",
                dict(default_props),
                dict(broker_props),
                exc,
            )
            return
        self.default_props, self.broker_props = dict(default_props), dict(broker_props)
        changed = self._changed(old, new)
        if not changed:
            return
        for key in changed:
            self.values[key] = new[key]
        log.info("Updated dynamic broker configuration: %s", {k: new[k] for k in sorted(changed)})
        for r in todo:
            try:
                result = r.reconfigure(old, new)
            except Exception:
                log.exception("Reconfiguring %s failed", r.name)
                continue
            if isinstance(result, asyncio.Task):
                self.pending.append(result)
                result.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        if task in self.pending:
            self.pending.remove(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("Reconfiguration task %s failed", task.get_name(), exc_info=task.exception())

    async def settled(self) -> None:
        """Wait for the asynchronous reconfigurations started so far (tests, shutdown)."""
        while self.pending:
            await asyncio.gather(*list(self.pending), return_exceptions=True)


# --- what each component takes (Kafka's BrokerReconfigurables) -------------------------------


def thread_count_problem(key: str, old: int, new: int) -> str | None:
    """Kafka's DynamicThreadPool check: at least 1, at most double, at least half."""
    if new == old:
        return None
    msg = f"Dynamic thread count update validation failed for {key}={new}"
    if new <= 0:
        return f"{msg}, value should be at least 1"
    if new < old // 2:
        return f"{msg}, value should be at least half the current value {old}"
    if new > old * 2:
        return f"{msg}, value should not be greater than double the current value {old}"
    return None


def _thread_counts(keys: frozenset[str]) -> Callable[[Values, Values], str | None]:
    def check(old: Values, new: Values) -> str | None:
        for key in sorted(keys):
            problem = thread_count_problem(key, int(old[key]), int(new[key]))
            if problem:
                return problem
        return None

    return check


def connection_limits_problem(old: Values, new: Values) -> str | None:
    """What Kafka's KafkaConfig and listener quotas refuse of the connection limits."""
    try:
        overrides = parse_overrides(str(new.get("max.connections.per.ip.overrides") or ""))
    except ValueError as exc:
        return f"Error parsing configuration property 'max.connections.per.ip.overrides': {exc}"
    if int(new["max.connections.per.ip"]) == 0 and not overrides:
        return (
            "requirement failed: max.connections.per.ip can be set to zero only if "
            "max.connections.per.ip.overrides property is set."
        )
    if int(new["max.connections"]) <= 0:
        return f"Invalid max.connections {new['max.connections']}"
    if int(new["max.connection.creation.rate"]) <= 0:
        return f"Invalid max.connection.creation.rate {new['max.connection.creation.rate']}"
    return None


CORDONED = "cordoned.log.dirs"


def cordoned_dirs_problem(raw: Any, log_dirs: Sequence[Path]) -> str | None:
    """KIP-1066: every entry of cordoned.log.dirs is `*` (all dirs) or one of log.dirs."""
    from kopfka.log.log_manager import cordoned_entries

    entries = cordoned_entries(raw)
    known = {d.resolve() for d in log_dirs}
    bad = [e for e in entries if e != "*" and Path(e).resolve() not in known]
    if not bad:
        return None
    return (
        f"Invalid value {bad} for configuration {CORDONED}: every cordoned log dir must be one of log.dirs "
        f"({', '.join(str(d) for d in log_dirs)}) or *"
    )


def broker_reconfigurables(server: Any, services: Any) -> list[Reconfigurable]:
    """The components of a broker that take dynamic configs, wired to the running server."""
    from kopfka.log.log_cleaner import CleanerConfig, LogCleaner

    log_manager = server.log_manager
    replica_manager = server.replica_manager

    def cleaner_problem(old: Values, new: Values) -> str | None:
        cleaner = log_manager.cleaner
        if cleaner is None:  # log.cleaner.enable=false: no cleaner to reconfigure, as in Kafka
            return None
        return LogCleaner.validate_reconfiguration(cleaner.config.num_threads, CleanerConfig(new))

    def reconfigure_cleaner(old: Values, new: Values) -> Any:
        cleaner = log_manager.cleaner
        return cleaner.reconfigure(CleanerConfig(new)) if cleaner is not None else None

    def reconfigure_threads(old: Values, new: Values) -> None:
        if new["num.replica.fetchers"] != old["num.replica.fetchers"] and replica_manager.fetchers is not None:
            replica_manager.fetchers.resize(int(new["num.replica.fetchers"]))
        if new["background.threads"] != old["background.threads"]:
            server.scheduler.resize(int(new["background.threads"]))
        # num.recovery.threads.per.data.dir: read from the current config when logs are next
        # loaded or closed; num.io.threads: no request handler pool (docs/dynamic-configs.md)

    def reconfigure_connections(old: Values, new: Values) -> None:
        quotas = services.quota_manager
        if quotas is None:
            return
        quotas.connections.update_limits(
            max_connections=int(new["max.connections"]),
            max_per_ip=int(new["max.connections.per.ip"]),
            per_ip_overrides=parse_overrides(str(new.get("max.connections.per.ip.overrides") or "")),
            max_creation_rate=int(new["max.connection.creation.rate"]),
        )

    def reconfigure_producer_state(old: Values, new: Values) -> None:
        # transaction.partition.verification.enable is read from the current config per request
        if new["producer.id.expiration.ms"] != old["producer.id.expiration.ms"]:
            log_manager.set_producer_id_expiration_ms(int(new["producer.id.expiration.ms"]))

    def producer_state_problem(old: Values, new: Values) -> str | None:
        if int(new["producer.id.expiration.ms"]) < 0:
            return (
                f"producer.id.expiration.ms cannot be less than 0, current value is "
                f"{old['producer.id.expiration.ms']}, and new value is {new['producer.id.expiration.ms']}"
            )
        return None

    def reconfigure_cordoned(old: Values, new: Values) -> None:
        # KIP-1066: placement avoids the dirs from now on, and the controller hears of it in the
        # next heartbeat, sent at once (Kafka's DirectoryEventHandler.handleCordoned)
        log_manager.update_cordoned_dirs()
        lifecycle = getattr(services, "lifecycle", None)
        if lifecycle is not None:
            lifecycle.heartbeat_soon()

    return [
        Reconfigurable("LogCleaner", dyn.CLEANER_CONFIGS - {"message.max.bytes"}, reconfigure_cleaner, cleaner_problem),
        Reconfigurable(
            "DynamicLogConfig",
            dyn.LOG_CONFIGS - {CORDONED},
            lambda old, new: log_manager.reconfigure_log_configs(),
        ),
        Reconfigurable(
            "CordonedLogDirs",
            frozenset({CORDONED}),
            reconfigure_cordoned,
            lambda old, new: cordoned_dirs_problem(new.get(CORDONED), log_manager.log_dirs),
            InvalidConfigValue,
        ),
        Reconfigurable(
            "BrokerDynamicThreadPool",
            dyn.THREAD_POOL_CONFIGS,
            reconfigure_threads,
            _thread_counts(dyn.THREAD_POOL_CONFIGS),
        ),
        # no network threads to resize (one event loop): the count is checked as Kafka's acceptor does
        Reconfigurable(
            "DataPlaneAcceptor",
            frozenset({"num.network.threads"}),
            lambda old, new: None,
            _thread_counts(frozenset({"num.network.threads"})),
        ),
        Reconfigurable(
            "ConnectionQuotas",
            dyn.SOCKET_SERVER_CONFIGS - {"num.network.threads"},
            reconfigure_connections,
            connection_limits_problem,
        ),
        Reconfigurable(
            "DynamicReplicationConfig",
            dyn.REPLICATION_QUOTA_CONFIGS,
            lambda old, new: replica_manager.update_replication_quotas(new),
        ),
        Reconfigurable(
            "DynamicProducerStateManagerConfig",
            dyn.PRODUCER_STATE_CONFIGS,
            reconfigure_producer_state,
            producer_state_problem,
        ),
    ]


def read_local_dynamic_configs(metadata_dir: Path, node_id: int) -> tuple[dict[str, str], dict[str, str]]:
    """(cluster default, this broker's) dynamic configs in the local metadata log: the latest
    snapshot and the records after it. Kafka reads only the snapshot; the tail is read too so a
    change made since the last snapshot counts at the next start (these are values to start with:
    the image the broker catches up to replaces them once it is published)."""
    from kopfka.metadata import records as mr
    from kopfka.raft import snapshots
    from kopfka.raft.metadata_log import metadata_log_dir

    directory = metadata_log_dir(metadata_dir)
    configs: dict[str, dict[str, str]] = {"": {}, str(node_id): {}}
    start = 0

    def apply(rec: Any) -> None:
        if isinstance(rec, mr.ConfigRecord) and rec.resource_type == BROKER_RESOURCE and rec.resource_name in configs:
            if rec.value is None:
                configs[rec.resource_name].pop(rec.name, None)
            else:
                configs[rec.resource_name][rec.name] = rec.value

    if not directory.is_dir():
        return {}, {}
    try:
        snap = snapshots.latest_snapshot(directory)
        if snap is not None:
            for rec in snapshots.read_snapshot(directory, snap):
                apply(rec)
            start = snap.end_offset
        for rec in _log_records_from(directory, start):
            apply(rec)
    except (OSError, ValueError, KafkaError, mr.MetadataRecordError) as exc:
        log.warning("Could not read the dynamic broker configs from the local metadata log: %s", exc)
    return configs[""], configs[str(node_id)]


def _log_records_from(directory: Path, start: int) -> list[Any]:
    """The ConfigRecords at offsets >= start in the log's segment files (read only, no
    recovery: a torn tail batch just ends the read)."""
    from kopfka.metadata import records as mr
    from kopfka.protocol.record_codec import decode_records
    from kopfka.protocol.records import iter_batches

    out: list[Any] = []
    for seg in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
        data = seg.read_bytes()
        for header in iter_batches(data, allow_partial_tail=True):
            if header.last_offset < start or header.is_control:
                continue
            for rec in decode_records(data, header):
                value = rec.value or b""
                if rec.offset >= start and mr.record_type(value) == mr.ConfigRecord.TYPE:
                    out.append(mr.decode(value))
    return out


__all__ = [
    "UNLIMITED",
    "DynamicBrokerConfig",
    "Reconfigurable",
    "broker_reconfigurables",
    "read_local_dynamic_configs",
]
