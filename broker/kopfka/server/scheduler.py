"""KafkaScheduler for asyncio: delayed background work (segment flushes after a roll, delayed
file deletion) run on a worker thread, so an fsync never blocks the event loop.

The storage engine calls it from the loop and from worker threads (log loading, the cleaner), so
every timer is armed on the loop thread. At shutdown, work still waiting for its delay runs at
once (as Kafka's scheduler does for delayed deletes), and work scheduled after shutdown runs
inline rather than being lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

Task = tuple[str, Callable[[], None]]


class KafkaScheduler:
    def __init__(self, threads: int = 2) -> None:
        self.threads = threads
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kafka-scheduler")
        self._retired: list[ThreadPoolExecutor] = []  # pools replaced by a resize, finishing their work
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timers: dict[asyncio.TimerHandle, Task] = {}
        self._closed = False

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
        if loop is None or loop.is_closed() or self._closed:
            self._run(name, fn)
            return
        loop.call_soon_threadsafe(self._arm, (name, fn), max(0, delay_ms) / 1000)

    def _arm(self, task: Task, delay_s: float) -> None:
        """On the loop thread: start the task now or after its delay."""
        if self._closed or delay_s <= 0:
            self._submit(task)
            return
        assert self._loop is not None
        handle: asyncio.TimerHandle | None = None

        def due() -> None:
            if self._timers.pop(handle, None) is not None:  # type: ignore[arg-type]
                self._submit(task)

        handle = self._loop.call_later(delay_s, due)
        self._timers[handle] = task

    def _submit(self, task: Task) -> None:
        try:
            self._executor.submit(self._run, *task)
        except RuntimeError:  # the executor is shut down: run it here rather than lose it
            self._run(*task)

    def resize(self, threads: int) -> None:
        """background.threads changed (Kafka's resizeThreadPool): work submitted from now on runs on
        `threads` workers; work already queued finishes on the old pool, which then ends."""
        if threads == self.threads:
            return
        log.info("Resizing the background thread pool from %d to %d", self.threads, threads)
        old, self.threads = self._executor, threads
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kafka-scheduler")
        old.shutdown(wait=False)
        self._retired.append(old)

    async def shutdown(self) -> None:
        """Run what is still waiting for its delay now (delayed deletes included), then stop the
        threads once they are done. Called on the loop thread."""
        self._closed = True
        for handle, task in list(self._timers.items()):
            handle.cancel()
            self._submit(task)
        self._timers.clear()
        await asyncio.to_thread(self._executor.shutdown, True)
        for old in self._retired:
            await asyncio.to_thread(old.shutdown, True)
