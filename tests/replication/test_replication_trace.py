"""The replication stage trace (benchmarks/replication.py's latency breakdown) on a real cluster:
every acks=all record of an RF=3 partition is stamped at each stage of its path, on the
leader and on both followers, in causal order; without the benchmark-only key nothing is
stamped and the endpoint does not exist."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from harness import create_topic, wait_full_isr
from kopfka.server.health import HealthServer
from kopfka.server.replication_trace import STALL_TICK_S, TRACE, ReplicationTrace

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import stage_breakdown

pytestmark = pytest.mark.timeout(240)


def _produce_and_consume(bootstrap: str, topic: str, n: int) -> list[tuple[float, float, int, int]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"trace-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    c.subscribe([topic])
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True})
    for _ in range(n):
        p.produce(topic, struct.pack(">d", time.perf_counter()))
        p.poll(0.002)
    assert p.flush(30) == 0
    rows: list[tuple[float, float, int, int]] = []
    deadline = time.monotonic() + 60
    while len(rows) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            rows.append((struct.unpack(">d", m.value())[0], time.perf_counter(), m.partition(), m.offset()))
    c.close()
    return rows


def test_every_stage_of_an_acks_all_write_is_stamped_in_order(make_cluster: Any) -> None:
    c = make_cluster(3, {"internal.replication.trace.enable": "true"})
    create_topic(c, "traced", 1, 3, configs={"min.insync.replicas": "2"})
    wait_full_isr(c, "traced")
    rows = _produce_and_consume(c.bootstrap(), "traced", 200)
    assert len(rows) == 200
    trace = stage_breakdown.collect(f"{b.host}:{b.http_port}" for b in c.brokers)
    assert len(trace.replicas("traced", 0)) == 2  # both followers stamped their appends
    stages = stage_breakdown.split(trace, "traced", rows)
    every = [name for name, _ in stage_breakdown.STAGES]
    for name in every:
        assert len(stages[name]) == 200, f"stage {name!r} missing for some records"
    chain = [
        "leader append",
        "follower wake-up",
        "to follower",
        "follower append",
        "follower next fetch",
        "ack→HW",
        "HW→produce answer",
        "HW→consumer answer",
        "to consumer",
    ]
    for name in chain:  # the stamps of one record follow its causal order (clock resolution aside)
        assert min(stages[name]) > -0.01, (name, min(stages[name]))
    for i in range(200):  # the stages on the consumer's path add up to the end-to-end time
        path = sum(stages[name][i] for name in every if name not in ("end-to-end", "HW→produce answer"))
        assert path == pytest.approx(stages["end-to-end"][i], abs=0.01)
    # taken means forgotten: a second collection has no appends left
    assert stage_breakdown.collect(f"{b.host}:{b.http_port}" for b in c.brokers).first("append", "traced", 0, 0) is None


def test_the_trace_is_off_and_unserved_by_default() -> None:
    assert not TRACE.enabled  # this process never enabled it

    async def probe(trace_on: bool) -> int:
        saved = TRACE.enabled
        TRACE.enabled = trace_on
        server = HealthServer(lambda: "RUNNING", lambda: True)
        try:
            await server.start("127.0.0.1", 0)
        finally:
            TRACE.enabled = saved
        try:
            url = f"http://127.0.0.1:{server.port}/debug/replication-trace"
            try:
                with await asyncio.to_thread(urllib.request.urlopen, url, timeout=5) as r:
                    return int(r.status)
            except urllib.error.HTTPError as exc:
                return int(exc.code)
        finally:
            await server.stop()

    assert asyncio.run(probe(False)) == 404
    assert asyncio.run(probe(True)) == 200


def test_a_delete_drops_the_stamps_unread() -> None:
    """The benchmark drops the warm-up's stamps with DELETE: a GET would encode them all as JSON on
    the broker's event loop (a ~50 ms stall at the start of the measured records)."""

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        saved_enabled, saved_events, saved_node = TRACE.enabled, TRACE.events, TRACE.node_id
        TRACE.enabled, TRACE.node_id = True, 7
        TRACE.forget()
        server = HealthServer(lambda: "RUNNING", lambda: True)
        try:
            await server.start("127.0.0.1", 0)
            for i in range(3):
                TRACE.mark("append", "t", 0, i, i + 1)
            url = f"http://127.0.0.1:{server.port}/debug/replication-trace"
            req = urllib.request.Request(url, method="DELETE")
            with await asyncio.to_thread(urllib.request.urlopen, req, timeout=5) as r:
                dropped = json.loads(r.read())
            with await asyncio.to_thread(urllib.request.urlopen, url, timeout=5) as r:
                left = json.loads(r.read())
            return dropped, left
        finally:
            await server.stop()
            TRACE.enabled, TRACE.events, TRACE.node_id = saved_enabled, saved_events, saved_node

    dropped, left = asyncio.run(run())
    assert dropped == {"node_id": 7, "forgotten": 3}
    assert left == {"node_id": 7, "events": []}


def _stall_of(block: Any) -> tuple[int, int, float]:
    """(late µs, loop thread's CPU µs, its run-queue wait µs) of the stall a callback that calls
    `block()` causes, as the stall watch stamps it."""

    async def run() -> list[Any]:
        trace = ReplicationTrace()
        trace.enable(0)
        try:
            await asyncio.sleep(0.25)  # the watch is running
            block()
            await asyncio.sleep(0.25)
            return [e for e in trace.events if e[0] == "stall"]
        finally:
            assert trace.watcher is not None
            trace.watcher.cancel()

    stalls = asyncio.run(run())
    assert stalls, "no stall stamped"
    _, _, _, late, ran, _, waited = max(stalls, key=lambda e: e[3])
    return late, ran, waited


@pytest.mark.skipif(not Path("/proc/thread-self/schedstat").exists(), reason="needs Linux schedstat")
def test_a_stall_says_whether_the_loop_waited_for_a_cpu_ran_or_slept() -> None:
    """The benchmark's stall table splits each stall of a broker's loop into CPU wait, on CPU and
    asleep. It once used the process's CPU time over the whole tick, which counts the tick's
    ordinary work and other threads, and reported run-queue waits on a busy machine as stalls
    "on the CPU"."""
    window = int(STALL_TICK_S * 1e6)
    # asleep: a callback blocked in a system call
    late, ran, waited = _stall_of(lambda: time.sleep(0.1))
    assert late >= 100_000 - window
    assert ran + waited < 0.5 * (late + window), (late, ran, waited)
    # starved: the loop's thread shares one CPU with three busy processes while its callback runs
    cpu = min(os.sched_getaffinity(0))
    saved = os.sched_getaffinity(0)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        for s in spinners:
            os.sched_setaffinity(s.pid, {cpu})
        os.sched_setaffinity(0, {cpu})  # this thread: the loop's

        def spin() -> None:
            end = time.perf_counter() + 0.2
            while time.perf_counter() < end:
                pass

        late, ran, waited = _stall_of(spin)
    finally:
        os.sched_setaffinity(0, saved)
        for s in spinners:
            s.kill()
            s.wait()
    assert late >= 200_000 - window
    assert waited > 2 * ran, (late, ran, waited)  # about 3/4 of the time in the run queue
    assert waited + ran > 0.8 * (late + window), (late, ran, waited)
