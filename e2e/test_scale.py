"""Scaling on real pods: controllers join and leave the voter set one at a time; a broker shrink
below a topic's replication factor is refused and says why; an empty broker goes at once and
is unregistered."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_pods import client_pod, cluster_ready, create_topic, kopfka_cli, patch_cluster, pods_of
from kube_env import Kube, condition, wait_for
from pod_producer import PodProducer, audit, consume_all

FIGURES: dict[str, Any] = {}

CLUSTER = {
    "apiVersion": "kopfka.io/v1alpha1",
    "kind": "KafkaCluster",
    "metadata": {"name": "scale"},
    "spec": {
        "mode": "dedicated",
        "controllers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "brokers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "config": {"offsets.topic.replication.factor": "3", "replica.lag.time.max.ms": "10000"},
        "rebalance": {"throttleBytesPerSecond": 10485760},
    },
}


@pytest.fixture(scope="module")
def ns(operator: Kube) -> Iterator[str]:
    import os

    name = f"e2e-scale-{uuid.uuid4().hex[:4]}"
    operator.kubectl("create", "namespace", name)
    yield name
    if not os.environ.get("KOPFKA_E2E_KEEP"):
        operator.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def cluster(operator: Kube, ns: str) -> dict[str, Any]:
    operator.apply(json.dumps(CLUSTER), ns)
    obj = cluster_ready(operator, "scale", ns)
    client_pod(operator, ns)
    return obj


def _voters(kube: Kube, ns: str) -> dict[int, str]:
    servers = ",".join(f"scale-controller-{i}.scale-controller.{ns}.svc:9093" for i in range(3))
    out = kopfka_cli(
        kube, ns, "client", "metadata-quorum", "--bootstrap-controller", servers, "describe", "--replication"
    )
    rows = {}
    for line in out.splitlines()[1:]:
        cols = line.split()
        if cols and cols[0].isdigit() and cols[-1] in ("Leader", "Follower"):
            rows[int(cols[0])] = cols[1]
    return rows


def test_controllers_join_and_leave_the_voter_set_one_at_a_time(
    operator: Kube, ns: str, cluster: dict[str, Any]
) -> None:
    patch_cluster(operator, ns, "scale", {"controllers": {"replicas": 4}})
    wait_for("controller 1003 a voter", lambda: 1003 in _voters(operator, ns), 300, 3)
    assert sorted(_voters(operator, ns)) == [1000, 1001, 1002, 1003]
    cluster_ready(operator, "scale", ns)
    patch_cluster(operator, ns, "scale", {"controllers": {"replicas": 3}})
    wait_for(
        "controller 1003 out of the voter set", lambda: sorted(_voters(operator, ns)) == [1000, 1001, 1002], 300, 3
    )
    wait_for("its pod gone", lambda: len(pods_of(operator, ns, "scale", "controller")) == 3, 180, 2)
    cluster_ready(operator, "scale", ns)
    events = operator.kubectl("-n", ns, "get", "events", "-o", "json")
    reasons = [e["reason"] for e in json.loads(events)["items"]]
    assert "AddingVoter" in reasons and "RemovedVoter" in reasons


def test_broker_shrink_below_a_topics_rf_is_refused_and_an_empty_broker_goes(
    operator: Kube, ns: str, cluster: dict[str, Any]
) -> None:
    bootstrap = cluster["status"]["bootstrapServers"]
    create_topic(operator, ns, "client", bootstrap, "rf3", 3, 3)
    patch_cluster(operator, ns, "scale", {"brokers": {"replicas": 2}})

    def refused() -> dict[str, Any] | None:
        obj = operator.get("kafkacluster", "scale", ns) or {}
        cond = condition(obj, "Warning")
        return obj if cond.get("reason") == "ScaleRefused" else None

    obj = wait_for("scale-down refused", refused, 120, 2)
    assert "rf3 (RF 3)" in condition(obj, "Warning")["message"]
    assert len(pods_of(operator, ns, "scale", "broker")) == 3  # nothing removed
    # Up to 4 and back to 3: broker 3 holds nothing, goes at once and is unregistered.
    patch_cluster(operator, ns, "scale", {"brokers": {"replicas": 4}})
    cluster_ready(operator, "scale", ns)
    patch_cluster(operator, ns, "scale", {"brokers": {"replicas": 3}})
    wait_for("3 broker pods", lambda: len(pods_of(operator, ns, "scale", "broker")) == 3, 240, 2)
    cluster_ready(operator, "scale", ns)
    assert condition(operator.get("kafkacluster", "scale", ns), "Warning").get("reason") != "ScaleRefused"

    def unregistered() -> bool:
        out = kopfka_cli(
            operator, ns, "client", "topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "rf3"
        )
        events = json.loads(operator.kubectl("-n", ns, "get", "events", "-o", "json"))["items"]
        return "rf3" in out and any(e["reason"] == "BrokersUnregistered" for e in events)

    wait_for("broker 3 unregistered", unregistered, 120, 3)


def _replicas_by_broker(kube: Kube, ns: str, bootstrap: str, topic: str) -> dict[int, int]:
    out = kopfka_cli(kube, ns, "client", "topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    counts: dict[int, int] = {}
    for line in out.splitlines():
        if "Replicas:" in line:
            replicas = line.split("Replicas:")[1].split()[0]
            for b in replicas.split(","):
                counts[int(b)] = counts.get(int(b), 0) + 1
    return counts


def test_scale_out_spreads_replicas_onto_the_new_broker_and_scale_in_empties_it_without_loss(
    operator: Kube, ns: str, cluster: dict[str, Any], tmp_path: Path
) -> None:
    bootstrap = cluster["status"]["bootstrapServers"]
    topic = "audit-scale"
    create_topic(operator, ns, "client", bootstrap, topic, 12, 3, **{"min.insync.replicas": "2"})
    prod = PodProducer(operator, ns, bootstrap, topic, throughput=50).start(tmp_path / "producer.log")
    try:
        prod.wait_acked(100, timeout=90)
        started = time.monotonic()
        patch_cluster(operator, ns, "scale", {"brokers": {"replicas": 4}})

        def spread() -> dict[int, int] | None:
            obj = operator.get("kafkacluster", "scale", ns) or {}
            moving = ((obj.get("status") or {}).get("scale") or {}).get("broker", {}).get("spreadTo")
            counts = _replicas_by_broker(operator, ns, bootstrap, topic)
            return counts if not moving and counts.get(3, 0) >= 6 else None

        counts = wait_for("replicas spread onto broker 3", spread, 600, 3)
        FIGURES["scale_out_s"] = round(time.monotonic() - started, 1)
        FIGURES["replicas_after_scale_out"] = counts
        assert sorted(counts) == [0, 1, 2, 3] and max(counts.values()) - min(counts.values()) <= 3, counts
        cluster_ready(operator, "scale", ns)
        prod.wait_acked(prod.acked_count + 100, timeout=90)

        started = time.monotonic()
        patch_cluster(operator, ns, "scale", {"brokers": {"replicas": 3}})
        wait_for("3 broker pods", lambda: len(pods_of(operator, ns, "scale", "broker")) == 3, 600, 3)
        cluster_ready(operator, "scale", ns)
        FIGURES["scale_in_s"] = round(time.monotonic() - started, 1)
        counts = _replicas_by_broker(operator, ns, bootstrap, topic)
        assert 3 not in counts and sum(counts.values()) == 36, counts
        prod.wait_acked(prod.acked_count + 100, timeout=90)
    finally:
        prod.stop()
    consumed = consume_all(bootstrap, topic, prod.acked_count, tmp_path / "consumer.log", command=prod.command)
    result = audit(prod.acked, consumed)
    FIGURES["scale_audit"] = result.line("scale 3->4->3")
    print(f"\nscale figures: {json.dumps(FIGURES)}")
    assert result.lost == 0 and result.duplicated == 0 and result.out_of_order == 0, (result, result.lost_sample)
    assert not prod.errors, prod.errors[:5]
