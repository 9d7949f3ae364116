"""The broker's counters are plain integers (kopfka.metrics.broker_metrics) exported at scrape time
(kopfka.metrics.exposition.EventCollector). A scrape must read exactly as prometheus-client's own
Counter and Histogram, which they replace, read for the same events: same names, labels, buckets
and values, so dashboards, alerts and the autoscaler see no difference."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kopfka.metrics.broker_metrics import LATENCY_BUCKETS_MS, BrokerMetrics, count_records, request_name
from kopfka.metrics.exposition import export
from kopfka.protocol.record_codec import Record, encode_batch
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.parser import text_string_to_metric_families

EVENT_FAMILIES = {
    "kafka_server_brokertopicmetrics_bytesin",
    "kafka_server_brokertopicmetrics_bytesout",
    "kafka_server_brokertopicmetrics_messagesin",
    "kafka_server_brokertopicmetrics_failedproducerequests",
    "kafka_network_requestmetrics_requests",
    "kafka_network_requestmetrics_errors",
    "kafka_network_requestmetrics_totaltimems",
    "kafka_server_replicamanager_isrshrinks",
    "kafka_server_replicamanager_isrexpands",
    "kafka_server_quota_throttled_requests",
    "kafka_server_socket_server_metrics_connection_rejected",
}


class Reference:
    """The prometheus-client objects kopfka updated per request before, fed the same events."""

    def __init__(self) -> None:
        disable_created_metrics()  # as kopfka ran them
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
        self.isr_shrinks = Counter("kafka_server_replicamanager_isrshrinks", "", registry=r)
        self.isr_expands = Counter("kafka_server_replicamanager_isrexpands", "", registry=r)
        self.throttled = Counter("kafka_server_quota_throttled_requests", "", ["quota_type"], registry=r)
        self.rejected = Counter(
            "kafka_server_socket_server_metrics_connection_rejected", "", ["listener", "reason"], registry=r
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

    def isr(self, shrink: bool) -> None:
        (self.isr_shrinks if shrink else self.isr_expands).inc()

    def throttle(self, quota_type: str) -> None:
        self.throttled.labels(quota_type=quota_type).inc()

    def reject(self, listener: str, reason: str) -> None:
        self.rejected.labels(listener=listener, reason=reason).inc()


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
        st.tuples(st.just("isr"), st.booleans()),
        st.tuples(st.just("throttled"), st.sampled_from(["any", "produce"])),
        st.tuples(st.just("rejected"), st.sampled_from(["PLAINTEXT", "EXTERNAL"]), st.sampled_from(["count", "rate"])),
    ),
    max_size=40,
)


def scrape_of(m: BrokerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    export(m, registry)
    return samples(registry)


def feed(ours: BrokerMetrics, ref: Reference, events: list[tuple]) -> None:  # type: ignore[type-arg]
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
        elif kind == "out":
            ours.record_bytes_out(ev[1], ev[2])
            ref.bytes_out_(ev[1], ev[2])
        elif kind == "isr":
            if ev[1]:
                ours.isr_shrinks += 1  # as IsrChangeCounter counts
            else:
                ours.isr_expands += 1
            ref.isr(ev[1])
        elif kind == "throttled":
            ours.count_throttled(ev[1])
            ref.throttle(ev[1])
        else:
            ours.count_rejected_connection(ev[1], ev[2])
            ref.reject(ev[1], ev[2])


@settings(max_examples=60, deadline=None)
@given(EVENTS)
def test_a_scrape_reads_as_prometheus_clients_own_counters_did(events: list[tuple]) -> None:  # type: ignore[type-arg]
    ours, ref = BrokerMetrics(), Reference()
    feed(ours, ref, events)
    assert scrape_of(ours) == samples(ref.registry)


def test_the_comparison_covers_every_family_and_sees_a_difference() -> None:
    """One event of each kind: every compared family has a sample on both sides (the property
    above compares something), and one count more on our side breaks the equality."""
    events = [
        ("request", 0, 3, 7.0, True),
        ("produce", "orders", 2),
        ("failed", "orders"),
        ("out", "orders", 10),
        ("isr", True),
        ("isr", False),
        ("throttled", "any"),
        ("rejected", "PLAINTEXT", "rate"),
    ]
    ours, ref = BrokerMetrics(), Reference()
    feed(ours, ref, events)
    theirs = samples(ref.registry)
    assert scrape_of(ours) == theirs
    suffixes = ("_total", "_bucket", "_sum", "_count")
    named = {name.removesuffix(sfx) for name, _ in theirs for sfx in suffixes if name.endswith(sfx)}
    assert named == EVENT_FAMILIES
    for more in (("isr", False), ("throttled", "produce"), ("rejected", "PLAINTEXT", "rate")):
        again = BrokerMetrics()
        feed(again, Reference(), [*events, more])
        assert scrape_of(again) != theirs, more


def test_unlabelled_counters_read_0_from_the_start_labelled_ones_appear_at_their_first_count() -> None:
    assert scrape_of(BrokerMetrics()) == samples(Reference().registry) == {
        ("kafka_server_replicamanager_isrshrinks_total", ()): 0.0,
        ("kafka_server_replicamanager_isrexpands_total", ()): 0.0,
    }


def test_exporting_twice_into_one_registry_exports_once() -> None:
    m, registry = BrokerMetrics(), CollectorRegistry()
    m.count_throttled("any")
    export(m, registry)
    export(m, registry)
    text = generate_latest(registry).decode()
    assert text.count('kafka_server_quota_throttled_requests_total{quota_type="any"} 1.0') == 1


def test_a_forgotten_topic_leaves_the_scrape() -> None:
    m = BrokerMetrics()
    m.record_produce("gone", batch(2))
    m.record_produce("kept", batch(1))
    m.forget_topic("gone")
    topics = {dict(labels).get("topic") for (name, labels) in scrape_of(m) if "brokertopic" in name}
    assert topics == {"kept"}


def test_request_names_are_kios_class_names_read_without_importing_a_schema() -> None:
    """The `request` label is the request class's name without "Request", for every API kio
    knows; reading it imports no schema module (it used to load each API's v0 module at that
    API's first request, ~5-8 ms each on a fresh broker)."""
    import json
    import subprocess
    import sys

    probe = (
        "import json, sys\n"
        "from kio.schema.index import api_key_map\n"
        "from kopfka.metrics.broker_metrics import request_name\n"
        "before = set(sys.modules)\n"
        "names = {k: request_name(k) for k in api_key_map}\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith('kio.schema.'))))\n"
        "print(json.dumps(names))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    imported, names = out.splitlines()
    assert json.loads(imported) == []
    from kio.index import load_request_schema
    from kio.schema.index import api_key_map, schema_name_map

    got = {int(k): v for k, v in json.loads(names).items()}
    for api_key, api in api_key_map.items():
        schema = load_request_schema(api_key, min(schema_name_map[api]))
        assert got[api_key] == schema.__name__.removesuffix("Request"), api_key
    assert request_name(10_000) == "10000"  # unknown keys keep their number
