"""The floor of one hop between two asyncio processes on this machine, measured in the run.

A replicated write crosses processes four times before a consumer sees it (producer → leader
→ follower → leader → consumer), so no broker can beat four of these hops. Two Python
processes (an asyncio echo server and an asyncio client) exchange 100-byte messages over
loopback TCP at the benchmark's rate; half the round trip is a hop.
"""

from __future__ import annotations

import asyncio
import struct
import subprocess
import sys
import time


async def _echo() -> None:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while True:
            try:
                w.write(await r.readexactly(100))
            except (asyncio.IncompleteReadError, ConnectionError):
                return

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await srv.serve_forever()


async def _ping(port: int, rate: int, seconds: float) -> list[float]:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    hops: list[float] = []
    t0 = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        sent = time.perf_counter()
        w.write(struct.pack(">d", sent) + b"x" * 92)
        await r.readexactly(100)
        hops.append((time.perf_counter() - sent) / 2)
    w.close()
    return hops


def measure(rate: int, seconds: float) -> tuple[float, float]:
    """(p50 ms, p99 ms) of one hop."""
    server = subprocess.Popen([sys.executable, __file__, "serve"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        hops = sorted(asyncio.run(_ping(port, rate, seconds)))
    finally:
        server.kill()
        server.wait()
    return hops[len(hops) // 2] * 1000, hops[min(len(hops) - 1, int(len(hops) * 0.99))] * 1000


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    asyncio.run(_echo())
