"""Topic-level log configs (TopicConfig / LogConfig) and their broker-level synonyms.

A topic's effective value is: the topic override if set, else the broker's dynamic or static
value of the first synonym that is set, else the default. DescribeConfigs reports that chain
(the synonyms and their sources), so the table keeps the synonyms in Kafka's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopfka.config.definitions import LONG_MAX, ConfigDef, at_least, between, one_of

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

TOPIC_CONFIG = (
    ConfigDef()
    .define("cleanup.policy", "list", ["delete"], validator=one_of("delete", "compact"))
    .define("compression.type", "string", "producer", validator=one_of(*COMPRESSION_TYPES))
    .define(
        "compression.gzip.level",
        "int",
        -1,
        validator=lambda v: None if v == -1 or 1 <= v <= 9 else "must be -1 or in [1, 9]",
    )
    .define("compression.lz4.level", "int", 9, validator=between(1, 17))
    .define("compression.zstd.level", "int", 3, validator=between(-131072, 22))
    .define("delete.retention.ms", "long", 86_400_000, validator=at_least(0))
    .define("file.delete.delay.ms", "long", 60_000, validator=at_least(0))
    .define("flush.messages", "long", LONG_MAX, validator=at_least(1))
    .define("flush.ms", "long", LONG_MAX, validator=at_least(0))
    .define("follower.replication.throttled.replicas", "list", [])
    .define("index.interval.bytes", "int", 4096, validator=at_least(0))
    .define("leader.replication.throttled.replicas", "list", [])
    .define("local.retention.bytes", "long", -2)
    .define("local.retention.ms", "long", -2)
    .define("max.compaction.lag.ms", "long", LONG_MAX, validator=at_least(1))
    .define("max.message.bytes", "int", 1_048_588, validator=at_least(0))
    .define("message.timestamp.after.max.ms", "long", 3_600_000, validator=at_least(0))
    .define("message.timestamp.before.max.ms", "long", LONG_MAX, validator=at_least(0))
    .define("message.timestamp.type", "string", "CreateTime", validator=one_of("CreateTime", "LogAppendTime"))
    .define("min.cleanable.dirty.ratio", "double", 0.5, validator=between(0, 1))
    .define("min.compaction.lag.ms", "long", 0, validator=at_least(0))
    .define("min.insync.replicas", "int", 1, validator=at_least(1))
    .define("preallocate", "boolean", False)
    .define("remote.storage.enable", "boolean", False)
    # tiered storage is not implemented: these exist so topics describe and validate as in Kafka
    .define("remote.log.copy.disable", "boolean", False)
    .define("remote.log.delete.on.disable", "boolean", False)
    .define("retention.bytes", "long", -1)
    .define("retention.ms", "long", 604_800_000, validator=at_least(-1))
    .define("segment.bytes", "int", 1_073_741_824, validator=at_least(1024 * 1024))
    .define("segment.index.bytes", "int", 10_485_760, validator=at_least(4))
    .define("segment.jitter.ms", "long", 0, validator=at_least(0))
    .define("segment.ms", "long", 604_800_000, validator=at_least(1))
    .define("unclean.leader.election.enable", "boolean", False)
)

# topic key -> broker keys, most specific first (Kafka's LogConfig synonyms).
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "compression.type": ("compression.type",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "local.retention.bytes": ("log.local.retention.bytes",),
    "local.retention.ms": ("log.local.retention.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "min.insync.replicas": ("min.insync.replicas",),
    "preallocate": ("log.preallocate",),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.bytes": ("log.segment.bytes",),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
}

# Broker keys whose unit differs from the topic key's (value is multiplied into ms).
SYNONYM_SCALE = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}


@dataclass(frozen=True)
class LogConfig:
    """The effective, typed config of one log. Attribute names mirror the topic keys."""

    values: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def segment_bytes(self) -> int:
        return int(self.values["segment.bytes"])

    @property
    def segment_ms(self) -> int:
        return int(self.values["segment.ms"])

    @property
    def segment_jitter_ms(self) -> int:
        return int(self.values["segment.jitter.ms"])

    @property
    def segment_index_bytes(self) -> int:
        return int(self.values["segment.index.bytes"])

    @property
    def index_interval_bytes(self) -> int:
        return int(self.values["index.interval.bytes"])

    @property
    def max_message_bytes(self) -> int:
        return int(self.values["max.message.bytes"])

    @property
    def flush_messages(self) -> int:
        return int(self.values["flush.messages"])

    @property
    def flush_ms(self) -> int:
        return int(self.values["flush.ms"])

    @property
    def retention_ms(self) -> int:
        return int(self.values["retention.ms"])

    @property
    def retention_bytes(self) -> int:
        return int(self.values["retention.bytes"])

    @property
    def compact(self) -> bool:
        return "compact" in self.values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return "delete" in self.values["cleanup.policy"]

    @property
    def compression_type(self) -> str:
        return str(self.values["compression.type"])

    @property
    def message_timestamp_type(self) -> str:
        return str(self.values["message.timestamp.type"])

    @property
    def preallocate(self) -> bool:
        return bool(self.values["preallocate"])

    @property
    def file_delete_delay_ms(self) -> int:
        return int(self.values["file.delete.delay.ms"])

    @classmethod
    def defaults(cls, **overrides: Any) -> LogConfig:
        """Topic defaults with `overrides` given by topic key using underscores or dots."""
        values = {k.name: k.default for k in TOPIC_CONFIG.keys.values()}
        for k, v in overrides.items():
            values[k.replace("_", ".")] = v
        return cls(values)


def broker_default_for(topic_key: str, broker_values: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The broker-level value for a topic key, and which broker key supplied it (None = default)."""
    for synonym in BROKER_SYNONYMS.get(topic_key, ()):
        if broker_values.get(synonym) is not None:
            value = broker_values[synonym]
            scale = SYNONYM_SCALE.get(synonym)
            return (value * scale if scale and value >= 0 else value), synonym
    return TOPIC_CONFIG.keys[topic_key].default, None


def effective_log_config(topic_overrides: Mapping[str, Any], broker_values: Mapping[str, Any]) -> LogConfig:
    """Combine topic overrides (already typed) with the broker's values."""
    values: dict[str, Any] = {}
    for key in TOPIC_CONFIG.keys:
        if key in topic_overrides:
            values[key] = topic_overrides[key]
        else:
            values[key] = broker_default_for(key, broker_values)[0]
    return LogConfig(values)
