"""Kafka's verifiable producer running in the client pod (the kafkatest runner in the client
image), its JSON events read through `kubectl exec`: what the e2e tests audit for loss."""

from __future__ import annotations

import sys

from kube_env import REPO, Kube

sys.path.insert(0, str(REPO / "tests"))
from verifiable import VerifiableProducer, audit, consume_all

RUNNER = "/opt/kafkatest/kafkatest_run.py"


class PodProducer(VerifiableProducer):
    """The verifiable producer inside the client pod, its JSON events read through kubectl."""

    def __init__(self, kube: Kube, ns: str, bootstrap: str, topic: str, throughput: int) -> None:
        command = [
            kube.kubectl_bin,
            f"--kubeconfig={kube.kubeconfig}",
            "-n",
            ns,
            "exec",
            "-i",
            "client",
            "--",
            "python3",
            RUNNER,
        ]
        super().__init__(bootstrap, topic, throughput=throughput, command=command)
        self.kube, self.ns = kube, ns

    def stop(self, timeout: float = 30) -> None:
        kill = (
            "import os, signal\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n        try:\n"
            "            if b'verifiable_producer' in open(f'/proc/{p}/cmdline', 'rb').read():\n"
            "                os.kill(int(p), signal.SIGTERM)\n        except OSError: pass\n"
        )
        self.kube.kubectl("-n", self.ns, "exec", "-i", "client", "--", "python3", "-", input=kill, check=False)
        super().stop(timeout)


__all__ = ["RUNNER", "PodProducer", "audit", "consume_all"]
