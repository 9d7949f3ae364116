"""Partition: one replica of a topic partition on this broker, and its leadership state."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kopfka.storage.unified_log import UnifiedLog


@dataclass
class Partition:
    topic: str
    partition: int
    topic_id: str
    log: UnifiedLog
    node_id: int
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.append(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def notify(self) -> None:
        """Wake delayed fetches: new data, a moved high watermark, or a leadership change."""
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def maybe_advance_high_watermark(self) -> None:
        """HW = the smallest LEO in the ISR; with a single in-sync replica that is our LEO."""
        if self.is_leader and self.isr == (self.node_id,):
            self.log.maybe_increment_high_watermark(self.log.log_end_offset)
