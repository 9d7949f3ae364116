"""A real kopfka node started from the server.properties the operator renders for a secured
cluster: every security key (listener protocols, client auth, SASL mechanisms, truststores,
principal mapping, authorizer, super users) exactly as rendered; only what must differ on
loopback is replaced (addresses, ports, directories, the TLS directory). Its certificate is
issued from a cluster CA made by the operator's own pki module, with 127.0.0.1 as its name."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopfka import uuids
from kopfka_operator.manifests import Cluster, server_properties
from kopfka_operator.naming import TLS_DIR, node_common_name
from kopfka_operator.security import pki
from kopfka_operator.spec import parse_spec
from kopfka_process import free_port

NS = "kafka"
CLUSTER = "demo"

SECURED_SPEC: dict[str, Any] = {
    "mode": "combined",
    "image": "kopfka:test",
    "brokers": {"replicas": 1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
    "listeners": [
        {"name": "CLIENT", "port": 9092, "tls": True, "authentication": {"type": "scram-sha-512"}},
        {"name": "MTLS", "port": 9094, "tls": True, "authentication": {"type": "tls"}},
    ],
    "authorization": {"type": "simple", "superUsers": ["admin"]},
    "config": {
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
    },
}
FAST = {
    "controller.quorum.election.timeout.ms": "800",
    "controller.quorum.fetch.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "500",
}


def parse_properties(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


@dataclass
class SecuredNode:
    dir: Path
    proc: subprocess.Popen[bytes]
    ports: dict[str, int]  # listener -> port
    http: int
    rendered: dict[str, str]  # the operator's server.properties, as rendered
    ca_file: Path

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def log_text(self) -> str:
        return (self.dir / "server.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def start_secured_node(
    root: Path, cluster_ca: pki.KeyPair, clients_ca: pki.KeyPair, also_trusted: pki.KeyPair | None = None
) -> SecuredNode:
    """`also_trusted`: a second CA in the cluster truststore (as during a CA renewal)."""
    spec = parse_spec(SECURED_SPEC)
    ports = {name: free_port() for name in ("CLIENT", "MTLS", "REPLICATION", "CONTROLLER")}
    http = free_port()
    directory_id = uuids.to_str(uuids.random_uuid())
    voters = f"0@127.0.0.1:{ports['CONTROLLER']}:{directory_id}"
    cluster_id = uuids.to_str(uuids.random_uuid())
    cluster = Cluster(CLUSTER, NS, "uid", cluster_id, voters, spec)
    rendered = parse_properties(server_properties(cluster, spec.brokers))

    tls = root / "tls"
    tls.mkdir(parents=True)
    now = datetime.datetime.now(datetime.UTC)
    node = pki.issue(cluster_ca, pki.name(node_common_name(CLUSTER)), 30, now, ["127.0.0.1", "localhost"])
    (tls / "demo-combined-0.pem").write_bytes(node.keystore_pem())
    (tls / "ca.crt").write_bytes(cluster_ca.cert_pem() + (also_trusted.cert_pem() if also_trusted else b""))
    (tls / "clients-ca.crt").write_bytes(clients_ca.cert_pem())

    props = {k: v.replace(TLS_DIR, str(tls)) for k, v in rendered.items()}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    props.update(
        {
            "node.id": "0",
            "listeners": listeners,
            "advertised.listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items() if n != "CONTROLLER"),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{ports['CONTROLLER']}",
            "log.dirs": str(root / "data"),
            "metadata.log.dir": str(root / "data"),
            "kopfka.http.listener": f"127.0.0.1:{http}",
            "ssl.keystore.location": str(tls / "demo-combined-0.pem"),
            **FAST,
        }
    )
    config = root / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cli = [sys.executable, "-m", "kopfka.cli.main"]
    fmt = subprocess.run(
        [*cli, "storage", "format", "--cluster-id", cluster_id, "--config", str(config), "-I", voters],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert fmt.returncode == 0, fmt.stderr
    with open(root / "server.log", "ab") as log:
        proc = subprocess.Popen([*cli, "serve", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT, env=env)
    node_ = SecuredNode(root, proc, ports, http, rendered, tls / "ca.crt")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kopfka exited {proc.returncode}:\n{node_.log_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=1) as r:
                if r.status == 200:
                    return node_
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    node_.stop()
    raise TimeoutError(f"the secured node did not become ready:\n{node_.log_text()[-3000:]}")
