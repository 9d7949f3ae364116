"""Fixtures of the end-to-end tests (marker `k8s`): a real Kubernetes and the operator on it.

Platform (KOPFKA_E2E_PLATFORM):
- `testbed` (default): the Kubernetes built from source in e2e/testbed. A test bed that is
  already up is reused and left up; otherwise the session brings one up (building binaries
  and images when KOPFKA_E2E_BUILD=1 or when they are cached) and takes it down at the end
  unless KOPFKA_E2E_KEEP=1. Needs root.
- `kind`: a throwaway kind cluster (Docker, kind, kubectl and helm on PATH); the images are
  built with `docker build` from the same Dockerfiles.
Everything skips with the reason when its platform cannot run here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_env import REPO, Kube, KubeError, wait_for

OPERATOR_NAMESPACE = "kopfka-system"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "k8s: needs a real Kubernetes (the test bed or kind)")
    config.addinivalue_line("markers", "smoke: the k8s subset ./scripts/test runs")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.k8s)


def _testbed(request: pytest.FixtureRequest) -> Iterator[Kube]:
    import testbed
    from testbed import build as buildlib
    from testbed import cluster, components, processes
    from testbed import images as imageslib

    if os.geteuid() != 0:
        pytest.skip("the test bed needs root (network namespaces, containerd, kubelet)")
    for tool in ("containerd", "runc", "buildah", "nft", "go"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            pytest.skip(f"the test bed needs `{tool}` (Debian package; e2e/README.md)")
    p = testbed.paths()
    images = imageslib.Images.current()
    allow_build = os.environ.get("KOPFKA_E2E_BUILD") == "1"
    already_up = processes.http_ok(f"{components.API_URL}/readyz", components._tls(p)) if p.pki.exists() else None
    started_here = False
    if not (already_up and already_up()):
        if not buildlib.is_built(p) and not allow_build:
            pytest.skip("test bed binaries not built (run `e2e/testbed.sh build` or set KOPFKA_E2E_BUILD=1)")
        cluster.up(p, build=allow_build or buildlib.is_built(p), images=images)
        started_here = True
    else:
        missing = imageslib.ensure(p, buildlib.bin_dir(p), images, build=True)
        assert not missing, missing
    bin_dir = buildlib.bin_dir(p)
    try:
        yield Kube(
            kubeconfig=p.admin_kubeconfig,
            kubectl_bin=str(bin_dir / "kubectl"),
            helm_bin=str(bin_dir / "helm"),
            image=images.kopfka,
            client_image=images.client,
            platform="testbed",
            extra={"paths": p},
        )
    finally:
        if started_here and not os.environ.get("KOPFKA_E2E_KEEP"):
            cluster.down(p)


def _kind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    for tool in ("docker", "kind", "kubectl", "helm"):
        if shutil.which(tool) is None:
            pytest.skip(f"kind e2e needs `{tool}` on PATH")
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("kind e2e needs a running Docker daemon (`docker info` failed)")
    name = f"kopfka-e2e-{uuid.uuid4().hex[:6]}"
    kubeconfig = tmp_path_factory.mktemp("kind") / "kubeconfig"
    image, client = "localhost/kopfka:e2e", "localhost/kopfka-client:e2e"
    subprocess.run(["docker", "build", "-t", image, str(REPO)], check=True)
    subprocess.run(
        [
            "docker",
            "build",
            "-t",
            client,
            "--build-arg",
            f"BASE={image}",
            "-f",
            str(REPO / "e2e" / "testbed" / "client.Dockerfile"),
            str(REPO / "e2e"),
        ],
        check=True,
    )
    subprocess.run(
        ["kind", "create", "cluster", "--name", name, "--kubeconfig", str(kubeconfig), "--wait", "120s"], check=True
    )
    try:
        for ref in (image, client):
            subprocess.run(["kind", "load", "docker-image", ref, "--name", name], check=True)
        yield Kube(kubeconfig, "kubectl", "helm", image, client, "kind")
    finally:
        if not os.environ.get("KOPFKA_E2E_KEEP"):
            subprocess.run(["kind", "delete", "cluster", "--name", name], check=False)


@pytest.fixture(scope="session")
def kube(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    platform = os.environ.get("KOPFKA_E2E_PLATFORM", "testbed")
    if platform == "kind":
        yield from _kind(tmp_path_factory)
    else:
        yield from _testbed(request)


def install_operator(kube: Kube, *extra: str) -> None:
    """helm upgrade --install of the chart. Helm installs a chart's CRDs but never upgrades them,
    so they are applied first (as an upgrade of a real installation has to do too)."""
    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    repo, _, tag = kube.image.rpartition(":")
    kube.helm(
        "upgrade",
        "--install",
        "kopfka",
        str(REPO / "charts" / "kopfka"),
        "--namespace",
        OPERATOR_NAMESPACE,
        "--create-namespace",
        "--set",
        f"image.repository={repo}",
        "--set",
        f"image.tag={tag}",
        "--set",
        "image.pullPolicy=IfNotPresent",
        "--set",
        "watch.clusterWide=true",
        "--set",
        "resyncSeconds=30",
        *extra,
        "--wait",
        "--timeout=180s",
    )


@pytest.fixture(scope="session")
def operator(kube: Kube) -> Kube:
    """The operator installed by its Helm chart (Deployment, ServiceAccount, RBAC, CRDs)."""
    started = time.monotonic()
    install_operator(kube)

    def available() -> bool:
        dep = kube.get("deployment", "kopfka", OPERATOR_NAMESPACE)
        return bool(dep and (dep.get("status") or {}).get("availableReplicas"))

    wait_for("operator Deployment available", available, 180)
    kube.extra["operator_install_seconds"] = time.monotonic() - started
    return kube


@pytest.fixture
def namespace(kube: Kube, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace per test, deleted afterwards (its PVCs with it)."""
    name = "e2e-" + request.node.name.lower().replace("_", "-")[:40].strip("-") + "-" + uuid.uuid4().hex[:4]
    kube.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        if not os.environ.get("KOPFKA_E2E_KEEP"):
            try:
                kube.kubectl("delete", "namespace", name, "--wait=false")
            except KubeError:
                pass
