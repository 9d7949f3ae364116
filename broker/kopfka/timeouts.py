"""Timeouts that never lose a cancellation.

On Python 3.11 `asyncio.wait_for` runs its awaitable as a separate task; when the caller is
cancelled in the same loop iteration as that task finishes, wait_for returns (or raises) the
inner result and the cancellation is silently dropped (CPython gh-86296, fixed in 3.12). A
long-running loop built on it (a replica fetcher, a raft driver) can then survive
`task.cancel()` and keep the process from exiting on SIGTERM. `asyncio.timeout` awaits in the
caller's own task, so a cancellation always arrives: kopfka uses only these helpers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(timeout: float | None, aw: Awaitable[T]) -> T:
    """`await aw`, raising TimeoutError after `timeout` seconds (None: no limit)."""
    async with asyncio.timeout(timeout):
        return await aw


async def wait_quietly(aw: Awaitable[object], timeout: float | None) -> bool:
    """`await aw` for at most `timeout` seconds: True if it finished, False on timeout."""
    try:
        async with asyncio.timeout(timeout):
            await aw
    except TimeoutError:
        return False
    return True
