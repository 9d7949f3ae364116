"""The Prometheus side of kopfka.metrics.broker_metrics: collectors that turn a `BrokerMetrics`'
plain counters and bound subsystems into metric families at scrape time, and `export` to
register them. The only broker module besides kopfka.server.health that imports
prometheus-client, and only imported when something exports: prometheus-client's import (its
exposition module pulls in http.server, urllib.request, ...) costs ~27 ms of a broker's cold
start, wasted on a broker that nothing scrapes.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kopfka.log.log_manager import disk_usage
from kopfka.metrics.broker_metrics import LATENCY_BUCKETS_MS, BrokerMetrics, request_name
from kopfka.metrics.load import IdleClock

_exported: weakref.WeakKeyDictionary[CollectorRegistry, list[BrokerMetrics]] = weakref.WeakKeyDictionary()


def export(metrics: BrokerMetrics, registry: CollectorRegistry | None = None) -> None:
    """Register `metrics`' collectors into `registry` (prometheus-client's default one unless
    given); a second call for the same pair does nothing, as the collectors would be scraped twice.
    Turns prometheus-client's `_created` samples off, as BrokerMetrics did while it made
    prometheus-client counters (for any other library's counters in the registry)."""
    registry = REGISTRY if registry is None else registry
    done = _exported.setdefault(registry, [])
    if any(m is metrics for m in done):
        return
    done.append(metrics)
    disable_created_metrics()
    for collector in (
        EventCollector(metrics),
        LoadCollector(metrics),
        BrokerStateCollector(metrics),
        LogManagerCollector(metrics),
        TelemetryCollector(metrics),
    ):
        registry.register(collector)


class _MetricsCollector(Collector):
    """Reads one `BrokerMetrics` per scrape. describe() is empty: the default registry would
    otherwise run collect() at registration, and which families exist depends on the scrape."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Any]:
        return []


class EventCollector(_MetricsCollector):
    """The event counters of `BrokerMetrics`, as the prometheus-client counters and histogram
    they replace exposed them (same names, labels and buckets; a labelled series from its first
    count on). It runs on the event loop (the /metrics route is aiohttp's), where every increment
    happens too."""

    def collect(self) -> Iterator[Any]:
        m = self.metrics
        for name, doc, count in (
            ("kafka_server_replicamanager_isrshrinks", "ISR shrinks", m.isr_shrinks),
            ("kafka_server_replicamanager_isrexpands", "ISR expansions", m.isr_expands),
        ):
            isr = CounterMetricFamily(name, doc)
            isr.add_metric([], count)
            yield isr
        throttled = CounterMetricFamily(
            "kafka_server_quota_throttled_requests", "Responses sent with a throttle", labels=["quota_type"]
        )
        for quota_type, count in list(m.throttled.items()):
            throttled.add_metric([quota_type], count)
        yield throttled
        rejected = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_rejected",
            "Connections refused by connection quotas",
            labels=["listener", "reason"],
        )
        for (listener, reason), count in list(m.connections_rejected.items()):
            rejected.add_metric([listener, reason], count)
        yield rejected
        topics = list(m.topics.items())
        families = [
            ("kafka_server_brokertopicmetrics_bytesin", "Bytes appended by producers", "bytes_in"),
            ("kafka_server_brokertopicmetrics_bytesout", "Bytes sent to fetchers", "bytes_out"),
            ("kafka_server_brokertopicmetrics_messagesin", "Records appended", "messages_in"),
        ]
        for name, doc, attr in families:
            fam = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, c in topics:
                fam.add_metric([topic], getattr(c, attr))
            yield fam
        failed = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_failedproducerequests",
            "Produce partition requests that failed",
            labels=["topic"],
        )
        for topic, c in topics:
            if c.failed_produce:  # a series from a topic's first failure on, as before
                failed.add_metric([topic], c.failed_produce)
        yield failed
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests handled", labels=["request", "version"]
        )
        for (api_key, version), rc in list(m.requests.items()):
            requests.add_metric([request_name(api_key), str(version)], rc.requests)
        yield requests
        times = list(m.times.items())
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors", "Requests whose handler failed", labels=["request"]
        )
        total = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems", "Request handling time (ms)", labels=["request"]
        )
        for name, t in times:
            errors.add_metric([name], t.errors)
            cumulative, running = [], 0
            for bound, n in zip((*LATENCY_BUCKETS_MS, float("inf")), t.buckets, strict=True):
                running += n
                cumulative.append((floatToGoString(bound), running))
            total.add_metric([name], cumulative, sum_value=t.total_ms)
        yield errors
        yield total


class LoadCollector(_MetricsCollector):
    """Request handler and network processor idle time (kopfka.metrics.load), under the names
    Strimzi's JMX exporter rules give Kafka's (`..._percent`: a 0-1 ratio over the last 30-60 s),
    plus cumulative idle-nanosecond counters whose rate / 1e9 is the idle ratio between any two
    scrapes: Kafka's meter count and its Selector's io-wait-time-ns-total."""

    def collect(self) -> Iterator[Any]:
        yield from _idle_families(
            self.metrics.handler_idle,
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
            "the request handlers were idle",
        )
        network = self.metrics.network_idle
        if network is not None:  # None: the loop has no IdleTimedSelector (an in-process test's broker)
            yield from _idle_families(
                network,
                "kafka_network_socketserver_networkprocessoravgidle_percent",
                "kafka_server_socket_server_metrics_io_wait_time_ns",
                "the event loop waited for I/O",
            )


def _idle_families(clock: IdleClock, ratio_name: str, counter_name: str, what: str) -> Iterator[Any]:
    ratio = GaugeMetricFamily(ratio_name, f"Share of time {what} over the last 30-60 s (0-1)")
    ratio.add_metric([], clock.ratio())
    total = CounterMetricFamily(counter_name, f"Time {what} (ns); its rate / 1e9 is the idle ratio")
    total.add_metric([], clock.idle_ns())
    yield from (ratio, total)


class BrokerStateCollector(_MetricsCollector):
    """Gauges computed when Prometheus scrapes, from the services `BrokerMetrics.bind_state`
    bound (nothing before that)."""

    def collect(self) -> Iterator[Any]:
        svc = self.metrics.services
        if svc is None:
            return
        image = svc.metadata.image
        node = svc.node_id
        urp = GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here with fewer in-sync replicas than replicas",
        )
        leaders = GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions led by this broker")
        parts = GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions hosted by this broker")
        offline = GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader"
        )
        active = GaugeMetricFamily(
            "kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller"
        )
        topics = GaugeMetricFamily("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster")
        apply_errors = GaugeMetricFamily(
            "kafka_server_broker_metadata_metrics_metadata_apply_error_count",
            "Metadata publishing faults: updates a metadata publisher failed to apply",
        )
        apply_errors.add_metric([], getattr(svc.metadata, "apply_error_count", 0))
        n_urp = n_lead = n_parts = n_off = 0
        for t in image.topics_by_id.values():
            for p in t.partitions.values():
                if p.leader == -1:
                    n_off += 1
                if node in p.replicas:
                    n_parts += 1
                if p.leader == node:
                    n_lead += 1
                    if len(p.isr) < len(p.replicas):
                        n_urp += 1
        ctl = svc.local_controller  # a combined node's own controller
        is_active = bool(getattr(ctl, "is_active", False))
        urp.add_metric([], n_urp)
        leaders.add_metric([], n_lead)
        parts.add_metric([], n_parts)
        offline.add_metric([], n_off if is_active else 0)
        active.add_metric([], 1 if is_active else 0)
        topics.add_metric([], len(image.topics_by_id) if is_active else 0)
        yield from (urp, leaders, parts, offline, active, topics, apply_errors)
        yield from self._logs(svc)
        yield from self._quotas(svc)
        yield from self._connections(svc)

    def _logs(self, svc: Any) -> Iterator[Any]:
        size = GaugeMetricFamily("kafka_log_log_size", "Partition log size (bytes)", labels=["topic", "partition"])
        segs = GaugeMetricFamily(
            "kafka_log_log_numlogsegments", "Segments per partition", labels=["topic", "partition"]
        )
        leo = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=["topic", "partition"])
        lso = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=["topic", "partition"])
        per_dir = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectorysize", "Bytes of partition logs per log dir", labels=["logdirectory"]
        )
        dirs: dict[str, int] = {str(d): 0 for d in getattr(svc.log_manager, "live_log_dirs", ())}
        for (topic, partition), ulog in list(svc.log_manager.all_logs()):
            try:
                nbytes = ulog.size_in_bytes
                labels = [topic, str(partition)]
                size.add_metric(labels, nbytes)
                segs.add_metric(labels, ulog.num_segments)
                leo.add_metric(labels, ulog.log_end_offset)
                lso.add_metric(labels, ulog.log_start_offset)
                d = str(ulog.dir.parent)
                dirs[d] = dirs.get(d, 0) + nbytes
            except Exception:  # a log being deleted or renamed concurrently
                continue
        for d, nbytes in dirs.items():
            per_dir.add_metric([d], nbytes)
        yield from (size, segs, leo, lso, per_dir)

    def _quotas(self, svc: Any) -> Iterator[Any]:
        qm = svc.quota_manager
        if qm is None:
            return
        now = time.monotonic() * 1000.0
        for mgr, usage in (
            (qm.produce, "byte_rate"),
            (qm.fetch, "byte_rate"),
            (qm.request, "request_time"),
            (qm.controller_mutation, "tokens"),
        ):
            prefix = f"kafka_server_{mgr.quota_type.value.lower()}"
            use = GaugeMetricFamily(
                f"{prefix}_{usage}", f"{mgr.quota_type.value} quota usage per entity", labels=["user", "client_id"]
            )
            bound = GaugeMetricFamily(
                f"{prefix}_quota_limit", f"{mgr.quota_type.value} quota bound per entity", labels=["user", "client_id"]
            )
            thr = CounterMetricFamily(
                f"{prefix}_throttle_time_ms", "Throttle time handed out (ms)", labels=["user", "client_id"]
            )
            for tags, sensor in list(mgr.sensors.items()):
                labels = [tags[0], tags[1]]
                use.add_metric(labels, sensor.value(now))
                if sensor.bound is not None:
                    bound.add_metric(labels, sensor.bound)
                thr.add_metric(labels, sensor.throttle_ms_total)
            yield from (use, bound, thr)
        exempt = CounterMetricFamily("kafka_server_request_exempt_request_time_ns", "Handler time of exempt requests")
        exempt.add_metric([], qm.request.exempt_ns_total)
        yield exempt

    def _connections(self, svc: Any) -> Iterator[Any]:
        qm = svc.quota_manager
        if qm is None:
            return
        cq = qm.connections
        count = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count", "Open connections", labels=["listener"]
        )
        created = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_creation", "Connections accepted", labels=["listener"]
        )
        throttled = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_accept_throttled",
            "Accepts delayed by the creation-rate quota",
            labels=["listener"],
        )
        for name, st in cq.listeners.items():
            count.add_metric([name], st.count)
            created.add_metric([name], st.created)
            throttled.add_metric([name], st.throttled)
        rate = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_broker_connection_accept_rate",
            "Broker-wide connection creation rate (per second)",
        )
        rate.add_metric([], cq.broker_rate.value(time.monotonic() * 1000.0) if cq.broker_rate.rate else 0.0)
        yield from (count, created, throttled, rate)


class LogManagerCollector(_MetricsCollector):
    """kafka.log LogManager, LogCleaner and LogCleanerManager gauges, read from figures the log
    subsystem keeps anyway (recovery counters, each cleaner's last clean, the last selection
    pass), so nothing is computed between scrapes. Nothing before `BrokerMetrics.bind_log_manager`."""

    def collect(self) -> Iterator[Any]:
        lm = self.metrics.log_manager
        if lm is None:
            return
        dirs = [str(d) for d in lm.log_dirs]
        live = {str(d) for d in lm.live_log_dirs}
        logs_left = GaugeMetricFamily(
            "kafka_log_logmanager_remaininglogstorecover", "Logs left to load/recover per log dir", labels=["dir"]
        )
        remaining = lm.remaining_logs_to_recover.copy()
        for d in dirs:
            logs_left.add_metric([d], remaining.get(d, 0))
        segs_left = GaugeMetricFamily(
            "kafka_log_logmanager_remainingsegmentstorecover",
            "Segments left to recover by each recovery thread of a log dir",
            labels=["dir", "threadnum"],
        )
        for (d, n), count in sorted(lm.remaining_segments_to_recover.copy().items()):
            segs_left.add_metric([d, str(n)], count)
        offline_count = GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount", "Log dirs that are offline")
        offline_count.add_metric([], lm.offline_log_directory_count)
        offline = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectoryoffline", "1 when the log dir is offline", labels=["logdirectory"]
        )
        for d in dirs:
            offline.add_metric([d], 0 if d in live else 1)
        yield from (logs_left, segs_left, offline_count, offline)
        yield from self._capacity(lm)
        cleaner = lm.cleaner
        if cleaner is not None:
            yield from self._cleaner(lm, cleaner)

    def _capacity(self, lm: Any) -> Iterator[Any]:
        """Each online log dir's filesystem size and usable bytes (KIP-827's TotalBytes and
        UsableBytes), so that its usage can be watched and autoscaled on."""
        total = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectorytotalbytes",
            "Size of the filesystem holding the log dir (bytes)",
            labels=["logdirectory"],
        )
        usable = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectoryusablebytes",
            "Bytes still usable on the filesystem holding the log dir",
            labels=["logdirectory"],
        )
        for d in lm.live_log_dirs:
            size, free = disk_usage(d)
            if size >= 0:
                total.add_metric([str(d)], size)
                usable.add_metric([str(d)], free)
        yield from (total, usable)

    def _cleaner(self, lm: Any, cleaner: Any) -> Iterator[Any]:
        for name, doc, value in (
            (
                "max_buffer_utilization_percent",
                "Fullest offset map at the end of a last clean (%)",
                cleaner.max_buffer_utilization_percent,
            ),
            (
                "cleaner_recopy_percent",
                "Bytes written / bytes read by the last cleans (%)",
                cleaner.cleaner_recopy_percent,
            ),
            ("max_clean_time_secs", "Longest last clean of the cleaner tasks (s)", cleaner.max_clean_time_secs),
            (
                "max_compaction_delay_secs",
                "Most overdue compaction beyond max.compaction.lag.ms (s)",
                cleaner.max_compaction_delay_secs,
            ),
            ("deadthreadcount", "Cleaner tasks that died", cleaner.dead_thread_count),
        ):
            g = GaugeMetricFamily(f"kafka_log_logcleaner_{name}", doc)
            g.add_metric([], value)
            yield g
        mgr = cleaner.manager
        dirty = GaugeMetricFamily(
            "kafka_log_logcleanermanager_max_dirty_percent", "Cleanable ratio of the dirtiest compacted log (%)"
        )
        dirty.add_metric([], mgr.max_dirty_percent)
        since = GaugeMetricFamily(
            "kafka_log_logcleanermanager_time_since_last_run_ms", "Time since the cleaner last picked a log (ms)"
        )
        since.add_metric([], mgr.time_since_last_run_ms())
        count = GaugeMetricFamily(
            "kafka_log_logcleanermanager_uncleanable_partitions_count",
            "Partitions skipped after a cleaning failure, per log dir",
            labels=["logdirectory"],
        )
        nbytes = GaugeMetricFamily(
            "kafka_log_logcleanermanager_uncleanable_bytes",
            "Cleanable bytes stuck in uncleanable partitions, per log dir",
            labels=["logdirectory"],
        )
        logs = lm.current_logs.copy()
        now = time.time_ns() // 1_000_000
        for d in lm.live_log_dirs:
            count.add_metric([str(d)], mgr.uncleanable_partitions_count(d))
            try:
                nbytes.add_metric([str(d)], mgr.uncleanable_bytes(d, logs, now))
            except Exception:  # a log closed or deleted under the scrape
                nbytes.add_metric([str(d)], 0)
        yield from (dirty, since, count, nbytes)


class TelemetryCollector(_MetricsCollector):
    """What clients pushed via KIP-714 (kopfka.telemetry.ClientMetricsManager), one gauge family
    per pushed metric name, plus the manager's instance count and refused pushes; nothing until
    a manager is set on the metrics (the first broker's: one process exports one)."""

    def collect(self) -> Iterator[Any]:
        telemetry = self.metrics.telemetry
        if telemetry is None:
            return
        families: dict[str, Metric] = {}
        for name, labels, value in telemetry.series():
            fam = families.get(name)
            if fam is None:
                fam = families[name] = Metric(name, "Client telemetry pushed via KIP-714", "gauge")
            fam.add_sample(name, labels, value)
        yield from families.values()
        count = Metric("kafka_server_client_metrics_instance_count", "Known client telemetry instances", "gauge")
        count.add_sample("kafka_server_client_metrics_instance_count", {}, float(len(telemetry.instances)))
        yield count
        thr = Metric("kafka_server_client_metrics_throttle", "Too-early telemetry pushes refused", "counter")
        thr.add_sample("kafka_server_client_metrics_throttle_total", {}, float(telemetry.throttled_pushes))
        yield thr
