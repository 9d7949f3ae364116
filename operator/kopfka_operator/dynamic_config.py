"""Which `spec.config` keys a running broker takes without a restart.

These are Kafka's cluster-wide dynamic broker configs (DynamicBrokerConfig: the log-config
synonyms, the cleaner's, the thread pools', the connection limits and the replication
throttles) that kopfka also applies at runtime. The operator applies a change of one of them
with IncrementalAlterConfigs on the cluster-default BROKER resource and restarts nothing; every
other key is static: it is part of the pod's desired state, and changing it rolls the pods.
The keys are still rendered into server.properties, so a node that starts before the live
change is applied already runs the new value.
"""

from __future__ import annotations

from collections.abc import Mapping

# Broker-level names of topic configs (Kafka's ServerTopicConfigSynonyms): the broker's
# default for every topic without an override. Only the most specific form of each is dynamic in
# Kafka (log.retention.ms, log.roll.ms, log.roll.jitter.ms): log.retention.{minutes,hours},
# log.roll.hours and log.roll.jitter.hours are refused at runtime, so they roll the pods.
LOG_CONFIG_SYNONYMS = frozenset(
    {
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.index.size.max.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleanup.policy",
        "log.preallocate",
        "log.message.timestamp.type",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "message.max.bytes",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
    }
)
CLEANER = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)
THREADS_AND_CONNECTIONS = frozenset(
    {
        "num.io.threads",
        "num.network.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
    }
)
REPLICATION_AND_PRODUCERS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
    }
)
DYNAMIC_CLUSTER_KEYS = LOG_CONFIG_SYNONYMS | CLEANER | THREADS_AND_CONNECTIONS | REPLICATION_AND_PRODUCERS


def is_dynamic(key: str) -> bool:
    return key in DYNAMIC_CLUSTER_KEYS


def split(config: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(static, dynamic) parts of a spec.config."""
    static = {k: v for k, v in config.items() if not is_dynamic(k)}
    dynamic = {k: v for k, v in config.items() if is_dynamic(k)}
    return static, dynamic


def live_changes(applied: Mapping[str, str], wanted: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """What IncrementalAlterConfigs must set and delete to go from what the operator applied
    last to what the spec wants (keys the operator never applied are not its business)."""
    to_set = {k: v for k, v in wanted.items() if applied.get(k) != v}
    to_delete = sorted(k for k in applied if k not in wanted)
    return to_set, to_delete
