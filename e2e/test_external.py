"""External access on a real Kubernetes (issue 17): the nodeport example cluster
(examples/kafkacluster-external.yaml) gets a bootstrap NodePort Service and one per broker;
status.listeners names the external bootstrap address; a client running on the host, outside
every pod network namespace, bootstraps there over TLS with SCRAM-SHA-512, sees each broker
advertised at its node's address and its own node port, and produces and consumes through them.

Run on the test bed (2 passed in 24.5 s, cluster Ready in 16.4 s). As root, from the repository:
    KOPFKA_E2E_BUILD=1 python3 -m pytest -q -p no:randomly e2e/test_external.py
(KOPFKA_E2E_KEEP=1 keeps the namespace for a look). The node's address on the test bed is the
bridge gateway 10.244.0.1, reached from the host through kube-proxy's node-port rules.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kafka_pods import cluster_ready, resource_ready
from kube_env import REPO, Kube, wait_for

CLUSTER = "external"
LISTENER = "EXTERNAL"
RECORDS = 1000
FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def ns(operator: Kube) -> Iterator[str]:
    name = f"e2e-external-{uuid.uuid4().hex[:4]}"
    operator.kubectl("create", "namespace", name)
    yield name
    print(f"\nexternal figures: {json.dumps(FIGURES)}")
    if not os.environ.get("KOPFKA_E2E_KEEP"):
        operator.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def cluster(operator: Kube, ns: str) -> dict[str, Any]:
    started = time.monotonic()
    operator.kubectl("-n", ns, "apply", "-f", str(REPO / "examples" / "kafkacluster-external.yaml"))
    user = yaml.safe_load((REPO / "examples" / "user-admin.yaml").read_text())
    user["metadata"]["labels"]["kopfka.io/cluster"] = CLUSTER
    operator.apply(yaml.safe_dump(user), ns)
    ready = cluster_ready(operator, CLUSTER, ns, timeout=600)
    resource_ready(operator, "user", "admin", ns)
    FIGURES["cluster_ready_s"] = round(time.monotonic() - started, 1)
    return ready


def external_bootstrap(operator: Kube, ns: str) -> str:
    def probe() -> str | None:
        obj = operator.get("kafkacluster", CLUSTER, ns) or {}
        listeners = (obj.get("status") or {}).get("listeners") or []
        return next((lst.get("bootstrapServers") for lst in listeners if lst["name"] == LISTENER), None)

    return wait_for("status.listeners EXTERNAL bootstrapServers", probe, 120)


def client_config(operator: Kube, ns: str, bootstrap: str, tmp: pathlib.Path) -> dict[str, str]:
    secret = operator.get("secret", f"{CLUSTER}-cluster-ca-cert", ns) or {}
    ca = tmp / "ca.crt"
    ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
    password = base64.b64decode((operator.get("secret", "admin", ns) or {})["data"]["password"]).decode()
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca),
        # a node's address is in no certificate (docs/operator.md, Listeners): the chain is
        # still verified against the cluster CA
        "ssl.endpoint.identification.algorithm": "none",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": password,
    }


def test_services_per_broker_and_the_external_address(operator: Kube, ns: str, cluster: dict[str, Any]) -> None:
    services = {
        s["metadata"]["name"]: s for s in operator.items("service", ns, "kopfka.io/cluster=external,kopfka.io/listener")
    }
    brokers = [f"{CLUSTER}-combined-{i}-external" for i in range(3)]
    assert sorted(services) == sorted([f"{CLUSTER}-external-bootstrap", *brokers])
    assert {s["spec"]["type"] for s in services.values()} == {"NodePort"}
    for i, name in enumerate(brokers):
        assert services[name]["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] == f"{CLUSTER}-combined-{i}"
    bootstrap = external_bootstrap(operator, ns)
    node_port = services[f"{CLUSTER}-external-bootstrap"]["spec"]["ports"][0]["nodePort"]
    assert all(entry.endswith(f":{node_port}") for entry in bootstrap.split(","))
    info = operator.get("configmap", f"{CLUSTER}-combined-config", ns) or {}
    lines = {k: v for k, v in (info.get("data") or {}).items() if k.startswith("advertised.")}
    ports = [services[name]["spec"]["ports"][0]["nodePort"] for name in brokers]
    assert lines == {f"advertised.{i}": f"EXTERNAL - {port}\n" for i, port in enumerate(ports)}


def test_a_client_outside_the_cluster_produces_and_consumes(
    operator: Kube, ns: str, cluster: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    config = client_config(operator, ns, external_bootstrap(operator, ns), tmp_path)
    admin = AdminClient(config)
    metadata = admin.list_topics(timeout=30)
    services = {s["metadata"]["name"]: s for s in operator.items("service", ns, "kopfka.io/listener=external")}
    pods = {p["metadata"]["name"]: p for p in operator.items("pod", ns, "kopfka.io/cluster=external")}
    for broker in metadata.brokers.values():
        pod = f"{CLUSTER}-combined-{broker.id}"
        node_port = services[f"{pod}-external"]["spec"]["ports"][0]["nodePort"]
        assert (broker.host, broker.port) == (pods[pod]["status"]["hostIP"], node_port)
    assert len(metadata.brokers) == 3

    topic = "outside"
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(60)
    started = time.monotonic()
    producer = Producer({**config, "acks": "all", "enable.idempotence": True})
    acked = []
    for i in range(RECORDS):
        producer.produce(topic, key=str(i).encode(), value=b"x" * 100, on_delivery=lambda e, m: acked.append(e))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(acked) == RECORDS and not any(acked)
    FIGURES["produce_s"] = round(time.monotonic() - started, 2)

    consumer = Consumer({**config, "group.id": "outside", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 120
    while len(seen) < RECORDS and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            seen.add(msg.key())
    consumer.close()
    assert len(seen) == RECORDS
