"""Which broker configs a running broker takes at runtime (Kafka's DynamicBrokerConfig, 4.3).

Kafka stores dynamic broker configs in the metadata log at two levels, the cluster default
(BROKER resource "") and one broker (BROKER resource "<id>"); the effective value of a key is
per-broker, else cluster default, else server.properties, else the key's default. Only the keys
of ALL_DYNAMIC_CONFIGS may be stored that way; DescribeConfigs reports every other key as
read-only, and an alteration of one is refused with INVALID_REQUEST and Kafka's wording.

kopfka knows the same keys and groups them by the component that applies them (the groups are
Kafka's `*.ReconfigurableConfigs`). A few of Kafka's dynamic keys are not applied at runtime by
kopfka (listener, TLS and SASL reconfiguration): they are refused with a
message that says so instead of being stored and silently ignored (docs/dynamic-configs.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kopfka.config.definitions import ConfigError
from kopfka.config.server_config import SERVER_CONFIG

log = logging.getLogger(__name__)

LISTENER_PREFIX = "listener.name."

# DynamicLogConfig: the broker-level synonyms of topic configs (topics without an override follow)
LOG_CONFIGS = frozenset(
    {
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "cordoned.log.dirs",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleanup.policy",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "log.index.size.max.bytes",
        "log.local.retention.bytes",
        "log.local.retention.ms",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.type",
        "log.preallocate",
        "log.retention.bytes",
        "log.retention.ms",
        "log.roll.jitter.ms",
        "log.roll.ms",
        "log.segment.bytes",
        "log.segment.delete.delay.ms",
        "message.max.bytes",
        "min.insync.replicas",
        "unclean.leader.election.enable",
    }
)
# LogCleaner.RECONFIGURABLE_CONFIGS: a change restarts the cleaner tasks with the new settings
CLEANER_CONFIGS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
        "message.max.bytes",
    }
)
# DynamicThreadPool.RECONFIGURABLE_CONFIGS
THREAD_POOL_CONFIGS = frozenset(
    {"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads"}
)
# SocketServer and its acceptors' reconfigurable configs
SOCKET_SERVER_CONFIGS = frozenset(
    {
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
        "num.network.threads",
    }
)
# DynamicReplicationConfig / the replication quota managers
REPLICATION_QUOTA_CONFIGS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)
# DynamicProducerStateManagerConfig
PRODUCER_STATE_CONFIGS = frozenset({"producer.id.expiration.ms", "transaction.partition.verification.enable"})
# DynamicListenerConfig (per broker)
LISTENER_CONFIGS = frozenset({"listeners", "listener.security.protocol.map"})
# SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix
DYNAMIC_SECURITY_CONFIGS = frozenset(
    {
        "ssl.cipher.suites",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.endpoint.identification.algorithm",
        "ssl.engine.factory.class",
        "ssl.key.password",
        "ssl.keymanager.algorithm",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.protocol",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "ssl.trustmanager.algorithm",
        "ssl.truststore.certificates",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
    }
)
SASL_CONFIGS = frozenset(
    {
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.kerberos.service.name",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.mechanism.inter.broker.protocol",
    }
)
# Kafka's dynamic keys of components kopfka does not have (remote storage, metric reporters, the
# new group coordinator's caches): listed for completeness; kopfka does not define them
KAFKA_ONLY_CONFIGS = frozenset(
    {
        "config.providers",
        "follower.fetch.last.tiered.offset.enable",
        "group.consumer.assignment.interval.ms",
        "group.coordinator.cached.buffer.max.bytes",
        "group.share.assignment.interval.ms",
        "group.streams.assignment.interval.ms",
        "metric.reporters",
        "remote.fetch.max.wait.ms",
        "remote.list.offsets.request.timeout.ms",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.log.manager.copier.thread.pool.size",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.expiration.thread.pool.size",
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote.log.manager.follower.thread.pool.size",
        "remote.log.reader.threads",
        "share.coordinator.cached.buffer.max.bytes",
    }
)

ALL_DYNAMIC_CONFIGS = (
    LOG_CONFIGS
    | CLEANER_CONFIGS
    | THREAD_POOL_CONFIGS
    | SOCKET_SERVER_CONFIGS
    | REPLICATION_QUOTA_CONFIGS
    | PRODUCER_STATE_CONFIGS
    | LISTENER_CONFIGS
    | DYNAMIC_SECURITY_CONFIGS
    | SASL_CONFIGS
    | {"principal.builder.class"}
    | KAFKA_ONLY_CONFIGS
)
# settable with a listener prefix at the cluster default too; every other listener key is per-broker
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
# cordoned.log.dirs (KIP-1066) is cluster-wide in Kafka too: `*` at the cluster default cordons every
# broker; a list of paths is checked against the log.dirs of the broker that answers the request
PER_BROKER_CONFIGS = DYNAMIC_SECURITY_CONFIGS | SASL_CONFIGS | LISTENER_CONFIGS | {"principal.builder.class"}

# Dynamic in Kafka, but kopfka reads them from server.properties at startup only: a listener,
# TLS or SASL change needs a restart.
NOT_APPLIED_AT_RUNTIME = LISTENER_CONFIGS | DYNAMIC_SECURITY_CONFIGS | SASL_CONFIGS | {"principal.builder.class"}
# Accepted and stored as Kafka does, but they change nothing in kopfka's asyncio design
# (docs/dynamic-configs.md says why): num.io.threads, num.network.threads
ACCEPTED_WITHOUT_EFFECT = frozenset({"num.io.threads", "num.network.threads"})


class DynamicConfigError(ValueError):
    """A dynamic broker config change that Kafka refuses (INVALID_REQUEST on the wire)."""


class InvalidConfigValue(DynamicConfigError):
    """A value a component refuses (Kafka's ConfigException from validateReconfiguration):
    INVALID_CONFIG on the wire."""


def is_dynamic(key: str) -> bool:
    """Kafka's `read_only=false` in DescribeConfigs: the key may be altered on a running broker."""
    return key in ALL_DYNAMIC_CONFIGS


def listener_base(key: str) -> str | None:
    """`<key>` of a `listener.name.<listener>.[<mechanism>.]<key>` override, else None."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    rest = key[len(LISTENER_PREFIX) :].partition(".")[2]
    if rest in SERVER_CONFIG or rest in ALL_DYNAMIC_CONFIGS:
        return rest
    return rest.partition(".")[2] or rest  # a SASL mechanism's key: listener.name.l.scram-sha-256.sasl.jaas.config


def _listed(names: Iterable[str]) -> str:
    return "[" + ", ".join(sorted(names)) + "]"


def validate_keys(props: Mapping[str, str | None], per_broker: bool) -> None:
    """The checks of Kafka's DynamicBrokerConfig.validateConfigs, in its order and wording, then
    kopfka's: unknown keys and Kafka-dynamic keys kopfka does not apply at runtime are refused."""
    names = set(props)
    non_dynamic = {k for k in names if k in SERVER_CONFIG and not is_dynamic(k) and listener_base(k) is None}
    if non_dynamic:
        raise DynamicConfigError(f"Cannot update these configs dynamically: {_listed(non_dynamic)}")
    unprefixed = names & DYNAMIC_SECURITY_CONFIGS
    if unprefixed:
        raise DynamicConfigError(
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            f"{_listed(unprefixed)}"
        )
    unknown = {k for k in names if k not in SERVER_CONFIG and k not in ALL_DYNAMIC_CONFIGS and listener_base(k) is None}
    if unknown:
        raise DynamicConfigError(f"Unknown broker configs: {_listed(unknown)}")
    validate_values(props)
    if not per_broker:
        broker_only = {
            k
            for k in names
            if k in PER_BROKER_CONFIGS
            or ((base := listener_base(k)) is not None and base not in CLUSTER_LEVEL_LISTENER_CONFIGS)
        }
        if broker_only:
            raise DynamicConfigError(
                "Cannot update these configs at default cluster level, broker id must be specified: "
                f"{_listed(broker_only)}"
            )
    not_applied = {
        k for k in names if k in NOT_APPLIED_AT_RUNTIME or k in KAFKA_ONLY_CONFIGS or listener_base(k) is not None
    }
    if not_applied:
        raise DynamicConfigError(
            f"kopfka applies these configs only at startup (set them in server.properties and restart the "
            f"broker): {_listed(not_applied)}"
        )


def validate_values(props: Mapping[str, str | None]) -> None:
    """Types and ranges (Kafka's DynamicConfig.Broker.validate): 'Invalid value ... for configuration ...'."""
    for key, raw in props.items():
        defn = SERVER_CONFIG.keys.get(key)
        if defn is None or raw is None:
            continue
        try:
            defn.parse(raw)
        except ConfigError as exc:
            raise DynamicConfigError(str(exc)) from exc


def valid_stored(props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
    """The entries of a stored dynamic config that are valid today (Kafka's fromPersistentProps
    drops the rest: keys stored by an older version, bad values)."""
    out = {}
    for key, raw in props.items():
        try:
            validate_keys({key: raw}, per_broker)
        except DynamicConfigError:
            continue
        out[key] = raw
    return out


def usable(props: Mapping[str, str], per_broker: bool, what: str) -> dict[str, Any]:
    """The typed values of a stored dynamic config that a broker applies; the invalid ones are
    logged as ignored."""
    valid = valid_stored(props, per_broker)
    dropped = sorted(set(props) - set(valid))
    if dropped:
        log.error("Dynamic %s config contains configs that will be ignored: %s", what, _listed(dropped))
    return {key: SERVER_CONFIG.keys[key].parse(raw) for key, raw in valid.items()}


def effective_values(
    static_values: Mapping[str, Any], default_props: Mapping[str, str], broker_props: Mapping[str, str]
) -> dict[str, Any]:
    """server.properties (typed) overlaid by the cluster default, then by the broker's own."""
    values = dict(static_values)
    values.update(usable(default_props, False, "default cluster"))
    values.update(usable(broker_props, True, "broker"))
    return values
