"""A real kopf operator (in-process task) against the kmock emulator from conftest.py.

kmock runs no controllers: where Kubernetes would fill StatefulSet status, create PVCs or run
pods, the tests write those objects themselves through the API, as the controllers would.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import kopf
import pytest
from kopfka.client.admin import PartitionInfo, TopicInfo
from kopfka.protocol.errors import ErrorCode
from kopfka_operator import handlers
from kopfka_operator.handlers import OperatorConfig, configure_settings, register
from kopfka_operator.kube import KubeApi
from kopfka_operator.reconcile import reconcile
from kopfka_operator.roll.kafka_view import AdminKafkaView
from operator_testlib import eventually, run_script, running_kopf

NS = "kafka"
IMAGE = "registry.invalid/kopfka:test"
ROLES = ("controller", "broker")
CHILD_PLURALS = {
    "configmaps",
    "services",
    "serviceaccounts",
    "statefulsets",
    "poddisruptionbudgets",
}


def cluster_body(name: str = "demo", **spec_overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "controllers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "brokers": {
            "replicas": 3,
            "storage": {
                "type": "jbod",
                "volumes": [
                    {"id": 0, "size": "10Gi"},
                    {"id": 1, "size": "10Gi", "kraftMetadata": True},
                    {"id": 2, "size": "20Gi", "deleteClaim": True, "storageClass": "fast"},
                ],
            },
        },
        "config": {"num.partitions": 6, "default.replication.factor": "3"},
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


@pytest.fixture
async def api(k8s: Any) -> AsyncIterator[KubeApi]:
    client = KubeApi(kopf.ConnectionInfo(server=k8s.server_url))
    yield client
    await client.close()


@pytest.fixture
async def operator(k8s: Any) -> AsyncIterator[None]:
    registry = kopf.OperatorRegistry()

    async def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=k8s.server_url)

    register(registry, OperatorConfig(default_image=IMAGE, resync_seconds=3600), login=login)
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    configure_settings(settings)
    async with running_kopf(registry, settings, [NS]):
        yield


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    """The condition, or {} while the operator has not written it yet (a probe polls again)."""
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


async def get(api: KubeApi, kind: str, name: str) -> dict[str, Any]:
    obj = await api.get(kind, NS, name)
    assert obj is not None, f"{kind} {name} missing"
    return obj


def child_writes(k8s: Any) -> list[tuple[str, str, str | None, str | None]]:
    return [w for w in k8s.writes if w[1] in CHILD_PLURALS]


async def set_ready(api: KubeApi, sts: str, ready: int) -> None:
    current = await get(api, "StatefulSet", sts)
    status = {
        "replicas": ready,
        "readyReplicas": ready,
        "observedGeneration": current["metadata"]["generation"],
    }
    await api.patch("StatefulSet", NS, sts, {"status": status}, subresource="status")


async def server_config_name(api: KubeApi, sts: str) -> str:
    """The server.properties ConfigMap (a static-config revision) a StatefulSet's pods mount."""
    volumes = (await get(api, "StatefulSet", sts))["spec"]["template"]["spec"]["volumes"]
    return str(next(v for v in volumes if v["name"] == "config")["configMap"]["name"])


async def server_properties_of(api: KubeApi, sts: str) -> str:
    return str((await get(api, "ConfigMap", await server_config_name(api, sts)))["data"]["server.properties"])


async def _cm_with(api: KubeApi, name: str, key: str) -> dict[str, Any] | None:
    cm = await api.get("ConfigMap", NS, name)
    return cm if cm and key in (cm.get("data") or {}) else None


async def test_cluster_lifecycle_children_status_update_delete(k8s: Any, api: KubeApi, operator: None) -> None:
    created = await api.create(NS, cluster_body())
    uid = created["metadata"]["uid"]

    broker_sts = await eventually(lambda: api.get("StatefulSet", NS, "demo-broker"))
    cluster = await eventually(lambda: _with_status(api, "demo", "clusterId", "conditions"))
    status = cluster["status"]
    cluster_id = status["clusterId"]
    assert len(cluster_id) == 22 and "=" not in cluster_id
    assert cluster["metadata"]["finalizers"] == ["kopfka.io/finalizer"]
    assert status["bootstrapServers"] == f"demo-bootstrap.{NS}.svc:9092"
    assert status["brokers"]["nodeIds"] == [0, 1, 2]
    assert status["controllers"]["nodeIds"] == [1000, 1001, 1002]
    assert status["initialControllers"].startswith(f"1000@demo-controller-0.demo-controller.{NS}.svc:9093:")
    assert condition(status, "Ready")["status"] == "False"
    assert condition(status, "Reconciling")["status"] == "True"
    assert condition(status, "Warning")["status"] == "False"

    # Every child exists and is owned by the cluster.
    names = {
        "ServiceAccount": ["demo-kopfka"],
        "ConfigMap": ["demo-controller-config", "demo-broker-config"],
        "Service": ["demo-controller", "demo-broker", "demo-bootstrap"],
        "PodDisruptionBudget": ["demo-controller", "demo-broker"],
        "StatefulSet": ["demo-controller", "demo-broker"],
    }
    for kind, kind_names in names.items():
        for name in kind_names:
            child = await get(api, kind, name)
            owners = child["metadata"]["ownerReferences"]
            assert [(o["kind"], o["uid"], o["controller"]) for o in owners] == [("KafkaCluster", uid, True)]

    # JBOD: three claim templates, mounts, log.dirs, metadata dir on the kraftMetadata volume.
    spec = broker_sts["spec"]
    assert spec["updateStrategy"] == {"type": "OnDelete"}
    assert [t["metadata"]["name"] for t in spec["volumeClaimTemplates"]] == [
        "data-0",
        "data-1",
        "data-2",
    ]
    assert spec["volumeClaimTemplates"][2]["spec"]["storageClassName"] == "fast"
    pod = spec["template"]["spec"]
    (init,) = pod["initContainers"]
    (main,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
    assert mounts["data-2"] == "/var/lib/kopfka/data-2"
    assert {m["name"] for m in init["volumeMounts"]} >= {"data-0", "data-1", "data-2", "config"}
    assert f"--cluster-id {cluster_id}" in init["command"][2]
    assert "--ignore-formatted" in init["command"][2]
    assert "--initial-controllers" not in init["command"][2]
    assert pod["terminationGracePeriodSeconds"] == 300
    assert main["readinessProbe"]["httpGet"]["path"] == "/readyz"
    props = await server_properties_of(api, "demo-broker")
    assert "log.dirs=/var/lib/kopfka/data-0,/var/lib/kopfka/data-1,/var/lib/kopfka/data-2\n" in props
    assert "metadata.log.dir=/var/lib/kopfka/data-1\n" in props
    assert "num.partitions=6\n" in props
    controller_init = (await get(api, "StatefulSet", "demo-controller"))["spec"]["template"]["spec"]["initContainers"][
        0
    ]["command"][2]
    assert status["initialControllers"] in controller_init
    assert "quorumFormed" not in status
    assert "quorum.formed" not in (await get(api, "ConfigMap", "demo-controller-config"))["data"]

    # The StatefulSet controller reports ready pods -> Ready; a Ready controller means the
    # quorum formed, and the voters' ConfigMap gets the mark their format script reads.
    await set_ready(api, "demo-controller", 3)
    await set_ready(api, "demo-broker", 3)
    cluster = await eventually(lambda: _condition_is(api, "demo", "Ready", "True"))
    assert cluster["status"]["quorumFormed"] is True
    voters_cm = await eventually(lambda: _cm_with(api, "demo-controller-config", "quorum.formed"))
    assert voters_cm["data"]["quorum.formed"] == "true"
    assert condition(cluster["status"], "Reconciling")["status"] == "False"
    assert cluster["status"]["brokers"]["readyReplicas"] == 3
    assert cluster["status"]["observedGeneration"] == cluster["metadata"]["generation"]

    # Re-running the reconcile changes nothing.
    before = len(child_writes(k8s))
    await reconcile(api, await get(api, "KafkaCluster", "demo"), IMAGE)
    assert child_writes(k8s)[before:] == []

    # Scale brokers and change config: children patched, progress reported.
    await api.patch(
        "KafkaCluster",
        NS,
        "demo",
        {"spec": {"brokers": {"replicas": 5}, "config": {"num.partitions": 12}}},
    )
    await eventually(lambda: _sts_replicas(api, "demo-broker", 5))
    props = await server_properties_of(api, "demo-broker")
    assert "num.partitions=12\n" in props
    cluster = await eventually(lambda: _condition_is(api, "demo", "Reconciling", "True"))
    assert cluster["status"]["brokers"]["nodeIds"] == [0, 1, 2, 3, 4]
    assert cluster["status"]["clusterId"] == cluster_id  # never regenerated
    assert condition(cluster["status"], "Ready")["status"] == "False"
    assert "StatefulSet update not observed yet" in condition(cluster["status"], "Ready")["message"]
    await set_ready(api, "demo-broker", 5)
    await set_ready(api, "demo-controller", 3)  # spec.config reaches the controllers too
    await eventually(lambda: _condition_is(api, "demo", "Ready", "True"))

    # Delete: the finalizer runs, deleteClaim volumes' PVCs go, the others stay.
    for vol in (0, 1, 2):
        await api.create(NS, _pvc(f"data-{vol}-demo-broker-0", "broker", vol))
    await api.create(NS, _pvc("data-0-demo-controller-0", "controller", 0))
    await api.delete("KafkaCluster", NS, "demo")
    await eventually(lambda: _gone(api, "KafkaCluster", "demo"))
    assert await api.get("PersistentVolumeClaim", NS, "data-2-demo-broker-0") is None
    for kept in ("data-0-demo-broker-0", "data-1-demo-broker-0", "data-0-demo-controller-0"):
        assert await api.get("PersistentVolumeClaim", NS, kept) is not None


async def test_invalid_config_key_is_a_warning_and_changes_no_children(k8s: Any, api: KubeApi, operator: None) -> None:
    await api.create(NS, cluster_body())
    await eventually(lambda: _condition_is(api, "demo", "Reconciling", "True"))
    cm_before = await get(api, "ConfigMap", await server_config_name(api, "demo-broker"))
    sts_before = await get(api, "StatefulSet", "demo-broker")
    writes_before = len(child_writes(k8s))

    await api.patch(
        "KafkaCluster",
        NS,
        "demo",
        {"spec": {"config": {"log.dirs": "/elsewhere"}, "brokers": {"replicas": 4}}},
    )
    cluster = await eventually(lambda: _condition_is(api, "demo", "Warning", "True"))
    warning = condition(cluster["status"], "Warning")
    assert warning["reason"] == "OperatorOwnedConfigKey"
    assert "log.dirs" in warning["message"]
    assert condition(cluster["status"], "Reconciling")["reason"] == "OperatorOwnedConfigKey"
    await asyncio.sleep(0.3)
    assert child_writes(k8s)[writes_before:] == []
    assert (await get(api, "ConfigMap", await server_config_name(api, "demo-broker")))["data"] == cm_before["data"]
    assert (await get(api, "StatefulSet", "demo-broker"))["spec"] == sts_before["spec"]

    # Fixing the spec applies it and clears the warning.
    await api.patch("KafkaCluster", NS, "demo", {"spec": {"config": {"log.dirs": None}}})
    await eventually(lambda: _condition_is(api, "demo", "Warning", "False"))
    await eventually(lambda: _sts_replicas(api, "demo-broker", 4))


async def test_spec_error_without_children_and_format_failure_surfaces(
    k8s: Any, api: KubeApi, operator: None, tmp_path: Any
) -> None:
    bad = cluster_body("bad", mode="combined")  # combined mode must not have controllers
    await api.create(NS, bad)
    cluster = await eventually(lambda: _condition_is(api, "bad", "Warning", "True"))
    assert condition(cluster["status"], "Warning")["reason"] == "InvalidSpec"
    assert "clusterId" not in cluster["status"]
    assert await api.get("StatefulSet", NS, "bad-broker") is None
    assert await api.get("ConfigMap", NS, "bad-broker-config") is None

    body = cluster_body("solo", mode="combined")
    del body["spec"]["controllers"]
    body["spec"]["brokers"]["replicas"] = 1
    await api.create(NS, body)
    sts = await eventually(lambda: api.get("StatefulSet", NS, "solo-combined"))
    script = sts["spec"]["template"]["spec"]["initContainers"][0]["command"][2]
    args = run_script(tmp_path, script, "solo-combined-0")
    assert "--initial-controllers" in args and "--no-initial-controllers" not in args

    # The format-storage init container fails on a disk of another cluster.
    labels = sts["spec"]["template"]["metadata"]["labels"]
    await api.create(
        NS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "solo-combined-0", "namespace": NS, "labels": labels},
            "spec": copy.deepcopy(sts["spec"]["template"]["spec"]),
        },
    )
    message = "log dir /var/lib/kopfka/data-0 is formatted for cluster AAAAAAAAAAAAAAAAAAAAAA"
    pod_status = {
        "phase": "Pending",
        "initContainerStatuses": [
            {
                "name": "format-storage",
                "ready": False,
                "restartCount": 2,
                "image": IMAGE,
                "imageID": "",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}},
            }
        ],
    }
    await api.patch("Pod", NS, "solo-combined-0", {"status": pod_status}, subresource="status")
    cluster = await eventually(lambda: _condition_is(api, "solo", "Warning", "True"))
    warning = condition(cluster["status"], "Warning")
    assert warning["reason"] == "FormatStorageFailed"
    assert "solo-combined-0" in warning["message"] and message in warning["message"]


def _pvc(name: str, role: str, volume: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {
                "kopfka.io/cluster": "demo",
                "kopfka.io/role": role,
                "kopfka.io/volume": str(volume),
            },
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


async def _with_status(api: KubeApi, name: str, *keys: str) -> dict[str, Any] | None:
    obj = await api.get("KafkaCluster", NS, name)
    status = (obj or {}).get("status") or {}
    return obj if all(k in status for k in keys) else None


async def _condition_is(api: KubeApi, name: str, type_: str, value: str) -> dict[str, Any] | None:
    obj = await _with_status(api, name, "conditions")
    if obj and condition(obj["status"], type_).get("status") == value:
        return obj
    return None


async def _sts_replicas(api: KubeApi, name: str, replicas: int) -> bool:
    sts = await api.get("StatefulSet", NS, name)
    return bool(sts and sts["spec"]["replicas"] == replicas)


async def _gone(api: KubeApi, kind: str, name: str) -> bool:
    return await api.get(kind, NS, name) is None


def _claim_names(sts: dict[str, Any]) -> list[str]:
    return [v["metadata"]["name"] for v in sts["spec"]["volumeClaimTemplates"]]


async def test_storage_changes_are_all_or_nothing_and_an_added_volume_recreates_the_set(
    k8s: Any, api: KubeApi, operator: None
) -> None:
    await api.create(NS, cluster_body())
    before = await eventually(lambda: api.get("StatefulSet", NS, "demo-broker"))
    assert _claim_names(before) == ["data-0", "data-1", "data-2"]
    volumes = cluster_body()["spec"]["brokers"]["storage"]["volumes"]

    # Moving kraftMetadata is refused as a whole, the set untouched, the reason in status.
    moved = [
        dict(volumes[0], kraftMetadata=True),
        {k: v for k, v in volumes[1].items() if k != "kraftMetadata"},
        volumes[2],
    ]
    await api.patch("KafkaCluster", NS, "demo", {"spec": {"brokers": {"storage": {"volumes": moved}}}})
    cluster = await eventually(lambda: _warning_says(api, "kraftMetadata moved"))
    assert (await get(api, "StatefulSet", "demo-broker"))["spec"] == before["spec"]

    # Removing a disk: it stays mounted and in log.dirs (the set untouched) until the scaler has
    # cordoned the dir on every broker and moved its replicas away -- here no Kafka answers, so
    # it waits and says so.
    await api.patch("KafkaCluster", NS, "demo", {"spec": {"brokers": {"storage": {"volumes": volumes[:2]}}}})
    cluster = await eventually(lambda: _scale_state(api, "removeVolumes"))
    state = cluster["status"]["scale"]["broker"]
    assert state["removeVolumes"] == [2] and state["deleteClaims"] == [2], state
    assert state["volumes"].startswith("waiting to cordon volume(s) [2] on brokers [0, 1, 2]"), state
    assert (await get(api, "StatefulSet", "demo-broker"))["spec"] == before["spec"]
    await eventually(lambda: _condition_is(api, "demo", "Warning", "False"))
    # Once emptied (the data mover's verdict, written here by hand), the set is re-created
    # without it (pods kept, rolled by the roller) and the scaler's state is cleared.
    await api.patch(
        "KafkaCluster", NS, "demo", {"status": {"scale": {"broker": {"volumesEvacuated": [2]}}}}, subresource="status"
    )
    removed = await eventually(lambda: _sts_with_claims(api, "demo-broker", 2))
    assert _claim_names(removed) == ["data-0", "data-1"]
    assert "data-2" not in json.dumps(removed["spec"]["template"])
    await eventually(lambda: _scale_state(api, "removeVolumes", absent=True))
    volumes = volumes[:2]

    # Adding a disk: the set is re-created (pods orphaned, not deleted) with the new claim template.
    added = [*volumes, {"id": 3, "size": "5Gi"}]
    await api.patch("KafkaCluster", NS, "demo", {"spec": {"brokers": {"storage": {"volumes": added}}}})
    after = await eventually(lambda: _sts_with_claims(api, "demo-broker", 3))
    assert _claim_names(after) == ["data-0", "data-1", "data-3"]
    deletes = [w for w in k8s.writes if w[0] == "DELETE" and w[1] == "statefulsets"]
    assert deletes and all(w[2] == "demo-broker" for w in deletes)
    await eventually(lambda: _condition_is(api, "demo", "Warning", "False"))


async def _warning_says(api: KubeApi, text: str) -> dict[str, Any] | None:
    cluster = await api.get("KafkaCluster", NS, "demo")
    return cluster if cluster and text in condition(cluster.get("status") or {}, "Warning").get("message", "") else None


async def _scale_state(api: KubeApi, key: str, absent: bool = False) -> dict[str, Any] | None:
    cluster = await api.get("KafkaCluster", NS, "demo")
    state = (((cluster or {}).get("status") or {}).get("scale") or {}).get("broker") or {}
    return cluster if (key in state) != absent else None


async def _sts_with_claims(api: KubeApi, name: str, count: int) -> dict[str, Any] | None:
    sts = await api.get("StatefulSet", NS, name)
    return sts if sts and len(sts["spec"].get("volumeClaimTemplates") or []) == count else None


@contextlib.asynccontextmanager
async def _fast_timer_operator(
    k8s: Any, view: AdminKafkaView | None, resync_seconds: float = 3600
) -> AsyncIterator[None]:
    """The operator with its roll timer ticking every 0.1 s, seeing the cluster through `view`."""
    registry = kopf.OperatorRegistry()

    async def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=k8s.server_url)

    config = OperatorConfig(
        default_image=IMAGE, resync_seconds=resync_seconds, roll_interval_seconds=0.1, kafka_view=lambda b, s: view
    )
    register(registry, config, login=login)
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    configure_settings(settings)
    async with running_kopf(registry, settings, [NS]):
        yield


async def test_a_new_cluster_gets_one_cluster_id_while_the_timers_run(k8s: Any, api: KubeApi) -> None:
    """The roll/scale timer fires at once on a new cluster, beside the create handler: both
    reconciled a body without status.clusterId and each made an id, the later one overwriting
    the status after children had used the first (seen on the test bed: a roll right after
    creation, then `storage format` refusing the disk of "another cluster")."""
    async with _fast_timer_operator(k8s, None):
        for i in range(4):
            await api.create(NS, cluster_body(f"race{i}"))
        names = [f"race{i}" for i in range(4)]
        # the four clusters are read side by side: one at a time, each read queued behind the
        # timers of all four, and the test took ~50 s
        clusters = await asyncio.gather(
            *(eventually(lambda n=n: _with_status(api, n, "clusterId", "conditions")) for n in names)
        )
        seen = {n: {c["status"]["clusterId"]} for n, c in zip(names, clusters, strict=True)}

        async def ids_of(name: str) -> set[str]:
            obj, *cms = await asyncio.gather(
                get(api, "KafkaCluster", name), *(get(api, "ConfigMap", f"{name}-{r}-config") for r in ROLES)
            )
            return {obj["status"]["clusterId"], *(cm["data"]["cluster.id"] for cm in cms)}

        for _ in range(3):  # several timer ticks
            await asyncio.sleep(0.3)
            for n, ids in zip(names, await asyncio.gather(*(ids_of(n) for n in names)), strict=True):
                seen[n] |= ids
        assert all(len(ids) == 1 for ids in seen.values()), seen


async def test_one_cluster_s_handlers_and_timers_never_overlap(
    k8s: Any, api: KubeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-cluster lock itself. Reconcile (create and update handlers, the resync timer every
    0.2 s) and the roll step (its timer every 0.1 s) are replaced by steps that only hold 50 ms
    and count, and the spec is updated meanwhile: no two steps ever run at once for one cluster,
    while two clusters do run side by side (the lock is per cluster, not the operator's)."""
    inflight: collections.Counter[str] = collections.Counter()
    peak: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    across = [0]  # steps that saw the other cluster's step in flight

    def held(kind: str) -> Callable[..., Awaitable[None]]:
        async def step(*args: Any) -> None:
            name = args[1]["metadata"]["name"]  # reconcile(api, body, image), roll_step(ctx, body)
            inflight[name] += 1
            peak[name] = max(peak[name], inflight[name])
            calls[kind] += 1
            try:
                await asyncio.sleep(0.05)
                across[0] += sum(1 for n in inflight.values() if n) > 1
            finally:
                inflight[name] -= 1

        return step

    monkeypatch.setattr(handlers, "reconcile", held("reconcile"))
    monkeypatch.setattr(handlers, "roll_step", held("roll"))
    async with _fast_timer_operator(k8s, None, resync_seconds=0.2):
        for name in ("lock0", "lock1"):
            await api.create(NS, cluster_body(name))
        deadline, i = time.monotonic() + 60, 0
        while (calls["reconcile"] < 20 or calls["roll"] < 20) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)  # update handlers beside the timers' steps
            i += 1
            for name in ("lock0", "lock1"):
                await api.patch("KafkaCluster", NS, name, {"spec": {"config": {"num.partitions": 6 + i}}})
    assert calls["reconcile"] >= 20 and calls["roll"] >= 20, calls
    assert dict(peak) == {"lock0": 1, "lock1": 1}, peak
    assert across[0] > 0, "the two clusters never ran side by side"


class _FailedDiskView(AdminKafkaView):
    """Metadata as a cluster with broker 1's disk failed answers it; nothing else answers."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1:1")

    async def metadata(self) -> tuple[dict[int, tuple[str, int, str | None]], list[TopicInfo]]:
        parts = [PartitionInfo(p, 0, 0, [0, 1, 2], [0, 2], [1] if p % 2 else [], ErrorCode.none) for p in range(6)]
        brokers: dict[int, tuple[str, int, str | None]] = {b: ("127.0.0.1", 1, None) for b in (0, 1, 2)}
        return brokers, [TopicInfo("orders", None, False, parts)]  # type: ignore[arg-type]


async def test_a_failed_disk_is_reported_in_status_and_the_warning_condition(k8s: Any, api: KubeApi) -> None:
    async with _fast_timer_operator(k8s, _FailedDiskView()):
        await api.create(NS, cluster_body())
        cluster = await eventually(lambda: _with_status(api, "demo", "logDirs"))
        [entry] = cluster["status"]["logDirs"]["offline"]
        assert entry["broker"] == 1
        assert entry["partitions"] == ["orders-1", "orders-3", "orders-5"] and entry["partitionCount"] == 3
        await eventually(lambda: _warning_says(api, "broker 1 has a log dir offline (3 partitions offline there)"))


async def test_a_stale_render_never_takes_the_quorum_formed_mark_back(k8s: Any, api: KubeApi) -> None:
    """The status handler marks the voters' ConfigMap when the quorum forms, outside the cluster's
    lock; a reconcile that read the cluster just before renders the ConfigMap without the mark.
    Its apply keeps the mark (server-side apply would drop it): at once when it reads the mark,
    and by a resourceVersion conflict and a re-read when the mark lands between its read and
    its write."""
    from kopfka_operator.naming import QUORUM_FORMED_KEY
    from kopfka_operator.reconcile import apply_child

    def render(formed: bool) -> dict[str, Any]:
        data = {"cluster.id": "AAAAAAAAAAAAAAAAAAAAAA", "initial.controllers": "1000@c-0:9093:x"}
        if formed:
            data[QUORUM_FORMED_KEY] = "true"
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "demo-controller-config", "namespace": NS},
            "data": data,
        }

    async def data() -> dict[str, str]:
        return dict((await get(api, "ConfigMap", "demo-controller-config"))["data"])

    assert await apply_child(api, render(False)) == ("created", None)
    assert await apply_child(api, render(True)) == ("updated", None)
    writes = len(k8s.writes)
    assert await apply_child(api, render(False)) == ("unchanged", None)
    assert k8s.writes[writes:] == [] and (await data())[QUORUM_FORMED_KEY] == "true"

    # the mark lands after a stale reconcile (which has another change to write) read the
    # ConfigMap and before it writes: what it finally applies carries the mark
    await api.delete("ConfigMap", NS, "demo-controller-config")
    await apply_child(api, render(False))
    before_mark = await get(api, "ConfigMap", "demo-controller-config")
    changed = render(False)
    changed["data"]["metadata.version"] = "4.1-IV0"
    applied: list[dict[str, str]] = []

    class MarkedAfterRead(KubeApi):
        async def get(self, kind: str, namespace: str, name: str) -> Any:
            if kind == "ConfigMap" and not marked:
                marked.append(await apply_child(api, render(True)))
                return before_mark
            return await super().get(kind, namespace, name)

        async def apply(self, kind: str, namespace: str, name: str, body: Any, field_manager: str) -> Any:
            result = await super().apply(kind, namespace, name, body, field_manager)
            applied.append(dict(body["data"]))
            return result

    marked: list[Any] = []
    stale = MarkedAfterRead(kopf.ConnectionInfo(server=k8s.server_url))
    try:
        assert await apply_child(stale, changed) == ("updated", None)
    finally:
        await stale.close()
    assert marked == [("updated", None)]
    assert applied == [{**changed["data"], QUORUM_FORMED_KEY: "true"}], "server-side apply keeps only what is sent"
    assert await data() == applied[0]
