"""KafkaScheduler for asyncio: delayed background work (segment flushes after a roll, delayed
file deletion) run on a worker thread, so an fsync never blocks the event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)


class KafkaScheduler:
    def __init__(self, threads: int = 2) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kafka-scheduler")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[asyncio.Future[None] | asyncio.TimerHandle] = set()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def _run(self, name: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            log.exception("Scheduled task %s failed", name)

    def __call__(self, name: str, delay_ms: int, fn: Callable[[], None]) -> None:
        """The storage engine's Scheduler signature: (name, delay in ms, task)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._run(name, fn)
            return

        def submit() -> None:
            fut = loop.run_in_executor(self._executor, self._run, name, fn)
            self._pending.add(fut)
            fut.add_done_callback(self._pending.discard)

        if delay_ms <= 0:
            loop.call_soon_threadsafe(submit)
        else:
            handle = loop.call_later(delay_ms / 1000, submit)
            self._pending.add(handle)

    def shutdown(self) -> None:
        """Run what is still pending now (delayed deletes included), then stop the threads."""
        for item in list(self._pending):
            if isinstance(item, asyncio.TimerHandle):
                item.cancel()
                item._run()  # run the submit callback at once
        self._executor.shutdown(wait=True)
