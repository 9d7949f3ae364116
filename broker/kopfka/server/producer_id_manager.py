"""Hands out producer ids from blocks the controller allocates (ProducerIdsRecord)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class ProducerIdManager:
    def __init__(self, allocate_block: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self._allocate_block = allocate_block
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def generate(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                start, length = await self._allocate_block()
                self._next, self._end = start, start + length
            pid = self._next
            self._next += 1
            return pid
