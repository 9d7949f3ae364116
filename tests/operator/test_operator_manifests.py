"""Manifest generation as pure functions; every rendered object passes kubernetes-validate."""

from __future__ import annotations

import base64
import dataclasses
import pathlib
from typing import Any

import kubernetes_validate
import pytest
from kopfka_operator.ids import initial_controllers, new_kafka_uuid
from kopfka_operator.manifests import Cluster, build_children, server_properties
from kopfka_operator.manifests.statefulset import format_script, serve_script
from kopfka_operator.spec import OWNED_CONFIG_KEYS, SpecError, parse_spec
from operator_testlib import run_script

K8S_VERSION = "1.37"


def make_cluster(**spec: Any) -> Cluster:
    raw: dict[str, Any] = {
        "image": "kopfka:dev",
        "controllers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "brokers": {
            "replicas": 3,
            "rack": {"topologyKey": "topology.kubernetes.io/zone"},
            "storage": {
                "volumes": [
                    {"id": 2, "size": "10Gi", "deleteClaim": True},
                    {"id": 0, "size": "10Gi", "storageClass": "fast"},
                    {"id": 1, "size": "10Gi"},
                ]
            },
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
        },
        "listeners": [{"name": "CLIENT", "port": 9092}, {"name": "INTERNAL_2", "port": 9094}],
        "config": {"num.partitions": 3},
        "podTemplate": {
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka"}],
            "nodeSelector": {"pool": "kafka"},
            "annotations": {"team": "streams"},
            "terminationGracePeriodSeconds": 900,
        },
        "imagePullSecrets": [{"name": "regcred"}],
    }
    raw.update(spec)
    parsed = parse_spec(raw)
    voters = initial_controllers("demo", "ns", parsed.voters)
    return Cluster("demo", "ns", "0b7c0f8e-1111-2222-3333-444455556666", new_kafka_uuid(), voters, parsed)


def combined_cluster() -> Cluster:
    return make_cluster(
        mode="combined",
        controllers=None,
        brokers={"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
    )


@pytest.mark.parametrize("cluster", [make_cluster(), combined_cluster()], ids=["dedicated", "combined"])
def test_every_child_is_valid_kubernetes(cluster: Cluster) -> None:
    children = build_children(cluster)
    kinds = sorted(c["kind"] for c in children)
    pools = len(cluster.spec.pools)
    assert kinds == sorted(
        ["ServiceAccount", "Service"]
        + ["ConfigMap", "ConfigMap", "Service", "PodDisruptionBudget", "StatefulSet"] * pools
    )
    for child in children:
        kubernetes_validate.validate(child, K8S_VERSION, strict=True)
        assert child["metadata"]["ownerReferences"][0]["uid"] == cluster.uid
        assert child["metadata"]["namespace"] == "ns"


def test_rendering_is_deterministic() -> None:
    cluster = make_cluster()
    assert build_children(cluster) == build_children(cluster)


def _by(children: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(c for c in children if c["kind"] == kind and c["metadata"]["name"] == name)


def test_broker_statefulset_jbod_and_pod_settings() -> None:
    children = build_children(make_cluster())
    sts = _by(children, "StatefulSet", "demo-broker")["spec"]
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    assert sts["podManagementPolicy"] == "Parallel"
    assert sts["serviceName"] == "demo-broker"
    claims = sts["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["data-0", "data-1", "data-2"]
    assert claims[0]["spec"]["storageClassName"] == "fast"
    assert "storageClassName" not in claims[1]["spec"]
    assert claims[2]["metadata"]["labels"]["kopfka.io/volume"] == "2"
    pod = sts["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 900
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert pod["securityContext"]["runAsNonRoot"] is True
    main = pod["containers"][0]
    assert {p["name"]: p["containerPort"] for p in main["ports"]} == {
        "client": 9092,
        "internal-2": 9094,
        "replication": 9091,
        "http": 8080,
    }
    assert main["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}}
    assert main["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert main["livenessProbe"]["failureThreshold"] * main["livenessProbe"]["periodSeconds"] >= 300
    mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
    assert mounts["data-1"] == "/var/lib/kopfka/data-1"
    assert sts["template"]["metadata"]["annotations"]["team"] == "streams"
    annotations = sts["template"]["metadata"]["annotations"]
    config_volume = next(v for v in sts["template"]["spec"]["volumes"] if v["name"] == "config")
    assert config_volume["configMap"]["name"] == f"demo-broker-config-{annotations['kopfka.io/config-hash']}"
    assert len(annotations["kopfka.io/pod-hash"]) == 16


def test_server_properties_per_role() -> None:
    cluster = make_cluster()
    controller, broker = cluster.spec.pools
    quorum = ",".join(f"demo-controller-{i}.demo-controller.ns.svc:9093" for i in range(3))

    props = dict(line.split("=", 1) for line in server_properties(cluster, broker).splitlines() if "=" in line)
    assert props["process.roles"] == "broker"
    assert props["listeners"] == "CLIENT://:9092,INTERNAL_2://:9094,REPLICATION://:9091"
    assert props["inter.broker.listener.name"] == "REPLICATION"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert "CONTROLLER:PLAINTEXT" in props["listener.security.protocol.map"]
    assert props["controller.quorum.bootstrap.servers"] == quorum
    assert props["log.dirs"] == "/var/lib/kopfka/data-0,/var/lib/kopfka/data-1,/var/lib/kopfka/data-2"
    assert props["metadata.log.dir"] == "/var/lib/kopfka/data-0"  # lowest id without kraftMetadata
    assert props["kopfka.http.listener"] == "0.0.0.0:8080"
    assert props["num.partitions"] == "3"
    assert "node.id" not in props and "advertised.listeners" not in props

    props = dict(line.split("=", 1) for line in server_properties(cluster, controller).splitlines() if "=" in line)
    assert props["process.roles"] == "controller"
    assert props["listeners"] == "CONTROLLER://:9093"
    assert "inter.broker.listener.name" not in props

    combined = combined_cluster()
    text = server_properties(combined, combined.spec.brokers)
    assert "process.roles=broker,controller\n" in text
    assert "demo-combined-2.demo-combined.ns.svc:9093" in text


def test_headless_services_publish_not_ready_pods() -> None:
    children = build_children(make_cluster())
    for name in ("demo-controller", "demo-broker"):
        svc = _by(children, "Service", name)["spec"]
        assert svc["clusterIP"] == "None" and svc["publishNotReadyAddresses"] is True
    bootstrap = _by(children, "Service", "demo-bootstrap")["spec"]
    assert bootstrap["selector"] == {"kopfka.io/cluster": "demo", "kopfka.io/role": "broker"}
    assert [p["port"] for p in bootstrap["ports"]] == [9092, 9094]
    pdb = _by(children, "PodDisruptionBudget", "demo-controller")["spec"]
    assert pdb["maxUnavailable"] == 1


def test_format_script_per_role_and_ordinal(tmp_path: pathlib.Path) -> None:
    cluster = make_cluster(controllers={"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}})
    controller, broker = cluster.spec.pools

    args = run_script(tmp_path, format_script(cluster, controller), "demo-controller-2")
    assert args[:6] == [
        "storage",
        "format",
        "--cluster-id",
        cluster.cluster_id,
        "--config",
        "/etc/kopfka/server.properties",
    ]
    assert "node.id=1002" in args and "--ignore-formatted" in args
    assert args[args.index("--initial-controllers") + 1] == cluster.initial_controllers
    assert "--no-initial-controllers" not in args

    # Once the quorum has formed, an initial voter with an empty disk lost it: new directory id.
    formed = tmp_path / "quorum.formed"
    formed.write_text("true")
    args = run_script(tmp_path, format_script(cluster, controller), "demo-controller-0", formed=formed)
    assert "--no-initial-controllers" in args and "--initial-controllers" not in args

    # A controller added after the initial three joins the existing quorum.
    args = run_script(tmp_path, format_script(cluster, controller), "demo-controller-3")
    assert "node.id=1003" in args and "--no-initial-controllers" in args

    args = run_script(tmp_path, format_script(cluster, broker), "demo-broker-11")
    assert "node.id=11" in args
    assert not {"--initial-controllers", "--no-initial-controllers", "--standalone"} & set(args)


def test_serve_script_overrides_per_pod(tmp_path: pathlib.Path) -> None:
    cluster = make_cluster()
    controller, broker = cluster.spec.pools
    args = run_script(tmp_path, serve_script(cluster, broker), "demo-broker-4")
    host = "demo-broker-4.demo-broker.ns.svc"
    assert args == [
        "serve",
        "--config",
        "/etc/kopfka/server.properties",
        "--override",
        "node.id=4",
        "--override",
        f"advertised.listeners=CLIENT://{host}:9092,INTERNAL_2://{host}:9094,REPLICATION://{host}:9091",
    ]
    # broker.rack from the node's zone label (the downward API env), when the pod has one
    args_in_zone = run_script(tmp_path, serve_script(cluster, broker), "demo-broker-4", KOPFKA_RACK="zone-b")
    assert args_in_zone == [*args, "--override", "broker.rack=zone-b"]
    env = next(
        c for c in _by(build_children(cluster), "StatefulSet", "demo-broker")["spec"]["template"]["spec"]["containers"]
    )["env"]
    rack_env = next(e for e in env if e["name"] == "KOPFKA_RACK")
    assert rack_env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['topology.kubernetes.io/zone']"
    args = run_script(tmp_path, serve_script(cluster, controller), "demo-controller-0")
    assert "node.id=1000" in args
    assert not any(a.startswith("broker.rack") for a in args)
    assert "advertised.listeners=CONTROLLER://demo-controller-0.demo-controller.ns.svc:9093" in args


def test_kafka_uuids() -> None:
    ids = {new_kafka_uuid() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


def test_initial_controllers_have_distinct_directory_ids() -> None:
    cluster = make_cluster()
    entries = cluster.initial_controllers.split(",")
    assert [e.split("@")[0] for e in entries] == ["1000", "1001", "1002"]
    assert len({e.rsplit(":", 1)[1] for e in entries}) == 3


@pytest.mark.parametrize("key", sorted(OWNED_CONFIG_KEYS))
def test_operator_owned_config_keys_are_refused(key: str) -> None:
    with pytest.raises(SpecError) as err:
        make_cluster(config={key: "x"})
    assert err.value.reason == "OperatorOwnedConfigKey" and key in err.value.message


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"image": None}, "image"),
        ({"mode": "combined"}, "omit spec.controllers"),
        ({"controllers": None}, "needs spec.controllers"),
        ({"listeners": [{"name": "CONTROLLER", "port": 9095}]}, "reserved"),
        ({"listeners": [{"name": "A", "port": 9092}, {"name": "B", "port": 9092}]}, "duplicate"),
        ({"listeners": [{"name": "A", "port": 9093}]}, "port"),
        (
            {"brokers": {"storage": {"volumes": [{"id": 0, "size": "1Gi"}, {"id": 0, "size": "2Gi"}]}}},
            "duplicate ids",
        ),
        (
            {
                "brokers": {
                    "storage": {
                        "volumes": [
                            {"id": 0, "size": "1Gi", "kraftMetadata": True},
                            {"id": 1, "size": "1Gi", "kraftMetadata": True},
                        ]
                    }
                }
            },
            "kraftMetadata",
        ),
        (
            {"brokers": {"replicas": 2000, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}}},
            "replicas",
        ),
        ({"config": {"a": "line\nbreak"}}, "single line"),
        ({"config": {"a": True}}, "string or an integer"),
    ],
)
def test_invalid_specs_are_refused_by_the_parser(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError) as err:
        make_cluster(**spec)
    assert fragment in err.value.message


def test_combined_mode_caps_nodes_at_voter_limit() -> None:
    with pytest.raises(SpecError, match="replicas"):
        make_cluster(
            mode="combined",
            controllers=None,
            brokers={"replicas": 10, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        )


def _template_hashes(cluster: Cluster) -> tuple[str, str]:
    sts = _by(build_children(cluster), "StatefulSet", "demo-broker")["spec"]["template"]
    return sts["metadata"]["annotations"]["kopfka.io/pod-hash"], sts["metadata"]["annotations"]["kopfka.io/config-hash"]


def test_dynamic_keys_change_no_pod_static_keys_and_images_do() -> None:
    base = make_cluster(config={"num.partitions": 3})

    def variant(**spec: Any) -> Cluster:  # same cluster (ids), another spec
        return dataclasses.replace(base, spec=make_cluster(**spec).spec)

    pod_hash, revision = _template_hashes(base)
    # A dynamic key (applied live with IncrementalAlterConfigs): same pods, same revision.
    dynamic = variant(config={"num.partitions": 3, "log.retention.ms": 1000, "log.cleaner.threads": 2})
    assert _template_hashes(dynamic) == (pod_hash, revision)
    text = server_properties(dynamic, dynamic.spec.brokers)
    assert "log.retention.ms=1000\n" in text  # rendered anyway: a node starting now runs it
    # A static key: a new revision, so a new pod spec.
    new_hash, new_revision = _template_hashes(
        variant(config={"num.partitions": 3, "auto.create.topics.enable": "false"})
    )
    assert new_revision != revision and new_hash != pod_hash
    # The image is pod spec too.
    assert _template_hashes(variant(image="kopfka:other", config={"num.partitions": 3}))[0] != pod_hash
