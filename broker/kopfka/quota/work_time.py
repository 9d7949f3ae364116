"""The time a request actually works, for the request-percentage quota (KIP-124).

Kafka charges a request the time its handler thread spends on it (and its network-thread
time), not the time it sits in purgatory waiting for the ISR, a rebalance or the controller: the
handler thread is free meanwhile. On asyncio the handler is a coroutine, so the equivalent is the
time of its own steps on the event loop; the time it is suspended, other requests run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from time import perf_counter_ns
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class WorkTimed(Generic[T]):
    """`await WorkTimed(aw)` is `await aw`, with `ns` the time spent inside its steps."""

    __slots__ = ("awaitable", "ns")

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self.awaitable = awaitable
        self.ns = 0

    def __await__(self) -> Generator[Any, Any, T]:
        coro: Generator[Any, Any, T] = self.awaitable.__await__()  # type: ignore[assignment]
        value: Any = None
        error: BaseException | None = None
        while True:
            start = perf_counter_ns()
            try:
                yielded = coro.throw(error) if error is not None else coro.send(value)
            except StopIteration as stop:
                self.ns += perf_counter_ns() - start
                return stop.value  # type: ignore[no-any-return]
            except BaseException:
                self.ns += perf_counter_ns() - start
                raise
            self.ns += perf_counter_ns() - start
            try:
                value, error = (yield yielded), None  # suspended: the event loop runs others
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation and the like go to the coroutine, as with await
                value, error = None, exc
