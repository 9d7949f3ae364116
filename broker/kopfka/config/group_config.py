"""Group configs (KIP-848/932): dynamic per-group overrides of the group.* broker defaults.

`kafka-configs --entity-type groups --entity-name G --alter --add-config
share.auto.offset.reset=earliest` stores a ConfigRecord for resource type GROUP (32). Names,
types and defaults are Kafka's GroupConfig; a value outside the broker's bounds (for example
share.record.lock.duration.ms outside [group.share.min.record.lock.duration.ms,
group.share.max.record.lock.duration.ms]) is refused with Kafka's wording. The effective value
of a key for a group is its override, else the broker's synonym (group.share.*), else the default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kopfka.config.definitions import ConfigDef, ConfigError, at_least, one_of

GROUP_RESOURCE = 32


def _auto_offset_reset(v: Any) -> str | None:
    s = str(v).strip().lower()
    if s in ("earliest", "latest"):
        return None
    if s.startswith("by_duration:") and _iso_duration_ms(s.split(":", 1)[1]) is not None:
        return None
    return "Invalid value: expected earliest, latest or by_duration:<ISO-8601 duration>"


GROUP_CONFIG = (
    ConfigDef()
    .define("consumer.session.timeout.ms", "int", 45000, validator=at_least(1))
    .define("consumer.heartbeat.interval.ms", "int", 5000, validator=at_least(1))
    .define("consumer.assignment.interval.ms", "int", 1000, validator=at_least(0))
    .define("share.session.timeout.ms", "int", 45000, validator=at_least(1))
    .define("share.heartbeat.interval.ms", "int", 5000, validator=at_least(1))
    .define("share.record.lock.duration.ms", "int", 30000, validator=at_least(1000))
    .define("share.delivery.count.limit", "int", 5, validator=at_least(2))
    .define("share.partition.max.record.locks", "int", 2000, validator=at_least(100))
    .define("share.auto.offset.reset", "string", "latest", validator=_auto_offset_reset)
    .define(
        "share.isolation.level", "string", "read_uncommitted", validator=one_of("read_committed", "read_uncommitted")
    )
    .define("share.renew.acknowledge.enable", "boolean", True)
    .define("share.assignment.interval.ms", "int", 1000, validator=at_least(0))
    .define("streams.session.timeout.ms", "int", 45000, validator=at_least(1))
    .define("streams.heartbeat.interval.ms", "int", 5000, validator=at_least(1))
    .define("streams.num.standby.replicas", "int", 0, validator=at_least(0))
    .define("streams.initial.rebalance.delay.ms", "int", 3000, validator=at_least(0))
    .define("streams.assignment.interval.ms", "int", 1000, validator=at_least(0))
)

# group config -> the broker config that gives its default (Kafka's ALL_GROUP_CONFIG_SYNONYMS)
SYNONYMS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.partition.max.record.locks": "group.share.partition.max.record.locks",
}

# group config -> (broker minimum key, broker maximum key)
BOUNDS = {
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.record.lock.duration.ms": (
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    "share.partition.max.record.locks": (
        "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks",
    ),
}


def validate_group_config(key: str, value: str | None, broker: Mapping[str, Any]) -> None:
    """Raise ConfigError (its message in Kafka's words) for an unknown name or a bad value."""
    if key not in GROUP_CONFIG:
        raise ConfigError(key, value, f"Unknown group config name: {key}")
    if value is None:
        return
    parsed = GROUP_CONFIG.keys[key].parse(value)
    if key in BOUNDS:
        lo_key, hi_key = BOUNDS[key]
        if lo_key in broker and parsed < int(broker[lo_key]):
            raise ConfigError(key, value, f"{key} must be greater than or equal to {lo_key}")
        if hi_key in broker and parsed > int(broker[hi_key]):
            raise ConfigError(key, value, f"{key} must be less than or equal to {hi_key}")


def group_config_value(overrides: Mapping[str, str], broker: Mapping[str, Any], key: str) -> Any:
    """The effective value of group config `key`: the group's override (clamped to the broker's
    bounds, as Kafka's GroupConfig.evaluate), else the broker default, else GROUP_CONFIG's."""
    defn = GROUP_CONFIG.keys[key]
    raw = overrides.get(key)
    if raw is not None:
        try:
            value = defn.parse(raw)
        except ConfigError:
            value = None
        if value is not None:
            if key in BOUNDS:
                lo_key, hi_key = BOUNDS[key]
                value = max(int(broker.get(lo_key, value)), min(int(broker.get(hi_key, value)), value))
            return value
    synonym = SYNONYMS.get(key)
    if synonym is not None and synonym in broker:
        return broker[synonym]
    return defn.default


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def _iso_duration_ms(text: str) -> int | None:
    """PnDTnHnMn.nS (Java's Duration.parse without signs) in milliseconds, or None."""
    m = _DURATION.match(text.strip())
    if m is None or text.strip().upper() in ("P", "PT"):
        return None
    days, hours, minutes, seconds = m.groups()
    total = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
    return int(total * 1000)


def auto_offset_reset(value: str) -> tuple[str, int]:
    """("earliest" | "latest" | "by_duration", duration ms) of a share.auto.offset.reset value."""
    s = value.strip().lower()
    if s.startswith("by_duration:"):
        return "by_duration", _iso_duration_ms(s.split(":", 1)[1]) or 0
    return s, 0
