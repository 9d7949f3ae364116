"""Driving the operator's data mover from a test or a benchmark as the operator's timer does:
each tick is a fresh Mover over a fresh connection (nothing carried over, as after an operator
restart) making one bounded step; and bulk data for the moves to copy."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from confluent_kafka import Producer
from harness import run
from kopfka_operator.kafka_pool import ClusterAdmin
from kopfka_operator.rebalance.model import Plan
from kopfka_operator.rebalance.mover import Mover, MoverSettings


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int, record: int = 1024) -> None:
    """Bulk data (unique values of `record` bytes) so that moves copy megabytes, not bytes."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1 << 20})
    for part in range(partitions):
        for i in range(per_partition // record):
            while True:
                try:
                    p.produce(topic, f"fill-{part}-{i}-".encode().ljust(record, b"."), partition=part)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 500 == 0:
                p.poll(0)
    assert p.flush(300) == 0


def tick(
    bootstrap: str, settings: MoverSettings, call: Callable[[Mover], Awaitable[tuple[bool, str]]]
) -> tuple[bool, str, Mover]:
    async def go() -> tuple[bool, str, Mover]:
        admin = ClusterAdmin(bootstrap)
        mover = Mover(admin, settings)
        try:
            return (*await call(mover), mover)
        finally:
            await admin.close()

    return run(go())  # type: ignore[no-any-return]


def drive(
    bootstrap: str,
    settings: MoverSettings,
    call: Callable[[Mover], Awaitable[tuple[bool, str]]],
    watch: Callable[[], None] = lambda: None,
    timeout: float = 90,
    interval: float = 1.0,
) -> tuple[list[str], list[Plan]]:
    """Ticks every `interval` s until the mover says done; `watch` looks at the cluster between
    ticks. Returns what it said and the plans of the steps that started moves."""
    said: list[str] = []
    plans: list[Plan] = []
    deadline = time.monotonic() + timeout
    while True:
        done, progress, mover = tick(bootstrap, settings, call)
        if not said or said[-1] != progress:
            print(f"mover: {progress}", flush=True)
        said.append(progress)
        if " started" in progress and mover.last_plan is not None:
            plans.append(mover.last_plan)
        if done:
            return said, plans
        assert time.monotonic() < deadline, f"the mover did not finish in {timeout} s: {said[-3:]}"
        watch()
        time.sleep(interval)
