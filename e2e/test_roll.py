"""Rolling restarts on real pods: every pod restarted exactly once, in the safe order, while
Kafka's verifiable producer (acks=all, idempotent) and consumer run — 0 acknowledged records
lost, 0 duplicates, the producer never failing; a dynamic config change restarts nothing; a
partition at RF = min.insync.replicas blocks the roll until its RF is raised.

One 3 controllers + 3 brokers cluster serves the whole module (tests run in file order).
"""

from __future__ import annotations

import json
import threading
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
    "metadata": {"name": "roll"},
    "spec": {
        "mode": "dedicated",
        "controllers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "brokers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "2Gi"}]}},
        "config": {
            "min.insync.replicas": "2",
            "default.replication.factor": "3",
            "offsets.topic.replication.factor": "3",
            "replica.lag.time.max.ms": "10000",
        },
        "rollingUpdate": {"blockedTimeoutSeconds": 15},
        "podTemplate": {"terminationGracePeriodSeconds": 60},
    },
}


@pytest.fixture(scope="module")
def ns(operator: Kube) -> Iterator[str]:
    import os

    name = f"e2e-roll-{uuid.uuid4().hex[:4]}"
    operator.kubectl("create", "namespace", name)
    yield name
    print(f"\nroll figures: {json.dumps(FIGURES)}")
    if not os.environ.get("KOPFKA_E2E_KEEP"):
        operator.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def cluster(operator: Kube, ns: str) -> dict[str, Any]:
    operator.apply(json.dumps(CLUSTER), ns)
    obj = cluster_ready(operator, "roll", ns)
    client = client_pod(operator, ns)
    bootstrap = obj["status"]["bootstrapServers"]
    create_topic(operator, ns, client, bootstrap, "audit", 6, 3, **{"min.insync.replicas": "2"})
    return obj


class UidWatch:
    """Samples the cluster's pod uids every half second: how often, and in which order, each
    pod was replaced."""

    def __init__(self, kube: Kube, ns: str) -> None:
        self.kube, self.ns = kube, ns
        self.replaced: list[str] = []
        self._last: dict[str, str] = self._uids()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _uids(self) -> dict[str, str]:
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_of(self.kube, self.ns, "roll")}

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                now = self._uids()
            except Exception:
                continue
            for name, uid in now.items():
                if name in self._last and self._last[name] != uid:
                    self.replaced.append(name)
            self._last.update(now)

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(5)
        return self.replaced


def _roll_finished_after(kube: Kube, ns: str, started_iso: str) -> dict[str, Any] | None:
    obj = kube.get("kafkacluster", "roll", ns) or {}
    roll = (obj.get("status") or {}).get("roll") or {}
    done = roll.get("phase") == "Done" and (roll.get("finishedAt") or "") >= started_iso
    return obj if done and condition(obj, "Ready").get("status") == "True" else None


def _leader_controller(kube: Kube, ns: str) -> int:
    out = kopfka_cli(
        kube,
        ns,
        "client",
        "metadata-quorum",
        "--bootstrap-controller",
        ",".join(f"roll-controller-{i}.roll-controller.{ns}.svc:9093" for i in range(3)),
        "describe",
        "--status",
    )
    line = next(line for line in out.splitlines() if line.startswith("LeaderId"))
    return int(line.split(":")[1])


def _rolled(kube: Kube, ns: str, cluster: dict[str, Any], tmp_path: Path, name: str, trigger: Any) -> dict[str, Any]:
    """Run `trigger` under a steady verifiable producer; wait for the roll; audit everything."""
    bootstrap = cluster["status"]["bootstrapServers"]
    topic = f"audit-{name}"  # the producer's values restart at 0: one topic per audit
    create_topic(kube, ns, "client", bootstrap, topic, 6, 3, **{"min.insync.replicas": "2"})
    leader = _leader_controller(kube, ns)
    prod = PodProducer(kube, ns, bootstrap, topic, throughput=50).start(tmp_path / f"{name}-producer.log")
    watch = UidWatch(kube, ns)
    try:
        prod.wait_acked(100, timeout=90)
        started_iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
        started = time.monotonic()
        trigger()
        obj = wait_for(f"{name}: roll finished", lambda: _roll_finished_after(kube, ns, started_iso), 900, 2)
        FIGURES[f"{name}_roll_s"] = round(time.monotonic() - started, 1)
        before = prod.acked_count
        prod.wait_acked(before + 100, timeout=90)
    finally:
        prod.stop()
        replaced = watch.stop()
    consumed = consume_all(bootstrap, topic, prod.acked_count, tmp_path / f"{name}-consumer.log", command=prod.command)
    result = audit(prod.acked, consumed)
    FIGURES[name] = result.line(name)
    roll = obj["status"]["roll"]
    # exactly once each, in the stated order: followers, then the active controller, then brokers
    assert sorted(replaced) == sorted(p["metadata"]["name"] for p in pods_of(kube, ns, "roll")), replaced
    assert roll["done"] == replaced, (roll["done"], replaced)
    controllers = [p for p in replaced if "controller" in p]
    assert replaced[:3] == controllers and controllers[-1] == f"roll-controller-{leader - 1000}", (replaced, leader)
    assert result.lost == 0 and result.duplicated == 0 and result.out_of_order == 0, (result, result.lost_sample)
    assert not prod.errors, prod.errors[:5]
    assert result.acked >= 200
    return obj


def _events(kube: Kube, ns: str, reason: str) -> list[str]:
    out = kube.kubectl("-n", ns, "get", "events", "--field-selector", f"reason={reason}", "-o", "json")
    return [e["message"] for e in json.loads(out)["items"]]


def test_dynamic_config_change_restarts_nothing(operator: Kube, ns: str, cluster: dict[str, Any]) -> None:
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_of(operator, ns, "roll")}
    patch_cluster(operator, ns, "roll", {"config": {"log.retention.ms": "3600000"}})

    def applied() -> dict[str, Any] | None:
        obj = operator.get("kafkacluster", "roll", ns) or {}
        live = ((obj.get("status") or {}).get("config") or {}).get("appliedLive") or {}
        return obj if live.get("log.retention.ms") == "3600000" else None

    obj = wait_for("log.retention.ms applied live", applied, 120)
    assert "log.retention.ms" in obj["status"]["config"]["lastAppliedLive"]
    bootstrap = obj["status"]["bootstrapServers"]
    kopfka_cli(operator, ns, "client", "topics", "--bootstrap-server", bootstrap, "--create", "--topic", "retained")
    described = kopfka_cli(
        operator,
        ns,
        "client",
        "configs",
        "--bootstrap-server",
        bootstrap,
        "--entity-type",
        "topics",
        "--entity-name",
        "retained",
        "--describe",
        "--all",
    )
    assert "log.retention.ms=3600000" in described.replace(" ", "") or "retention.ms=3600000" in described, described
    time.sleep(10)  # the roller ticks every 3 s: it had its chances to restart something
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_of(operator, ns, "roll")} == uids
    assert condition(operator.get("kafkacluster", "roll", ns), "Ready").get("status") == "True"


def test_image_change_rolls_every_pod_once_without_loss(
    operator: Kube, ns: str, cluster: dict[str, Any], tmp_path: Path
) -> None:
    if operator.platform != "testbed":
        pytest.skip("tags a second image in the node's containerd: test bed only")
    from testbed import images as imageslib

    new_image = operator.image + "-roll"
    imageslib.ctr(operator.extra["paths"], "images", "tag", "--force", operator.image, new_image)

    def trigger() -> None:
        operator.kubectl(
            "-n", ns, "patch", "kafkacluster", "roll", "--type=merge", "-p", json.dumps({"spec": {"image": new_image}})
        )

    obj = _rolled(operator, ns, cluster, tmp_path, "image", trigger)
    assert all(p["spec"]["containers"][0]["image"] == new_image for p in pods_of(operator, ns, "roll"))
    assert obj["status"]["roll"]["lastShutdown"]["ledPartitionsAtStop"] == 0
    assert not _events(operator, ns, "LeadershipNotMoved")
    assert len(_events(operator, ns, "ControlledShutdown")) >= 3


def test_static_config_change_rolls_every_pod_once_without_loss(
    operator: Kube, ns: str, cluster: dict[str, Any], tmp_path: Path
) -> None:
    def trigger() -> None:
        patch_cluster(operator, ns, "roll", {"config": {"replica.lag.time.max.ms": "12000"}})

    _rolled(operator, ns, cluster, tmp_path, "static-config", trigger)
    props = operator.kubectl(
        "-n", ns, "exec", "roll-broker-0", "-c", "kopfka", "--", "cat", "/etc/kopfka/server.properties"
    )
    assert "replica.lag.time.max.ms=12000" in props


def test_manual_roll_restarts_every_pod_once_and_clears_the_annotation(
    operator: Kube, ns: str, cluster: dict[str, Any], tmp_path: Path
) -> None:
    def trigger() -> None:
        operator.kubectl("-n", ns, "annotate", "kafkacluster", "roll", "kopfka.io/manual-rolling-update=true")

    obj = _rolled(operator, ns, cluster, tmp_path, "manual", trigger)
    annotations = obj["metadata"].get("annotations") or {}
    assert "kopfka.io/manual-rolling-update" not in annotations


def test_roll_blocked_by_rf_equal_min_insync_resumes_when_rf_is_raised(
    operator: Kube, ns: str, cluster: dict[str, Any]
) -> None:
    bootstrap = cluster["status"]["bootstrapServers"]
    create_topic(operator, ns, "client", bootstrap, "fragile", 3, 2, **{"min.insync.replicas": "2"})
    operator.kubectl("-n", ns, "annotate", "kafkacluster", "roll", "kopfka.io/manual-rolling-update=true")

    def blocked() -> dict[str, Any] | None:
        obj = operator.get("kafkacluster", "roll", ns) or {}
        return obj if condition(obj, "RollBlocked").get("status") == "True" else None

    obj = wait_for("RollBlocked", blocked, 600, 2)
    message = condition(obj, "RollBlocked")["message"]
    assert "fragile-" in message and "min.insync.replicas" in message, message
    assert obj["status"]["roll"]["phase"] == "Blocked"
    assert "min.insync" in operator.kubectl("-n", ns, "get", "kafkacluster", "roll", "-o", "wide")
    # Raise the RF to 3 (a reassignment): the gate opens and the roll finishes by itself.
    started_iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
    moves = [f"--move=fragile:{p}=0,1,2" for p in range(3)]
    kopfka_cli(
        operator, ns, "client", "reassign", "--bootstrap-server", bootstrap, "--execute", *moves, "--wait", timeout=300
    )
    wait_for("roll finished after the RF was raised", lambda: _roll_finished_after(operator, ns, started_iso), 900, 2)
    assert condition(operator.get("kafkacluster", "roll", ns), "RollBlocked").get("status") == "False"


def test_operator_killed_mid_roll_resumes_without_restarting_a_pod_twice(
    operator: Kube, ns: str, cluster: dict[str, Any], tmp_path: Path
) -> None:
    def trigger() -> None:
        operator.kubectl("-n", ns, "annotate", "kafkacluster", "roll", "kopfka.io/manual-rolling-update=true")

        def two_done() -> bool:
            roll = ((operator.get("kafkacluster", "roll", ns) or {}).get("status") or {}).get("roll") or {}
            return len(roll.get("done") or []) >= 2

        wait_for("two pods restarted", two_done, 300, 1)
        selector = "app.kubernetes.io/name=kopfka-operator"
        victims = [p["metadata"]["name"] for p in operator.items("pods", "kopfka-system", selector)]
        operator.kubectl("-n", "kopfka-system", "delete", "pod", "--force", "--grace-period=0", *victims)

    _rolled(operator, ns, cluster, tmp_path, "operator-killed", trigger)


def test_metadata_version_formatted_raised_and_never_lowered(operator: Kube, ns: str) -> None:
    small = {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": "upgrade"},
        "spec": {
            "mode": "combined",
            "metadataVersion": "4.1",
            "brokers": {"replicas": 1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        },
    }
    operator.apply(json.dumps(small), ns)
    cluster_ready(operator, "upgrade", ns)

    def version(field: str, value: object) -> dict[str, Any] | None:
        obj = operator.get("kafkacluster", "upgrade", ns) or {}
        info = (obj.get("status") or {}).get("metadataVersion") or {}
        return info if info.get(field) == value else None

    wait_for("formatted at 4.1 (level 27)", lambda: version("finalized", 27), 120)
    patch_cluster(operator, ns, "upgrade", {"metadataVersion": "4.3"})
    wait_for("raised to 4.3 (level 30) with UpdateFeatures", lambda: version("finalized", 30), 120)
    assert operator.kubectl("-n", ns, "get", "events", "--field-selector", "reason=MetadataVersionUpgraded")
    patch_cluster(operator, ns, "upgrade", {"metadataVersion": "4.0"})

    def refused() -> dict[str, Any] | None:
        info = version("finalized", 30)
        return info if info and "downgrade" in (info.get("refused") or "") else None

    info = wait_for("a downgrade refused, the level kept", refused, 120)
    assert "downgrade is refused" in info["refused"], info
