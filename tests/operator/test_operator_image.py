"""Opt-in (`pytest -m image`): build the image with buildah and run `kopfka storage format` and
`kopfka serve` inside it, via e2e/build_image.sh. Needs root, buildah, podman, runc, debootstrap
and a few minutes; never part of the default run."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from operator_testlib import REPO

pytestmark = pytest.mark.image


def test_image_builds_and_runs_format_and_serve() -> None:
    missing = [tool for tool in ("buildah", "podman", "debootstrap") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"image build needs {', '.join(missing)} (apt-get install buildah podman runc)")
    if os.geteuid() != 0:
        pytest.skip("image build with buildah/debootstrap needs root")
    proc = subprocess.run(
        ["bash", str(REPO / "e2e" / "build_image.sh"), "localhost/kopfka:test"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "storage format and serve OK" in proc.stderr
