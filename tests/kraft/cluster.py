"""Multi-process KRaft clusters for tests: separate controller and broker processes, each on its
own 127.0.0.x address, formatted with `kopfka storage format` and run with `kopfka serve`."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kopfka import uuids
from kopfka.client.connection import KafkaConnection

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: kopfka_process
import kopfka_process

FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "controller.quorum.election.timeout.ms": "800",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "300",
    "initial.broker.registration.timeout.ms": "20000",
    "num.partitions": "1",
}


def free_port(host: str) -> int:
    """A port outside the kernel's ephemeral range, from this xdist worker's block."""
    return kopfka_process.free_port(host)


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as exc:
            last_exc = exc
        time.sleep(interval)
    raise TimeoutError(
        f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_exc})" if last_exc else "")
    )


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def request(addr: str, api_key: int, version: int, body: dict[str, Any], timeout: float = 10.0) -> Any:
    conn = await KafkaConnection.open(addr, timeout=timeout)
    try:
        return await conn.request(api_key, version, body, timeout=timeout)
    finally:
        await conn.close()


class Node:
    def __init__(
        self, root: Path, node_id: int, role: str, host: str, *, props: dict[str, str], own_session: bool = False
    ) -> None:
        self.node_id = node_id
        self.own_session = own_session
        self.role = role
        self.host = host
        self.dir = root / f"{role}-{node_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(host)
        self.http_port = free_port(host)
        self.directory_id = uuids.to_str(uuids.random_uuid())
        self.props = props
        self.config = self.dir / "server.properties"
        self.log_path = self.dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def write_config(self, extra: dict[str, str]) -> None:
        listener = "CONTROLLER" if self.role == "controller" else "PLAINTEXT"
        base = {
            "node.id": str(self.node_id),
            "process.roles": self.role,
            "listeners": f"{listener}://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(self.dir / "logs"),
            "metadata.log.dir": str(self.dir / "metadata"),
            "kopfka.http.listener": f"{self.host}:{self.http_port}",
            **FAST,
        }
        if self.role == "broker":
            base["advertised.listeners"] = f"PLAINTEXT://{self.host}:{self.port}"
        base.update(self.props)
        base.update(extra)
        self.config.write_text("".join(f"{k}={v}\n" for k, v in base.items()))

    def kopfka(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kopfka.cli.main", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def format(self, cluster_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.kopfka("storage", "format", "--cluster-id", cluster_id, "--config", str(self.config), *extra)

    def start(self) -> Node:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kopfka.cli.main", "serve", "--config", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=self.own_session,
        )
        return self

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.http_port}/readyz", timeout=1) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = 40) -> None:
        def check() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.role} {self.node_id} exited {self.proc.returncode}:\n{self.log_text()[-3000:]}"
                )
            return self.ready()

        try:
            wait_until(check, timeout, f"{self.role} {self.node_id} ready")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{self.log_text()[-3000:]}") from None

    def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        if not self.alive:
            return self.proc.returncode if self.proc else 0
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


class Cluster:
    """Controllers 1000+i on 127.0.0.(11+i), brokers i on 127.0.0.(21+i).

    `own_sessions` starts every node in a session of its own, as a service manager would start
    separate servers: Linux's autogroup scheduler then gives each node the CPU share of a
    session, instead of one share for the whole cluster and the test (benchmarks use it; tests
    keep their nodes in their own session, so that killing a test's process group ends them)."""

    def __init__(
        self,
        root: Path,
        controllers: int = 3,
        brokers: int = 3,
        *,
        dynamic: bool = True,
        props: dict[str, str] | None = None,
        own_sessions: bool = False,
    ) -> None:
        self.root = root
        self.props = dict(props or {})
        self.dynamic = dynamic
        self.cluster_id = uuids.to_str(uuids.random_uuid())
        self.controllers = [
            Node(root, 1000 + i, "controller", f"127.0.0.{11 + i}", props=self.props, own_session=own_sessions)
            for i in range(controllers)
        ]
        self.brokers = [
            Node(root, i, "broker", f"127.0.0.{21 + i}", props=self.props, own_session=own_sessions)
            for i in range(brokers)
        ]

    @property
    def nodes(self) -> list[Node]:
        return [*self.controllers, *self.brokers]

    def quorum_props(self) -> dict[str, str]:
        if self.dynamic:
            return {"controller.quorum.bootstrap.servers": ",".join(c.address for c in self.controllers)}
        return {"controller.quorum.voters": ",".join(f"{c.node_id}@{c.address}" for c in self.controllers)}

    def initial_controllers(self) -> str:
        return ",".join(f"{c.node_id}@{c.address}:{c.directory_id}" for c in self.controllers)

    def format_all(self) -> None:
        for n in self.nodes:
            n.write_config(self.quorum_props())
            extra: tuple[str, ...] = ()
            if n.role == "controller" and self.dynamic:
                extra = ("--initial-controllers", self.initial_controllers())
            res = n.format(self.cluster_id, *extra)
            assert res.returncode == 0, res.stderr

    def start(self, timeout: float = 60) -> Cluster:
        for n in self.nodes:
            n.start()
        for n in self.nodes:
            n.wait_ready(timeout)
        return self

    def stop(self) -> None:
        for n in self.nodes:
            n.kill()

    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers if b.alive)

    def leader(self) -> Node:
        """The active controller according to DescribeQuorum on any live controller."""

        def find() -> Node | None:
            for c in self.controllers:
                if not c.alive:
                    continue
                try:
                    resp = run(describe_quorum(c.address))
                except (OSError, ConnectionError, TimeoutError):
                    continue
                p = resp.topics[0].partitions[0]
                for x in self.controllers:
                    if x.node_id == p.leader_id and x.alive:
                        return x
            return None

        return wait_until(find, 30, "a quorum leader")


async def describe_quorum(addr: str) -> Any:
    return await request(
        addr,
        55,
        2,
        {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        timeout=3,
    )


async def metadata(addr: str, topics: list[str] | None = None) -> Any:
    body = {
        "topics": None if topics is None else [{"name": t, "topic_id": uuids.ZERO_UUID} for t in topics],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    return await request(addr, 3, 12, body, timeout=5)


async def create_topic(addr: str, name: str, partitions: int = 1, rf: int = 1) -> Any:
    body = {
        "timeout": 15000,
        "validate_only": False,
        "topics": [
            {"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [], "configs": []}
        ],
    }
    resp = await request(addr, 19, 7, body, timeout=30)
    return resp.topics[0]
