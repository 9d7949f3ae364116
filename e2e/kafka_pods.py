"""KafkaClusters and client pods on a real Kubernetes, for the operator's e2e tests."""

from __future__ import annotations

import json
import time
from typing import Any

import yaml
from kube_env import REPO, Kube, condition, wait_for


def cluster_ready(kube: Kube, name: str, namespace: str, timeout: float = 420) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        # Ready for the current generation: right after a change the status still says Ready for
        # the previous one (e.g. 3 of 3 brokers just after `kubectl scale --replicas=4`)
        obj = kube.get("kafkacluster", name, namespace)
        if obj is None:
            return None
        ready, generation = condition(obj, "Ready"), obj["metadata"].get("generation")
        current = (obj.get("status") or {}).get("observedGeneration") == ready.get("observedGeneration") == generation
        return obj if current and ready.get("status") == "True" else None

    try:
        return wait_for(f"KafkaCluster {namespace}/{name} Ready", ready, timeout, interval=2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{describe_cluster(kube, name, namespace)}") from None


def resource_ready(kube: Kube, kind: str, name: str, namespace: str, timeout: float = 120) -> dict[str, Any]:
    """A Topic, Quota or User Ready for its current generation."""

    def probe() -> dict[str, Any] | None:
        obj = kube.get(kind, name, namespace)
        if obj is None or condition(obj, "Ready").get("status") != "True":
            return None
        return obj if obj["status"].get("observedGeneration") == obj["metadata"]["generation"] else None

    return wait_for(f"{kind} {namespace}/{name} Ready", probe, timeout, interval=1)


def describe_cluster(kube: Kube, name: str, namespace: str) -> str:
    """What a human would look at: the status, each pod's phase and the namespace's warnings."""
    obj = kube.get("kafkacluster", name, namespace) or {}
    lines = [f"status: {json.dumps(obj.get('status'))[:3000]}"]
    for pod in pods_of(kube, namespace, name):
        st = pod.get("status", {})
        waiting = [
            (c.get("state") or {}).get("waiting", {}).get("reason", "")
            for c in st.get("containerStatuses", []) + st.get("initContainerStatuses", [])
        ]
        lines.append(f"pod {pod['metadata']['name']}: {st.get('phase')} {' '.join(w for w in waiting if w)}")
    events = kube.kubectl("-n", namespace, "get", "events", "--field-selector", "type=Warning", check=False)
    lines.append(events[-3000:])
    return "\n".join(lines)


def cluster_with_external(name: str, external: dict[str, Any]) -> dict[str, Any]:
    """A 3-broker combined cluster with an internal CLIENT listener on 9092 and `external` (an
    EXTERNAL listener on 9094 of some type) beside it."""
    return {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": name},
        "spec": {
            "mode": "combined",
            "brokers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi", "deleteClaim": True}]}},
            "listeners": [{"name": "CLIENT", "port": 9092}, {"name": "EXTERNAL", "port": 9094, **external}],
            "config": {"offsets.topic.replication.factor": "3"},
        },
    }


def example(name: str, **overrides: Any) -> str:
    """An examples/ manifest, optionally with top-level spec keys replaced."""
    doc = yaml.safe_load((REPO / "examples" / name).read_text())
    doc["spec"].update(overrides)
    return yaml.safe_dump(doc)


def client_pod(kube: Kube, namespace: str, name: str = "client", **spec: Any) -> str:
    """A long-running pod of the client image (confluent-kafka, kafkatest, kafka-python, kcat)
    inside the cluster network; tests `exec` into it. `spec`: more pod spec fields (hostAliases)."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "kafka-client"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "client",
                    "image": kube.client_image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "infinity"],
                }
            ],
            **spec,
        },
    }
    kube.apply(json.dumps(manifest), namespace)

    def running() -> bool:
        pod = kube.get("pod", name, namespace) or {}
        return any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in pod.get("status", {}).get("conditions", [])
        )

    wait_for(f"client pod {name} ready", running, 180)
    return name


def exec_python(kube: Kube, namespace: str, pod: str, script: str, timeout: float = 300) -> str:
    return kube.kubectl("-n", namespace, "exec", "-i", pod, "--", "python3", "-", input=script, timeout=timeout)


def exec_sh(kube: Kube, namespace: str, pod: str, script: str, timeout: float = 300) -> str:
    return kube.kubectl("-n", namespace, "exec", "-i", pod, "--", "/bin/sh", "-s", input=script, timeout=timeout)


def kopfka_cli(kube: Kube, namespace: str, pod: str, *args: str, timeout: float = 120) -> str:
    """The `kopfka` admin CLI (kafka-topics & co.) inside a client pod."""
    return kube.kubectl("-n", namespace, "exec", pod, "--", "kopfka", *args, timeout=timeout)


def pods_of(kube: Kube, namespace: str, cluster: str, role: str | None = None) -> list[dict[str, Any]]:
    selector = f"kopfka.io/cluster={cluster}" + (f",kopfka.io/role={role}" if role else "")
    return sorted(kube.items("pods", namespace, selector), key=lambda p: p["metadata"]["name"])


def wait_gone(kube: Kube, kind: str, namespace: str, selector: str, timeout: float = 180) -> None:
    wait_for(f"no {kind} with {selector}", lambda: not kube.items(kind, namespace, selector) or None, timeout)


def elapsed(started: float) -> float:
    return round(time.monotonic() - started, 1)


def create_topic(
    kube: Kube, namespace: str, pod: str, bootstrap: str, topic: str, partitions: int = 1, rf: int = 1, **config: str
) -> None:
    """`kopfka topics --create` from a client pod (config keys with dots: pass a dict via **)."""
    args = ["topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic]
    args += ["--partitions", str(partitions), "--replication-factor", str(rf)]
    for key, value in config.items():
        args += ["--config", f"{key}={value}"]
    kopfka_cli(kube, namespace, pod, *args)


def patch_cluster(kube: Kube, namespace: str, name: str, spec: dict[str, Any]) -> None:
    """A merge patch of a KafkaCluster's spec, as `kubectl patch --type=merge` sends it."""
    kube.kubectl("-n", namespace, "patch", "kafkacluster", name, "--type=merge", "-p", json.dumps({"spec": spec}))


def listener_bootstrap(kube: Kube, cluster: str, namespace: str, listener: str) -> str | None:
    """status.listeners[].bootstrapServers of one listener, None until the operator publishes it."""
    obj = kube.get("kafkacluster", cluster, namespace) or {}
    listeners = (obj.get("status") or {}).get("listeners") or []
    return next((lst.get("bootstrapServers") for lst in listeners if lst["name"] == listener), None)
