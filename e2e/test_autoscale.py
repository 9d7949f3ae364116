"""The autoscaler on real pods: a load burst past the per-broker bytes-in target adds a broker
(scraped from the brokers' own /metrics by the operator, no Prometheus), the new broker gets
replicas and leads partitions; when the load ends, a broker is removed after the scale-down
window -- its replicas moved away first. The verifiable producer runs throughout at a low rate
and is audited (0 acknowledged records lost)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_pods import client_pod, cluster_ready, create_topic, exec_sh, kopfka_cli, pods_of
from kube_env import Kube, wait_for
from pod_producer import PodProducer, audit, consume_all

FIGURES: dict[str, Any] = {}


def kubectl_exec(kube: Kube, ns: str) -> list[str]:
    return [kube.kubectl_bin, f"--kubeconfig={kube.kubeconfig}", "-n", ns, "exec", "-i", "client", "--"]


TARGET = 100 * 1024  # bytes in per broker per second
CLUSTER = {
    "apiVersion": "kopfka.io/v1alpha1",
    "kind": "KafkaCluster",
    "metadata": {"name": "auto"},
    "spec": {
        "mode": "dedicated",
        "controllers": {"replicas": 1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "brokers": {
            "replicas": 3,
            "storage": {"volumes": [{"id": 0, "size": "2Gi"}]},
            "autoscaling": {
                "minBrokers": 3,
                "maxBrokers": 4,
                "targets": {"bytesInPerBroker": TARGET},
                "scaleUpStabilizationWindowSeconds": 15,
                "scaleDownStabilizationWindowSeconds": 45,
                "cooldownSeconds": 30,
            },
        },
        "config": {
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
            "replica.lag.time.max.ms": "10000",
        },
        "rebalance": {"throttleBytesPerSecond": 10485760},
    },
}

# ~600 kB/s for `seconds` from the client pod: 2x the target on 3 brokers
BURST = """
import os, sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "linger.ms": 20, "acks": "1"})
end = time.time() + float(sys.argv[2])
value = b"x" * 1000
while time.time() < end and not os.path.exists("/tmp/stop-burst"):
    t = time.time()
    for _ in range(60):
        p.produce("burst", value)
        p.poll(0)
    time.sleep(max(0.0, 0.1 - (time.time() - t)))
p.flush(30)
"""


@pytest.fixture(scope="module")
def ns(operator: Kube) -> Iterator[str]:
    name = f"e2e-auto-{uuid.uuid4().hex[:4]}"
    operator.kubectl("create", "namespace", name)
    yield name
    print(f"\nautoscale figures: {json.dumps(FIGURES)}")
    if os.environ.get("KOPFKA_AUTOSCALE_FIGURES"):  # benchmarks/autoscale.py reads them there
        Path(os.environ["KOPFKA_AUTOSCALE_FIGURES"]).write_text(json.dumps(FIGURES))
    if not os.environ.get("KOPFKA_E2E_KEEP"):
        operator.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def cluster(operator: Kube, ns: str) -> dict[str, Any]:
    operator.apply(json.dumps(CLUSTER), ns)
    obj = cluster_ready(operator, "auto", ns)
    client_pod(operator, ns)
    return obj


def _leaders(kube: Kube, ns: str, bootstrap: str, topic: str) -> dict[int, int]:
    out = kopfka_cli(kube, ns, "client", "topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    counts: dict[int, int] = {}
    for line in out.splitlines():
        if "Leader:" in line:
            leader = int(line.split("Leader:")[1].split()[0])
            counts[leader] = counts.get(leader, 0) + 1
    return counts


def _events(kube: Kube, ns: str, reason: str) -> list[str]:
    items = json.loads(kube.kubectl("-n", ns, "get", "events", "-o", "json"))["items"]
    return [e["message"] for e in items if e["reason"] == reason]


def test_a_burst_adds_a_broker_and_its_end_removes_one(
    operator: Kube, ns: str, cluster: dict[str, Any], tmp_path: Path
) -> None:
    bootstrap = cluster["status"]["bootstrapServers"]
    create_topic(operator, ns, "client", bootstrap, "burst", 12, 3)
    create_topic(operator, ns, "client", bootstrap, "audit-auto", 6, 3, **{"min.insync.replicas": "2"})
    prod = PodProducer(operator, ns, bootstrap, "audit-auto", throughput=20).start(tmp_path / "producer.log")
    burst = None
    try:
        prod.wait_acked(100, timeout=90)
        time.sleep(20)  # a quiet baseline: no scale
        assert not _events(operator, ns, "AutoscaledUp")
        started = time.monotonic()
        burst = subprocess.Popen(
            [*kubectl_exec(operator, ns), "python3", "-", bootstrap, "900"],
            stdin=subprocess.PIPE,
            text=True,
        )
        assert burst.stdin is not None
        burst.stdin.write(BURST)
        burst.stdin.close()

        def scaled_up() -> dict[str, Any] | None:
            obj = operator.get("kafkacluster", "auto", ns) or {}
            return obj if obj["spec"]["brokers"]["replicas"] == 4 else None

        obj = wait_for("autoscaled to 4 brokers", scaled_up, 300, 3)
        FIGURES["decided_up_s"] = round(time.monotonic() - started, 1)
        FIGURES["up_reason"] = obj["status"]["autoscaling"]["reason"]
        assert _events(operator, ns, "AutoscaledUp"), "no AutoscaledUp event"
        wait_for("broker 3 leads partitions", lambda: _leaders(operator, ns, bootstrap, "burst").get(3, 0) > 0, 600, 5)
        FIGURES["new_broker_leads_s"] = round(time.monotonic() - started, 1)
        exec_sh(operator, ns, "client", "touch /tmp/stop-burst")
        burst.wait(60)
        burst = None
        ended = time.monotonic()

        def scaled_down() -> dict[str, Any] | None:
            obj = operator.get("kafkacluster", "auto", ns) or {}
            pods = pods_of(operator, ns, "auto", "broker")
            return obj if obj["spec"]["brokers"]["replicas"] == 3 and len(pods) == 3 else None

        obj = wait_for("autoscaled back to 3 brokers", scaled_down, 900, 5)
        FIGURES["down_after_load_end_s"] = round(time.monotonic() - ended, 1)
        FIGURES["down_reason"] = obj["status"]["autoscaling"]["reason"]
        assert time.monotonic() - ended >= 45, "scaled down inside the scale-down window"
        cluster_ready(operator, "auto", ns)
        prod.wait_acked(prod.acked_count + 50, timeout=90)
    finally:
        if burst is not None:
            exec_sh(operator, ns, "client", "touch /tmp/stop-burst")
            burst.wait(60)
        prod.stop()
    consumed = consume_all(bootstrap, "audit-auto", prod.acked_count, tmp_path / "consumer.log", command=prod.command)
    result = audit(prod.acked, consumed)
    FIGURES["audit"] = result.line("autoscale 3->4->3")
    assert result.lost == 0 and result.duplicated == 0 and result.out_of_order == 0, (result, result.lost_sample)
