"""Bring the whole test bed up from nothing, and take it down leaving nothing running.

`up` always starts from an empty etcd and fresh certificates (a test bed is disposable; the
binaries and images are what is cached). `down` stops the kubelet first so it restarts nothing,
kills every container through containerd, then the shims, unmounts what the pods mounted, stops
the control plane, and restores the host's network settings.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import NODE_NAME, PROVISIONER_NAME, STORAGE_CLASS, Paths, network
from . import build as buildlib
from . import components as comp
from . import images as imageslib
from . import processes as proc

# Stop order of `down`; the scheduler ignores SIGTERM without leader election: it is killed.
DAEMONS = (
    ("kubelet", signal.SIGTERM),
    ("kube-proxy", signal.SIGTERM),
    ("coredns", signal.SIGTERM),
    ("provisioner", signal.SIGTERM),
    ("containerd", signal.SIGTERM),
    ("kube-scheduler", signal.SIGKILL),
    ("kube-controller-manager", signal.SIGTERM),
    ("kube-apiserver", signal.SIGTERM),
    ("etcd", signal.SIGTERM),
)
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _log(msg: str) -> None:
    print(f"== {msg}", file=sys.stderr, flush=True)


def kubectl(p: Paths, bin_dir: Path, *args: str, input: str | None = None, check: bool = True) -> str:
    out = subprocess.run(
        [str(bin_dir / "kubectl"), f"--kubeconfig={p.admin_kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
    )
    if check and out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


STORAGE_CLASS_YAML = f"""apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {STORAGE_CLASS}
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: {PROVISIONER_NAME}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
"""


def _wait(what: str, check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise proc.StartError(f"{what} not reached after {timeout:.0f} s")


def up(p: Paths, *, build: bool = True, images: imageslib.Images | None = None) -> float:
    """Start everything; returns the seconds it took once binaries and images were there."""
    images = images or imageslib.Images.current()
    if not buildlib.is_built(p):
        if not build:
            raise proc.StartError("binaries are not built: run `e2e/testbed.sh build` first")
        buildlib.build(p)
    bin_dir = buildlib.bin_dir(p)
    down(p, quiet=True)
    started = time.monotonic()
    p.state.mkdir(parents=True, exist_ok=True)
    p.run.mkdir(parents=True, exist_ok=True)
    network.setup(p.run)
    comp.make_pki(p)
    _log("etcd, kube-apiserver")
    comp.start_etcd(p, bin_dir)
    comp.start_apiserver(p, bin_dir)
    comp.start_controller_manager(p, bin_dir)
    comp.start_scheduler(p, bin_dir)
    _log("containerd, images")
    comp.start_containerd(p)
    image_seconds = time.monotonic()
    missing = imageslib.ensure(p, bin_dir, images, build=build)
    if missing:
        raise proc.StartError(f"images missing and not built: {missing}")
    image_seconds = time.monotonic() - image_seconds
    _log("kubelet, kube-proxy, coredns, provisioner")
    comp.start_kubelet(p, bin_dir)
    comp.start_kube_proxy(p, bin_dir)
    comp.start_coredns(p, bin_dir)
    comp.start_provisioner(p, bin_dir)
    kubectl(p, bin_dir, "apply", "-f", "-", input=STORAGE_CLASS_YAML)

    def node_ready() -> bool:
        out = kubectl(
            p,
            bin_dir,
            "get",
            "node",
            NODE_NAME,
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
            check=False,
        )
        return out.strip() == "True"

    _wait(f"node {NODE_NAME} Ready", node_ready, 90)

    def default_sa() -> bool:
        return bool(kubectl(p, bin_dir, "get", "sa", "default", "-o", "name", check=False).strip())

    _wait("default service account", default_sa, 30)
    took = time.monotonic() - started - image_seconds
    _log(f"test bed up in {took:.1f} s (+{image_seconds:.1f} s for images); KUBECONFIG={p.admin_kubeconfig}")
    return took


def _mounts_under(prefixes: tuple[str, ...]) -> list[str]:
    points = []
    with open("/proc/self/mounts") as f:
        for line in f:
            point = line.split()[1].encode().decode("unicode_escape")
            if point.startswith(prefixes):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def _kill_containers(p: Paths) -> None:
    if not p.containerd_socket.exists() or proc.pid_of(p, "containerd") is None:
        return
    tasks = imageslib.ctr(p, "tasks", "ls", "-q", check=False).stdout.split()
    for task in tasks:
        imageslib.ctr(p, "tasks", "kill", "-s", "SIGKILL", task, check=False)
    deadline = time.monotonic() + 10
    for task in tasks:
        while imageslib.ctr(p, "tasks", "delete", task, check=False).returncode and time.monotonic() < deadline:
            time.sleep(0.2)
    for container in imageslib.ctr(p, "containers", "ls", "-q", check=False).stdout.split():
        imageslib.ctr(p, "containers", "delete", container, check=False)


def _kill_shims(p: Paths) -> None:
    marker = str(p.containerd_socket)
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cmdline = (pid_dir / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and b"containerd-shim" in cmdline[0] and marker.encode() in b" ".join(cmdline):
            proc.signal_group(int(pid_dir.name), signal.SIGKILL)


def _kill_cgroup(prefix: str) -> None:
    """Whatever still runs in the pods' cgroups (e.g. after a kubelet crash) is killed, and the
    emptied cgroups removed, in every v1 hierarchy and the unified one."""
    for hierarchy in CGROUP_ROOT.iterdir() if CGROUP_ROOT.exists() else []:
        root = hierarchy / prefix
        if not root.is_dir():
            continue
        for procs in root.rglob("cgroup.procs"):
            for pid in procs.read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for d in sorted((x for x in root.rglob("*") if x.is_dir()), key=lambda x: len(x.parts), reverse=True):
            try:
                d.rmdir()
            except OSError:
                pass
        try:
            root.rmdir()
        except OSError:
            pass


def down(p: Paths, *, quiet: bool = False) -> None:
    if not quiet:
        _log("stopping the test bed")
    proc.stop(p, "kubelet")
    _kill_containers(p)
    for name, sig in DAEMONS:
        proc.stop(p, name, sig)
    _kill_shims(p)
    _kill_cgroup("kubepods")
    for point in _mounts_under(
        (str(p.state) + "/", str(p.containerd_root) + "/", "/run/netns/cni-", "/var/run/netns/cni-")
    ):
        subprocess.run(["umount", "-l", point], capture_output=True)
    for netns in Path("/run/netns").glob("cni-*") if Path("/run/netns").exists() else []:
        netns.unlink(missing_ok=True)
    network.teardown(p.run)
    if p.state.exists():
        shutil.rmtree(p.state, ignore_errors=True)


def status(p: Paths) -> dict[str, int | None]:
    return {name: proc.pid_of(p, name) for name, _ in reversed(DAEMONS)}


def rss_mib(pid: int) -> float:
    """Resident memory of a daemon and its descendants' sessions (containerd's shims aside)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


def pods_memory_mib() -> float:
    """What every pod uses (the kubelet's kubepods cgroup, cgroup v1 memory controller)."""
    usage = CGROUP_ROOT / "memory" / "kubepods" / "memory.usage_in_bytes"
    try:
        return int(usage.read_text()) / 2**20
    except (FileNotFoundError, ValueError):
        return 0.0
