"""Parse and validate Spark-Kafka-compatible options for the ``kopfka`` data source.

Every check that does not need a broker happens here, when Spark instantiates the data source
(``load()`` / ``save()`` / ``start()``), so a typo fails before any task runs instead of as a
task failure minutes into a job. Option names and semantics follow Spark's built-in Kafka
connector so a pipeline can switch between ``format("kafka")`` and ``format("kopfka")``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

EARLIEST = -2
LATEST = -1

Mode = Literal["batch", "stream"]
TopicPartition = tuple[str, int]


class KopfkaOptionError(ValueError):
    """An invalid option; raised before the query starts."""


# Option keys are compared lowercased: Spark hands Python data sources a case-insensitive map.
SOURCE_KEYS = {
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "maxoffsetspertrigger",
    "includeheaders",
    "failondataloss",
    "minpartitions",
    "maxrecordsperpartition",
    "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    "groupidprefix",
}
SINK_KEYS = {"topic"}
# Keys Spark itself may put into a source's or sink's option map.
SPARK_KEYS = {"path", "checkpointlocation", "queryname"}
UNSUPPORTED_KEYS = {
    "minoffsetspertrigger": "minOffsetsPerTrigger is not supported by the kopfka source",
    "maxtriggerdelay": "maxTriggerDelay is not supported by the kopfka source",
    "kafka.auto.offset.reset": "kafka.auto.offset.reset is not supported; use startingOffsets "
    "(and failOnDataLoss for offsets that no longer exist)",
    "kafka.enable.auto.commit": "kafka.enable.auto.commit is not supported: the source tracks "
    "offsets in the Spark checkpoint, not in a consumer group",
    "kafka.key.deserializer": "kafka.key.deserializer is not supported: key is always binary; "
    "cast it in a DataFrame operation",
    "kafka.value.deserializer": "kafka.value.deserializer is not supported: value is always "
    "binary; cast it in a DataFrame operation",
    "kafka.key.serializer": "kafka.key.serializer is not supported: pass key as string or binary",
    "kafka.value.serializer": "kafka.value.serializer is not supported: pass value as string or "
    "binary",
    "kafka.interceptor.classes": "kafka.interceptor.classes is not supported",
}
# Public spelling of each key, for error messages.
_SPELLING = {
    k.lower(): k
    for k in (
        "subscribe subscribePattern assign startingOffsets endingOffsets startingTimestamp "
        "endingTimestamp startingOffsetsByTimestamp endingOffsetsByTimestamp "
        "startingOffsetsByTimestampStrategy maxOffsetsPerTrigger includeHeaders failOnDataLoss "
        "minPartitions maxRecordsPerPartition kafkaConsumer.pollTimeoutMs fetchOffset.numRetries "
        "fetchOffset.retryIntervalMs groupIdPrefix topic"
    ).split()
}


def spelled(key: str) -> str:
    return _SPELLING.get(key, key)


@dataclass(frozen=True)
class Subscription:
    """Which partitions a source reads: a topic list, a regex over topic names, or fixed ones."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, before it is resolved against the broker.

    ``kind``: ``earliest`` / ``latest``; ``offsets`` (per partition, -2/-1 allowed);
    ``timestamp`` (one timestamp for every partition); ``timestamps`` (per partition).
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int = 0

    @property
    def per_partition(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)


@dataclass(frozen=True)
class SourceOptions:
    """Validated options of a read (batch or stream)."""

    client_conf: Mapping[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    by_timestamp_strategy: Literal["error", "latest"] = "error"
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = 120_000
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1_000
    group_id_prefix: str = "spark-kafka-source"

    def consumer_conf(self) -> dict[str, str | int | bool]:
        """librdkafka consumer config: assign + seek only, so no offsets are ever committed."""
        conf: dict[str, str | int | bool] = {
            "group.id": f"{self.group_id_prefix}-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Java clients (and so Spark) default to read_uncommitted; librdkafka does not.
            "isolation.level": "read_uncommitted",
        }
        conf.update(self.client_conf)
        # Out-of-range must surface as an error so failOnDataLoss decides, never a silent reset.
        conf["auto.offset.reset"] = "error"
        conf["enable.partition.eof"] = True
        return conf

    @property
    def read_committed(self) -> bool:
        return str(self.client_conf.get("isolation.level", "")).lower() == "read_committed"


@dataclass(frozen=True)
class SinkOptions:
    """Validated options of a write."""

    client_conf: Mapping[str, str]
    topic: str | None = None

    def producer_conf(self) -> dict[str, str | int | bool]:
        """Idempotent producer: a retried batch cannot be written twice within one task."""
        conf: dict[str, str | int | bool] = {
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
        conf.update(self.client_conf)
        return conf


@dataclass(frozen=True)
class ParsedOptions:
    """Options split by role; mode-specific checks happen in :meth:`source` / :meth:`sink`."""

    raw: Mapping[str, str]
    client_conf: Mapping[str, str]

    def has(self, key: str) -> bool:
        return key in self.raw

    def source(self, mode: Mode) -> SourceOptions:
        return _source_options(self, mode)

    def check_if_source(self) -> None:
        """At definition time Spark does not say read or write; a source-only key means read,
        so check everything that does not depend on batch vs. streaming right away."""
        if any(k in self.raw for k in SOURCE_KEYS):
            _source_options(self, None)

    def sink(self) -> SinkOptions:
        return _sink_options(self)


def parse_options(options: Mapping[str, str]) -> ParsedOptions:
    """Reject unknown or unsupported keys and split off the ``kafka.*`` client config."""
    raw = {str(k).lower(): str(v) for k, v in options.items()}
    client: dict[str, str] = {}
    unknown: list[str] = []
    for key, value in raw.items():
        if key in UNSUPPORTED_KEYS:
            raise KopfkaOptionError(UNSUPPORTED_KEYS[key])
        if key.startswith("kafka."):
            client[key[len("kafka."):]] = value
        elif key not in SOURCE_KEYS | SINK_KEYS | SPARK_KEYS:
            unknown.append(key)
    if unknown:
        known = sorted(spelled(k) for k in SOURCE_KEYS | SINK_KEYS)
        raise KopfkaOptionError(
            f"unknown option(s) {', '.join(sorted(unknown))} for format('kopfka'); known options: "
            f"{', '.join(known)}, and kafka.* (passed to the Kafka client)"
        )
    if not client.get("bootstrap.servers", "").strip():
        raise KopfkaOptionError("option kafka.bootstrap.servers is required")
    return ParsedOptions(raw=raw, client_conf=client)


def _source_options(p: ParsedOptions, mode: Mode | None) -> SourceOptions:
    raw = p.raw
    sink_only = [k for k in SINK_KEYS if k in raw]
    if sink_only:
        raise KopfkaOptionError(
            f"option {', '.join(spelled(k) for k in sink_only)} only applies to writes; "
            "choose topics to read with subscribe, subscribePattern or assign"
        )
    subscription = _subscription(raw)

    if mode == "stream":
        for key in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if key in raw:
                raise KopfkaOptionError(f"{spelled(key)} is not valid in streaming queries")
    elif mode == "batch" and "maxoffsetspertrigger" in raw:
        raise KopfkaOptionError("maxOffsetsPerTrigger only applies to streaming queries")

    starting = _offset_spec(raw, "starting", default="latest" if mode == "stream" else "earliest")
    ending = _offset_spec(raw, "ending", default="latest")
    if mode == "batch":
        if starting.kind == "latest" or (
            starting.kind == "offsets" and LATEST in starting.per_partition.values()
        ):
            raise KopfkaOptionError("startingOffsets can't be latest (-1) for batch queries")
        if ending.kind == "earliest" or (
            ending.kind == "offsets" and EARLIEST in ending.per_partition.values()
        ):
            raise KopfkaOptionError("endingOffsets can't be earliest (-2) for batch queries")
    if subscription.kind == "assign":
        assigned = set(subscription.assigned)
        for name, spec in (("startingOffsets", starting), ("endingOffsets", ending)):
            extra = set(spec.per_partition) - assigned
            if extra:
                raise KopfkaOptionError(
                    f"{name} names partitions that are not assigned: {_fmt_tps(extra)}"
                )

    strategy = raw.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise KopfkaOptionError(
            f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', got {strategy!r}"
        )
    return SourceOptions(
        client_conf=dict(p.client_conf),
        subscription=subscription,
        starting=starting,
        ending=ending,
        by_timestamp_strategy="latest" if strategy == "latest" else "error",
        max_offsets_per_trigger=_positive_int(raw, "maxoffsetspertrigger"),
        include_headers=_bool(raw, "includeheaders", False),
        fail_on_data_loss=_bool(raw, "failondataloss", True),
        min_partitions=_positive_int(raw, "minpartitions"),
        max_records_per_partition=_positive_int(raw, "maxrecordsperpartition"),
        poll_timeout_ms=_positive_int(raw, "kafkaconsumer.polltimeoutms") or 120_000,
        fetch_offset_retries=_non_negative_int(raw, "fetchoffset.numretries", 3),
        fetch_offset_retry_interval_ms=_non_negative_int(raw, "fetchoffset.retryintervalms", 1000),
        group_id_prefix=raw.get("groupidprefix", "spark-kafka-source"),
    )


def _sink_options(p: ParsedOptions) -> SinkOptions:
    source_only = sorted(k for k in SOURCE_KEYS if k in p.raw)
    if source_only:
        raise KopfkaOptionError(
            f"option(s) {', '.join(spelled(k) for k in source_only)} only apply to reads; "
            "a write takes kafka.* options and topic"
        )
    topic = p.raw.get("topic")
    if topic is not None and not topic.strip():
        raise KopfkaOptionError("option topic must not be empty")
    return SinkOptions(client_conf=dict(p.client_conf), topic=topic)


def _subscription(raw: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in raw]
    if len(given) != 1:
        what = "none" if not given else ", ".join(spelled(k) for k in given)
        raise KopfkaOptionError(
            f"exactly one of subscribe, subscribePattern or assign must be set (got {what})"
        )
    key = given[0]
    value = raw[key]
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KopfkaOptionError("subscribe must list at least one topic (comma-separated)")
        return Subscription("subscribe", topics=topics)
    if key == "subscribepattern":
        if not value.strip():
            raise KopfkaOptionError("subscribePattern must not be empty")
        try:
            re.compile(value)
        except re.error as e:
            raise KopfkaOptionError(f"subscribePattern {value!r} is not a valid regex: {e}") from e
        return Subscription("subscribePattern", pattern=value)
    doc = _json_object("assign", value)
    assigned: list[TopicPartition] = []
    for topic, parts in doc.items():
        if not isinstance(parts, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in parts
        ):
            raise KopfkaOptionError(
                f"assign: topic {topic!r} must map to a list of partition numbers, "
                f'e.g. {{"{topic}":[0,1]}}; got {json.dumps(parts)}'
            )
        assigned.extend((topic, x) for x in parts)
    if not assigned:
        raise KopfkaOptionError("assign must name at least one partition")
    return Subscription("assign", assigned=tuple(sorted(set(assigned))))


def _offset_spec(raw: Mapping[str, str], prefix: str, default: str) -> OffsetSpec:
    """Resolve precedence as Spark does: timestamp > offsets-by-timestamp > offsets."""
    name = f"{prefix}Offsets"
    if f"{prefix}timestamp" in raw:
        key = f"{prefix}Timestamp"
        ts = _int_value(key, raw[f"{prefix}timestamp"])
        if ts < 0:
            raise KopfkaOptionError(f"{key} must be a non-negative epoch-millis, got {ts}")
        return OffsetSpec("timestamp", timestamp=ts)
    if f"{prefix}offsetsbytimestamp" in raw:
        key = f"{prefix}OffsetsByTimestamp"
        per = _partition_json(key, raw[f"{prefix}offsetsbytimestamp"], min_value=0)
        return OffsetSpec("timestamps", offsets=per)
    value = raw.get(f"{prefix}offsets", default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec("earliest" if value.lower() == "earliest" else "latest")
    if not value.startswith("{"):
        raise KopfkaOptionError(
            f"{name} must be 'earliest', 'latest' or a JSON object like "
            f'{{"topic":{{"0":23,"1":-2}}}}; got {value!r}'
        )
    return OffsetSpec("offsets", offsets=_partition_json(name, value, min_value=EARLIEST))


def _partition_json(name: str, value: str, min_value: int
                    ) -> tuple[tuple[TopicPartition, int], ...]:
    doc = _json_object(name, value)
    out: list[tuple[TopicPartition, int]] = []
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise KopfkaOptionError(
                f'{name}: topic {topic!r} must map to an object {{"<partition>": <number>}}, '
                f"got {json.dumps(parts)}"
            )
        for part, off in parts.items():
            try:
                partition = int(part)
            except ValueError:
                partition = -1
            if partition < 0:
                raise KopfkaOptionError(
                    f"{name}: {part!r} is not a partition number (topic {topic})"
                )
            if not isinstance(off, int) or isinstance(off, bool) or off < min_value:
                raise KopfkaOptionError(
                    f"{name}: {topic}-{partition} has invalid value {json.dumps(off)}"
                    + (" (use -2 for earliest, -1 for latest)" if min_value < 0 else "")
                )
            out.append(((topic, partition), off))
    if not out:
        raise KopfkaOptionError(f"{name} names no partitions")
    return tuple(sorted(out))


def _json_object(name: str, value: str) -> dict[str, object]:
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as e:
        raise KopfkaOptionError(
            f"{name} is not valid JSON ({e.msg} at char {e.pos}): {value!r}"
        ) from e
    if not isinstance(doc, dict):
        raise KopfkaOptionError(f"{name} must be a JSON object, got {value!r}")
    return doc


def _int_value(key: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise KopfkaOptionError(f"{key} must be an integer, got {value!r}") from None


def _positive_int(raw: Mapping[str, str], key: str) -> int | None:
    if key not in raw:
        return None
    n = _int_value(spelled(key), raw[key])
    if n <= 0:
        raise KopfkaOptionError(f"{spelled(key)} must be positive, got {n}")
    return n


def _non_negative_int(raw: Mapping[str, str], key: str, default: int) -> int:
    if key not in raw:
        return default
    n = _int_value(spelled(key), raw[key])
    if n < 0:
        raise KopfkaOptionError(f"{spelled(key)} must not be negative, got {n}")
    return n


def _bool(raw: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in raw:
        return default
    v = raw[key].strip().lower()
    if v not in ("true", "false"):
        raise KopfkaOptionError(f"{spelled(key)} must be true or false, got {raw[key]!r}")
    return v == "true"


def _fmt_tps(tps: set[TopicPartition] | list[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps))
