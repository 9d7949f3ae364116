"""The CRDs: generated files in sync, examples valid, bad specs rejected, defaults consistent."""

from __future__ import annotations

import copy
import pathlib
from typing import Any

import jsonschema
import kopfka_operator.crds as crds
import pytest
import yaml
from kopfka_operator.security.users import desired_acls, mechanism_of
from kopfka_operator.spec import parse_spec
from operator_testlib import CRD_DIR, REPO, load_crd

EXAMPLES = REPO / "examples"
CHART_CRDS = REPO / "charts" / "kopfka" / "crds"


def example_files(prefix: str) -> list[pathlib.Path]:
    return sorted(EXAMPLES.glob(f"{prefix}-*.yaml"))


def validate(schemas: dict[str, Any], obj: dict[str, Any]) -> None:
    jsonschema.Draft7Validator(schemas[obj["kind"]]).validate(obj)


def apply_defaults(schema: dict[str, Any], obj: Any) -> Any:
    """What the API server does with `default:` (objects that are present get their defaults)."""
    if isinstance(obj, dict) and schema.get("type") == "object":
        out = dict(obj)
        for key, sub in (schema.get("properties") or {}).items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
            if key in out:
                out[key] = apply_defaults(sub, out[key])
        return out
    if isinstance(obj, list) and "items" in schema:
        return [apply_defaults(schema["items"], item) for item in obj]
    return obj


@pytest.mark.parametrize("plural", sorted(crds.ALL_CRDS))
def test_committed_crds_match_the_generator(plural: str) -> None:
    path = CRD_DIR / crds.file_name(plural)
    assert path.read_text() == crds.render(plural), (
        f"{path} is stale: run `python -m kopfka_operator.crds --write crds`"
    )


@pytest.mark.parametrize("plural", sorted(crds.ALL_CRDS))
def test_chart_crds_are_the_same_files(plural: str) -> None:
    """One source of truth: the chart's crds/ entries are symlinks into the top-level crds/."""
    link = CHART_CRDS / crds.file_name(plural)
    assert link.is_symlink(), f"{link} must be a symlink to ../../../crds/"
    assert link.resolve() == (CRD_DIR / crds.file_name(plural)).resolve()


def test_kafkacluster_crd_shape() -> None:
    crd = load_crd("kafkaclusters")
    version = crd["spec"]["versions"][0]
    assert crd["spec"]["group"] == "kopfka.io" and version["name"] == "v1alpha1"
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.brokers.replicas",
        "statusReplicasPath": ".status.brokers.readyReplicas",  # what runs (HPA, kubectl scale)
        "labelSelectorPath": ".status.brokers.selector",
    }
    assert "status" in version["subresources"]
    columns = {c["name"] for c in version["additionalPrinterColumns"]}
    assert {"Brokers", "Ready", "Age"} <= columns
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    replicas = spec["properties"]["brokers"]["properties"]["replicas"]
    assert "1000" in spec["properties"]["controllers"]["properties"]["replicas"]["description"]
    assert replicas["maximum"] == 1000 and replicas["default"] == 3

    def walk(schema: Any, path: str) -> None:
        """Structural schema: every node typed (or an explicit pass-through) and described."""
        if not isinstance(schema, dict):
            return
        assert "type" in schema or schema.get("x-kubernetes-int-or-string"), path
        for key, sub in (schema.get("properties") or {}).items():
            assert "description" in sub, f"{path}.{key} lacks a description"
            walk(sub, f"{path}.{key}")
        walk(schema.get("items"), f"{path}[]")

    walk(spec, "spec")


@pytest.mark.parametrize(
    "path",
    [*example_files("kafkacluster"), *example_files("topic"), *example_files("quota"), *example_files("user")],
    ids=lambda p: p.name,
)
def test_examples_are_valid(crd_schemas: dict[str, Any], path: pathlib.Path) -> None:
    for obj in yaml.safe_load_all(path.read_text()):
        validate(crd_schemas, obj)
        if obj["kind"] == "KafkaCluster":
            parse_spec(obj["spec"], default_image="kopfka:dev")
        if obj["kind"] == "User":
            mechanism_of(obj["spec"])
            desired_acls(obj["spec"], f"User:{obj['metadata']['name']}")


def test_every_kind_has_examples() -> None:
    for prefix in ("kafkacluster", "topic", "quota", "user"):
        assert example_files(prefix), f"no examples/{prefix}-*.yaml"


def test_parser_defaults_match_crd_defaults() -> None:
    """Parsing a sparse spec equals parsing it after the API server applied the CRD defaults."""
    schema = load_crd("kafkaclusters")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path in example_files("kafkacluster"):
        sparse = yaml.safe_load(path.read_text())["spec"]
        for key in ("mode", "listeners", "metrics"):
            sparse.pop(key, None)
        if "controllers" not in sparse:
            sparse["mode"] = "combined"
        defaulted = apply_defaults(schema["properties"]["spec"], sparse)
        assert parse_spec(sparse, "img") == parse_spec(defaulted, "img")


def _cluster() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "kafkacluster-dedicated-jbod.yaml").read_text())


BAD_CLUSTER_SPECS: dict[str, tuple[dict[str, Any], str]] = {
    "negative-replicas": ({"brokers": {"replicas": -1}}, "-1"),
    "too-many-brokers": ({"brokers": {"replicas": 1001}}, "1001"),
    "even-more-controllers": ({"controllers": {"replicas": 10}}, "10"),
    "unknown-field": ({"brokerz": {}}, "brokerz"),
    "bad-size": (
        {"brokers": {"storage": {"volumes": [{"id": 0, "size": "ten gigs"}]}}},
        "ten gigs",
    ),
    "volume-id-range": (
        {"brokers": {"storage": {"volumes": [{"id": 1000, "size": "1Gi"}]}}},
        "1000",
    ),
    "no-volumes": ({"brokers": {"storage": {"volumes": []}}}, "[]"),
    "volume-without-size": ({"brokers": {"storage": {"volumes": [{"id": 0}]}}}, "size"),
    "storage-type": ({"brokers": {"storage": {"type": "raid"}}}, "raid"),
    "mode": ({"mode": "triple"}, "triple"),
    "pull-policy": ({"imagePullPolicy": "Sometimes"}, "Sometimes"),
    "listener-name": ({"listeners": [{"name": "client", "port": 9092}]}, "client"),
    "listener-port": ({"listeners": [{"name": "CLIENT", "port": 80}]}, "80"),
    "protocol": ({"listeners": [{"name": "C", "port": 9092, "protocol": "SSL"}]}, "SSL"),
    "listener-type": ({"listeners": [{"name": "C", "port": 9092, "type": "route"}]}, "route"),
    "advertised-host": (
        {
            "listeners": [
                {
                    "name": "C",
                    "port": 9092,
                    "type": "nodeport",
                    "configuration": {"brokers": [{"broker": 0, "advertisedHost": "$(reboot)"}]},
                }
            ]
        },
        "$(reboot)",
    ),
    "config-value-type": ({"config": {"num.partitions": [1]}}, "[1]"),
    "grace-period": ({"podTemplate": {"terminationGracePeriodSeconds": 5}}, "5"),
    "resources-quantity": ({"brokers": {"resources": {"requests": {"cpu": "lots"}}}}, "lots"),
}


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and value:
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize("case", sorted(BAD_CLUSTER_SPECS))
def test_bad_cluster_specs_are_rejected_by_the_schema(crd_schemas: dict[str, Any], case: str) -> None:
    patch, fragment = BAD_CLUSTER_SPECS[case]
    obj = _cluster()
    obj["spec"] = _merge(obj["spec"], patch)
    with pytest.raises(jsonschema.ValidationError) as err:
        validate(crd_schemas, obj)
    assert fragment in str(err.value)


def test_missing_brokers_is_rejected(crd_schemas: dict[str, Any]) -> None:
    obj = _cluster()
    del obj["spec"]["brokers"]
    with pytest.raises(jsonschema.ValidationError, match="brokers"):
        validate(crd_schemas, obj)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"partitions": 0}, "0"),
        ({"replicationFactor": 0}, "0"),
        ({"topicName": "no spaces"}, "no spaces"),
        ({"clusterRef": {"name": "demo"}}, "clusterRef"),  # replaced by the kopfka.io/cluster label
    ],
)
def test_bad_topics_are_rejected(crd_schemas: dict[str, Any], spec: dict[str, Any], fragment: str) -> None:
    obj = yaml.safe_load((EXAMPLES / "topic-orders.yaml").read_text())
    obj["spec"].update(spec)
    with pytest.raises(jsonschema.ValidationError) as err:
        validate(crd_schemas, obj)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: [s.pop(k) for k in ("producerByteRate", "consumerByteRate", "requestPercentage")],
        lambda s: s.update(entity={}),
        lambda s: s.update(producerByteRate=-1),
        lambda s: s.update(entity={"user": {"name": "a", "default": True}}),
        lambda s: s.update(entity={"user": {"default": False}}),
        lambda s: s.update(clusterRef={"name": "demo"}),
    ],
    ids=["no-rates", "no-entity", "negative", "name-and-default", "default-false", "cluster-ref"],
)
def test_bad_quotas_are_rejected(crd_schemas: dict[str, Any], mutate: Any) -> None:
    obj = yaml.safe_load((EXAMPLES / "quota-user-producer.yaml").read_text())
    mutate(obj["spec"])
    with pytest.raises(jsonschema.ValidationError):
        validate(crd_schemas, obj)


@pytest.mark.parametrize(
    "spec",
    [
        {"authentication": {"type": "kerberos"}},
        {
            "authorization": {
                "type": "simple",
                "acls": [{"resource": {"type": "topic", "name": "t"}, "operations": ["Reed"]}],
            }
        },
        {
            "authorization": {
                "type": "simple",
                "acls": [{"resource": {"type": "table", "name": "t"}, "operations": ["Read"]}],
            }
        },
        {"authorization": {"type": "simple", "acls": [{"resource": {"type": "topic", "name": "t"}, "operations": []}]}},
    ],
    ids=["authentication", "operation", "resource-type", "no-operations"],
)
def test_bad_users_are_rejected(crd_schemas: dict[str, Any], spec: dict[str, Any]) -> None:
    obj = {"apiVersion": "kopfka.io/v1alpha1", "kind": "User", "metadata": {"name": "u"}, "spec": spec}
    with pytest.raises(jsonschema.ValidationError):
        validate(crd_schemas, obj)
