"""One connection's pipelined requests do not hold the broker's event loop: handlers that finish
without suspending (ApiVersions, acks=1 produces) used to run every request of a read in one loop
step, 10-20 ms at 20,000 acks=1 writes/s, while other connections, the replica fetchers and the
timers waited. A connection now yields after about a millisecond of queued work."""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

from kopfka_process import KopfkaProcess

N = 3000


def _api_versions(corr: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, corr, 4) + b"fair"
    return struct.pack(">i", len(body)) + body


async def _read_answers(reader: asyncio.StreamReader, n: int) -> float:
    for _ in range(n):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        await reader.readexactly(size)
    return time.perf_counter()


async def _race(host: str, port: int) -> tuple[float, float, float]:
    ra, wa = await asyncio.open_connection(host, port)
    rb, wb = await asyncio.open_connection(host, port)
    wa.write(_api_versions(0))  # both connections open and answered once before the race
    wb.write(_api_versions(0))
    await _read_answers(ra, 1)
    await _read_answers(rb, 1)
    a_done = asyncio.create_task(_read_answers(ra, N))
    t0 = time.perf_counter()
    wa.write(b"".join(_api_versions(i + 1) for i in range(N)))  # one write: reads of many frames
    await asyncio.sleep(0.005)  # they are in the broker's queue
    wb.write(_api_versions(1))
    b_answered = await _read_answers(rb, 1)
    a_answered = await a_done
    for w in (wa, wb):
        w.close()
    return t0, b_answered, a_answered


def test_a_pipelining_connection_does_not_hold_the_loop(tmp_path: Path) -> None:
    node = KopfkaProcess(tmp_path / "data")
    node.start()
    try:
        t0, b, a = asyncio.run(_race(node.host, node.port))
    finally:
        node.stop()
    assert a - t0 > 0.05, "the pipelined requests took too little time to tell"
    # the single request of the other connection is answered long before the pipeline ends
    assert b < t0 + (a - t0) / 2, (b - t0, a - t0)
