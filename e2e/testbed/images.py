"""Images for the test bed's pods, built here and imported into containerd (no registry).

- `localhost/pause:testbed`: Kubernetes' own pause.c, statically linked, in an empty image;
- `localhost/kopfka:<key>`: the repository's Dockerfile built with buildah on a debootstrap'ed
  Debian base (e2e/build_image.sh), the image the chart and the operator deploy;
- `localhost/kopfka-client:<key>`: that image plus the clients the tests run in pods
  (confluent-kafka with its kafkatest verifiable producer/consumer, kafka-python, kcat).

`<key>` hashes the files that go into the image, so an unchanged tree reuses the image already
in containerd (or its archive in the cache) and a changed one builds anew.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import REPO, Paths

PAUSE = "localhost/pause:testbed"
IMAGE_INPUTS = ("Dockerfile", "pyproject.toml", "README.md", "broker", "operator")
CLIENT_DOCKERFILE = Path(__file__).resolve().parent / "client.Dockerfile"
CLIENT_EXTRA = "tests/replication/kafkatest_run.py"  # copied into the client image
KAFKATEST_RUNNER = "/opt/kafkatest/kafkatest_run.py"


def _log(msg: str) -> None:
    print(f"== {msg}", file=sys.stderr, flush=True)


def source_key() -> str:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "--", *IMAGE_INPUTS],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    digest = hashlib.sha256()
    for name in sorted(files):
        path = REPO / name
        if path.is_file() and "__pycache__" not in name:
            digest.update(name.encode() + b"\0" + path.read_bytes())
    digest.update(CLIENT_DOCKERFILE.read_bytes())
    digest.update((REPO / CLIENT_EXTRA).read_bytes())
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class Images:
    """The image refs of one source snapshot (the key is computed once: other work landing in
    the tree mid-build must not make the client image look for another kopfka image)."""

    kopfka: str
    client: str

    @classmethod
    def current(cls) -> Images:
        key = source_key()
        return cls(
            os.environ.get("KOPFKA_TESTBED_IMAGE") or f"localhost/kopfka:{key}",
            os.environ.get("KOPFKA_TESTBED_CLIENT_IMAGE") or f"localhost/kopfka-client:{key}",
        )


def ctr(p: Paths, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ctr", "--address", str(p.containerd_socket), "--namespace", "k8s.io", *args],
        capture_output=True,
        text=True,
        check=check,
    )


def in_containerd(p: Paths, ref: str) -> bool:
    out = ctr(p, "images", "ls", "-q", check=False).stdout.split()
    return ref in out


def _archive(p: Paths, ref: str) -> Path:
    return p.images / (ref.replace("/", "_").replace(":", "@") + ".tar")


def _buildah(*args: str) -> str:
    return subprocess.run(["buildah", *args], capture_output=True, text=True, check=True).stdout.strip()


def _export(p: Paths, ref: str) -> Path:
    """buildah's local image -> a docker-archive in the cache, which `ctr import` takes."""
    p.images.mkdir(parents=True, exist_ok=True)
    target = _archive(p, ref)
    partial = target.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    _buildah("push", "--quiet", ref, f"docker-archive:{partial}:{ref}")
    partial.rename(target)
    _prune_older(p, ref)
    return target


def _prune_older(p: Paths, ref: str) -> None:
    """Drop the archives and buildah images of earlier source snapshots of the same image: each
    is half a gigabyte, and a day of edits left twenty of them (a full disk fails the next
    build's `ensurepip` and every test's tmp_path)."""
    repo = ref.rsplit(":", 1)[0]
    keep = _archive(p, ref)
    stem = repo.replace("/", "_") + "@"
    for old in p.images.glob(stem + "*.tar"):
        if old != keep:
            old.unlink(missing_ok=True)
    listed = subprocess.run(
        ["buildah", "images", "--format", "{{.Name}}:{{.Tag}}"], capture_output=True, text=True, check=False
    ).stdout.split()
    for name in listed:
        if name.rsplit(":", 1)[0] == repo and name != ref and not name.endswith(":bookworm"):
            subprocess.run(["buildah", "rmi", name], capture_output=True, check=False)


def build_pause(p: Paths, bin_dir: Path) -> Path:
    container = _buildah("from", "scratch")
    try:
        _buildah("copy", container, str(bin_dir / "pause"), "/pause")
        _buildah("config", "--entrypoint", '["/pause"]', "--user", "65535:65535", container)
        _buildah("commit", "--quiet", container, PAUSE)
    finally:
        _buildah("rm", container)
    return _export(p, PAUSE)


def build_kopfka(p: Paths, ref: str) -> Path:
    _log(f"building {ref} (buildah; the first build debootstraps a Debian base: minutes)")
    env = dict(os.environ, KOPFKA_SMOKE="0")
    subprocess.run([str(REPO / "e2e" / "build_image.sh"), ref], env=env, check=True)
    return _export(p, ref)


def _ca_args() -> list[str]:
    """pip inside the build trusts this host's CA bundle (a TLS-intercepting proxy), as
    e2e/build_image.sh does."""
    ca = os.environ.get("KOPFKA_BUILD_CA", "/etc/ssl/certs/ca-certificates.crt")
    if not Path(ca).is_file():
        return []
    return ["--volume", f"{ca}:/run/kopfka-build-ca.crt:ro", "--build-arg", "PIP_CERT=/run/kopfka-build-ca.crt"]


def build_client(p: Paths, ref: str, base: str) -> Path:
    if subprocess.run(["buildah", "inspect", "--type", "image", base], capture_output=True).returncode:
        build_kopfka(p, base)
    _log(f"building {ref}")
    subprocess.run(
        [
            "buildah",
            "bud",
            "--isolation",
            "chroot",
            "--network",
            "host",
            "--layers=false",
            *_ca_args(),
            "--build-arg",
            f"BASE={base}",
            "-t",
            ref,
            "-f",
            str(CLIENT_DOCKERFILE),
            str(REPO),
        ],
        check=True,
    )
    return _export(p, ref)


def ensure(p: Paths, bin_dir: Path, images: Images, *, build: bool = True) -> list[str]:
    """Make sure containerd holds every image; returns what was missing and could not be had."""
    missing = []
    builders = {
        PAUSE: lambda: build_pause(p, bin_dir),
        images.kopfka: lambda: build_kopfka(p, images.kopfka),
        images.client: lambda: build_client(p, images.client, images.kopfka),
    }
    for ref, builder in builders.items():
        if in_containerd(p, ref):
            continue
        archive = _archive(p, ref)
        if not archive.exists():
            if not build:
                missing.append(ref)
                continue
            archive = builder()
        _log(f"ctr images import {archive.name}")
        ctr(p, "images", "import", str(archive))
    return missing
