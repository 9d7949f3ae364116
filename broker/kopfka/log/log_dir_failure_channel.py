"""LogDirFailureChannel (seed 001): how any code doing log I/O reports a failed log dir.

`maybe_add_offline_log_dir` may be called from any thread; each dir is queued once, so the
queue never holds more than the number of dirs. LogManager's failure-handler task drains it
and takes the dir offline (its partitions answer KAFKA_STORAGE_ERROR) until restart.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: set[Path] = set()
        self._pending: list[Path] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Path] | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach the event loop the handler runs on; dirs reported before are queued now."""
        self._loop = loop
        self._queue = asyncio.Queue()
        with self._lock:
            pending, self._pending = self._pending, []
        for d in pending:
            self._queue.put_nowait(d)

    def has_offline_log_dir(self, log_dir: Path) -> bool:
        with self._lock:
            return log_dir in self._offline

    @property
    def offline_dirs(self) -> set[Path]:
        with self._lock:
            return set(self._offline)

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, exc: BaseException | None = None) -> None:
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline.add(log_dir)
        log.error("%s (log dir %s goes offline)%s", message, log_dir, f": {exc}" if exc else "")
        loop, queue = self._loop, self._queue
        if loop is None or queue is None:
            with self._lock:
                self._pending.append(log_dir)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            queue.put_nowait(log_dir)
        else:
            loop.call_soon_threadsafe(queue.put_nowait, log_dir)

    async def take_next_offline_log_dir(self) -> Path:
        assert self._queue is not None, "bind() first"
        return await self._queue.get()
