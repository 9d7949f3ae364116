"""The Kubernetes an e2e test talks to: the source-built test bed (default) or kind.

Tests only see `Kube`: kubectl/helm bound to one kubeconfig, the image refs to deploy, and
waiting helpers. Which platform backs it is the fixture's business (e2e/conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


class KubeError(RuntimeError):
    def __init__(self, args: Iterable[str], proc: subprocess.CompletedProcess[str]) -> None:
        super().__init__(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
        self.stderr = proc.stderr
        self.returncode = proc.returncode


@dataclass
class Kube:
    kubeconfig: Path
    kubectl_bin: str
    helm_bin: str
    image: str  # the kopfka image (broker, operator, init container)
    client_image: str  # kopfka plus Kafka clients, for client pods
    platform: str
    extra: dict[str, Any] = field(default_factory=dict)

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 120, check: bool = True) -> str:
        cmd = [self.kubectl_bin, f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise KubeError(cmd[2:], proc)
        return proc.stdout

    def kubectl_result(
        self, *args: str, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        cmd = [self.kubectl_bin, f"--kubeconfig={self.kubeconfig}", *args]
        return subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)

    def helm(self, *args: str, timeout: float = 300) -> str:
        cmd = [self.helm_bin, f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise KubeError(cmd[1:], proc)
        return proc.stdout

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        args = ["get", kind, name, "-o", "json"]
        if namespace:
            args[0:0] = ["-n", namespace]
        proc = self.kubectl_result(*args)
        if proc.returncode != 0:
            if "NotFound" in proc.stderr or "not found" in proc.stderr:
                return None
            raise KubeError(args, proc)
        result: dict[str, Any] = json.loads(proc.stdout)
        return result

    def items(self, kind: str, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["-n", namespace, "get", kind, "-o", "json"]
        if selector:
            args += ["-l", selector]
        return list(json.loads(self.kubectl(*args))["items"])

    def apply(self, manifest: str, namespace: str | None = None) -> str:
        args = ["apply", "-f", "-"]
        if namespace:
            args[0:0] = ["-n", namespace]
        return self.kubectl(*args, input=manifest)

    def namespace(self, name: str) -> str:
        self.kubectl("create", "namespace", name, check=False)
        return name


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 1.0) -> T:
    """Poll until `probe` returns something truthy; the failure says what and the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
        except (KubeError, subprocess.TimeoutExpired) as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not reached in {timeout:.0f} s (last: {str(last)[-1500:]})")
        time.sleep(interval)


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return {}
