"""The request-percentage quota charges the time a request works, not the time it waits (here a
JoinGroup waiting out group.initial.rebalance.delay.ms), as Kafka charges handler-thread time."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kopfka.client import connection
from kopfka.client.connection import KafkaConnection
from kopfka.client.quotas import alter_client_quotas

from tests.quotas.quota_helpers import admin_call, start_broker

DELAY_MS = 1500
COORDINATOR_NOT_AVAILABLE = 15


async def find_coordinator(bootstrap: str) -> None:
    """Until the offsets topic exists (its creation is not what this test measures)."""
    conn = await KafkaConnection.open(bootstrap)
    try:
        for _ in range(100):
            fc = await conn.request(10, 2, {"key": "waiting-group", "key_type": 0})
            if fc.error_code == 0:
                return
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def join_group(bootstrap: str) -> tuple[int, int, float]:
    """One JoinGroup v2 of a new group: (error, throttle ms, seconds)."""
    conn = await KafkaConnection.open(bootstrap)
    try:
        body = {
            "group_id": "waiting-group",
            "session_timeout": 10000,
            "rebalance_timeout": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        }
        for _ in range(100):
            t0 = time.monotonic()
            resp = await conn.request(11, 2, body, timeout=30)
            if resp.error_code != COORDINATOR_NOT_AVAILABLE:  # the group coordinator is still loading
                break
            await asyncio.sleep(0.1)
        return int(resp.error_code), int(resp.throttle_time.total_seconds() * 1000), time.monotonic() - t0
    finally:
        await conn.close()


@pytest.mark.timeout(120)
def test_rebalance_wait_is_not_charged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc, _ = start_broker(tmp_path / "data", **{"group.initial.rebalance.delay.ms": str(DELAY_MS)})
    try:
        asyncio.run(find_coordinator(proc.bootstrap))  # creates the offsets topic, not charged to "joiner"
        # 5% of a request thread: 50 ms of work per second; the join does a millisecond of work
        admin_call(
            proc.bootstrap, lambda a: alter_client_quotas(a, [("client-id", "joiner")], {"request_percentage": 5})
        )
        monkeypatch.setattr(connection, "CLIENT_ID", "joiner")
        error, throttle_ms, seconds = asyncio.run(join_group(proc.bootstrap))
        assert error == 0 and seconds >= DELAY_MS / 1000 * 0.9  # it did wait out the initial delay
        assert throttle_ms == 0, f"a {seconds:.1f} s wait was charged as work: throttled {throttle_ms} ms"
    finally:
        proc.kill()


async def create_topic(bootstrap: str, name: str, partitions: int) -> tuple[int, int]:
    conn = await KafkaConnection.open(bootstrap)
    try:
        body = {
            "topics": [
                {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
            ],
            "timeout": 30000,
            "validate_only": False,
        }
        resp = await conn.request(19, 5, body, timeout=60)
        return int(resp.topics[0].error_code), int(resp.throttle_time.total_seconds() * 1000)
    finally:
        await conn.close()


@pytest.mark.timeout(120)
def test_controller_work_is_not_charged_to_the_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded node's controller creates 150 partitions (records, logs on disk) for the
    request: that is the controller's work, on its own thread in Kafka, not the request's."""
    proc, _ = start_broker(tmp_path / "data")
    try:
        admin_call(
            proc.bootstrap, lambda a: alter_client_quotas(a, [("client-id", "creator")], {"request_percentage": 1})
        )
        monkeypatch.setattr(connection, "CLIENT_ID", "creator")
        t0 = time.monotonic()
        error, throttle_ms = asyncio.run(create_topic(proc.bootstrap, "wide", 150))
        seconds = time.monotonic() - t0
        assert error == 0 and seconds > 0.1  # real work was done (and waited for)
        assert throttle_ms == 0, (
            f"{seconds:.2f} s of controller work charged to the request: throttled {throttle_ms} ms"
        )
    finally:
        proc.kill()


def test_work_timed_counts_steps_not_waits() -> None:
    from kopfka.quota.work_time import WorkTimed

    async def handler() -> str:
        deadline = time.perf_counter() + 0.05
        while time.perf_counter() < deadline:  # 50 ms of work
            pass
        await asyncio.sleep(0.3)  # waiting: other requests run
        return "done"

    async def cancelled() -> None:
        timed = WorkTimed(asyncio.sleep(10))
        task = asyncio.ensure_future(_await(timed))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def _await(timed: WorkTimed[None]) -> None:
        await timed

    async def main() -> tuple[str, int]:
        timed = WorkTimed(handler())
        return await timed, timed.ns

    result, ns = asyncio.run(main())
    assert result == "done" and 45e6 <= ns < 200e6
    asyncio.run(cancelled())
