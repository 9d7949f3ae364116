"""End to end on kind: install the chart, apply the examples, wait Ready, produce and consume
through the bootstrap Service (from a client pod running the same image)."""

from __future__ import annotations

import json
import time

from e2e_support import REPO
from e2e_support import run as _run

NS = "kafka-e2e"


def kubectl(kubeconfig: str, *args: str, timeout: float = 300) -> str:
    return _run("kubectl", "--kubeconfig", kubeconfig, *args, timeout=timeout).stdout


def wait_ready(kubeconfig: str, name: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    last = {}
    while time.monotonic() < deadline:
        last = json.loads(kubectl(kubeconfig, "-n", NS, "get", "kafkacluster", name, "-o", "json"))
        conditions = {c["type"]: c for c in last.get("status", {}).get("conditions", [])}
        if conditions.get("Ready", {}).get("status") == "True":
            return last
        time.sleep(5)
    raise AssertionError(f"{name} not Ready: {json.dumps(last.get('status'), indent=1)}")


def test_examples_become_ready_and_serve_clients(kind_cluster: str) -> None:
    kubeconfig = kind_cluster
    kubectl(kubeconfig, "create", "namespace", NS)
    kubectl(
        kubeconfig,
        "-n",
        NS,
        "apply",
        "-f",
        str(REPO / "examples" / "kafkacluster-combined-small.yaml"),
    )
    for pattern in ("topic-*.yaml", "quota-*.yaml"):
        for path in sorted((REPO / "examples").glob(pattern)):
            kubectl(kubeconfig, "-n", NS, "apply", "-f", str(path))
    cluster = wait_ready(kubeconfig, "small")
    status = cluster["status"]
    assert len(status["clusterId"]) == 22
    assert status["brokers"]["readyReplicas"] == 3
    bootstrap = status["bootstrapServers"]

    image = json.loads(
        kubectl(kubeconfig, "-n", NS, "get", "statefulset", "small-combined", "-o", "json")
    )["spec"]["template"]["spec"]["containers"][0]["image"]
    client = f"""
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
KafkaAdminClient(bootstrap_servers="{bootstrap}").create_topics([NewTopic("e2e", 3, 3)])
producer = KafkaProducer(bootstrap_servers="{bootstrap}", acks="all")
for i in range(100):
    producer.send("e2e", str(i).encode())
producer.flush()
consumer = KafkaConsumer("e2e", bootstrap_servers="{bootstrap}", auto_offset_reset="earliest",
                         consumer_timeout_ms=20000)
got = sorted(int(m.value) for m in consumer)
assert got == list(range(100)), got
print("E2E OK")
"""
    # The image does not ship a Kafka client library; the client pod fetches one.
    script = (
        "set -e; pip install -q --target /tmp/client kafka-python==3.0.12; "
        f"PYTHONPATH=/tmp/client python -c '{client}'"
    )
    out = kubectl(
        kubeconfig,
        "-n",
        NS,
        "run",
        "e2e-client",
        "--rm",
        "-i",
        "--restart=Never",
        f"--image={image}",
        "--image-pull-policy=Never",
        "--command",
        "--",
        "/bin/sh",
        "-c",
        script,
        timeout=600,
    )
    assert "E2E OK" in out
