"""Compiled dataclass methods cached across starts (kopfka.dataclass_cache): a class built from
the cache is the class `exec` would have built, a bad file is ignored, and a real node's second
start compiles none of the methods its first start compiled."""

from __future__ import annotations

import dataclasses
import inspect
import marshal
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kopfka.dataclass_cache import DataclassCodeCache

from tests.kopfka_process import KopfkaProcess


def build(cache: DataclassCodeCache | None, monkeypatch: pytest.MonkeyPatch) -> dict[str, type]:
    """The same class definitions, built through `cache` (None: dataclasses' own exec)."""
    if cache is not None:
        monkeypatch.setattr(dataclasses, "exec", cache.exec, raising=False)
    try:

        @dataclass(frozen=True)
        class Point:
            x: int
            y: int = 0
            tags: tuple[str, ...] = ()
            note: str = field(default="", compare=False)

        @dataclass(order=True)
        class Mutable:
            key: str
            items: list[int] = field(default_factory=list)

        @dataclass(slots=True, unsafe_hash=True)
        class Slotted:
            a: int
            b: Any = None

    finally:
        monkeypatch.delattr(dataclasses, "exec", raising=False)
    return {"Point": Point, "Mutable": Mutable, "Slotted": Slotted}


def behaviour(classes: dict[str, type]) -> list[Any]:
    """What the generated methods do, and how they are declared."""
    point, mutable, slotted = classes["Point"], classes["Mutable"], classes["Slotted"]
    p = point(1, tags=("a",), note="n")
    out: list[Any] = [repr(p), p == point(1, tags=("a",), note="other"), hash(p) == hash(point(1, 0, ("a",)))]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    m1, m2 = mutable("a"), mutable("b", [1])
    m1.items.append(5)
    out += [repr(m1), m1 < m2, mutable("c").items, sorted([m2, m1]) == [m1, m2]]
    s = slotted(1)
    out += [repr(s), hash(s) == hash(slotted(1)), hasattr(s, "__dict__")]
    for cls in classes.values():
        for name in ("__init__", "__repr__", "__eq__", "__setattr__", "__hash__", "__lt__"):
            fn = cls.__dict__.get(name)
            if inspect.isfunction(fn):
                # the annotations dataclasses put on __init__ are objects, not strings: the cache
                # compiles without this test module's (or its own) `from __future__ import annotations`
                out.append((cls.__name__, name, fn.__qualname__, str(inspect.signature(fn)), fn.__annotations__))
    return out


def test_a_class_built_from_the_cache_is_the_class_exec_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "cache.marshal")
    reference = behaviour(build(None, monkeypatch))
    first = DataclassCodeCache(path)
    assert behaviour(build(first, monkeypatch)) == reference
    assert first.compiled > 10 and first.hits == 0
    assert first.save()
    assert not first.save()  # nothing new since
    second = DataclassCodeCache(path)
    classes = build(second, monkeypatch)
    assert second.compiled == 0 and second.hits == first.compiled
    assert behaviour(classes) == reference
    init = classes["Point"].__init__  # type: ignore[misc]
    assert init.__code__.co_filename == "<string>"  # as exec names the code it compiles


def test_a_foreign_or_broken_file_is_ignored_and_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cache.marshal"
    reference = behaviour(build(None, monkeypatch))
    for content in (b"", b"\x00garbage", marshal.dumps(("2.7.18 (other build)", {"x": compile("1", "<s>", "exec")}))):
        path.write_bytes(content)
        cache = DataclassCodeCache(str(path))
        assert cache.loaded == {}
        assert behaviour(build(cache, monkeypatch)) == reference
        assert cache.save()
        assert DataclassCodeCache(str(path)).loaded.keys() == cache.used.keys()
    texts = DataclassCodeCache(str(path)).loaded  # the real texts, mapped to something not code
    path.write_bytes(marshal.dumps((sys.version, dict.fromkeys(texts, 0))))
    cache = DataclassCodeCache(str(path))
    assert behaviour(build(cache, monkeypatch)) == reference
    assert cache.compiled == len(texts)
    path.unlink()
    path.mkdir()  # not writable as a file: the process runs uncached, nothing raised
    cache = DataclassCodeCache(str(path))
    build(cache, monkeypatch)
    assert not cache.save()


def test_stale_texts_are_dropped_once_they_outnumber_the_used_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "cache.marshal")
    stale = {
        f"def __create_fn__():\n def f{i}(self):\n  return {i}\n return f{i}": compile("0", "<string>", "exec")
        for i in range(3)
    }
    with open(path, "wb") as f:
        marshal.dump((sys.version, stale), f)
    cache = DataclassCodeCache(path)
    build(cache, monkeypatch)
    assert cache.save()
    kept = DataclassCodeCache(path).loaded
    assert stale.keys() <= kept.keys()  # a few stale ones stay: another class may come back
    many = {f"text {i}": compile("0", "<string>", "exec") for i in range(10 * len(cache.used))}
    with open(path, "wb") as f:
        marshal.dump((sys.version, many), f)
    cache = DataclassCodeCache(path)
    build(cache, monkeypatch)
    assert cache.save()
    assert DataclassCodeCache(path).loaded.keys() == cache.used.keys()


def _start_figures(proc: KopfkaProcess, earlier: int) -> tuple[int, int]:
    pattern = re.compile(r"(\d+) dataclass methods compiled at start, (\d+) from the cache")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = pattern.search(proc.log_text()[earlier:])
        if found:
            return int(found[1]), int(found[2])
        time.sleep(0.1)
    raise AssertionError(f"no dataclass cache line in the log:\n{proc.log_text()[-3000:]}")


def test_a_nodes_second_start_compiles_no_dataclass_method(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real `kopfka serve` processes with their bytecode (and so the cache) under a prefix of this
    test's own: the first start compiles and writes, a start of a fresh node reads them all, and
    both serve a producer and a consumer."""
    prefix = tmp_path / "pycache"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(prefix))
    monkeypatch.setenv("KOPFKA_DATACLASS_CACHE", "write")
    figures = []
    for n in range(2):
        proc = KopfkaProcess(tmp_path / f"node{n}" / "data").start(timeout=60)
        try:
            figures.append(_start_figures(proc, 0))
            producer = Producer({"bootstrap.servers": proc.bootstrap})
            producer.produce("cached", value=f"start {n}".encode())
            assert producer.flush(30) == 0
            consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": "g", "enable.auto.commit": False})
            consumer.assign([TopicPartition("cached", 0, 0)])
            msg = consumer.poll(30)
            assert msg is not None and msg.error() is None and msg.value() == f"start {n}".encode()
            consumer.close()
        finally:
            proc.kill()
    (compiled_first, cached_first), (compiled_second, cached_second) = figures
    assert compiled_first > 300  # texts repeated within a start (identical classes) count as cached
    assert compiled_second == 0 and cached_second == compiled_first + cached_first
    assert list(prefix.rglob("dataclass-methods.serve.*.marshal"))


def test_nothing_is_written_where_python_writes_no_bytecode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = tmp_path / "pycache"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(prefix))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("KOPFKA_DATACLASS_CACHE", raising=False)
    proc = KopfkaProcess(tmp_path / "data").start(timeout=60)
    try:
        compiled, cached = _start_figures(proc, 0)
    finally:
        assert proc.stop() == 0
    assert compiled > 300 and cached < compiled / 4  # only texts repeated within this start
    assert not list(prefix.rglob("dataclass-methods.*"))


def test_the_warm_up_leaves_a_cache_a_nodes_start_needs_nothing_beyond(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m kopfka.dataclass_cache` (the test command's and the image's step) writes the
    cache even under PYTHONDONTWRITEBYTECODE, and a node started after it compiles nothing."""
    import subprocess

    prefix = tmp_path / "pycache"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(prefix))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("KOPFKA_DATACLASS_CACHE", raising=False)
    warm = subprocess.run([sys.executable, "-m", "kopfka.dataclass_cache"], capture_output=True, text=True, timeout=120)
    assert warm.returncode == 0, warm.stderr
    assert list(prefix.rglob("dataclass-methods.serve.*.marshal"))
    proc = KopfkaProcess(tmp_path / "data").start(timeout=60)
    try:
        compiled, cached = _start_figures(proc, 0)
    finally:
        proc.kill()
    assert compiled == 0 and cached > 300
