"""The broker's subsystems, wired once and handed to every request handler."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from kopfka.config.definitions import ConfigError
from kopfka.config.log_config import TOPIC_CONFIG, LogConfig, effective_log_config
from kopfka.config.server_config import KafkaConfig
from kopfka.log.log_manager import LogManager
from kopfka.metadata.loader import MetadataLoader
from kopfka.server.coordinator_slots import CoordinatorProperty, CoordinatorSlot
from kopfka.server.fetch_session import FetchSessionCache
from kopfka.server.leader_discovery import enabled_in as leader_discovery_enabled
from kopfka.server.producer_id_manager import ProducerIdManager
from kopfka.server.replica_manager import ReplicaManager


@dataclass
class BrokerServices:
    """The broker's subsystems, wired once at startup and reached by every request handler."""

    config: KafkaConfig
    node_id: int
    cluster_id: str
    metadata: MetadataLoader
    controller: Any  # RemoteController: the channel to the active controller (node_to_controller)
    replica_manager: ReplicaManager
    log_manager: LogManager
    fetch_sessions: FetchSessionCache
    producer_ids: ProducerIdManager
    lifecycle: Any = None
    # the coordinators, each built on first need (kopfka.server.coordinator_slots): the
    # CoordinatorProperty attributes below; `built(name)` reads one without building it
    slots: dict[str, CoordinatorSlot] = field(default_factory=dict)
    txn_verifier: Any = None  # kopfka.server.txn_verification (KIP-890, partition leader side)
    inter_broker: Any = None  # kopfka.server.inter_broker.InterBrokerClient
    quota_manager: Any = None  # quotas and throttling (kopfka.quota.QuotaManagers)
    metrics: Any = None  # kopfka.metrics.BrokerMetrics
    telemetry: Any = None  # kopfka.telemetry.ClientMetricsManager (KIP-714)
    authorizer: Any = None  # kopfka.security.authorizer.StandardAuthorizer, None without authorizer.class.name
    dynamic_config: Any = None  # kopfka.server.dynamic_config.DynamicBrokerConfig
    local_controller: Any = None  # this node's QuorumController in combined mode (its metrics), else None

    def built(self, name: str) -> Any:
        """The coordinator `name` if it was built, else None (never builds it)."""
        slot = self.slots.get(name)
        return slot.built if slot is not None else None

    group_coordinator = CoordinatorProperty()  # kopfka.coordinator.group (consumer groups, committed offsets)
    txn_coordinator = CoordinatorProperty()  # kopfka.coordinator.transaction (transactional ids, markers)
    share_coordinator = CoordinatorProperty()  # kopfka.coordinator.share (share-partition state)
    share_persister = CoordinatorProperty()  # kopfka.server.share.persister (reaches a key's share coordinator)
    share_partitions = CoordinatorProperty()  # kopfka.server.share (share-partition leaders)

    @functools.cached_property
    def leader_discovery(self) -> bool:
        """KIP-951 hints in error responses (kopfka.server.leader_discovery); read once."""
        return leader_discovery_enabled(self.config)


def make_config_for(config: KafkaConfig, loader: MetadataLoader) -> Any:
    """A topic's LogConfig: its overrides in the image over the broker's current config (which
    kopfka.server.dynamic_config keeps up to date with the dynamic broker configs)."""

    def config_for(topic: str) -> LogConfig:
        overrides = {}
        for key, raw in loader.image.topic_config(topic).items():
            if key in TOPIC_CONFIG:
                try:
                    overrides[key] = TOPIC_CONFIG.keys[key].parse(raw)
                except ConfigError:
                    continue
        return effective_log_config(overrides, config.values)

    return config_for
