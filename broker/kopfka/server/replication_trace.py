"""Per-stage timestamps of replicated writes, so a benchmark can say where a write's time goes.

Off unless the benchmark-only key `internal.replication.trace.enable=true` is set (like
`internal.raft.isolation.file`, it is no Kafka config). Then the stages of a write are stamped
with `time.perf_counter()` — CLOCK_MONOTONIC on Linux, one clock for every process on the
machine, so stamps of the leader, the followers and the benchmark's own clients compare
directly — and `/debug/replication-trace` on the HTTP listener (kopfka.http.listener) hands
them out and forgets them.

Each event covers a partition's offsets [lo, hi):
  append           leader: a produce appended [lo, hi); `extra` = when its handler started
  fetch_out        leader: a follower's fetch (replica `extra`) is answered with [lo, hi)
  follower_append  follower: appended [lo, hi) fetched from the leader; `extra` = when the
                   response arrived
  ack              leader: follower `extra` fetched at hi, so it holds everything below hi
  hw               leader: the high watermark moved from lo to hi
  produce_done     leader: an acks=all produce of [lo, hi) is answered
  consumer_out     leader: a consumer's fetch is answered with [lo, hi)
  stall            any node: its event loop woke `lo` µs late (over STALL_US); in that tick
                   (STALL_TICK_S + `lo` µs) the loop's thread ran `hi` µs on a
                   CPU and waited `extra` µs ready in the run queue (Linux schedstat; -1
                   elsewhere): mostly waiting, the OS ran others; mostly running, a callback
                   blocked the loop; neither, it was idle or slept in a system call
Where a stage happened for offset o is the first event of it (for that partition and replica)
whose hi passes o: every stage's offsets only move forward.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

MAX_EVENTS = 2_000_000  # ~10 minutes at 2,000 writes/s: bounded if nobody collects
STALL_TICK_S = 0.02  # 50 wake-ups/s: the watch must not become the load it measures
STALL_US = 5000

Event = tuple[str, str, int, int, int, float, float]  # stage, topic, partition, lo, hi, time, extra


def thread_sched() -> tuple[int, int]:
    """(ns on a CPU, ns waiting in a run queue) of the calling thread: Linux's schedstat, or the
    thread's CPU time and -1 where there is none."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            ran, waited = f.read().split()[:2]
        return int(ran), int(waited)
    except (OSError, ValueError):
        return time.thread_time_ns(), -1


class ReplicationTrace:
    __slots__ = ("enabled", "events", "node_id", "watcher")

    def __init__(self) -> None:
        self.enabled = False
        self.node_id = -1
        self.events: deque[Event] = deque(maxlen=MAX_EVENTS)
        self.watcher: asyncio.Task[None] | None = None

    def enable(self, node_id: int) -> None:
        """On the running loop: also starts the stall watch."""
        self.enabled = True
        self.node_id = node_id
        if self.watcher is None:
            self.watcher = asyncio.get_running_loop().create_task(self.watch_loop(), name="loop-stall-watch")

    def mark(self, stage: str, topic: str, partition: int, lo: int, hi: int, extra: float = -1.0) -> None:
        """Callers test `enabled` first: the hot path pays one attribute read when tracing is off."""
        self.events.append((stage, topic, partition, lo, hi, time.perf_counter(), extra))

    async def watch_loop(self) -> None:
        """Stamp every wake-up of a STALL_TICK_S timer that comes more than STALL_US late, with what
        the loop's own thread did over that tick: on a CPU, ready in the run queue, or neither
        (asleep in a system call). The short tick keeps the tick's ordinary work a small part of
        a stall's window. (The process's CPU time over a 100 ms tick, used before, also counted
        the other threads and the tick's ordinary work, and called stalls "on the CPU" that were
        run-queue waits.)"""
        while True:
            t0, (ran0, waited0) = time.perf_counter(), thread_sched()
            await asyncio.sleep(STALL_TICK_S)
            t1 = time.perf_counter()
            late = t1 - t0 - STALL_TICK_S
            if late * 1e6 > STALL_US:
                ran1, waited1 = thread_sched()
                waited = (waited1 - waited0) / 1000 if waited0 >= 0 else -1.0
                self.events.append(("stall", "", 0, int(late * 1e6), (ran1 - ran0) // 1000, t1, waited))

    def forget(self) -> int:
        """Drop every stamp; how many there were."""
        n = len(self.events)
        self.events = deque(maxlen=MAX_EVENTS)
        return n

    def take(self) -> dict[str, Any]:
        events, self.events = self.events, deque(maxlen=MAX_EVENTS)
        return {"node_id": self.node_id, "events": list(events)}


TRACE = ReplicationTrace()
