"""The operator applies live only keys a running kopfka broker takes at runtime (the broker's
list is Kafka's DynamicBrokerConfig): any other key would be refused with INVALID_REQUEST, so it
must roll the pods instead."""

from __future__ import annotations

from kopfka.config import dynamic_broker_config as broker_side
from kopfka_operator import dynamic_config


def test_every_live_key_is_applied_by_the_broker_at_the_cluster_default() -> None:
    applied = broker_side.ALL_DYNAMIC_CONFIGS - broker_side.NOT_APPLIED_AT_RUNTIME - broker_side.PER_BROKER_CONFIGS
    live = dynamic_config.DYNAMIC_CLUSTER_KEYS
    assert live <= applied, sorted(live - applied)
    for key in ("log.retention.hours", "log.retention.minutes", "log.roll.hours", "log.roll.jitter.hours"):
        assert not dynamic_config.is_dynamic(key), key
