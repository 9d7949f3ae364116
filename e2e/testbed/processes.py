"""Daemons of the test bed: started detached with a pidfile and a log, stopped by pidfile.

Each daemon runs in its own session, so `down` can signal it and everything it forked (the
containerd shims are reaped separately: they outlive containerd by design).
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from . import Paths


class StartError(RuntimeError):
    pass


def pidfile(p: Paths, name: str) -> Path:
    return p.run / f"{name}.pid"


def start(p: Paths, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> int:
    p.logs.mkdir(parents=True, exist_ok=True)
    p.run.mkdir(parents=True, exist_ok=True)
    log = open(p.logs / f"{name}.log", "ab")
    proc = subprocess.Popen(
        list(argv),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    log.close()
    pidfile(p, name).write_text(str(proc.pid))
    return proc.pid


def pid_of(p: Paths, name: str) -> int | None:
    try:
        pid = int(pidfile(p, name).read_text())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours (we are its parent when `up` and `down` run in one process) is gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def stop(p: Paths, name: str, sig: signal.Signals = signal.SIGTERM, timeout: float = 20) -> None:
    pid = pid_of(p, name)
    if pid is not None:
        signal_group(pid, sig)
        deadline = time.monotonic() + timeout
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            signal_group(pid, signal.SIGKILL)
            while alive(pid):
                time.sleep(0.05)
    pidfile(p, name).unlink(missing_ok=True)


def signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_until(what: str, check: Callable[[], bool], timeout: float, p: Paths, name: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if pid_of(p, name) is None:
            raise StartError(f"{name} exited while waiting for {what}: see {p.logs / name}.log")
        time.sleep(0.2)
    raise StartError(f"{name}: {what} not ready after {timeout:.0f} s: see {p.logs / name}.log")


def http_ok(url: str, context: ssl.SSLContext | None = None) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    return check
