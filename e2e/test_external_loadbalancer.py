"""A `loadbalancer` listener on a real Kubernetes (issue 17). The test bed has no cloud load
balancer, so the test does what a cloud's service controller does: it writes an address into each
LoadBalancer Service's status.loadBalancer.ingress. The address is a DNS name that reaches that
same Service inside the cluster (`<service>.<namespace>.svc`), so everything stays on the test
bed's network. The operator must then:
- advertise each broker at its own Service's address, restarting the brokers that had started
  before it was assigned;
- publish the bootstrap Service's address in status.listeners.
A client in a pod bootstraps there, is sent to every broker at its own address, and produces and
consumes through them."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_pods import client_pod, cluster_ready, cluster_with_external, exec_python, listener_bootstrap
from kube_env import Kube, wait_for

CLUSTER = "lb"
FIGURES: dict[str, Any] = {}
MANIFEST = cluster_with_external(CLUSTER, {"type": "loadbalancer"})


@pytest.fixture(scope="module")
def ns(operator: Kube) -> Iterator[str]:
    name = f"e2e-lb-{uuid.uuid4().hex[:4]}"
    operator.kubectl("create", "namespace", name)
    yield name
    print(f"\nloadbalancer figures: {json.dumps(FIGURES)}")
    if not os.environ.get("KOPFKA_E2E_KEEP"):
        operator.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_brokers_advertise_their_load_balancer_addresses(operator: Kube, ns: str) -> None:
    operator.apply(json.dumps(MANIFEST), ns)
    cluster_ready(operator, CLUSTER, ns, timeout=600)
    client_pod(operator, ns)
    services = operator.items("service", ns, f"kopfka.io/cluster={CLUSTER},kopfka.io/listener")
    assert {s["spec"]["type"] for s in services} == {"LoadBalancer"} and len(services) == 4
    assert listener_bootstrap(operator, CLUSTER, ns, "EXTERNAL") is None, (
        "a bootstrap address before the load balancer has one"
    )

    started = time.monotonic()
    for service in services:  # the cloud controller's part
        name = service["metadata"]["name"]
        status = {"status": {"loadBalancer": {"ingress": [{"hostname": f"{name}.{ns}.svc"}]}}}
        operator.kubectl(
            "-n", ns, "patch", "service", name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )
    operator.kubectl("-n", ns, "annotate", "kafkacluster", CLUSTER, f"e2e/nudge={time.time()}", "--overwrite")
    bootstrap = wait_for(
        "status.listeners EXTERNAL", lambda: listener_bootstrap(operator, CLUSTER, ns, "EXTERNAL"), 180, 3
    )
    assert bootstrap == f"{CLUSTER}-external-bootstrap.{ns}.svc:9094"

    def advertised() -> bool:
        info = operator.get("configmap", f"{CLUSTER}-combined-config", ns) or {}
        data = info.get("data") or {}
        return all(
            data.get(f"advertised.{i}") == f"EXTERNAL {CLUSTER}-combined-{i}-external.{ns}.svc 9094\n" for i in range(3)
        )

    wait_for("each broker's line names its load balancer address", advertised, 180, 3)
    wait_for("the brokers restarted with it, Ready", lambda: _rolled(operator, ns), 900, 5)
    FIGURES["assigned_to_ready_s"] = round(time.monotonic() - started, 1)

    out = exec_python(operator, ns, "client", _CLIENT.replace("BOOTSTRAP", bootstrap), timeout=240)
    result = json.loads(out.strip().splitlines()[-1])
    FIGURES.update(result)
    assert sorted(result["brokers"]) == sorted(f"{CLUSTER}-combined-{i}-external.{ns}.svc:9094" for i in range(3))
    assert result["acked"] == result["consumed"] == 500


def _rolled(operator: Kube, ns: str) -> bool:
    obj = operator.get("kafkacluster", CLUSTER, ns) or {}
    conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
    return (
        conditions.get("Ready", {}).get("status") == "True"
        and conditions.get("Reconciling", {}).get("status") == "False"
    )


_CLIENT = """
import json
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

conf = {"bootstrap.servers": "BOOTSTRAP"}
admin = AdminClient(conf)
md = admin.list_topics(timeout=30)
brokers = [f"{b.host}:{b.port}" for b in md.brokers.values()]
admin.create_topics([NewTopic("through-lb", num_partitions=3, replication_factor=3)])["through-lb"].result(60)
p = Producer({**conf, "acks": "all"})
acked = []
for i in range(500):
    p.produce("through-lb", key=str(i).encode(), value=b"x", on_delivery=lambda e, m: acked.append(e is None))
    p.poll(0)
p.flush(60)
c = Consumer({**conf, "group.id": "lb", "auto.offset.reset": "earliest"})
c.subscribe(["through-lb"])
seen = set()
import time
deadline = time.time() + 120
while len(seen) < 500 and time.time() < deadline:
    m = c.poll(1.0)
    if m is not None and m.error() is None:
        seen.add(m.key())
c.close()
print(json.dumps({"brokers": brokers, "acked": sum(acked), "consumed": len(seen)}))
"""
