"""The operator as users run it: installed by its Helm chart, driven by `kubectl apply`.

One namespace holds every example (examples/*.yaml): the dedicated 3 controllers + 3 brokers
JBOD cluster `demo` and the combined 3-node cluster `small`. The tests run in file order and
share them, because bringing a cluster up is the expensive part on two cores.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kafka_pods import (
    client_pod,
    cluster_ready,
    create_topic,
    elapsed,
    exec_python,
    exec_sh,
    kopfka_cli,
    pods_of,
)
from kube_env import REPO, Kube, KubeError, condition, wait_for

# The secured example clusters and their Users have modules of their own (e2e/test_security.py,
# e2e/test_external.py).
SECURITY_EXAMPLES = ("kafkacluster-tls-scram.yaml", "kafkacluster-external.yaml", "user-")
EXAMPLES = sorted(p for p in (REPO / "examples").glob("*.yaml") if not p.name.startswith(SECURITY_EXAMPLES))
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def ns(operator: Kube) -> Iterator[str]:
    name = f"e2e-examples-{uuid.uuid4().hex[:4]}"
    operator.kubectl("create", "namespace", name)
    yield name
    import os

    if not os.environ.get("KOPFKA_E2E_KEEP"):
        operator.kubectl("delete", "namespace", name, "--wait=false", check=False)
    print(f"\ne2e timings: {json.dumps(TIMINGS)}")


@pytest.fixture(scope="module")
def examples(operator: Kube, ns: str) -> dict[str, dict[str, Any]]:
    started = time.monotonic()
    for path in EXAMPLES:
        operator.kubectl("-n", ns, "apply", "-f", str(path))
    clusters = {}
    for path in EXAMPLES:
        doc = yaml.safe_load(path.read_text())
        if doc["kind"] == "KafkaCluster":
            clusters[doc["metadata"]["name"]] = cluster_ready(operator, doc["metadata"]["name"], ns)
            TIMINGS[f"ready_{doc['metadata']['name']}_s"] = elapsed(started)
    return clusters


@pytest.fixture(scope="module")
def client(operator: Kube, ns: str) -> str:
    return client_pod(operator, ns)


@pytest.mark.smoke
def test_examples_become_ready_with_status(operator: Kube, ns: str, examples: dict[str, dict[str, Any]]) -> None:
    assert set(examples) == {"demo", "small"}
    demo = examples["demo"]["status"]
    assert len(demo["clusterId"]) == 22
    assert demo["controllers"]["nodeIds"] == [1000, 1001, 1002]
    assert demo["brokers"]["nodeIds"] == [0, 1, 2]
    assert demo["controllers"]["readyReplicas"] == 3 and demo["brokers"]["readyReplicas"] == 3
    assert demo["bootstrapServers"] == f"demo-bootstrap.{ns}.svc:9092"
    assert examples["small"]["status"]["brokers"]["nodeIds"] == [0, 1, 2]
    # The printer columns, as `kubectl get kafkaclusters` shows them.
    table = operator.kubectl("-n", ns, "get", "kafkaclusters")
    header = table.splitlines()[0].split()
    for column in ("NAME", "MODE", "BROKERS", "READY", "AGE"):
        assert column in header, table
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:]}
    assert rows["demo"][header.index("READY")] == "True", table
    if operator.platform == "testbed":  # figures for the record (printed at the module's end)
        from testbed import cluster as bed

        TIMINGS["testbed_daemons_rss_mib"] = round(
            sum(bed.rss_mib(pid) for pid in bed.status(operator.extra["paths"]).values() if pid)
        )
        TIMINGS["pods_memory_mib"] = round(bed.pods_memory_mib())
    # Pods really run the rendered spec: one per node, each Ready, the image deployed.
    for cluster, roles in (("demo", ("controller", "broker")), ("small", ("combined",))):
        for role in roles:
            pods = pods_of(operator, ns, cluster, role)
            assert len(pods) == 3
            assert all(p["spec"]["containers"][0]["image"] == operator.image for p in pods)


@pytest.mark.smoke
def test_clients_produce_and_consume_through_the_bootstrap_service(
    operator: Kube, ns: str, examples: dict[str, dict[str, Any]], client: str
) -> None:
    bootstrap = examples["demo"]["status"]["bootstrapServers"]
    script = f"""
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({{"bootstrap.servers": "{bootstrap}"}})
for f in admin.create_topics([NewTopic("e2e-rf3", 3, 3, config={{"min.insync.replicas": "2"}})]).values():
    f.result(60)
md = admin.list_topics("e2e-rf3", timeout=30).topics["e2e-rf3"]
assert all(len(p.replicas) == 3 and len(p.isrs) == 3 for p in md.partitions.values()), md.partitions
acked = []
p = Producer({{"bootstrap.servers": "{bootstrap}", "acks": "all", "enable.idempotence": True}})
for i in range(1000):
    p.produce("e2e-rf3", str(i).encode(), on_delivery=lambda e, m: acked.append(int(m.value())) if e is None else None)
assert p.flush(60) == 0
c = Consumer({{"bootstrap.servers": "{bootstrap}", "group.id": "e2e", "auto.offset.reset": "earliest"}})
c.subscribe(["e2e-rf3"])
got = set()
import time
deadline = time.time() + 90
while len(got) < 1000 and time.time() < deadline:
    m = c.poll(1)
    if m is not None and m.error() is None:
        got.add(int(m.value()))
c.close()
print("acked", len(acked), "consumed", len(got), "missing", sorted(set(acked) - got)[:10])
assert got == set(acked) == set(range(1000))
"""
    out = exec_python(operator, ns, client, script)
    assert "acked 1000 consumed 1000" in out, out
    kcat = exec_sh(
        operator,
        ns,
        client,
        f"seq 1 50 | kcat -b {bootstrap} -P -t e2e-rf3 -p 0 -X acks=all && "
        f"kcat -b {bootstrap} -C -t e2e-rf3 -p 0 -o beginning -e -q | wc -l",
    )
    assert int(kcat.strip().splitlines()[-1]) >= 50, kcat


def test_jbod_claims_log_dirs_and_partition_placement(
    operator: Kube, ns: str, examples: dict[str, dict[str, Any]], client: str
) -> None:
    claims = {c["metadata"]["name"]: c for c in operator.items("pvc", ns, "kopfka.io/cluster=demo")}
    for ordinal in range(3):
        for volume in range(4):
            claim = claims[f"data-{volume}-demo-broker-{ordinal}"]
            assert claim["status"]["phase"] == "Bound"
    props = operator.kubectl(
        "-n", ns, "exec", "demo-broker-0", "-c", "kopfka", "--", "cat", "/etc/kopfka/server.properties"
    )
    log_dirs = next(line for line in props.splitlines() if line.startswith("log.dirs="))
    assert log_dirs == "log.dirs=" + ",".join(f"/var/lib/kopfka/data-{i}" for i in range(4))
    bootstrap = examples["demo"]["status"]["bootstrapServers"]
    create_topic(operator, ns, client, bootstrap, "jbod", 12, 3)
    time.sleep(2)
    listing = operator.kubectl(
        "-n",
        ns,
        "exec",
        "demo-broker-0",
        "-c",
        "kopfka",
        "--",
        "sh",
        "-c",
        "for d in /var/lib/kopfka/data-*; do echo \"$d $(ls $d | grep -c '^jbod-')\"; done",
    )
    counts = {line.split()[0]: int(line.split()[1]) for line in listing.splitlines()}
    assert sum(counts.values()) == 12, listing  # RF 3 on 3 brokers: every partition here
    assert sum(1 for n in counts.values() if n > 0) >= 3, listing  # spread over the data dirs
    # Each data dir is its own volume (a different filesystem source), not one disk.
    mounts = operator.kubectl("-n", ns, "exec", "demo-broker-0", "-c", "kopfka", "--", "cat", "/proc/self/mountinfo")
    sources = {line.split()[3] for line in mounts.splitlines() if " /var/lib/kopfka/data-" in line}
    assert len(sources) == 4, mounts


def _pod_uid(kube: Kube, ns: str, name: str) -> str:
    pod = kube.get("pod", name, ns)
    return pod["metadata"]["uid"] if pod else ""


def test_format_init_container_is_idempotent_and_refuses_a_foreign_volume(
    operator: Kube, ns: str, examples: dict[str, dict[str, Any]]
) -> None:
    pod = "small-combined-2"
    before = _pod_uid(operator, ns, pod)
    meta = operator.kubectl(
        "-n", ns, "exec", pod, "-c", "kopfka", "--", "cat", "/var/lib/kopfka/data-0/meta.properties"
    )
    operator.kubectl("-n", ns, "delete", "pod", pod, timeout=180)
    cluster_ready(operator, "small", ns)
    assert _pod_uid(operator, ns, pod) not in ("", before)
    # Same disk, same identity: the init container formatted nothing.
    assert (
        operator.kubectl("-n", ns, "exec", pod, "-c", "kopfka", "--", "cat", "/var/lib/kopfka/data-0/meta.properties")
        == meta
    )

    # The disk now belongs to another cluster (its meta.properties says so): refused, and said.
    foreign = "cluster.id=" + "A" * 22
    operator.kubectl(
        "-n",
        ns,
        "exec",
        pod,
        "-c",
        "kopfka",
        "--",
        "sed",
        "-i",
        f"s/^cluster.id=.*/{foreign}/",
        "/var/lib/kopfka/data-0/meta.properties",
    )
    operator.kubectl("-n", ns, "delete", "pod", pod, timeout=180)

    def warned() -> dict[str, Any] | None:
        obj = operator.get("kafkacluster", "small", ns)
        cond = condition(obj, "Warning")
        return cond if cond.get("reason") == "FormatStorageFailed" else None

    warning = wait_for("FormatStorageFailed in status", warned, 180)
    assert pod in warning["message"] and "A" * 22 in warning["message"], warning
    assert condition(operator.get("kafkacluster", "small", ns), "Ready").get("status") == "False"

    # Put the disk back (through a pod mounting the claim, as an admin would): the node recovers.
    claim = f"data-0-{pod}"
    fixer = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fix-disk"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
            "containers": [
                {
                    "name": "fix",
                    "image": operator.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sed", "-i", f"s/^cluster.id=.*/{_line(meta, 'cluster.id')}/", "/disk/meta.properties"],
                    "volumeMounts": [{"name": "disk", "mountPath": "/disk"}],
                }
            ],
            "volumes": [{"name": "disk", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }
    operator.apply(json.dumps(fixer), ns)
    wait_for(
        "disk fixed",
        lambda: (operator.get("pod", "fix-disk", ns) or {}).get("status", {}).get("phase") == "Succeeded",
        120,
    )
    operator.kubectl("-n", ns, "delete", "pod", "fix-disk", pod, "--wait=false")
    cluster_ready(operator, "small", ns)
    assert condition(operator.get("kafkacluster", "small", ns), "Warning").get("status") == "False"


def _line(properties: str, key: str) -> str:
    return next(line for line in properties.splitlines() if line.startswith(key + "="))


INVALID = [
    (
        "KafkaCluster",
        {"mode": "dedicated", "brokers": {"replicas": 1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}}},
        "dedicated mode needs spec.controllers; combined mode must omit it",
    ),
    (
        "KafkaCluster",
        {"mode": "combined", "brokers": {"replicas": -1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}}},
        "spec.brokers.replicas: Invalid value: -1",
    ),
    (
        "KafkaCluster",
        {
            "mode": "combined",
            "brokers": {"replicas": 1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
            "listeners": [{"name": "CONTROLLER", "port": 9000}],
        },
        "listener names CONTROLLER and REPLICATION are reserved",
    ),
    (
        "Topic",
        {"partitions": 0},
        "spec.partitions: Invalid value: 0",
    ),
    (
        "Quota",
        {
            "entity": {"ip": {"name": "10.0.0.1"}, "user": {"name": "u"}},
            "connectionCreationRate": 5,
        },
        "an ip quota cannot be combined with user or clientId",
    ),
    (
        "Quota",
        {"entity": {"user": {"name": "u"}}, "connectionCreationRate": 5},
        "connectionCreationRate applies to ip entities only",
    ),
]


@pytest.mark.parametrize(("kind", "spec", "message"), INVALID, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(INVALID)])
def test_api_server_rejects_invalid_objects_with_the_crd_messages(
    operator: Kube, ns: str, kind: str, spec: dict[str, Any], message: str
) -> None:
    obj = {"apiVersion": "kopfka.io/v1alpha1", "kind": kind, "metadata": {"name": "invalid"}, "spec": spec}
    proc = operator.kubectl_result("-n", ns, "apply", "-f", "-", input=json.dumps(obj))
    assert proc.returncode != 0, proc.stdout
    assert message in proc.stderr, proc.stderr


def test_kubectl_scale_through_the_scale_subresource(
    operator: Kube, ns: str, examples: dict[str, dict[str, Any]]
) -> None:
    operator.kubectl("-n", ns, "scale", "kafkacluster", "demo", "--replicas=4")
    assert operator.get("kafkacluster", "demo", ns)["spec"]["brokers"]["replicas"] == 4
    wait_for("4 broker pods", lambda: len(pods_of(operator, ns, "demo", "broker")) == 4, 120)
    status = cluster_ready(operator, "demo", ns)["status"]
    assert status["brokers"]["nodeIds"] == [0, 1, 2, 3]
    out = operator.kubectl("-n", ns, "get", "kafkacluster", "demo", "-o", "jsonpath={.status.brokers.selector}")
    assert "kopfka.io/role=broker" in out
    # Back to 3: broker 3 was just added and holds no partition yet.
    operator.kubectl("-n", ns, "scale", "kafkacluster", "demo", "--replicas=3")
    wait_for("3 broker pods", lambda: len(pods_of(operator, ns, "demo", "broker")) == 3, 180)
    cluster_ready(operator, "demo", ns)


def test_operator_restart_mid_reconcile_converges(operator: Kube, ns: str, examples: dict[str, dict[str, Any]]) -> None:
    """A change, a hard kill of the operator pod while it reconciles, a second change while no
    operator runs: the replacement operator converges to both."""
    started = time.monotonic()
    before = [
        p["metadata"]["name"] for p in operator.items("pods", "kopfka-system", "app.kubernetes.io/name=kopfka-operator")
    ]
    assert before, "no operator pod"

    def patch(key: str, value: str) -> None:
        operator.kubectl(
            "-n",
            ns,
            "patch",
            "kafkacluster",
            "small",
            "--type=merge",
            "-p",
            json.dumps({"spec": {"config": {key: value}}}),
        )

    patch("log.retention.bytes", "123456789")
    operator.kubectl("-n", "kopfka-system", "delete", "pod", "--force", "--grace-period=0", *before)
    patch("log.segment.bytes", "33554432")
    generation = operator.get("kafkacluster", "small", ns)["metadata"]["generation"]

    def converged() -> bool:
        # both keys are dynamic broker configs: the roller applies them live and says so in status
        obj = operator.get("kafkacluster", "small", ns) or {}
        live = ((obj.get("status") or {}).get("config") or {}).get("appliedLive") or {}
        return (
            live.get("log.retention.bytes") == "123456789"
            and live.get("log.segment.bytes") == "33554432"
            and obj.get("status", {}).get("observedGeneration") == generation
            and condition(obj, "Ready").get("status") == "True"
        )

    wait_for("converged after the operator restart", converged, 300, interval=2)
    described = operator.kubectl(
        "-n", ns, "exec", "small-combined-0", "--", "kopfka", "configs", "--bootstrap-server", "localhost:9092",
        "--entity-type", "brokers", "--entity-default", "--describe",
    )  # fmt: skip
    assert "log.retention.bytes=123456789" in described and "log.segment.bytes=33554432" in described, described
    after = [
        p["metadata"]["name"] for p in operator.items("pods", "kopfka-system", "app.kubernetes.io/name=kopfka-operator")
    ]
    assert after and not set(after) & set(before), (before, after)
    TIMINGS["operator_restart_converge_s"] = elapsed(started)


def _replication(kube: Kube, ns: str, client: str) -> dict[int, list[str]]:
    controllers = ",".join(f"demo-controller-{i}.demo-controller.{ns}.svc:9093" for i in range(3))
    out = kopfka_cli(
        kube, ns, client, "metadata-quorum", "--bootstrap-controller", controllers, "describe", "--replication"
    )
    rows = {}
    for line in out.splitlines()[1:]:
        cols = line.split()
        if cols and cols[0].isdigit():
            rows[int(cols[0])] = cols
    return rows


def test_wiped_controller_rejoins_under_a_new_directory_id(
    operator: Kube, ns: str, examples: dict[str, dict[str, Any]], client: str
) -> None:
    """KIP-853 disk loss, on real pods: a follower controller's metadata volume is emptied and
    the node killed. Its format-storage init container must not re-use the pre-generated
    directory id (the node would vote with an empty log); it formats a new one, and the node
    rejoins as a new voter (its stale key removed, itself added)."""
    if operator.platform != "testbed":
        pytest.skip("kills a process on the node: test bed only")
    from testbed import images as imageslib

    before = _replication(operator, ns, client)
    voters = {n: cols for n, cols in before.items() if cols[-1] in ("Leader", "Follower")}
    assert sorted(voters) == [1000, 1001, 1002], before
    leader = next(n for n, cols in voters.items() if cols[-1] == "Leader")
    node = max(n for n in voters if n != leader)
    pod = f"demo-controller-{node - 1000}"
    old_dir = voters[node][1]

    cid = operator.get("pod", pod, ns)["status"]["containerStatuses"][0]["containerID"].split("//")[1]
    tasks = imageslib.ctr(operator.extra["paths"], "tasks", "ls").stdout.splitlines()
    pid = next(int(line.split()[1]) for line in tasks if line.startswith(cid))
    operator.kubectl("-n", ns, "exec", pod, "-c", "kopfka", "--", "sh", "-c", "rm -rf /var/lib/kopfka/data-0/*")
    os.kill(pid, signal.SIGKILL)  # the disk is gone and so is the process: nothing writes back
    operator.kubectl("-n", ns, "delete", "pod", pod, "--wait=false")

    def rejoined() -> dict[int, list[str]] | None:
        rows = _replication(operator, ns, client)
        cols = rows.get(node)
        ok = cols is not None and cols[1] != old_dir and cols[-1] == "Follower"
        voters_now = [n for n, c in rows.items() if c[-1] in ("Leader", "Follower")]
        return rows if ok and sorted(voters_now) == [1000, 1001, 1002] else None

    rows = wait_for(f"controller {node} back as a voter under a new directory id", rejoined, 240, interval=3)
    assert int(rows[node][3]) <= 10, rows[node]  # caught up (lag)
    cluster_ready(operator, "demo", ns)


def test_deleting_a_cluster_removes_children_and_keeps_claims_unless_delete_claim(
    operator: Kube, ns: str, examples: dict[str, dict[str, Any]]
) -> None:
    before = {c["metadata"]["name"] for c in operator.items("pvc", ns, "kopfka.io/cluster=demo")}
    assert any(name.startswith("data-3-") for name in before)
    operator.kubectl("-n", ns, "delete", "kafkacluster", "demo", timeout=300)
    for kind in ("statefulset", "service", "configmap", "poddisruptionbudget", "pod"):
        wait_for(
            f"no {kind} of demo", lambda kind=kind: not operator.items(kind, ns, "kopfka.io/cluster=demo") or None, 240
        )
    after = {c["metadata"]["name"] for c in operator.items("pvc", ns, "kopfka.io/cluster=demo")}
    assert after == {n for n in before if not n.startswith("data-3-")}, (before, after)
    with pytest.raises(KubeError):
        operator.kubectl("-n", ns, "get", "kafkacluster", "demo")
