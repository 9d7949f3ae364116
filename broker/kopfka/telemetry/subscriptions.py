"""Client-metrics subscriptions (KIP-714): config resources of type 16 named by the operator.

Each has `metrics` (metric-name prefixes, `*` for all), `interval.ms` (push interval, 100 ms
to 1 h, default 5 min) and `match` (`selector=regex` pairs over the client's identity). They
live in the metadata log as ordinary ConfigRecords, so the controller validates them here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kopfka.protocol.errors import ErrorCode, KafkaError

CLIENT_METRICS_RESOURCE = 16
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
ALL_METRICS = "*"
MATCH_SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
CONFIG_DEFAULTS = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}


@dataclass(frozen=True)
class Subscription:
    """A client-metrics subscription (KIP-714): its name, metric prefixes, push interval and `match` selectors."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, identity: Mapping[str, str]) -> bool:
        return all(p.fullmatch(identity.get(sel, "")) is not None for sel, p in self.match)


def _split(value: str) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()]


def parse_match(value: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for item in _split(value):
        sel, sep, pattern = item.partition("=")
        if not sep or sel not in MATCH_SELECTORS:
            raise KafkaError(
                ErrorCode.invalid_config,
                f"Illegal client matching pattern {item!r}; selectors are {', '.join(MATCH_SELECTORS)}",
            )
        try:
            out.append((sel, re.compile(pattern)))
        except re.error as exc:
            raise KafkaError(
                ErrorCode.invalid_config, f"Illegal regular expression in client matching pattern {item!r}: {exc}"
            ) from None
    return tuple(out)


def validate_config(name: str, key: str, value: str | None) -> None:
    """One key of a client-metrics resource (IncrementalAlterConfigs / AlterConfigs)."""
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Subscription name can't be empty")
    if key not in CONFIG_DEFAULTS:
        raise KafkaError(ErrorCode.invalid_config, f"Unknown client metrics config name: {key}")
    if value is None:
        return
    if key == INTERVAL_MS:
        try:
            ms = int(value)
        except ValueError:
            raise KafkaError(
                ErrorCode.invalid_config, f"Invalid value {value} for interval.ms: not an integer"
            ) from None
        if not MIN_INTERVAL_MS <= ms <= MAX_INTERVAL_MS:
            raise KafkaError(
                ErrorCode.invalid_config,
                f"Invalid value {ms} for interval.ms, interval must be between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}",
            )
    elif key == MATCH:
        parse_match(value)


def subscription_from_config(name: str, values: Mapping[str, str]) -> Subscription:
    metrics = tuple(_split(values.get(METRICS, "")))
    try:
        interval = int(values.get(INTERVAL_MS, DEFAULT_INTERVAL_MS))
    except ValueError:
        interval = DEFAULT_INTERVAL_MS
    try:
        match = parse_match(values.get(MATCH, ""))
    except KafkaError:
        match = ((MATCH_SELECTORS[0], re.compile(r"(?!)")),)  # an invalid pattern matches nobody
    return Subscription(name, metrics, min(max(interval, MIN_INTERVAL_MS), MAX_INTERVAL_MS), match)


CLIENT_METRICS_CONFIG_SOURCE, DEFAULT_CONFIG_SOURCE = 7, 5
_CONFIG_TYPES = {METRICS: 7, INTERVAL_MS: 3, MATCH: 7}  # list, int, list


def describe_entries(image: object, name: str, keys: list[str] | None = None) -> list[dict[str, object]]:
    """DescribeConfigs entries of a client-metrics resource (set values, else defaults)."""
    configs = getattr(image, "configs", {})
    current = configs.get((CLIENT_METRICS_RESOURCE, name), {})
    out: list[dict[str, object]] = []
    for key, default in CONFIG_DEFAULTS.items():
        if keys is not None and key not in keys:
            continue
        is_set = key in current
        source = CLIENT_METRICS_CONFIG_SOURCE if is_set else DEFAULT_CONFIG_SOURCE
        value = current[key] if is_set else default
        out.append(
            {
                "name": key,
                "value": value,
                "read_only": False,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": [{"name": key, "value": value, "source": source}],
                "config_type": _CONFIG_TYPES[key],
                "documentation": None,
                "is_default": not is_set,
            }
        )
    return out
