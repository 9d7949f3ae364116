"""A broker must exit on SIGTERM: no task may outlive its cancellation, and no shutdown step may
wait without bound.

The rolling controlled-shutdown test once hung for good in asyncio.run's final task cancellation:
a replica fetcher had been cancelled in the same loop step as its pending read completed, and
Python 3.11's asyncio.wait_for dropped the cancellation, so the fetcher kept fetching. These tests
pin the pieces of the fix: reads and waits that always deliver a cancellation, no wait_for in
the broker, a scheduler that neither loses nor crashes on delayed work at shutdown, and a
bounded last-resort drain.
"""

from __future__ import annotations

import asyncio
import os
import re
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kopfka.client.connection import KafkaConnection
from kopfka.server.scheduler import KafkaScheduler
from kopfka.timeouts import wait_quietly, within

ROOT = Path(__file__).resolve().parents[2]


class _NullWriter:
    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_request_cancelled_as_its_response_arrives_is_cancelled() -> None:
    """The exact race of the hang: the response lands and the task is cancelled in one loop step.
    With asyncio.wait_for (3.11) the request returned its response and the cancellation was lost."""
    reader = asyncio.StreamReader()
    conn = KafkaConnection(reader, _NullWriter())  # type: ignore[arg-type]
    task = asyncio.create_task(conn.request(18, 0, {}, timeout=5))  # ApiVersions v0
    await _settle()
    body = struct.pack(">ihi", 1, 0, 0)  # correlation id 1, error 0, no api keys
    reader.feed_data(struct.pack(">i", len(body)) + body)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("helper", ["wait_quietly", "within"])
async def test_wait_cancelled_as_its_event_fires_is_cancelled(helper: str) -> None:
    """The same race on the event waits the raft driver, heartbeat and fetcher loops are built on."""
    ev = asyncio.Event()

    async def loop_forever() -> None:
        while True:  # a driver loop: only a delivered cancellation ends it
            ev.clear()
            if helper == "wait_quietly":
                await wait_quietly(ev.wait(), 5)
            else:
                await within(5, ev.wait())

    task = asyncio.create_task(loop_forever())
    await _settle()
    ev.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert done, "the loop survived its cancellation"
    assert task.cancelled()


async def test_timeouts_still_time_out() -> None:
    assert await wait_quietly(asyncio.Event().wait(), 0.01) is False
    assert await wait_quietly(asyncio.sleep(0), 1) is True
    with pytest.raises(TimeoutError):
        await within(0.01, asyncio.Event().wait())
    assert await within(1, asyncio.sleep(0, "x")) == "x"


def test_no_asyncio_wait_for_in_the_broker_or_operator() -> None:
    """asyncio.wait_for can lose a cancellation on 3.11: kopfka.timeouts replaces it."""
    offenders = []
    for pkg in (ROOT / "broker" / "kopfka", ROOT / "operator" / "kopfka_operator"):
        for path in pkg.rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\bwait_for\(", line) and "def " not in line:
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "use kopfka.timeouts (within / wait_quietly):\n" + "\n".join(offenders)


async def test_scheduler_runs_delayed_work_at_shutdown_and_after() -> None:
    """Delayed deletes pending at shutdown run then (they crashed with a TypeError and were lost);
    work scheduled from a worker thread is armed on the loop; work after shutdown runs inline."""
    sched = KafkaScheduler()
    sched.bind(asyncio.get_running_loop())
    ran: list[str] = []
    sched("soon", 0, lambda: ran.append("soon"))
    sched("delayed", 60_000, lambda: ran.append("delayed"))
    t = threading.Thread(target=sched, args=("from-thread", 60_000, lambda: ran.append("from-thread")))
    t.start()
    t.join()
    await _settle()
    await sched.shutdown()
    assert sorted(ran) == ["delayed", "from-thread", "soon"]
    sched("late", 1000, lambda: ran.append("late"))
    await _settle()
    assert ran[-1] == "late"


def test_leftover_task_that_ignores_cancellation_cannot_keep_the_process_alive(tmp_path: Path) -> None:
    """The last-resort drain after shutdown: a task that swallows its cancellation is logged with
    its stack and the process still exits (asyncio.run alone would wait for it forever)."""
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import asyncio, logging, types\n"
        "from kopfka.server.kafka_server import KafkaServer\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "async def stubborn():\n"
        "    while True:\n"
        "        try:\n"
        "            await asyncio.sleep(3600)\n"
        "        except asyncio.CancelledError:\n"
        "            pass\n"
        "async def main():\n"
        "    asyncio.create_task(stubborn(), name='stubborn')\n"
        "    await asyncio.sleep(0)\n"
        "    await KafkaServer._stop_leftover_tasks(types.SimpleNamespace(node_id=7), 0.5)\n"
        "asyncio.run(main())\n"
    )
    res = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert res.returncode == 0, res.stderr
    assert "task stubborn did not stop when cancelled" in res.stderr
    assert "stubborn" in res.stderr.split("did not stop when cancelled", 1)[1]
