"""The counters every request touches are plain integers exported at scrape time
(kopfka.metrics.broker_metrics.EventCollector). A scrape must read exactly as prometheus-client's own
Counter and Histogram, which they replace, read for the same events: same names, labels, buckets
and values, so dashboards, alerts and the autoscaler see no difference."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kopfka.metrics.broker_metrics import LATENCY_BUCKETS_MS, BrokerMetrics, count_records, request_name
from kopfka.protocol.record_codec import Record, encode_batch
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

EVENT_FAMILIES = {
    "kafka_server_brokertopicmetrics_bytesin",
    "kafka_server_brokertopicmetrics_bytesout",
    "kafka_server_brokertopicmetrics_messagesin",
    "kafka_server_brokertopicmetrics_failedproducerequests",
    "kafka_network_requestmetrics_requests",
    "kafka_network_requestmetrics_errors",
    "kafka_network_requestmetrics_totaltimems",
}


class Reference:
    """The prometheus-client objects kopfka updated per request before, fed the same events."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.bytes_in = Counter("kafka_server_brokertopicmetrics_bytesin", "", ["topic"], registry=r)
        self.bytes_out = Counter("kafka_server_brokertopicmetrics_bytesout", "", ["topic"], registry=r)
        self.messages_in = Counter("kafka_server_brokertopicmetrics_messagesin", "", ["topic"], registry=r)
        self.failed = Counter("kafka_server_brokertopicmetrics_failedproducerequests", "", ["topic"], registry=r)
        self.requests = Counter("kafka_network_requestmetrics_requests", "", ["request", "version"], registry=r)
        self.errors = Counter("kafka_network_requestmetrics_errors", "", ["request"], registry=r)
        self.total = Histogram(
            "kafka_network_requestmetrics_totaltimems", "", ["request"], buckets=LATENCY_BUCKETS_MS, registry=r
        )

    def topic(self, topic: str) -> None:  # a topic's three series appeared at its first event
        for c in (self.bytes_in, self.bytes_out, self.messages_in):
            c.labels(topic=topic)

    def produce(self, topic: str, batch: bytes) -> None:
        self.topic(topic)
        self.bytes_in.labels(topic=topic).inc(len(batch))
        self.messages_in.labels(topic=topic).inc(count_records(batch))

    def failed_produce(self, topic: str) -> None:
        self.topic(topic)
        self.failed.labels(topic=topic).inc()

    def bytes_out_(self, topic: str, n: int) -> None:
        self.topic(topic)
        self.bytes_out.labels(topic=topic).inc(n)

    def request(self, api_key: int, version: int, ms: float, failed: bool) -> None:
        name = request_name(api_key)
        self.requests.labels(request=name, version=str(version)).inc()
        self.errors.labels(request=name)
        self.total.labels(request=name).observe(ms)
        if failed:
            self.errors.labels(request=name).inc()


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        if fam.name in EVENT_FAMILIES:
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def batch(records: int) -> bytes:
    return bytes(encode_batch([Record(i, 1_700_000_000_000, None, b"v" * i) for i in range(records)]))


# request times on, near and past the bucket bounds: `le` is inclusive
TIMES = st.one_of(
    st.sampled_from([0.0, *LATENCY_BUCKETS_MS, 30_000.5, 1e9]),
    st.floats(min_value=0, max_value=40_000, allow_nan=False),
)
TOPICS = st.sampled_from(["orders", "clicks", "x"])
EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.sampled_from([0, 1, 3, 18]), st.integers(0, 12), TIMES, st.booleans()),
        st.tuples(st.just("produce"), TOPICS, st.integers(1, 5)),
        st.tuples(st.just("failed"), TOPICS),
        st.tuples(st.just("out"), TOPICS, st.integers(0, 1 << 40)),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(EVENTS)
def test_a_scrape_reads_as_prometheus_clients_own_counters_did(events: list[tuple]) -> None:  # type: ignore[type-arg]
    ours, ref = BrokerMetrics(CollectorRegistry()), Reference()
    for ev in events:
        kind = ev[0]
        if kind == "request":
            _, api_key, version, ms, failed = ev
            ours.record_request(api_key, version, ms, failed=failed)
            ref.request(api_key, version, ms, failed)
        elif kind == "produce":
            b = batch(ev[2])
            ours.record_produce(ev[1], b)
            ref.produce(ev[1], b)
        elif kind == "failed":
            ours.record_failed_produce(ev[1])
            ref.failed_produce(ev[1])
        else:
            ours.record_bytes_out(ev[1], ev[2])
            ref.bytes_out_(ev[1], ev[2])
    assert samples(ours.registry) == samples(ref.registry)


def test_a_forgotten_topic_leaves_the_scrape() -> None:
    m = BrokerMetrics(CollectorRegistry())
    m.record_produce("gone", batch(2))
    m.record_produce("kept", batch(1))
    m.forget_topic("gone")
    topics = {dict(labels).get("topic") for (name, labels) in samples(m.registry) if "brokertopic" in name}
    assert topics == {"kept"}
