"""Driver-side broker queries: which partitions a subscription covers and their offsets.

Uses one AdminClient: ListOffsets for many partitions in one request per broker, instead of a
watermark round trip per partition. Never joins a consumer group.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from confluent_kafka import IsolationLevel, KafkaException
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, OffsetSpec

from kopfka.spark.offsets import PartitionOffsets
from kopfka.spark.options import (
    EARLIEST,
    LATEST,
    KopfkaOptionError,
    SourceOptions,
    TopicPartition,
)
from kopfka.spark.options import (
    OffsetSpec as StartSpec,
)

# Kafka's own internal topics: a pattern subscription excludes them, as Java consumers do.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata"})

T = TypeVar("T")


class KopfkaDataLossError(RuntimeError):
    """Offsets a query needs are no longer in the log (and failOnDataLoss is true)."""


def data_loss_message(topic: str, partition: int, wanted: int, log_start: int) -> str:
    return (
        f"Data loss on {topic}-{partition}: offsets {wanted}..{log_start - 1} were deleted "
        f"(the log start offset is now {log_start}, the query needed offset {wanted}). Some data "
        "may have been lost because it is no longer available in Kafka (retention or "
        "DeleteRecords). Set failOnDataLoss=false to skip ahead to the log start offset."
    )


class BrokerMetadata:
    """Partition discovery and ListOffsets with the source's retry options."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        conf: dict[str, str | int | float | bool] = dict(opts.client_conf)
        for key in ("isolation.level", "group.id"):  # consumer-only; AdminClient rejects them
            conf.pop(key, None)
        self.admin = AdminClient(conf)
        self.timeout = max(10.0, opts.poll_timeout_ms / 1000 / 4)
        self.isolation = (IsolationLevel.READ_COMMITTED if opts.read_committed
                          else IsolationLevel.READ_UNCOMMITTED)

    def _retry(self, what: str, fn: Callable[[], T]) -> T:
        attempts = self.opts.fetch_offset_retries + 1
        for i in range(attempts):
            try:
                return fn()
            except (KafkaException, TimeoutError) as e:
                if i + 1 >= attempts:
                    raise RuntimeError(f"{what} failed after {attempts} attempt(s): {e}") from e
                time.sleep(self.opts.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def topic_partitions(self, topic: str | None = None) -> dict[str, list[int]]:
        """Partitions per topic: one named topic, or every topic when ``topic`` is None."""
        md = self._retry(
            "listing topics",
            lambda: self.admin.list_topics(topic, timeout=self.timeout),
        )
        return {name: sorted(t.partitions) for name, t in md.topics.items()
                if t.error is None and t.partitions}

    def partitions(self) -> list[TopicPartition]:
        """Current partitions of the subscription (assign: exactly the assigned ones)."""
        sub = self.opts.subscription
        if sub.kind == "subscribePattern":
            topics = self.topic_partitions()
        else:
            # Per-topic metadata: cheaper than listing the cluster.
            names = sub.topics if sub.kind == "subscribe" else sorted({t for t, _ in sub.assigned})
            topics = {}
            for name in names:
                topics.update(self.topic_partitions(name))
        if sub.kind == "assign":
            missing = [tp for tp in sub.assigned if tp[1] not in topics.get(tp[0], [])]
            if missing:
                names_ = ", ".join(f"{t}-{p}" for t, p in missing)
                raise KopfkaOptionError(f"assign names partitions that do not exist: {names_}")
            return list(sub.assigned)
        return sorted(
            (topic, p) for topic, parts in topics.items()
            if topic not in INTERNAL_TOPICS and sub.matches(topic) for p in parts
        )

    def list_offsets(self, tps: Iterable[TopicPartition], spec: int | str) -> PartitionOffsets:
        """``spec``: "earliest", "latest" or an epoch-millis timestamp (-1 if none at/after it)."""
        tps = list(tps)
        if not tps:
            return {}
        if spec == "earliest":
            ospec = OffsetSpec.earliest()
        elif spec == "latest":
            ospec = OffsetSpec.latest()
        else:
            ospec = OffsetSpec.for_timestamp(int(spec))

        def call() -> PartitionOffsets:
            futures = self.admin.list_offsets(
                {KafkaTP(t, p): ospec for t, p in tps},
                isolation_level=self.isolation, request_timeout=self.timeout,
            )
            return {(tp.topic, tp.partition): int(f.result(timeout=self.timeout + 5).offset)
                    for tp, f in futures.items()}

        return self._retry(f"ListOffsets({spec})", call)

    def resolve(self, spec: StartSpec, tps: list[TopicPartition], *, role: str,
                strict_json: bool = True) -> PartitionOffsets:
        """Concrete offsets for ``tps`` from a starting/ending spec.

        A JSON spec must name every partition (as Spark requires) when ``strict_json``; in a
        streaming query new partitions found later start from earliest instead.
        """
        if spec.kind in ("earliest", "latest"):
            return self.list_offsets(tps, spec.kind)
        if spec.kind == "timestamp":
            return self._by_timestamp({tp: spec.timestamp for tp in tps}, role)
        per = spec.per_partition
        missing = [tp for tp in tps if tp not in per]
        if missing and strict_json:
            raise KopfkaOptionError(
                f"{role}Offsets{'ByTimestamp' if spec.kind == 'timestamps' else ''} must specify "
                f"every partition; missing: {', '.join(f'{t}-{p}' for t, p in missing)} "
                "(use -2 for earliest, -1 for latest)"
            )
        unknown = [tp for tp in per if tp not in tps]
        if unknown:
            raise KopfkaOptionError(
                f"{role}Offsets names partitions that are not subscribed or do not exist: "
                f"{', '.join(f'{t}-{p}' for t, p in unknown)}"
            )
        if spec.kind == "timestamps":
            return self._by_timestamp({tp: per[tp] for tp in tps if tp in per}, role)
        out: PartitionOffsets = {}
        symbolic = {tp: per[tp] for tp in tps if per.get(tp, EARLIEST) in (EARLIEST, LATEST)}
        earliest = self.list_offsets([tp for tp, v in symbolic.items() if v == EARLIEST],
                                     "earliest")
        latest = self.list_offsets([tp for tp, v in symbolic.items() if v == LATEST], "latest")
        for tp in tps:
            v = per.get(tp, EARLIEST)
            out[tp] = earliest[tp] if v == EARLIEST else latest[tp] if v == LATEST else v
        return out

    def _by_timestamp(self, wanted: dict[TopicPartition, int], role: str) -> PartitionOffsets:
        out: PartitionOffsets = {}
        by_ts: dict[int, list[TopicPartition]] = {}
        for tp, ts in wanted.items():
            by_ts.setdefault(ts, []).append(tp)
        latest: PartitionOffsets | None = None
        for ts, tps in by_ts.items():
            for tp, off in self.list_offsets(tps, ts).items():
                if off >= 0:
                    out[tp] = off
                    continue
                if role == "starting" and self.opts.by_timestamp_strategy == "error":
                    raise KopfkaOptionError(
                        f"no offset in {tp[0]}-{tp[1]} has a timestamp >= {ts}; set "
                        "startingOffsetsByTimestampStrategy=latest to start from the latest "
                        "offset instead"
                    )
                if latest is None:
                    latest = self.list_offsets(list(wanted), "latest")
                out[tp] = latest[tp]
        return out
