"""The test bed behaves as a real cluster where the operator depends on it.

A StatefulSet rollout, a pod deletion and a node-level kill of a container each do what they do
on any conformant Kubernetes; volumes come from the default StorageClass and outlive pods; pods
reach each other through Services and cluster DNS, and nothing outside the machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from kube_env import Kube, wait_for

STS = """
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  clusterIP: None
  selector: {{app: web}}
  ports: [{{name: http, port: 8000}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web-lb}}
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: 8000}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: web}}
spec:
  serviceName: web
  replicas: 2
  podManagementPolicy: Parallel
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 5
      securityContext: {{fsGroup: 1000}}
      containers:
        - name: web
          image: {image}
          imagePullPolicy: IfNotPresent
          env: [{{name: GENERATION, value: "{generation}"}}]
          command: ["/bin/sh", "-c"]
          args:
            - |
              [ -f /data/born ] || echo "$HOSTNAME" > /data/born
              echo "$GENERATION" > /data/generation
              cd /data && exec python3 -m http.server 8000
          readinessProbe:
            httpGet: {{path: /born, port: 8000}}
            periodSeconds: 1
          volumeMounts: [{{name: data, mountPath: /data}}]
  volumeClaimTemplates:
    - metadata: {{name: data}}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {{requests: {{storage: 10Mi}}}}
"""


def _sts(kube: Kube, ns: str, generation: int) -> None:
    kube.apply(STS.format(image=kube.image, generation=generation), ns)


def _ready_pods(kube: Kube, ns: str, want: int) -> list[dict]:
    pods = kube.items("pods", ns, "app=web")
    ready = [
        p
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
    ]
    return ready if len(ready) == want else []


def _exec(kube: Kube, ns: str, pod: str, *cmd: str) -> str:
    return kube.kubectl("-n", ns, "exec", pod, "--", *cmd, timeout=60)


@pytest.mark.smoke
def test_statefulset_volumes_rollout_and_pod_deletion(kube: Kube, namespace: str) -> None:
    _sts(kube, namespace, 1)
    pods = wait_for("2 ready pods", lambda: _ready_pods(kube, namespace, 2), 180)
    claims = kube.items("pvc", namespace)
    assert sorted(c["metadata"]["name"] for c in claims) == ["data-web-0", "data-web-1"]
    assert all(c["status"]["phase"] == "Bound" for c in claims)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}

    # Service + DNS: one pod fetches from the other by its stable name and through the ClusterIP
    # (retried: kube-proxy and CoreDNS pick a new Service up within a moment, not at once).
    def fetch(url: str) -> str:
        code = f"import urllib.request as u;print(u.urlopen('{url}',timeout=5).read().decode())"
        return _exec(kube, namespace, "web-0", "python3", "-c", code).strip()

    assert wait_for("web-1 by its pod DNS name", lambda: fetch("http://web-1.web:8000/born"), 60) == "web-1"
    assert wait_for("the ClusterIP Service", lambda: fetch("http://web-lb/born"), 60) in ("web-0", "web-1")

    # Pod deletion: the controller recreates the pod under the same name with the same volume.
    kube.kubectl("-n", namespace, "delete", "pod", "web-1", "--wait=true", timeout=120)
    pods = wait_for("web-1 recreated", lambda: _ready_pods(kube, namespace, 2), 180)
    new = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    assert new["web-1"] != uids["web-1"] and new["web-0"] == uids["web-0"]
    assert _exec(kube, namespace, "web-1", "cat", "/data/born").strip() == "web-1"

    # Rollout (RollingUpdate): a template change replaces every pod, highest ordinal first.
    _sts(kube, namespace, 2)

    def rolled() -> bool:
        sts = kube.get("statefulset", "web", namespace) or {}
        st = sts.get("status", {})
        return bool(
            st.get("updatedReplicas") == 2
            and st.get("readyReplicas") == 2
            and st.get("currentRevision") == st.get("updateRevision")
        )

    wait_for("rollout complete", rolled, 240)
    for pod in ("web-0", "web-1"):
        assert _exec(kube, namespace, pod, "cat", "/data/generation").strip() == "2"
        assert _exec(kube, namespace, pod, "cat", "/data/born").strip() == pod
    events = kube.kubectl("-n", namespace, "get", "events", "--field-selector", "reason=SuccessfulDelete", "-o", "json")
    deleted = [e["message"] for e in json.loads(events)["items"]]
    assert any("web-1" in m for m in deleted), deleted

    # Claims outlive the set: deleting the StatefulSet keeps both PVCs and their data.
    kube.kubectl("-n", namespace, "delete", "statefulset", "web", "--wait=true", timeout=120)
    assert sorted(c["metadata"]["name"] for c in kube.items("pvc", namespace)) == ["data-web-0", "data-web-1"]


def test_node_level_kill_restarts_the_container(kube: Kube, namespace: str) -> None:
    """SIGKILL of a container's process from the host, as an OOM kill would: the kubelet
    restarts the container in the same pod and counts it."""
    if kube.platform != "testbed":
        pytest.skip("kills a process on the node: test bed only")
    from testbed import images as imageslib

    _sts(kube, namespace, 1)
    wait_for("2 ready pods", lambda: _ready_pods(kube, namespace, 2), 180)
    pod = kube.get("pod", "web-0", namespace)
    assert pod
    cid = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    tasks = imageslib.ctr(kube.extra["paths"], "tasks", "ls").stdout.splitlines()
    pid = next(int(line.split()[1]) for line in tasks if line.startswith(cid))
    os.kill(pid, signal.SIGKILL)

    def restarted() -> dict | None:
        p = kube.get("pod", "web-0", namespace) or {}
        statuses = p.get("status", {}).get("containerStatuses") or [{}]
        st = statuses[0]
        return p if st.get("restartCount", 0) >= 1 and st.get("ready") else None

    pod = wait_for("container restarted and ready", restarted, 180)
    last = pod["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert last["exitCode"] == 137, last
    assert pod["metadata"]["uid"] == kube.get("pod", "web-0", namespace)["metadata"]["uid"]


@pytest.mark.smoke
def test_pods_reach_nothing_off_the_machine(kube: Kube, namespace: str) -> None:
    if kube.platform != "testbed":
        pytest.skip("the guard is the test bed's")
    kube.kubectl(
        "-n",
        namespace,
        "run",
        "probe",
        f"--image={kube.image}",
        "--image-pull-policy=IfNotPresent",
        "--restart=Never",
        "--command",
        "--",
        "sleep",
        "300",
    )
    wait_for(
        "probe running",
        lambda: (kube.get("pod", "probe", namespace) or {}).get("status", {}).get("phase") == "Running",
        120,
    )
    script = (
        "import socket\n"
        "for target in [('192.0.2.1', 80), ('1.1.1.1', 53), ('8.8.8.8', 443)]:\n"
        "    try:\n"
        "        socket.create_connection(target, timeout=3).close(); print('REACHED', target)\n"
        "    except OSError as e: print('blocked', target, type(e).__name__)\n"
        "try:\n"
        "    print('RESOLVED', socket.gethostbyname('example.com'))\n"
        "except OSError as e: print('unresolved', type(e).__name__)\n"
        "print('api', socket.gethostbyname('kubernetes.default.svc.cluster.local'))\n"
    )
    out = _exec(kube, namespace, "probe", "python3", "-c", script)
    assert "REACHED" not in out and "RESOLVED" not in out, out
    assert "api 10.96.0.1" in out, out
    proc = subprocess.run(["nft", "list", "table", "inet", "kopfka_testbed_guard"], capture_output=True, text=True)
    assert "drop" in proc.stdout
