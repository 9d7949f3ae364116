"""Run a real `kopfka serve` process for tests: free loopback port, own data dir, real signals."""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PORT_BLOCK_BASE, PORT_BLOCK_SIZE = 20_000, 1_500


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _port_block() -> range:
    """This process's ports: each xdist worker has a block of its own below the kernel's ephemeral
    range, so nothing in the suite that binds port 0 (an embedded node's controller listener, a
    client socket) can take a port a broker of this test is restarting on. A broker's port used to
    come from bind(0) too: on CI another test's embedded controller got it between a stop and the
    restart, and the restarted broker's client found that controller."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    start = PORT_BLOCK_BASE + index * PORT_BLOCK_SIZE
    return range(start, start + PORT_BLOCK_SIZE)


_BLOCK = _port_block()
_next = random.randrange(len(_BLOCK))  # processes of one worker walk the block from different points


def free_port(host: str = "127.0.0.1") -> int:
    """A loopback port free now, from this worker's block (outside the ephemeral range)."""
    global _next
    if _BLOCK.stop > _ephemeral_low():  # a machine with a low ephemeral range: the kernel's pick
        with socket.socket() as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    for _ in range(len(_BLOCK)):
        port = _BLOCK[_next % len(_BLOCK)]
        _next += 1
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_BLOCK}")


class KopfkaProcess:
    """One broker+controller process on 127.0.0.1. Restartable on the same port and data dir."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        overrides: dict[str, str] | None = None,
        config_file: Path | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.overrides = dict(overrides or {})
        self.config_file = config_file
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir.parent / f"kopfka-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kopfka.cli.main", "serve"]
        if self.config_file is not None:
            cmd += ["--config", str(self.config_file)]
        cmd += ["--data-dir", str(self.data_dir), "--listen", f"{self.host}:{self.port}"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start(self, timeout: float = 30.0) -> KopfkaProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        earlier = self.log_path.stat().st_size  # the log is appended across restarts
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        ours = re.compile(rf"Listening on \S+:{self.port} ")  # this process bound the port, not another
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kopfka exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    pass
                with open(self.log_path, "rb") as f:
                    f.seek(earlier)
                    if ours.search(f.read().decode(errors="replace")):
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"kopfka did not listen on {self.bootstrap}:\n{self.log_text()[-4000:]}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: a real crash, nothing flushed by the process."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean (controlled) shutdown. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def restart(self) -> KopfkaProcess:
        self.stop()
        return self.start()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def sasl_controller_listener(user: str, password: str, others: dict[str, str] | None = None) -> dict[str, str]:
    """Overrides for a node with an authorizer: its broker registers and heartbeats with its own
    controller over the CONTROLLER listener, so that listener authenticates the broker as a super
    user (SASL_PLAINTEXT PLAIN), as Kafka requires; a PLAINTEXT one would make it User:ANONYMOUS.
    Map CONTROLLER to SASL_PLAINTEXT in listener.security.protocol.map as well. `others`: more
    users the listener accepts (user -> password)."""
    users = " ".join(f'user_{u}="{p}"' for u, p in {user: password, **(others or {})}.items())
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{password}" {users};'
    )
    return {
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": jaas,
        "sasl.mechanism.controller.protocol": "PLAIN",
    }
