"""Compiled dataclass methods, cached across process starts (as .pyc files cache modules).

`@dataclass` writes the source of each class's `__init__`, `__repr__`, `__eq__`, `__hash__` (and
a frozen class's `__setattr__` / `__delattr__`) and compiles it with `exec` when the class is
created: ~0.1 ms per method here, 757 methods for the ~156 dataclasses (kopfka's and kio's) a
node builds before its first Metadata answer, 70-100 ms of a 0.3-0.4 s cold start. That source depends
only on the class definition, so the compiled code is kept, keyed by the source text itself, in
a marshal file beside kopfka's bytecode: a text seen before is executed from its code object,
which is what `exec` would have compiled from it (same filename, no inherited compiler flags:
dataclasses.py has no `__future__` imports). A text not seen before is compiled as usual.

Scope: only the `exec` that the `dataclasses` module calls is replaced, and only in a `kopfka`
console-script process (`install`, from cli.main); imports from tests or other programs are
untouched. One file per subcommand (a node, the storage tool and the operator build different
classes), for this interpreter (`sys.implementation.cache_tag`; the file also carries
`sys.version`, and one written by another build is ignored).

Written like bytecode: only when Python would write bytecode (not under PYTHONDONTWRITEBYTECODE)
or when KOPFKA_DATACLASS_CACHE=write asks for it (the test command and the image build warm it
that way: `python -m kopfka.dataclass_cache`); KOPFKA_DATACLASS_CACHE=off neither reads nor
writes. A file that cannot be read or written is left alone and the process runs uncached.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
from types import CodeType
from typing import Any

_ENV = "KOPFKA_DATACLASS_CACHE"
_exec = builtins.exec


class DataclassCodeCache:
    """The source -> code mapping of one process, loaded from and saved to `path`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.loaded: dict[str, CodeType] = {}
        self.used: dict[str, CodeType] = {}
        self.misses = 0  # compiled since the last save
        self.compiled = 0  # compiled by this process
        self.hits = 0  # served from compiled code
        try:
            with open(path, "rb") as f:
                version, entries = marshal.loads(f.read())  # marshal.load(f): ~10x slower, read by read
            if version == sys.version and isinstance(entries, dict):
                self.loaded = entries
        except (OSError, EOFError, ValueError, TypeError):  # absent, truncated or foreign: start empty
            pass

    def exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        """`exec` as the dataclasses module calls it: `exec(text, globals, namespace)`."""
        if type(source) is not str:
            return _exec(source, globals, locals)
        code = self.used.get(source) or self.loaded.get(source)
        if type(code) is not CodeType:  # not seen before (or a foreign file's value)
            code = compile(source, "<string>", "exec", dont_inherit=True)
            self.misses += 1
            self.compiled += 1
        else:
            self.hits += 1
        self.used[source] = code
        return _exec(code, globals, locals)

    def save(self) -> bool:
        """Write what this process compiled, with what it loaded, unless nothing new was seen.
        Stale texts (from classes since changed) are dropped once they outnumber the used ones."""
        if not self.misses:
            return False
        entries = {**self.loaded, **self.used}
        if len(entries) > 2 * len(self.used):
            entries = dict(self.used)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(marshal.dumps((sys.version, entries)))
            os.replace(tmp, self.path)  # concurrent starts: each reads a whole file, the last write wins
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        self.loaded, self.misses = entries, 0
        return True


_cache: DataclassCodeCache | None = None
_writable = False


def cache_path(kind: str) -> str:
    """The file for processes of one kind (a subcommand), beside kopfka's own bytecode: in its
    __pycache__, or under PYTHONPYCACHEPREFIX when bytecode goes there."""
    package = os.path.dirname(os.path.abspath(__file__))
    tag = sys.implementation.cache_tag or "python"
    name = f"dataclass-methods.{kind}.{tag}.marshal"
    if sys.pycache_prefix is not None:
        return os.path.join(sys.pycache_prefix, package.lstrip(os.sep), name)
    return os.path.join(package, "__pycache__", name)


def install(kind: str) -> DataclassCodeCache | None:
    """Serve the dataclasses created from now on from the cache for `kind` (before importing the
    modules that define them)."""
    global _cache, _writable
    mode = os.environ.get(_ENV, "")
    if mode == "off" or _cache is not None:
        return _cache
    import dataclasses

    _cache = DataclassCodeCache(cache_path(kind))
    _writable = mode == "write" or not sys.dont_write_bytecode
    dataclasses.exec = _cache.exec  # type: ignore[attr-defined]  # the module global shadows the builtin
    return _cache


def stats() -> tuple[int, int] | None:
    """(methods compiled, methods served from the cache) so far; None when the cache is off."""
    if _cache is None:
        return None
    return _cache.compiled, _cache.hits


def save() -> bool:
    """Write the cache if this process may and compiled anything new (a started node calls this
    once its start is done, every console-script process when its command returns)."""
    return _cache is not None and _writable and _cache.save()


def warm(timeout_s: float = 60.0) -> int:
    """Start an embedded node on a free loopback port, ask it for ApiVersions and Metadata as a
    client's first requests do, stop it: its cache then holds what a node's start compiles."""
    import asyncio
    import socket
    import subprocess
    import tempfile

    from kopfka.client.connection import KafkaConnection

    async def first_requests(bootstrap: str, node: subprocess.Popen[bytes]) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                conn = await KafkaConnection.open(bootstrap, timeout=timeout_s)
                break
            except OSError:
                if node.poll() is not None or loop.time() > deadline:
                    return False
                await asyncio.sleep(0.05)
        try:
            await conn.request(18, 3, {"client_software_name": "kopfka-warm", "client_software_version": "1"})
            await conn.request(
                3,
                12,
                {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
            )
        finally:
            await conn.close()
        return True

    with tempfile.TemporaryDirectory(prefix="kopfka-warm-") as tmp, socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        env = {**os.environ, _ENV: "write"}
        cmd = [sys.executable, "-m", "kopfka.cli.main", "serve", "--data-dir", tmp, "--listen", f"127.0.0.1:{port}"]
        node = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            answered = asyncio.run(first_requests(f"127.0.0.1:{port}", node))
        finally:
            node.terminate()
            node.wait(timeout_s)
    if not answered:
        print("kopfka: the warm-up node did not start", file=sys.stderr)
    return 0 if answered and node.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(warm())
