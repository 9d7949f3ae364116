"""Unit tests: AlterClientQuotas validation/records, DescribeClientQuotas filters, connection
quotas, and the KIP-714 manager's gating, subscription ids and OTLP decoding."""

from __future__ import annotations

import asyncio
import gzip
import uuid
from types import SimpleNamespace

import pytest
from kopfka.controller.client_quota_control import QuotaAlteration, describe, plan_alterations
from kopfka.metadata import image as mi
from kopfka.metrics.broker_metrics import BrokerMetrics
from kopfka.metrics.exposition import export
from kopfka.protocol.errors import ErrorCode
from kopfka.quota.connection_quotas import ConnectionQuotas, ConnectionRejected
from kopfka.quota.stats import MetricConfig
from kopfka.telemetry.client_metrics import ClientMetricsManager, subscription_id
from kopfka.telemetry.otlp import SUM, TEMPORALITY_DELTA, Metric, Point, decode_metrics_data, encode_metrics_data
from prometheus_client import CollectorRegistry


def test_alterations_validate_each_entity_alone() -> None:
    results, records = plan_alterations(
        [
            QuotaAlteration((("user", "alice"), ("client-id", None)), [("producer_byte_rate", 1024.0)]),
            QuotaAlteration((("ip", "not-an-ip"),), [("connection_creation_rate", 5.0)]),
            QuotaAlteration((("client-id", "x"),), [("connection_creation_rate", 5.0)]),
            QuotaAlteration((("client-id", "x"),), [("producer_byte_rate", 10.5)]),
            QuotaAlteration((("client-id", "x"), ("ip", "1.2.3.4")), [("producer_byte_rate", 1.0)]),
            QuotaAlteration((("client-id", "y"),), [("request_percentage", 12.5), ("consumer_byte_rate", None)]),
        ]
    )
    assert [r.error for r in results] == [
        ErrorCode.none,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.none,
    ]
    assert [(r.entity, r.key, r.value) for r in records] == [  # type: ignore[attr-defined]
        ((("client-id", None), ("user", "alice")), "producer_byte_rate", 1024.0),
        ((("client-id", "y"),), "request_percentage", 12.5),
        ((("client-id", "y"),), "consumer_byte_rate", None),
    ]
    img = mi.replay(records)
    assert dict(img.client_quotas) == {
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 1024.0},
        (("client-id", "y"),): {"request_percentage": 12.5},
    }


def test_describe_filters() -> None:
    q: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {
        (("user", "alice"),): {"a": 1.0},
        (("client-id", None), ("user", "alice")): {"a": 2.0},
        (("client-id", "app"),): {"a": 3.0},
        (("ip", None),): {"connection_creation_rate": 4.0},
    }
    names = lambda found: [e for e, _ in found]  # noqa: E731
    assert names(describe(q, [("user", 0, "alice")], strict=True)) == [(("user", "alice"),)]
    assert len(describe(q, [("user", 0, "alice")], strict=False)) == 2
    assert names(describe(q, [("client-id", 1, None)], strict=False)) == [(("client-id", None), ("user", "alice"))]
    assert names(describe(q, [("client-id", 2, None)], strict=True)) == [(("client-id", "app"),)]
    assert names(describe(q, [("ip", 1, None)], strict=True)) == [(("ip", None),)]
    assert len(describe(q, [], strict=False)) == 4


def test_connection_quotas_per_ip_count_and_rate() -> None:
    async def main() -> None:
        t = [0.0]
        cq = ConnectionQuotas(
            MetricConfig(2, 1000), max_per_ip=2, per_ip_overrides={"10.0.0.9": 3, "10.0.0.2": 100}, clock=lambda: t[0]
        )
        await cq.acquire("PLAINTEXT", "10.0.0.1")
        await cq.acquire("PLAINTEXT", "10.0.0.1")
        with pytest.raises(ConnectionRejected):
            await cq.acquire("PLAINTEXT", "10.0.0.1")
        for _ in range(3):
            await cq.acquire("PLAINTEXT", "10.0.0.9")  # its override admits a third
        assert cq.total == 5
        cq.release("PLAINTEXT", "10.0.0.1")
        await cq.acquire("PLAINTEXT", "10.0.0.1")  # a freed slot admits again
        # per-IP creation rate: 2 samples of 1 s -> bound 3/s over a padded 1 s window
        cq.update_ip_quotas({"10.0.0.2": 3.0})
        admitted = rejected = 0
        for _ in range(6):
            try:
                await cq.acquire("PLAINTEXT", "10.0.0.2")
                admitted += 1
            except ConnectionRejected:
                rejected += 1
        assert (admitted, rejected) == (3, 3)  # the excess is refused ...
        assert cq.ip_rates["10.0.0.2"].value(t[0]) == 3  # ... and un-recorded (1 s padded window)
        assert cq.broker_rate.value(t[0]) == 10

    asyncio.run(main())


def _ctx(client_id: str = "app") -> SimpleNamespace:
    return SimpleNamespace(client_id=client_id, client_host="127.0.0.1")


def test_telemetry_subscription_gating_and_export() -> None:
    t = [1000.0]
    mgr = ClientMetricsManager(telemetry_max_bytes=4096, clock=lambda: t[0])
    mgr.update_subscriptions(
        {"all-apps": {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000", "match": "client_id=app.*"}}
    )
    got = mgr.get_subscriptions(_ctx(), None)
    iid = got["client_instance_id"]
    assert got["requested_metrics"] == ["org.apache.kafka.producer."] and got["push_interval"] == 1000
    assert got["subscription_id"] == subscription_id(("org.apache.kafka.producer.",), 1000, iid)
    other = mgr.get_subscriptions(_ctx("batch"), None)
    assert other["requested_metrics"] == [] and other["subscription_id"] != got["subscription_id"]
    payload = encode_metrics_data(
        {"service.name": "x"},
        [
            Metric(
                "org.apache.kafka.producer.record.send.total",
                SUM,
                temporality=TEMPORALITY_DELTA,
                monotonic=True,
                points=[Point({"topic": "t"}, 5.0)],
            )
        ],
    )
    sid = got["subscription_id"]
    assert mgr.push(_ctx(), iid, sid, False, 1, gzip.compress(payload))["error_code"] == ErrorCode.none
    t[0] += 400
    early = mgr.push(_ctx(), iid, sid, False, 0, payload)
    assert early["error_code"] == ErrorCode.throttling_quota_exceeded and early["throttle_time"] == 600
    t[0] += 600
    assert mgr.push(_ctx(), iid, sid, False, 0, payload)["error_code"] == ErrorCode.none
    assert mgr.push(_ctx(), iid, sid + 1, False, 0, payload)["error_code"] == ErrorCode.unknown_subscription_id
    t[0] += 1000
    assert mgr.push(_ctx(), iid, sid, False, 0, b"x" * 5000)["error_code"] == ErrorCode.telemetry_too_large
    t[0] += 1000
    assert mgr.push(_ctx(), iid, sid, False, 9, payload)["error_code"] == ErrorCode.unsupported_compression_type
    metrics, registry = BrokerMetrics(), CollectorRegistry()
    metrics.telemetry = mgr
    export(metrics, registry)  # as /metrics exports it
    samples = {(s.name, s.labels.get("topic")): s.value for fam in registry.collect() for s in fam.samples}
    assert samples[("kafka_client_telemetry_org_apache_kafka_producer_record_send_total", "t")] == 10.0  # deltas summed
    assert mgr.push(_ctx(), uuid.UUID(int=0), sid, False, 0, payload)["error_code"] == ErrorCode.invalid_request
    # a subscription change is picked up on the next request and changes the id
    mgr.update_subscriptions({"all-apps": {"metrics": "*", "interval.ms": "2000"}})
    t[0] += 5000
    again = mgr.get_subscriptions(_ctx(), iid)
    assert again["requested_metrics"] == [""] and again["subscription_id"] != sid


def test_otlp_roundtrip() -> None:
    data = encode_metrics_data(
        {"client_rack": "r1"}, [Metric("a.b", "gauge", points=[Point({"k": "v"}, 1.5, time_unix_nano=7)])]
    )
    (md,) = decode_metrics_data(data)
    assert md.resource == {"client_rack": "r1"}
    (m,) = md.metrics
    assert (m.name, m.kind, m.points[0].attributes, m.points[0].value, m.points[0].time_unix_nano) == (
        "a.b",
        "gauge",
        {"k": "v"},
        1.5,
        7,
    )
