"""Build the test bed's binaries once and keep them, keyed by everything that decides them.

The key hashes go/go.mod, go/go.sum, our small commands, the external tools' pinned versions and
the Go toolchain version: a rebuild happens only when one of those changes. A build goes to a
fresh directory that is renamed into place at the end, so an interrupted build never leaves a
half-filled cache that looks complete.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import EXTERNAL_TOOLS, GO_MODULE, KUBE_TOOLS, LOCAL_COMMANDS, SUBMODULES, Paths

PAUSE_SOURCE = "build/pause/linux/pause.c"  # Kubernetes' own pause, inside the k8s.io module


def go_version() -> str:
    return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()


def k8s_version() -> str:
    for line in (GO_MODULE / "go.mod").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "k8s.io/kubernetes" and parts[1].startswith("v"):
            return parts[1]
    raise RuntimeError("k8s.io/kubernetes is not required in go/go.mod")


def version_ldflags() -> str:
    """What Kubernetes' own build stamps (hack/lib/version.sh), so every component and kubectl
    report the real version (Helm and kubectl version skew checks read it)."""
    version = k8s_version()
    major, minor = version.lstrip("v").split(".")[:2]
    stamps = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    return " ".join(
        f"-X {pkg}.{key}={value}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in stamps.items()
    )


def build_key() -> str:
    digest = hashlib.sha256()
    files = [GO_MODULE / "go.mod", GO_MODULE / "go.sum"]
    files += sorted((GO_MODULE / "cmd").rglob("*.go"))
    for sub in SUBMODULES:
        files += [GO_MODULE / sub / "go.mod", GO_MODULE / sub / "go.sum", *sorted((GO_MODULE / sub).glob("*.go"))]
    for path in files:
        digest.update(str(path.relative_to(GO_MODULE)).encode())
        digest.update(path.read_bytes())
    for name, spec in sorted(EXTERNAL_TOOLS.items()):
        digest.update(f"{name}={spec}".encode())
    digest.update(go_version().encode())
    digest.update(version_ldflags().encode())
    return digest.hexdigest()[:16]


def binaries() -> list[str]:
    return [*LOCAL_COMMANDS, *KUBE_TOOLS, *SUBMODULES, *EXTERNAL_TOOLS, "pause"]


def bin_dir(p: Paths) -> Path:
    return p.cache / f"bin-{build_key()}"


def is_built(p: Paths) -> bool:
    d = bin_dir(p)
    return all((d / name).is_file() for name in binaries())


def _log(msg: str) -> None:
    print(f"== {msg}", file=sys.stderr, flush=True)


def _k8s_module_dir() -> Path:
    out = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"],
        cwd=GO_MODULE,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def build(p: Paths, *, jobs: int | None = None) -> Path:
    """Build everything missing; returns the directory holding the binaries."""
    target = bin_dir(p)
    if is_built(p):
        return target
    work = target.with_name(target.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = dict(os.environ, CGO_ENABLED=os.environ.get("CGO_ENABLED", "1"))
    flags = [f"-ldflags=-s -w {version_ldflags()}"]
    if jobs:
        flags.append(f"-p={jobs}")
    started = time.monotonic()
    packages = [f"./cmd/{name}" for name in LOCAL_COMMANDS]
    packages += [f"k8s.io/kubernetes/cmd/{name}" for name in KUBE_TOOLS]
    _log(f"go build {' '.join(packages)} (cold: several minutes on 2 cores)")
    subprocess.run(["go", "build", *flags, "-o", str(work) + "/", *packages], cwd=GO_MODULE, env=env, check=True)
    for sub in SUBMODULES:
        _log(f"go build {sub} (go/{sub})")
        subprocess.run(["go", "build", *flags, "-o", str(work / sub), "."], cwd=GO_MODULE / sub, env=env, check=True)
    for name, spec in EXTERNAL_TOOLS.items():
        _log(f"go install {spec}")
        subprocess.run(
            ["go", "install", *flags, spec],
            env=dict(env, GOBIN=str(work), GOFLAGS="-mod=mod"),
            check=True,
            cwd="/",
        )
        built = work / Path(spec.split("@")[0]).name
        if built.name != name:
            built.rename(work / name)
    _log("gcc -static pause.c")
    subprocess.run(
        ["gcc", "-Os", "-static", "-o", str(work / "pause"), str(_k8s_module_dir() / PAUSE_SOURCE)],
        check=True,
    )
    shutil.rmtree(target, ignore_errors=True)
    work.rename(target)
    _log(f"built {len(binaries())} binaries in {time.monotonic() - started:.0f} s into {target}")
    return target
