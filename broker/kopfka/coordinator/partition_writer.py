"""PartitionWriter: a coordinator's appends to one partition of its internal topic.

The group coordinator (`__consumer_offsets`) and the transaction coordinator
(`__transaction_state`) keep their state in memory and make every change durable as records
in the partition they lead. Writes issued in the same event-loop turn are coalesced into one
batch — one append, one replication round — which is what keeps frequent offset commits and
transaction state changes cheap. A write completes when the high watermark passes it
(acks=all); its `apply` callback then updates the in-memory state, so readers only ever see
committed state. Transactional writes (TxnOffsetCommit) get batches of their own carrying the
producer id and epoch, like Kafka's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.record_codec import Record, encode_batch
from kopfka.server.delayed_produce import await_replication

log = logging.getLogger(__name__)

MAX_BATCH_BYTES = 512 * 1024

KeyValue = tuple[bytes, bytes | None]
Apply = Callable[[int], None]  # called with the log offset of the write's first record


@dataclass
class _PendingWrite:
    records: list[KeyValue]
    apply: Apply | None
    future: asyncio.Future[int]
    producer: tuple[int, int] | None  # (producer id, epoch) of a transactional write

    @property
    def size(self) -> int:
        return sum(len(k) + len(v or b"") for k, v in self.records)


class PartitionWriter:
    """Batched, replicated appends to one coordinator partition for one leader epoch."""

    def __init__(
        self,
        services: Any,
        tp: tuple[str, int],
        leader_epoch: int,
        *,
        timeout_ms: Callable[[], int],
        map_error: Callable[[ErrorCode, str], KafkaError],
    ) -> None:
        self.services = services
        self.tp = tp
        self.leader_epoch = leader_epoch
        self._timeout_ms = timeout_ms
        self._map_error = map_error
        self._pending: list[_PendingWrite] = []
        self._flush_scheduled = False
        self._closed: KafkaError | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def write(
        self, records: list[KeyValue], apply: Apply | None = None, *, producer: tuple[int, int] | None = None
    ) -> int:
        """Append `records`; returns (and passes `apply`) the offset of the first one once committed."""
        if self._closed is not None:
            raise self._closed
        if not records:
            if apply is not None:
                apply(-1)
            return -1
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        self._pending.append(_PendingWrite(records, apply, fut, producer))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return await fut

    def close(self, error: KafkaError) -> None:
        """Fail pending and future writes (the partition moved or the coordinator stops)."""
        self._closed = error
        pending, self._pending = self._pending, []
        for w in pending:
            if not w.future.done():
                w.future.set_exception(error)
        for t in list(self._tasks):
            t.cancel()

    def _flush(self) -> None:
        self._flush_scheduled = False
        pending, self._pending = self._pending, []
        while pending:
            chunk = [pending.pop(0)]
            size = chunk[0].size
            while pending and pending[0].producer == chunk[0].producer and size + pending[0].size < MAX_BATCH_BYTES:
                w = pending.pop(0)
                size += w.size
                chunk.append(w)
            self._append(chunk)

    def _append(self, chunk: list[_PendingWrite]) -> None:
        ts = time.time_ns() // 1_000_000
        recs = [Record(i, ts, k, v) for i, (k, v) in enumerate(kv for w in chunk for kv in w.records)]
        rm = self.services.replica_manager
        part = rm.partitions.get(self.tp)
        if self._closed is not None:
            return self._fail(chunk, self._closed)
        if part is None or part.leader_epoch != self.leader_epoch:
            return self._fail(chunk, self._map_error(ErrorCode.not_leader_or_follower, "the coordinator moved"))
        producer = chunk[0].producer
        batch = (
            encode_batch(recs)
            if producer is None
            else encode_batch(recs, producer_id=producer[0], producer_epoch=producer[1], transactional=True)
        )
        results = rm.append_records([(self.tp, batch)], -1, internal=True)
        res = results[self.tp]
        if res.error != ErrorCode.none:
            return self._fail(chunk, self._map_error(res.error, res.message or res.error.name))
        firsts = []
        offset = res.base_offset
        for w in chunk:
            firsts.append(offset)
            offset += len(w.records)
        if part.log.high_watermark > res.last_offset:
            self._complete(chunk, firsts)
            return None
        task = asyncio.get_running_loop().create_task(self._await_commit(chunk, firsts, results))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    async def _await_commit(self, chunk: list[_PendingWrite], firsts: list[int], results: Any) -> None:
        try:
            await await_replication(self.services.replica_manager, results, self._timeout_ms())
        except asyncio.CancelledError:
            self._fail(chunk, self._closed or KafkaError(ErrorCode.not_coordinator, "the coordinator moved"))
            raise
        res = results[self.tp]
        if self._closed is not None:
            self._fail(chunk, self._closed)
        elif res.error != ErrorCode.none:
            self._fail(chunk, self._map_error(res.error, res.message or res.error.name))
        else:
            self._complete(chunk, firsts)

    @staticmethod
    def _fail(chunk: list[_PendingWrite], error: KafkaError) -> None:
        for w in chunk:
            if not w.future.done():
                w.future.set_exception(error)

    @staticmethod
    def _complete(chunk: list[_PendingWrite], firsts: list[int]) -> None:
        for w, first in zip(chunk, firsts, strict=True):
            try:
                if w.apply is not None:
                    w.apply(first)
            except Exception as exc:  # a bug in one apply must not strand the other writers
                log.exception("applying a committed coordinator write failed")
                if not w.future.done():
                    w.future.set_exception(exc)
                continue
            if not w.future.done():
                w.future.set_result(first)
