"""An ingress controller for the test bed: Traefik, built from its module here.

Traefik's Kubernetes Ingress NGINX provider reads ingress-nginx's annotations, among them
`nginx.ingress.kubernetes.io/ssl-passthrough`, which is what the operator writes on the Ingresses of
an `ingress` listener. So the Ingresses the operator makes for ingress-nginx are served unchanged.
ingress-nginx itself needs an OpenResty build with its Lua modules, which Debian does not package.

Three things keep `go install` from building Traefik here, and the build works around them:
- its go.mod replaces `github.com/traefik/traefik/dynamic/ext` with a directory the module zip
  leaves out (a nested module of two empty extension structs): the build writes it back;
- ACME's DNS-challenge factory in lego imports ~150 DNS providers, some of whose modules the
  module proxy refuses: the build replaces lego with a copy whose factory knows no provider (a
  DNS challenge then fails with a message naming why; the test bed has no ACME either);
- the commit of its go-http-auth fork is refused too: an older commit of the same fork is used.
The image is the static binary alone, on an empty base, like the pause image.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import Paths
from . import images as imageslib

MODULE = "github.com/traefik/traefik/v3"
VERSION = "v3.7.13"
LEGO = "github.com/go-acme/lego/v5"
IMAGE = f"localhost/traefik:{VERSION}"
# Traefik replaces abbot/go-http-auth with a fork at a 2026 commit the proxy refuses; the fork's
# 2020 commit (Traefik 2.x's) is served and has the same API. Only basic/digest auth use it.
HTTP_AUTH = "github.com/abbot/go-http-auth"
HTTP_AUTH_FORK = "github.com/containous/go-http-auth@v0.4.1-0.20200324110947-a37a7636d23e"
# The nested module the replace points at (pkg/config/dynamic/ext in Traefik's repository).
_EXT_GO = """package ext

// HTTP is a dynamic.HTTP extension.
type HTTP struct{}

// Router is a dynamic.Router extension.
type Router struct{}
"""
_NO_DNS_PROVIDERS = """package dns

import (
\t"fmt"

\t"github.com/go-acme/lego/v5/challenge"
)

// NewDNSChallengeProviderByName knows no provider in the kopfka test bed's Traefik build.
func NewDNSChallengeProviderByName(name string) (challenge.Provider, error) {
\treturn nil, fmt.Errorf("DNS challenge provider %q is not built into the test bed's Traefik", name)
}
"""


def _log(msg: str) -> None:
    print(f"== {msg}", file=sys.stderr, flush=True)


def _module_dir(spec: str) -> Path:
    out = subprocess.run(["go", "mod", "download", "-json", spec], capture_output=True, text=True, cwd="/")
    info = json.loads(out.stdout or "{}")
    if out.returncode or "Dir" not in info:
        raise RuntimeError(f"go mod download {spec}: {info.get('Error') or out.stderr.strip()}")
    return Path(info["Dir"])


def _copy(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    for path in [dst, *dst.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)


def _binary_path(p: Paths) -> Path:
    return p.cache / "ingress" / f"traefik-{VERSION}"


def binary_built(p: Paths) -> bool:
    return _binary_path(p).is_file() or imageslib._archive(p, IMAGE).exists()


def binary(p: Paths) -> Path:
    """The static traefik binary, built once per version."""
    target = _binary_path(p)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        work = Path(tmp)
        src, lego = work / "traefik", work / "lego"
        _copy(_module_dir(f"{MODULE}@{VERSION}"), src)
        ext = src / "pkg" / "config" / "dynamic" / "ext"
        ext.mkdir(parents=True, exist_ok=True)
        (ext / "go.mod").write_text("module github.com/traefik/traefik/dynamic/ext\n\ngo 1.26.0\n")
        (ext / "ext.go").write_text(_EXT_GO)
        lego_version = subprocess.run(
            ["go", "list", "-m", "-f", "{{.Version}}", LEGO], cwd=src, capture_output=True, text=True, check=True
        ).stdout.strip()
        _copy(_module_dir(f"{LEGO}@{lego_version}"), lego)
        (lego / "providers" / "dns" / "zz_gen_dns_providers.go").write_text(_NO_DNS_PROVIDERS)
        replaces = [f"-replace={LEGO}={lego}", f"-replace={HTTP_AUTH}={HTTP_AUTH_FORK}"]
        subprocess.run(["go", "mod", "edit", *replaces], cwd=src, check=True)
        _log(f"go build {MODULE}/cmd/traefik@{VERSION} (cold: minutes)")
        env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod")
        ldflags = f"-s -w -X github.com/traefik/traefik/v3/pkg/version.Version={VERSION}"
        partial = target.with_name(target.name + ".partial")
        subprocess.run(
            ["go", "build", "-trimpath", f"-ldflags={ldflags}", "-o", str(partial), "./cmd/traefik"],
            cwd=src,
            env=env,
            check=True,
        )
        partial.rename(target)
    return target


def ensure_image(p: Paths) -> str:
    """Build (once) and import the Traefik image into the test bed's containerd; returns its ref."""
    if imageslib.in_containerd(p, IMAGE):
        return IMAGE
    archive = imageslib._archive(p, IMAGE)
    if not archive.exists():
        built = binary(p)
        container = imageslib._buildah("from", "scratch")
        try:
            imageslib._buildah("copy", "--chmod", "0755", container, str(built), "/traefik")
            imageslib._buildah("config", "--entrypoint", '["/traefik"]', "--user", "65532:65532", container)
            imageslib._buildah("commit", "--quiet", container, IMAGE)
        finally:
            imageslib._buildah("rm", container)
        archive = imageslib._export(p, IMAGE)
    _log(f"ctr images import {archive.name}")
    imageslib.ctr(p, "images", "import", str(archive))
    return IMAGE
