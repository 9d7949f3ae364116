"""An `ingress` listener on a real Kubernetes with a real ingress controller (issue 17).

The controller is Traefik (built from its module by e2e/testbed/ingress.py; on kind, its published
image), run in the cluster as a Deployment with its ServiceAccount and RBAC and an IngressClass
`nginx` for controller `k8s.io/ingress-nginx`: Traefik's Ingress NGINX provider reads the
ingress-nginx annotations the operator writes (`ssl-passthrough`), so the Ingresses are the ones a
user of ingress-nginx gets. TLS is passed through: the controller routes each connection by its SNI
to one broker's Service without terminating it, and the client verifies the broker's certificate
against the cluster CA *and its host name* (the operator puts the ingress hosts in the brokers'
certificates). That verification is also what proves the passthrough: a controller terminating TLS
could only show its own certificate, which the cluster CA did not sign.

Clients reach the controller's Service on port 443; the ingress hosts (`bootstrap.<ns>.kafka.test`,
`broker-<id>.<ns>.kafka.test`) resolve to it through the client pod's hostAliases, as a wildcard DNS
record would point them at a load balancer in front of the controller outside the test bed.

Run (as root, from the repository):
    KOPFKA_E2E_BUILD=1 python3 -m pytest -q -p no:randomly e2e/test_external_ingress.py
The first run builds Traefik (minutes); the binary and image are cached.
On the test bed: 1 passed in 29.9 s, the cluster Ready 16.5 s after it was applied, 1,000
idempotent acks=all records produced through the controller in 0.56 s and all consumed back.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_pods import client_pod, cluster_ready, cluster_with_external, exec_python, listener_bootstrap
from kube_env import Kube, KubeError, wait_for

CLUSTER = "ingress"
RECORDS = 1000
CONTROLLER_NS = "kopfka-e2e-ingress"
FIGURES: dict[str, Any] = {}


def manifest(domain: str) -> dict[str, Any]:
    """The cluster, its ingress hosts under `domain` (one per namespace: a controller routes a host
    to one backend, and a kept namespace of an earlier run must not take this run's connections)."""
    configuration = {"bootstrap": {"host": f"bootstrap.{domain}"}, "brokerHostTemplate": f"broker-{{id}}.{domain}"}
    return cluster_with_external(CLUSTER, {"type": "ingress", "tls": True, "configuration": configuration})


def _controller_manifests(image: str) -> list[dict[str, Any]]:
    """Traefik as an ingress-nginx replacement: the RBAC of its Ingress NGINX provider, the
    IngressClass `nginx` (controller k8s.io/ingress-nginx), a Deployment and its Service on 443."""
    name = "traefik"
    labels = {"app": name}
    meta = {"name": name, "namespace": CONTROLLER_NS}
    rules = [
        {
            "apiGroups": [""],
            "resources": ["services", "secrets", "configmaps", "namespaces"],
            "verbs": ["list", "watch"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "ingressclasses"], "verbs": ["list", "watch"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses/status"], "verbs": ["update"]},
    ]
    args = [
        "--entryPoints.websecure.address=:8443",
        "--entryPoints.traefik.address=:8080",
        "--ping=true",
        "--providers.kubernetesIngressNGINX=true",
        "--providers.kubernetesIngressNGINX.httpsEntryPoint=websecure",
        f"--providers.kubernetesIngressNGINX.publishService={CONTROLLER_NS}/{name}",
        "--log.level=INFO",
    ]
    container = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "ports": [{"name": "websecure", "containerPort": 8443}, {"name": "admin", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/ping", "port": 8080}, "periodSeconds": 2},
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NS}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": CONTROLLER_NS},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": CONTROLLER_NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CONTROLLER_NS},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": CONTROLLER_NS}],
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "nginx"},
            "spec": {"controller": "k8s.io/ingress-nginx"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"serviceAccountName": name, "containers": [container]},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"selector": labels, "ports": [{"name": "websecure", "port": 443, "targetPort": 8443}]},
        },
    ]


def _controller_image(kube: Kube) -> str:
    if kube.platform != "testbed":
        return "docker.io/library/traefik:v3.7"
    from testbed import ingress

    paths = kube.extra["paths"]
    if not ingress.binary_built(paths) and os.environ.get("KOPFKA_E2E_BUILD") != "1":
        pytest.skip("the test bed's Traefik is not built (set KOPFKA_E2E_BUILD=1 to build it: minutes)")
    return ingress.ensure_image(paths)


@pytest.fixture(scope="module")
def controller(operator: Kube) -> Iterator[str]:
    """The ingress controller's Service ClusterIP, once Traefik is ready."""
    image = _controller_image(operator)
    manifests = _controller_manifests(image)
    operator.apply("\n---\n".join(json.dumps(m) for m in manifests))
    try:
        operator.kubectl("-n", CONTROLLER_NS, "rollout", "status", "deployment/traefik", "--timeout=180s", timeout=200)
        service = operator.get("service", "traefik", CONTROLLER_NS) or {}
        yield service["spec"]["clusterIP"]
    finally:
        if not os.environ.get("KOPFKA_E2E_KEEP"):
            for kind, name in (("ingressclass", "nginx"), ("clusterrolebinding", CONTROLLER_NS)):
                operator.kubectl("delete", kind, name, "--ignore-not-found", check=False)
            operator.kubectl("delete", "clusterrole", CONTROLLER_NS, "--ignore-not-found", check=False)
            operator.kubectl("delete", "namespace", CONTROLLER_NS, "--wait=false", check=False)


@pytest.fixture(scope="module")
def ns(operator: Kube) -> Iterator[str]:
    name = f"e2e-ingress-{uuid.uuid4().hex[:4]}"
    operator.kubectl("create", "namespace", name)
    yield name
    print(f"\ningress figures: {json.dumps(FIGURES)}")
    if not os.environ.get("KOPFKA_E2E_KEEP"):
        operator.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_clients_reach_every_broker_through_the_ingress_controller(operator: Kube, controller: str, ns: str) -> None:
    started = time.monotonic()
    domain = f"{ns}.kafka.test"
    bootstrap_host = f"bootstrap.{domain}"
    operator.apply(json.dumps(manifest(domain)), ns)
    cluster_ready(operator, CLUSTER, ns, timeout=600)
    FIGURES["cluster_ready_s"] = round(time.monotonic() - started, 1)

    ingresses = {i["metadata"]["name"]: i for i in operator.items("ingress", ns, f"kopfka.io/cluster={CLUSTER}")}
    hosts = {i["spec"]["rules"][0]["host"]: i for i in ingresses.values()}
    broker_hosts = [f"broker-{i}.{domain}" for i in range(3)]
    assert sorted(hosts) == sorted([bootstrap_host, *broker_hosts])
    for ingress in ingresses.values():
        assert ingress["spec"]["ingressClassName"] == "nginx"
        assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/ssl-passthrough"] == "true"

    def published() -> bool:  # the controller took them: it writes its Service's address into their status
        found = operator.items("ingress", ns, f"kopfka.io/cluster={CLUSTER}")
        return all(
            [a.get("ip") for a in (i.get("status") or {}).get("loadBalancer", {}).get("ingress") or []] == [controller]
            for i in found
        )

    wait_for("the controller publishes its address on every Ingress", published, 120, 2)
    bootstrap = wait_for(
        "status.listeners EXTERNAL", lambda: listener_bootstrap(operator, CLUSTER, ns, "EXTERNAL"), 120, 2
    )
    assert bootstrap == f"{bootstrap_host}:443"

    aliases = [{"ip": controller, "hostnames": [bootstrap_host, *broker_hosts]}]
    client_pod(operator, ns, hostAliases=aliases)
    ca = base64.b64decode((operator.get("secret", f"{CLUSTER}-cluster-ca-cert", ns) or {})["data"]["ca.crt"]).decode()
    script = _CLIENT.replace("BOOTSTRAP", bootstrap).replace("CA_PEM", ca).replace("RECORDS", str(RECORDS))
    # the controller picks up the Ingresses' backends within its throttle (a few seconds)
    out = wait_for("a client through the ingress", lambda: _attempt(operator, ns, script), 300, 5)
    result = json.loads(out)
    FIGURES.update({k: v for k, v in result.items() if k.endswith("_s")})
    assert sorted(result["brokers"]) == sorted(f"{h}:443" for h in broker_hosts)
    assert result["acked"] == result["consumed"] == RECORDS and result["failed"] == 0


def _attempt(operator: Kube, ns: str, script: str) -> str | None:
    try:
        out = exec_python(operator, ns, "client", script, timeout=240)
    except (KubeError, subprocess.TimeoutExpired) as exc:  # retried until the deadline
        print(f"client attempt failed: {str(exc)[-400:]}")
        return None
    return out.strip().splitlines()[-1]


_CLIENT = """
import json, tempfile, time
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ca = tempfile.NamedTemporaryFile("w", suffix=".crt", delete=False)
ca.write('''CA_PEM''')
ca.close()
# endpoint identification on (librdkafka's default): each broker's certificate must name its host
conf = {"bootstrap.servers": "BOOTSTRAP", "security.protocol": "SSL", "ssl.ca.location": ca.name}
admin = AdminClient(conf)
md = admin.list_topics(timeout=20)
brokers = [f"{b.host}:{b.port}" for b in md.brokers.values()]
topic = "through-ingress"
if topic not in md.topics:
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(60)
started = time.monotonic()
p = Producer({**conf, "acks": "all", "enable.idempotence": True})
acked, failed = [], []
for i in range(RECORDS):
    p.produce(topic, key=str(i).encode(), value=b"x" * 100,
              on_delivery=lambda e, m: (failed if e else acked).append(m.key()))
    p.poll(0)
p.flush(60)
produce_s = time.monotonic() - started
c = Consumer({**conf, "group.id": f"ingress-{time.time()}", "auto.offset.reset": "earliest"})
c.subscribe([topic])
seen = set()
deadline = time.monotonic() + 120
while len(seen) < len(acked) and time.monotonic() < deadline:
    m = c.poll(1.0)
    if m is not None and m.error() is None:
        seen.add(m.key())
c.close()
print(json.dumps({"brokers": brokers, "acked": len(set(acked)), "failed": len(failed),
                  "consumed": len(seen & set(acked)), "produce_s": round(produce_s, 2)}))
"""
