"""A single-machine Kubernetes built from source, for the operator's end-to-end tests.

Control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), one node (the real
kubelet with containerd, runc and the CNI plugins), kube-proxy (nftables), CoreDNS for cluster
DNS and a dynamic local-volume provisioner, all built from their official sources through the Go
module proxy (`e2e/testbed/go`) and run as host processes. Pods live in network namespaces on a
host-only bridge; nothing is routed off the machine.

    e2e/testbed.sh build | images | up | down | status | env

The layout below is the whole contract between the pieces; `paths()` is the one place that
knows where things live.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GO_MODULE = Path(__file__).resolve().parent / "go"

# Tools built with `go install module@version` (their modules carry no replace directives);
# Kubernetes, etcd and the provisioner come from the pinned module in go/, CoreDNS (only the
# plugins cluster DNS needs) from go/coredns, a module of its own so its dependencies never
# move Kubernetes' versions.
EXTERNAL_TOOLS = {
    "helm": "helm.sh/helm/v4/cmd/helm@v4.3.1",
}
SUBMODULES = ("coredns",)
KUBE_TOOLS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kubectl",
    "kube-proxy",
)
LOCAL_COMMANDS = ("etcd", "provisioner")

# Network: a host-only bridge for pods; the API server listens on its gateway address because
# pods (the operator) must reach it, every other component on 127.0.0.1.
BRIDGE = "kopfka0"
POD_CIDR = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DOMAIN = "cluster.local"
NODE_NAME = "localhost"
API_PORT = 6443
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
STORAGE_CLASS = "local-dir"
PROVISIONER_NAME = "kopfka.io/local-dir"


@dataclass(frozen=True)
class Paths:
    state: Path  # wiped by `up` and `down`: etcd data, certificates, logs, pod volumes
    cache: Path  # kept: built binaries, image archives, containerd's image store

    @property
    def bin(self) -> Path:
        return self.cache / "bin"

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def run(self) -> Path:
        return self.state / "run"

    @property
    def volumes(self) -> Path:
        return self.state / "volumes"

    @property
    def containerd_root(self) -> Path:
        return self.cache / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.state / "admin.kubeconfig"

    @property
    def images(self) -> Path:
        return self.cache / "images"


def paths() -> Paths:
    state = Path(os.environ.get("KOPFKA_TESTBED_DIR", "/var/lib/kopfka-testbed"))
    cache = Path(os.environ.get("KOPFKA_TESTBED_CACHE", Path.home() / ".cache" / "kopfka-testbed"))
    return Paths(state=state, cache=cache)
