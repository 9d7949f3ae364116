"""Broker metrics, named as Kafka's JMX exporter names them, kept as plain numbers.

`kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t` is scraped by the usual JMX
exporter rules as `kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`; using the same
names lets existing dashboards and alerts work unchanged. The counters (requests, request time,
bytes and messages per topic, ISR changes, throttles, rejected connections) are plain integers
bumped on the event loop: prometheus-client's own counters take a lock per increment: 4.8-9.1 us
of each Produce request on the test machine, 1.8-3.6 us now. Everything that is a state rather
than an event (partition counts, log sizes, quota usage, connection counts) is computed at scrape
time. Nothing here imports prometheus-client: kopfka.metrics.exposition turns these figures into
Prometheus families, imported only when something exports them (the HTTP listener's /metrics),
so a broker without one never pays for prometheus-client's import (~27 ms of a cold start).
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Callable
from typing import Any, ClassVar

from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from kopfka.metrics.load import IdleClock

LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_BATCH_LEN = struct.Struct(">i")
_REQUEST_NAMES: dict[int, str] = {}


def request_name(api_key: int) -> str:
    """Kafka's request name for the `request` label (Produce, Fetch, ApiVersions, ...), read from
    the class path in kio's schema index: importing the schema module to read its class name
    loaded each API's v0 module at its first request (~5-8 ms each, on a fresh broker's first
    ApiVersions and Metadata)."""
    name = _REQUEST_NAMES.get(api_key)
    if name is None:
        name = str(api_key)
        versions = schema_name_map.get(api_key_map.get(api_key, ""), {})
        for version in sorted(versions):
            path = versions[version].get(EntityType.request)
            if path:
                name = path.rpartition(":")[2].removesuffix("Request")
                break
        _REQUEST_NAMES[api_key] = name
    return name


def count_records(records: bytes | bytearray | memoryview | None) -> int:
    """Records in a v2 batch sequence, from each header's lastOffsetDelta (no decoding)."""
    if not records:
        return 0
    buf = memoryview(records)
    pos, total, end = 0, 0, len(buf)
    while pos + 61 <= end:
        (length,) = _BATCH_LEN.unpack_from(buf, pos + 8)
        (last_delta,) = _BATCH_LEN.unpack_from(buf, pos + 23)
        total += last_delta + 1
        pos += 12 + length
    return total


class _TopicCounters:
    """A topic's event counts (BrokerTopicMetrics), bumped on the event loop."""

    __slots__ = ("bytes_in", "bytes_out", "failed_produce", "messages_in")

    def __init__(self) -> None:
        self.bytes_in = self.bytes_out = self.messages_in = self.failed_produce = 0


class _RequestTimes:
    """One request name's RequestMetrics: failures and the TotalTimeMs histogram (a count per
    bucket of LATENCY_BUCKETS_MS, the last one +Inf; made cumulative at scrape time)."""

    __slots__ = ("buckets", "errors", "total_ms")

    def __init__(self) -> None:
        self.errors = 0
        self.total_ms = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)


class _RequestCounters:
    """One (API, version): its request count, and its name's times."""

    __slots__ = ("requests", "times")

    def __init__(self, times: _RequestTimes) -> None:
        self.requests = 0
        self.times = times


class BrokerMetrics:
    """A broker's event counters (updated inline) and the subsystems whose state is read at
    scrape time, bound as they come up. Exporting them is kopfka.metrics.exposition's job."""

    _shared: ClassVar[BrokerMetrics | None] = None

    @classmethod
    def shared(cls) -> BrokerMetrics:
        """The process-wide instance, the one /metrics exports on prometheus-client's default
        registry: every broker of a process counts into it, as they all shared that registry."""
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    def __init__(self) -> None:
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.throttled: dict[str, int] = {}  # by quota_type
        self.connections_rejected: dict[tuple[str, str], int] = {}  # by (listener, reason)
        self.handler_idle = IdleClock(records_idle=False)
        self.network_idle: IdleClock | None = None  # set when the event loop runs an IdleTimedSelector
        self.topics: dict[str, _TopicCounters] = {}
        self.requests: dict[tuple[int, int], _RequestCounters] = {}  # by (API key, version)
        self.times: dict[str, _RequestTimes] = {}  # by request name
        # read at scrape time; None until bound
        self.services: Any = None
        self.network: Callable[[], Any] | None = None
        self.log_manager: Any = None
        self.telemetry: Any = None  # kopfka.telemetry.ClientMetricsManager: the first one set is exported

    # --- hot path ------------------------------------------------------------------------
    def topic(self, topic: str) -> _TopicCounters:
        c = self.topics.get(topic)
        if c is None:
            c = self.topics[topic] = _TopicCounters()
        return c

    def record_produce(self, topic: str, records: bytes | bytearray | memoryview | None) -> None:
        c = self.topic(topic)
        if records:
            c.bytes_in += len(records)
            c.messages_in += count_records(records)

    def record_failed_produce(self, topic: str) -> None:
        self.topic(topic).failed_produce += 1

    def record_bytes_out(self, topic: str, size: int) -> None:
        self.topic(topic).bytes_out += size

    def record_request(
        self, api_key: int, version: int, elapsed_ms: float, failed: bool = False, work_ns: int = 0
    ) -> None:
        """One answered request: `elapsed_ms` from arrival to answer, `work_ns` the handler's own
        time on the event loop (its busy time, for the request handler idle ratio)."""
        self.handler_idle.add_busy(work_ns)
        c = self.requests.get((api_key, version))
        if c is None:
            name = request_name(api_key)
            times = self.times.get(name)
            if times is None:
                times = self.times[name] = _RequestTimes()
            c = self.requests[(api_key, version)] = _RequestCounters(times)
        c.requests += 1
        t = c.times
        t.total_ms += elapsed_ms
        t.buckets[bisect_left(LATENCY_BUCKETS_MS, elapsed_ms)] += 1  # the first bound >= it, as `le`
        if failed:
            t.errors += 1

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's series."""
        self.topics.pop(topic, None)

    def count_throttled(self, quota_type: str) -> None:
        """A response sent with a throttle time."""
        self.throttled[quota_type] = self.throttled.get(quota_type, 0) + 1

    def count_rejected_connection(self, listener: str, reason: str) -> None:
        """A connection closed at accept by the connection quotas (`reason`: "count" or "rate")."""
        key = (listener, reason)
        self.connections_rejected[key] = self.connections_rejected.get(key, 0) + 1

    # --- state -----------------------------------------------------------------------------
    def bind_state(self, services: Any, network: Callable[[], Any] | None = None) -> None:
        """The broker's subsystems, read per scrape (the last broker bound is the one exported)."""
        self.services, self.network = services, network
        if services.log_manager is not None:
            self.bind_log_manager(services.log_manager)

    def bind_log_manager(self, log_manager: Any) -> None:
        """The LogManager / cleaner figures; bound as soon as the LogManager exists so that
        recovery progress can be scraped while the logs are still loading."""
        self.log_manager = log_manager


class IsrChangeCounter:
    """Metadata publisher counting ISR shrinks and expansions of the partitions this broker leads
    (kafka.server:type=ReplicaManager IsrShrinksPerSec / IsrExpandsPerSec): the committed ISR is
    compared with the previous image's, once per changed partition, off the request path."""

    name = "isr-change-metrics"

    def __init__(self, metrics: BrokerMetrics, node_id: int) -> None:
        self.metrics = metrics
        self.node_id = node_id

    def on_metadata_update(self, delta: Any, image: Any) -> None:
        before = delta.image.topics_by_id
        for topic_id, pids in delta.topic_changes.changed_partitions.items():
            old_topic, new_topic = before.get(topic_id), image.topics_by_id.get(topic_id)
            if old_topic is None or new_topic is None:
                continue
            for pid in pids:
                old, new = old_topic.partitions.get(pid), new_topic.partitions.get(pid)
                if old is None or new is None or new.leader != self.node_id or old.leader != self.node_id:
                    continue
                was, now = set(old.isr), set(new.isr)
                if now < was:
                    self.metrics.isr_shrinks += 1
                elif now > was:
                    self.metrics.isr_expands += 1
