"""How busy a broker is: request handler idle time and network (event loop) idle time.

Kafka publishes `RequestHandlerAvgIdlePercent` (the share of time its I/O threads wait for a
request) and `NetworkProcessorAvgIdlePercent` (the share of time its network threads wait in
select). kopfka runs both jobs on one asyncio event loop, so:

- a request handler is busy while its coroutine actually runs (the steps `WorkTimed` measures,
  as for the request-percentage quota), never while it waits for the ISR or a rebalance;
- the network processor is idle while the loop blocks in its selector's `select()` with nothing
  to do, which `IdleTimedSelector` measures (`kopfka serve` runs its loop on one).

Each is an `IdleClock`: a cumulative idle-nanoseconds counter (so a scraper can take exact rates
between two scrapes) plus Kafka's windowed ratio over the last 30-60 s (metrics.sample.window.ms
30 s x metrics.num.samples 2), which a lifetime mean would hide.
"""

from __future__ import annotations

import selectors
from collections import deque
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

WINDOW_NS = 30_000_000_000  # Kafka's metrics.sample.window.ms default
SAMPLES = 2  # Kafka's metrics.num.samples default


class IdleClock:
    """Idle time of one worker since it started, fed either busy spans (`add_busy`: the rest of
    the time is idle) or idle spans (`add_idle`), never both."""

    __slots__ = ("_clock", "_next_roll", "_recorded", "_records_idle", "_snapshots", "started_ns")

    def __init__(self, *, records_idle: bool, clock: Callable[[], int] = perf_counter_ns) -> None:
        self._clock = clock
        self._records_idle = records_idle
        self._recorded = 0
        self.started_ns = clock()
        self._snapshots: deque[tuple[int, int]] = deque([(self.started_ns, 0)], maxlen=SAMPLES)
        self._next_roll = self.started_ns + WINDOW_NS

    def add_busy(self, ns: int) -> None:
        self._recorded += ns
        now = self._clock()
        if now >= self._next_roll:
            self._roll(now)

    add_idle = add_busy  # the same accounting; `records_idle` says what the spans mean

    def idle_ns(self, now: int | None = None) -> int:
        """Cumulative idle nanoseconds since the start."""
        if self._records_idle:
            return self._recorded
        now = self._clock() if now is None else now
        return max(0, now - self.started_ns - self._recorded)

    def ratio(self) -> float:
        """Idle share of the last one or two sample windows (0..1)."""
        now = self._clock()
        if now >= self._next_roll:
            self._roll(now)
        since, idle_then = self._snapshots[0]
        elapsed = now - since
        if elapsed <= 0:
            return 1.0
        return min(1.0, max(0.0, (self.idle_ns(now) - idle_then) / elapsed))

    def _roll(self, now: int) -> None:
        self._snapshots.append((now, self.idle_ns(now)))
        self._next_roll = now + WINDOW_NS


class IdleTimedSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The platform's default selector, counting the time `select()` blocks as network idle."""

    def __init__(self, idle: IdleClock) -> None:
        super().__init__()
        self.idle = idle

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        start = perf_counter_ns()
        try:
            return super().select(timeout)  # type: ignore[no-any-return]
        finally:
            self.idle.add_idle(perf_counter_ns() - start)


def timed_loop_factory(idle: IdleClock) -> Callable[[], Any]:
    """An `asyncio.Runner(loop_factory=...)` whose loop reports its select() time to `idle`."""
    import asyncio

    return lambda: asyncio.SelectorEventLoop(IdleTimedSelector(idle))
