"""e2e tests need Docker, kind, kubectl and helm; they are outside the default test path.

Run: `pytest e2e` (optionally KOPFKA_E2E_IMAGE=... to use a prebuilt image,
KOPFKA_E2E_KEEP=1 to keep the kind cluster). Everything skips with the reason when a tool or
the Docker daemon is missing.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator

import pytest
from e2e_support import REPO
from e2e_support import run as _run


def _require_tools() -> None:
    for tool in ("docker", "kind", "kubectl", "helm"):
        if shutil.which(tool) is None:
            pytest.skip(f"e2e needs `{tool}` on PATH")
    if _run("docker", "info", check=False, timeout=30).returncode != 0:
        pytest.skip("e2e needs a running Docker daemon (`docker info` failed)")


@pytest.fixture(scope="session")
def kind_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway kind cluster with the kopfka image loaded; yields the kubeconfig path."""
    _require_tools()
    name = f"kopfka-e2e-{uuid.uuid4().hex[:6]}"
    kubeconfig = str(tmp_path_factory.mktemp("kind") / "kubeconfig")
    image = os.environ.get("KOPFKA_E2E_IMAGE", "kopfka:e2e")
    if "KOPFKA_E2E_IMAGE" not in os.environ:
        _run("docker", "build", "-t", image, str(REPO), timeout=1800)
    _run("kind", "create", "cluster", "--name", name, "--kubeconfig", kubeconfig, "--wait", "120s")
    try:
        _run("kind", "load", "docker-image", image, "--name", name)
        repo, _, tag = image.rpartition(":")
        _run(
            "helm",
            "install",
            "kopfka",
            str(REPO / "charts" / "kopfka"),
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            "kopfka",
            "--create-namespace",
            "--wait",
            "--set",
            f"image.repository={repo}",
            "--set",
            f"image.tag={tag}",
            "--set",
            "image.pullPolicy=Never",
            "--set",
            "watch.clusterWide=true",
        )
        yield kubeconfig
    finally:
        if not os.environ.get("KOPFKA_E2E_KEEP"):
            _run("kind", "delete", "cluster", "--name", name, check=False)
