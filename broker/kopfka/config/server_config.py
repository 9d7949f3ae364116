"""KafkaConfig: the broker/controller's server.properties, parsed and validated.

Keys, types and defaults are Kafka's. Unknown keys are reported (a warning, as Kafka logs
"These configurations ... were supplied but are not used"); an invalid value raises a
ConfigError naming the key, which `kopfka serve` turns into a non-zero exit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kopfka.config.definitions import LONG_MAX, ConfigDef, ConfigError, at_least, between, one_of
from kopfka.config.log_config import BROKER_SYNONYMS, TOPIC_CONFIG

SERVER_CONFIG = (
    ConfigDef()
    # --- node identity and roles (KRaft)
    .define("node.id", "int", -1, validator=at_least(-1), read_only=True)
    .define("process.roles", "list", [], validator=one_of("broker", "controller"), read_only=True)
    .define("controller.listener.names", "list", [], read_only=True)
    .define("controller.quorum.voters", "list", [], read_only=True)
    .define("controller.quorum.bootstrap.servers", "list", [], read_only=True)
    .define(
        "controller.quorum.auto.join.enable",
        "boolean",
        True,
        doc="A controller that is not a voter adds itself to the quorum once caught up (KIP-853). "
        "Kafka's default is false; kopfka's operator grows the controller set this way.",
    )
    .define("controller.quorum.election.timeout.ms", "int", 1000, validator=at_least(0))
    .define("controller.quorum.fetch.timeout.ms", "int", 2000, validator=at_least(0))
    .define("controller.quorum.election.backoff.max.ms", "int", 1000, validator=at_least(0))
    .define("controller.quorum.retry.backoff.ms", "int", 20, validator=at_least(0))
    .define("controller.quorum.request.timeout.ms", "int", 2000, validator=at_least(0))
    .define("broker.heartbeat.interval.ms", "int", 2000, validator=at_least(1))
    .define("broker.session.timeout.ms", "int", 9000, validator=at_least(1))
    .define("initial.broker.registration.timeout.ms", "int", 60000, validator=at_least(1))
    .define("metadata.log.dir", "string", None, read_only=True)
    .define("metadata.log.segment.bytes", "int", 1_073_741_824, validator=at_least(8 * 1024 * 1024))
    .define("metadata.log.max.record.bytes.between.snapshots", "long", 20_971_520, validator=at_least(1))
    .define("metadata.log.max.snapshot.interval.ms", "long", 3_600_000, validator=at_least(0))
    .define("metadata.max.retention.bytes", "long", 104_857_600)
    .define("metadata.max.retention.ms", "long", 604_800_000)
    .define("broker.rack", "string", None, read_only=True)
    # --- listeners and network
    .define("listeners", "list", ["PLAINTEXT://:9092"], read_only=True)
    .define("advertised.listeners", "list", [], read_only=True)
    .define(
        "listener.security.protocol.map",
        "list",
        [
            "PLAINTEXT:PLAINTEXT",
            "CONTROLLER:PLAINTEXT",
            "SSL:SSL",
            "SASL_PLAINTEXT:SASL_PLAINTEXT",
            "SASL_SSL:SASL_SSL",
        ],
        read_only=True,
    )
    .define("inter.broker.listener.name", "string", None, read_only=True)
    .define("socket.request.max.bytes", "int", 104_857_600, validator=at_least(1))
    .define("socket.send.buffer.bytes", "int", 102_400)
    .define("socket.receive.buffer.bytes", "int", 102_400)
    .define("connections.max.idle.ms", "long", 600_000)
    .define("num.network.threads", "int", 3, validator=at_least(1))
    .define("num.io.threads", "int", 8, validator=at_least(1))
    .define("background.threads", "int", 10, validator=at_least(1), doc="worker threads of the broker's scheduler")
    .define("queued.max.requests", "int", 500, validator=at_least(1))
    .define("request.timeout.ms", "int", 30000)
    .define("max.request.partition.size.limit", "int", 2000, validator=at_least(1))
    # --- topics and logs
    .define("log.dirs", "list", None, read_only=True)
    .define("log.dir", "string", "/tmp/kafka-logs", read_only=True)
    .define("num.partitions", "int", 1, validator=at_least(1))
    .define("default.replication.factor", "int", 1, validator=at_least(1))
    .define("auto.create.topics.enable", "boolean", True)
    .define("delete.topic.enable", "boolean", True)
    .define("message.max.bytes", "int", 1_048_588, validator=at_least(0))
    .define(
        "compression.type",
        "string",
        "producer",
        validator=one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    )
    .define("compression.gzip.level", "int", -1)
    .define("compression.lz4.level", "int", 9, validator=between(1, 17))
    .define("compression.zstd.level", "int", 3)
    .define("log.cleanup.policy", "list", ["delete"], validator=one_of("delete", "compact"))
    .define("log.segment.bytes", "int", 1_073_741_824, validator=at_least(1024 * 1024))
    .define("log.roll.ms", "long", None, validator=at_least(1))
    .define("log.roll.hours", "int", 168, validator=at_least(1))
    .define("log.roll.jitter.ms", "long", None, validator=at_least(0))
    .define("log.roll.jitter.hours", "int", 0, validator=at_least(0))
    .define("log.index.size.max.bytes", "int", 10_485_760, validator=at_least(4))
    .define("log.index.interval.bytes", "int", 4096, validator=at_least(0))
    .define("log.flush.interval.messages", "long", LONG_MAX, validator=at_least(1))
    .define("log.flush.interval.ms", "long", None)
    .define("log.flush.scheduler.interval.ms", "long", LONG_MAX)
    .define("log.flush.offset.checkpoint.interval.ms", "int", 60000, validator=at_least(0))
    .define("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, validator=at_least(0))
    .define("log.retention.hours", "int", 168)
    .define("log.retention.minutes", "int", None)
    .define("log.retention.ms", "long", None)
    .define("log.retention.bytes", "long", -1)
    .define("log.retention.check.interval.ms", "long", 300_000, validator=at_least(1))
    .define("log.segment.delete.delay.ms", "long", 60000, validator=at_least(0))
    .define("log.initial.task.delay.ms", "long", 30000, validator=at_least(0))
    .define("log.preallocate", "boolean", False)
    .define("log.message.timestamp.type", "string", "CreateTime", validator=one_of("CreateTime", "LogAppendTime"))
    .define("log.message.timestamp.before.max.ms", "long", LONG_MAX, validator=at_least(0))
    .define("log.message.timestamp.after.max.ms", "long", 3_600_000, validator=at_least(0))
    .define("log.cleaner.threads", "int", 1, validator=at_least(0))
    .define("log.cleaner.enable", "boolean", True)
    .define("log.cleaner.dedupe.buffer.size", "long", 134_217_728)
    .define("log.cleaner.io.buffer.size", "int", 524_288, validator=at_least(0))
    .define("log.cleaner.io.buffer.load.factor", "double", 0.9)
    .define("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308)
    .define("log.cleaner.backoff.ms", "long", 15000, validator=at_least(0))
    .define("log.cleaner.min.cleanable.ratio", "double", 0.5, validator=between(0, 1))
    .define("log.cleaner.min.compaction.lag.ms", "long", 0, validator=at_least(0))
    .define("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, validator=at_least(1))
    .define("log.cleaner.delete.retention.ms", "long", 86_400_000, validator=at_least(0))
    .define("log.local.retention.bytes", "long", -2)
    .define("log.local.retention.ms", "long", -2)
    .define("num.recovery.threads.per.data.dir", "int", 2, validator=at_least(1))
    .define("cordoned.log.dirs", "list", [])
    .define("min.insync.replicas", "int", 1, validator=at_least(1))
    .define("unclean.leader.election.enable", "boolean", False)
    .define(
        "unclean.leader.election.interval.ms",
        "long",
        300_000,
        validator=at_least(1),
        doc="How often the active controller elects unclean leaders where now allowed (Kafka's internal key)",
    )
    # --- replication
    .define("replica.lag.time.max.ms", "long", 30000)
    .define("replica.fetch.max.bytes", "int", 1_048_576)
    .define("replica.fetch.wait.max.ms", "int", 500)
    .define("replica.fetch.min.bytes", "int", 1)
    .define("replica.fetch.response.max.bytes", "int", 10_485_760)
    .define("num.replica.fetchers", "int", 1, validator=at_least(1))
    .define("replica.fetch.backoff.ms", "int", 1000, validator=at_least(0))
    .define("replica.socket.timeout.ms", "int", 30000)
    .define("auto.leader.rebalance.enable", "boolean", True)
    .define("leader.imbalance.check.interval.seconds", "long", 300)
    .define("leader.replication.throttled.rate", "long", LONG_MAX)
    .define("follower.replication.throttled.rate", "long", LONG_MAX)
    .define("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX)
    # --- groups and offsets
    .define("offsets.topic.num.partitions", "int", 50, validator=at_least(1), read_only=True)
    .define("offsets.topic.replication.factor", "short", 3, validator=at_least(1))
    .define("offsets.topic.segment.bytes", "int", 104_857_600, validator=at_least(1))
    .define("offsets.retention.minutes", "int", 10080, validator=at_least(1))
    .define("offsets.retention.check.interval.ms", "long", 600_000, validator=at_least(1))
    .define("group.initial.rebalance.delay.ms", "int", 3000)
    .define("group.min.session.timeout.ms", "int", 6000)
    .define("group.max.session.timeout.ms", "int", 1_800_000)
    .define("group.max.size", "int", 2**31 - 1, validator=at_least(1))
    .define("group.coordinator.rebalance.protocols", "list", ["classic", "consumer", "streams"])
    .define("group.consumer.session.timeout.ms", "int", 45000)
    .define("group.consumer.heartbeat.interval.ms", "int", 5000)
    .define("group.consumer.assignors", "list", ["uniform", "range"])
    # --- share groups (KIP-932): membership on the group coordinator, records on the partition leaders
    .define("group.share.session.timeout.ms", "int", 45000, validator=at_least(1))
    .define("group.share.min.session.timeout.ms", "int", 45000, validator=at_least(1))
    .define("group.share.max.session.timeout.ms", "int", 60000, validator=at_least(1))
    .define("group.share.heartbeat.interval.ms", "int", 5000, validator=at_least(1))
    .define("group.share.min.heartbeat.interval.ms", "int", 5000, validator=at_least(1))
    .define("group.share.max.heartbeat.interval.ms", "int", 15000, validator=at_least(1))
    .define("group.share.max.size", "int", 200, validator=between(1, 1000))
    .define("group.share.assignors", "list", ["simple"])
    .define("group.share.delivery.count.limit", "int", 5, validator=between(2, 10))
    .define("group.share.min.delivery.count.limit", "int", 2, validator=between(2, 5))
    .define("group.share.max.delivery.count.limit", "int", 10, validator=between(5, 25))
    .define("group.share.record.lock.duration.ms", "int", 30000, validator=between(1000, 3_600_000))
    .define("group.share.min.record.lock.duration.ms", "int", 15000, validator=between(1000, 30000))
    .define("group.share.max.record.lock.duration.ms", "int", 60000, validator=between(30000, 3_600_000))
    .define("group.share.partition.max.record.locks", "int", 2000, validator=between(100, 10000))
    .define("group.share.min.partition.max.record.locks", "int", 100, validator=between(100, 2000))
    .define("group.share.max.partition.max.record.locks", "int", 4000, validator=between(2000, 10000))
    .define("group.share.max.share.sessions", "int", 2000, validator=at_least(1))
    .define("share.coordinator.state.topic.num.partitions", "int", 50, validator=at_least(1), read_only=True)
    .define("share.coordinator.state.topic.replication.factor", "short", 3, validator=at_least(1))
    .define("share.coordinator.state.topic.min.isr", "short", 2, validator=at_least(1))
    .define("share.coordinator.state.topic.segment.bytes", "int", 104_857_600, validator=at_least(1))
    .define("share.coordinator.snapshot.update.records.per.snapshot", "int", 500, validator=between(0, 500))
    .define("share.coordinator.load.buffer.size", "int", 5_242_880, validator=at_least(1))
    .define("share.coordinator.write.timeout.ms", "int", 5000, validator=at_least(1))
    .define("share.coordinator.state.topic.prune.interval.ms", "int", 300_000, validator=at_least(1))
    .define("share.coordinator.cold.partition.snapshot.interval.ms", "int", 300_000, validator=at_least(1))
    .define("offset.metadata.max.bytes", "int", 4096, validator=at_least(0))
    .define("offsets.commit.timeout.ms", "int", 5000, validator=at_least(1))
    .define("transaction.state.log.num.partitions", "int", 50, validator=at_least(1))
    .define("transaction.state.log.replication.factor", "short", 3, validator=at_least(1))
    .define("transaction.state.log.min.isr", "int", 2, validator=at_least(1))
    .define("transaction.state.log.segment.bytes", "int", 104_857_600, validator=at_least(1))
    .define("transaction.state.log.load.buffer.size", "int", 5_242_880, validator=at_least(1))
    .define("transaction.max.timeout.ms", "int", 900_000, validator=at_least(1))
    .define("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000, validator=at_least(1))
    .define("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3_600_000, validator=at_least(1))
    .define("transaction.partition.verification.enable", "boolean", True)
    .define("transactional.id.expiration.ms", "int", 604_800_000, validator=at_least(1))
    .define("producer.id.expiration.ms", "int", 86_400_000, validator=at_least(1))
    .define("producer.id.expiration.check.interval.ms", "int", 600_000, validator=at_least(1))
    .define("max.incremental.fetch.session.cache.slots", "int", 1000, validator=at_least(0))
    .define("fetch.max.bytes", "int", 57_671_680, validator=at_least(1024))
    # --- quotas
    .define("quota.window.num", "int", 11, validator=at_least(1))
    .define("quota.window.size.seconds", "int", 1, validator=at_least(1))
    .define("max.connections", "int", 2**31 - 1, validator=at_least(0))
    .define("max.connections.per.ip", "int", 2**31 - 1, validator=at_least(0))
    .define("max.connections.per.ip.overrides", "string", "")
    .define("max.connection.creation.rate", "int", 2**31 - 1, validator=at_least(0))
    .define("telemetry.max.bytes", "int", 1_048_576, validator=at_least(1))
    # --- security: listeners (each key may be overridden per listener as listener.name.<l>.<key>)
    .define("security.inter.broker.protocol", "string", "PLAINTEXT", read_only=True,
            validator=one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    .define("ssl.keystore.type", "string", "JKS", read_only=True)
    .define("ssl.keystore.location", "string", None, read_only=True)
    .define("ssl.keystore.password", "password", None, sensitive=True, read_only=True)
    .define("ssl.keystore.key", "password", None, sensitive=True, read_only=True)
    .define("ssl.keystore.certificate.chain", "password", None, sensitive=True, read_only=True)
    .define("ssl.key.password", "password", None, sensitive=True, read_only=True)
    .define("ssl.truststore.type", "string", "JKS", read_only=True)
    .define("ssl.truststore.location", "string", None, read_only=True)
    .define("ssl.truststore.password", "password", None, sensitive=True, read_only=True)
    .define("ssl.truststore.certificates", "password", None, sensitive=True, read_only=True)
    .define("ssl.client.auth", "string", "none", validator=one_of("required", "requested", "none"), read_only=True)
    .define("ssl.protocol", "string", "TLSv1.3", read_only=True)
    .define("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], read_only=True,
            validator=one_of("TLSv1.2", "TLSv1.3"))
    .define("ssl.cipher.suites", "list", [], read_only=True,
            doc="OpenSSL cipher names for TLSv1.2 (TLSv1.3 suites are OpenSSL's defaults)")
    .define("ssl.endpoint.identification.algorithm", "string", "https", read_only=True)
    .define("ssl.principal.mapping.rules", "string", "DEFAULT", read_only=True)
    .define("ssl.keymanager.algorithm", "string", "SunX509", read_only=True, doc="accepted for compatibility; unused")
    .define("ssl.trustmanager.algorithm", "string", "PKIX", read_only=True, doc="accepted for compatibility; unused")
    .define("ssl.engine.factory.class", "class", None, read_only=True)
    .define("principal.builder.class", "class", None, read_only=True)
    # --- security: SASL
    .define("sasl.enabled.mechanisms", "list", ["GSSAPI"], read_only=True)
    .define("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", read_only=True)
    .define("sasl.mechanism.controller.protocol", "string", "GSSAPI", read_only=True)
    .define("sasl.jaas.config", "password", None, sensitive=True, read_only=True)
    .define("sasl.server.max.receive.size", "int", 524_288, validator=at_least(1), read_only=True)
    .define("connections.max.reauth.ms", "long", 0, validator=at_least(0), read_only=True)
    .define("connection.failed.authentication.delay.ms", "int", 100, validator=at_least(0), read_only=True)
    # --- security: authorization (StandardAuthorizer, ACLs in the metadata log)
    .define("authorizer.class.name", "string", "", read_only=True)
    .define("super.users", "string", "", read_only=True, doc="semicolon-separated principals: User:admin;User:b0")
    .define("allow.everyone.if.no.acl.found", "boolean", False, read_only=True)
    # --- kopfka-specific (namespaced so they never collide with Kafka keys)
    .define(
        "kopfka.http.listener",
        "string",
        "",
        read_only=True,
        doc="HOST:PORT of the health/metrics HTTP endpoint; empty disables it",
    )
)

_INTERPOLATION = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def read_properties(path: Path) -> dict[str, str]:
    """Parse a Java .properties file (the subset Kafka users write: key=value / key: value)."""
    props: dict[str, str] = {}
    text = path.read_text(encoding="utf-8")
    pending = ""
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            props[line] = ""
            continue
        props[m.group(1)] = m.group(2)
    return props


def interpolate(value: str, env: Mapping[str, str] | None = None) -> str:
    """Expand ${env:NAME} and ${env:NAME:-default} (so one ConfigMap serves every pod)."""
    env = os.environ if env is None else env

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ConfigError(m.group(0), value, f"environment variable {name} is not set")

    return _INTERPOLATION.sub(sub, value)


@dataclass
class Listener:
    """One entry of `listeners` (NAME://HOST:PORT); an empty host binds 0.0.0.0."""

    name: str
    host: str
    port: int

    @property
    def bind_host(self) -> str:
        return self.host or "0.0.0.0"


def parse_listeners(key: str, entries: list[str]) -> list[Listener]:
    out = []
    for entry in entries:
        m = re.match(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(\d+)$", entry.strip())
        if not m:
            raise ConfigError(key, entry, "expected NAME://HOST:PORT")
        host = m.group(2).strip("[]")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, entry, "port out of range")
        out.append(Listener(m.group(1).upper(), host, port))
    names = [listener.name for listener in out]
    if len(set(names)) != len(names):
        raise ConfigError(key, ",".join(entries), "each listener must have a distinct name")
    return out


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def listener_security_protocols(config: KafkaConfig) -> dict[str, str]:
    """`listener.security.protocol.map` as {LISTENER: PROTOCOL}, checked as Kafka checks it.

    As in Kafka, when the map is not set explicitly the controller listeners default to PLAINTEXT."""
    key = "listener.security.protocol.map"
    out: dict[str, str] = {}
    for entry in config.values[key]:
        name, sep, proto = entry.partition(":")
        if not sep or not name.strip():
            raise ConfigError(key, entry, "expected LISTENER_NAME:SECURITY_PROTOCOL")
        if proto.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                key, entry, f"invalid security protocol {proto.strip()!r} (one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        out[name.strip().upper()] = proto.strip().upper()
    if key not in config.originals:
        for name in config.controller_listener_names:
            out.setdefault(name, "PLAINTEXT")
    return out


def check_listener_security(config: KafkaConfig) -> None:
    """Every listener (bound or advertised) must have a security protocol in the map; what each
    protocol needs (keystores, SASL mechanisms) is checked by kopfka.security at startup."""
    protocols = listener_security_protocols(config)
    for key in ("listeners", "advertised.listeners"):
        for lst in parse_listeners(key, config.values[key]):
            if lst.name not in protocols:
                raise ConfigError(
                    key,
                    lst.name,
                    f"no security protocol defined for listener {lst.name} in listener.security.protocol.map",
                )


@dataclass
class KafkaConfig:
    """Typed server config. `values` holds every defined key (defaults filled in)."""

    values: dict[str, Any]
    originals: dict[str, str] = field(default_factory=dict)
    unknown_keys: list[str] = field(default_factory=list)

    @classmethod
    def from_properties(cls, raw: Mapping[str, str], *, env: Mapping[str, str] | None = None) -> KafkaConfig:
        from kopfka.config.providers import is_provider_key, resolve
        from kopfka.security.listeners import is_listener_key

        expanded = {k: interpolate(v, env) for k, v in resolve(raw).items()}
        unknown = [
            k
            for k in expanded
            if k not in SERVER_CONFIG and k not in TOPIC_CONFIG and not is_listener_key(k) and not is_provider_key(k)
        ]
        parsed = SERVER_CONFIG.parse(expanded)
        values = {k.name: k.default for k in SERVER_CONFIG.keys.values()}
        values.update(parsed)
        cfg = cls(values, dict(expanded), unknown)
        cfg._validate()
        check_listener_security(cfg)
        return cfg

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    # --- derived views -------------------------------------------------------------------
    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def roles(self) -> set[str]:
        return set(self.values["process.roles"])

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"] or [self.values["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def metadata_log_dir(self) -> Path:
        d = self.values["metadata.log.dir"]
        return Path(d) if d else self.log_dirs[0]

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners("listeners", self.values["listeners"])

    @property
    def controller_listener_names(self) -> list[str]:
        return [n.upper() for n in self.values["controller.listener.names"]]

    @property
    def broker_listeners(self) -> list[Listener]:
        ctl = set(self.controller_listener_names)
        return [lst for lst in self.listeners if lst.name not in ctl]

    @property
    def advertised_listeners(self) -> list[Listener]:
        """Advertised endpoints; a listener without one advertises its bind address."""
        adv = {lst.name: lst for lst in parse_listeners("advertised.listeners", self.values["advertised.listeners"])}
        out = []
        for lst in self.broker_listeners:
            a = adv.get(lst.name, lst)
            out.append(Listener(a.name, a.host or "localhost", a.port))
        return out

    @property
    def broker_log_values(self) -> dict[str, Any]:
        """The broker-level values behind topic-config synonyms (for DescribeConfigs and LogConfig)."""
        keys = {s for syns in BROKER_SYNONYMS.values() for s in syns}
        return {k: self.values.get(k) for k in keys if k in self.values}

    def _validate(self) -> None:
        if self.values["node.id"] < 0:
            raise ConfigError("node.id", self.values["node.id"], "node.id is required and must be >= 0")
        roles = self.roles
        if not roles:
            raise ConfigError("process.roles", "", "process.roles is required (broker, controller or both)")
        listeners = self.listeners
        ctl = self.controller_listener_names
        if "controller" in roles:
            if not ctl:
                raise ConfigError("controller.listener.names", "", "required when process.roles contains controller")
            if not any(lst.name in ctl for lst in listeners):
                raise ConfigError(
                    "listeners", ",".join(self.values["listeners"]), f"must include the controller listener {ctl[0]}"
                )
        if "broker" in roles and not self.broker_listeners:
            raise ConfigError(
                "listeners", ",".join(self.values["listeners"]), "a broker needs a non-controller listener"
            )
        if "broker" in roles and not ctl:
            raise ConfigError("controller.listener.names", "", "required (the listener used to reach the controllers)")
        voters = self.values["controller.quorum.voters"]
        bootstrap = self.values["controller.quorum.bootstrap.servers"]
        if voters and bootstrap:
            raise ConfigError(
                "controller.quorum.bootstrap.servers",
                ",".join(bootstrap),
                "set either controller.quorum.voters or controller.quorum.bootstrap.servers, not both",
            )
        if not voters and not bootstrap:
            raise ConfigError(
                "controller.quorum.voters", "", "set controller.quorum.voters or controller.quorum.bootstrap.servers"
            )
        for v in voters:
            if not re.match(r"^\d+@(\[[^\]]+\]|[^:]+):\d+$", v):
                raise ConfigError("controller.quorum.voters", v, "expected ID@HOST:PORT")
        for b in bootstrap:
            if not re.match(r"^(\[[^\]]+\]|[^:]+):\d+$", b):
                raise ConfigError("controller.quorum.bootstrap.servers", b, "expected HOST:PORT")
