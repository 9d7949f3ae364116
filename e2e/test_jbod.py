"""JBOD on real pods, under a running acks=all producer (audited: 0 acknowledged records lost):
a volume added to every broker (the StatefulSet re-created with the new claim template, pods
kept and rolled one at a time, the new disk in log.dirs), then a volume that holds replicas
removed (its replicas moved to the other disks first, then the disk unmounted and its
deleteClaim claims deleted)."""

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
import testbed
from kafka_pods import client_pod, cluster_ready, create_topic, exec_sh, patch_cluster, pods_of
from kube_env import Kube, wait_for
from pod_producer import PodProducer, audit, consume_all

FIGURES: dict[str, Any] = {}
VOLUMES = [
    {"id": 0, "size": "1Gi", "kraftMetadata": True},
    {"id": 1, "size": "1Gi", "deleteClaim": True},
]
CLUSTER = {
    "apiVersion": "kopfka.io/v1alpha1",
    "kind": "KafkaCluster",
    "metadata": {"name": "jbod"},
    "spec": {
        "mode": "dedicated",
        "controllers": {"replicas": 1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "brokers": {"replicas": 3, "storage": {"type": "jbod", "volumes": VOLUMES}},
        "config": {
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
            "replica.lag.time.max.ms": "10000",
        },
        "podTemplate": {"terminationGracePeriodSeconds": 60},
    },
}


@pytest.fixture(scope="module")
def ns(operator: Kube) -> Iterator[str]:
    name = f"e2e-jbod-{uuid.uuid4().hex[:4]}"
    operator.kubectl("create", "namespace", name)
    yield name
    print(f"\njbod figures: {json.dumps(FIGURES)}")
    if not os.environ.get("KOPFKA_E2E_KEEP"):
        operator.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def cluster(operator: Kube, ns: str) -> dict[str, Any]:
    operator.apply(json.dumps(CLUSTER), ns)
    obj = cluster_ready(operator, "jbod", ns)
    client_pod(operator, ns)
    return obj


def _partition_dirs(kube: Kube, ns: str, pod: str, volume: int) -> list[str]:
    out = exec_sh(kube, ns, pod, f"ls /var/lib/kopfka/data-{volume} 2>/dev/null || true")
    return [d for d in out.split() if "-" in d and d.rsplit("-", 1)[1].isdigit()]


def _claims(kube: Kube, ns: str, volume: int) -> list[str]:
    out = json.loads(kube.kubectl("-n", ns, "get", "pvc", "-o", "json"))
    return [
        c["metadata"]["name"] for c in out["items"] if c["metadata"]["name"].startswith(f"data-{volume}-jbod-broker")
    ]


def _settled(kube: Kube, ns: str) -> dict[str, Any] | None:
    obj = kube.get("kafkacluster", "jbod", ns) or {}
    status = obj.get("status") or {}
    scale = (status.get("scale") or {}).get("broker") or {}
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
    return (
        obj
        if ready and not scale.get("removeVolumes") and (status.get("roll") or {}).get("phase") != "Rolling"
        else None
    )


def test_a_volume_is_added_then_a_volume_with_data_is_removed_without_loss(
    operator: Kube, ns: str, cluster: dict[str, Any], tmp_path: Path
) -> None:
    bootstrap = cluster["status"]["bootstrapServers"]
    brokers = [p["metadata"]["name"] for p in pods_of(operator, ns, "jbod", "broker")]
    topic = "audit-jbod"
    create_topic(operator, ns, "client", bootstrap, topic, 12, 3, **{"min.insync.replicas": "2"})
    prod = PodProducer(operator, ns, bootstrap, topic, throughput=50).start(tmp_path / "producer.log")
    try:
        prod.wait_acked(200, timeout=90)
        on_disk_1 = sum(len(_partition_dirs(operator, ns, b, 1)) for b in brokers)
        assert on_disk_1 > 0, "volume 1 holds no partition: nothing to prove by removing it"
        FIGURES["replicas_on_volume_1"] = on_disk_1

        started = time.monotonic()
        patch_cluster(operator, ns, "jbod", {"brokers": {"storage": {"volumes": [*VOLUMES, {"id": 2, "size": "1Gi"}]}}})
        wait_for(
            "volume 2 mounted on every broker",
            lambda: all("data-2" in exec_sh(operator, ns, b, "ls /var/lib/kopfka") for b in brokers),
            900,
            5,
        )
        wait_for("roll done, Ready", lambda: _settled(operator, ns), 900, 3)
        FIGURES["add_volume_s"] = round(time.monotonic() - started, 1)
        assert len(_claims(operator, ns, 2)) == 3
        prod.wait_acked(prod.acked_count + 100, timeout=90)

        started = time.monotonic()
        patch_cluster(
            operator, ns, "jbod", {"brokers": {"storage": {"volumes": [VOLUMES[0], {"id": 2, "size": "1Gi"}]}}}
        )

        def emptied() -> bool:
            obj = operator.get("kafkacluster", "jbod", ns) or {}
            state = ((obj.get("status") or {}).get("scale") or {}).get("broker") or {}
            sts = operator.get("statefulset", "jbod-broker", ns) or {}
            claims = [t["metadata"]["name"] for t in sts.get("spec", {}).get("volumeClaimTemplates", [])]
            return bool(state.get("volumesEvacuated")) or "data-1" not in claims

        wait_for("volume 1 emptied", emptied, 900, 3)
        FIGURES["evacuate_volume_s"] = round(time.monotonic() - started, 1)
        wait_for(
            "volume 1 unmounted everywhere, roll done",
            lambda: (
                _settled(operator, ns)
                and not any("data-1" in exec_sh(operator, ns, b, "ls /var/lib/kopfka") for b in brokers)
            ),
            900,
            3,
        )
        FIGURES["remove_volume_s"] = round(time.monotonic() - started, 1)
        wait_for("deleteClaim claims of volume 1 deleted", lambda: not _claims(operator, ns, 1), 120, 3)
        prod.wait_acked(prod.acked_count + 100, timeout=90)
    finally:
        prod.stop()
    consumed = consume_all(bootstrap, topic, prod.acked_count, tmp_path / "consumer.log", command=prod.command)
    result = audit(prod.acked, consumed)
    FIGURES["audit"] = result.line("jbod add+remove")
    assert result.lost == 0 and result.duplicated == 0 and result.out_of_order == 0, (result, result.lost_sample)
    assert not prod.errors, prod.errors[:5]


def _container_pid(kube: Kube, ns: str, pod: str) -> int:
    """The broker container's process on the node (the test bed's containerd), for nsenter."""
    obj = kube.get("pod", pod, ns) or {}
    [cid] = [s["containerID"].split("://", 1)[1] for s in obj["status"]["containerStatuses"]]
    sock = testbed.paths().containerd_socket
    out = subprocess.run(
        ["ctr", f"--address={sock}", "-n", "k8s.io", "task", "ls"], capture_output=True, text=True, check=True
    ).stdout
    return next(int(line.split()[1]) for line in out.splitlines() if line.startswith(cid))


def _offline(kube: Kube, ns: str) -> list[dict[str, Any]]:
    obj = kube.get("kafkacluster", "jbod", ns) or {}
    return list(((obj.get("status") or {}).get("logDirs") or {}).get("offline") or [])


def _events(kube: Kube, ns: str, reason: str) -> list[str]:
    items = json.loads(kube.kubectl("-n", ns, "get", "events", "-o", "json"))["items"]
    return [e["message"] for e in items if e["reason"] == reason]


def test_a_failed_disk_is_reported_with_its_partitions_until_the_broker_is_back(
    operator: Kube, ns: str, cluster: dict[str, Any]
) -> None:
    """Volume 2 of one broker fails under it (in the container's mount namespace an empty
    read-only filesystem is mounted over it, so writes there fail as on a failing disk): the broker
    runs on with its other disk, and status.logDirs names the broker, the dir, the volume and
    exactly the replicas that were on it; the Warning condition and an Event say so. A restarted
    pod mounts the disk again and the report clears."""
    if operator.platform != "testbed":
        pytest.skip("fails a disk with nsenter on the test bed's node")
    pod = "jbod-broker-0"
    on_disk = sorted(_partition_dirs(operator, ns, pod, 2))
    assert on_disk, "volume 2 of broker 0 holds no replica: nothing would go offline"
    pid = _container_pid(operator, ns, pod)
    path = "/var/lib/kopfka/data-2"
    # the container's view of the disk turns into an empty read-only filesystem: the broker's
    # next checkpoint write there fails (EROFS), as on a disk the kernel remounted read-only
    subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "-r", "-w", "mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", path],
        check=True,
    )
    started = time.monotonic()
    [entry] = wait_for("broker 0's failed disk in status", lambda: _offline(operator, ns), 180, 2)
    FIGURES["failed_disk_reported_s"] = round(time.monotonic() - started, 1)
    assert entry["dirs"] == [path] and entry["volumes"] == ["data-2"]
    assert sorted(entry["partitions"]) == on_disk and entry["partitionCount"] == len(on_disk)
    obj = operator.get("kafkacluster", "jbod", ns) or {}
    warning = next(c for c in obj["status"]["conditions"] if c["type"] == "Warning")
    assert warning["status"] == "True" and f"has {path} offline" in warning["message"], warning
    assert any(path in m for m in _events(operator, ns, "LogDirOffline"))
    assert len(pods_of(operator, ns, "jbod", "broker")) == 3, "a broker with a disk left keeps running"

    operator.kubectl("-n", ns, "delete", "pod", pod, "--wait=false")
    wait_for(
        "the report cleared after the pod mounted its disk again", lambda: not _offline(operator, ns) or None, 600, 3
    )
    assert any(path in m for m in _events(operator, ns, "LogDirOnline"))
    wait_for("Ready again", lambda: _settled(operator, ns), 600, 3)
