"""The acks=all purgatory: a produce is answered once the ISR holds its batches.

After the leader appended, each partition's response waits until the high watermark (the
smallest LEO of the ISR) passes the batch's last offset. It then succeeds, or reports
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas meanwhile
(the data is written but not as durable as asked); losing leadership answers
NOT_LEADER_OR_FOLLOWER and the request timeout REQUEST_TIMED_OUT — all retriable, and an
idempotent producer's retry is deduplicated by the leader. A partition whose ISR is only the
leader has its HW at the LEO right after the append, so it never waits here.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kopfka.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kopfka.server.partition import Partition
    from kopfka.server.replica_manager import ProduceResult, ReplicaManager, TopicPartition

MESSAGES = {
    ErrorCode.not_enough_replicas_after_append: "Messages are written to the log, but to fewer in-sync replicas "
    "than required.",
    ErrorCode.not_leader_or_follower: "Leadership moved before the write was replicated.",
    ErrorCode.request_timed_out: "The write was not replicated to the in-sync replicas within the timeout.",
}


Waits = list[tuple["TopicPartition", "Partition", asyncio.Future[ErrorCode]]]


def register_waits(rm: ReplicaManager, results: dict[TopicPartition, ProduceResult]) -> Waits:
    """Enter every successful append that is not yet committed into its partition's purgatory.

    Synchronous, so the caller can let the connection move on to its next request right after
    (see `handle_produce`); appends already committed or failed are settled in `results` here."""
    loop = asyncio.get_running_loop()
    waits: Waits = []
    for tp, r in results.items():
        if r.error != ErrorCode.none:
            continue
        part = rm.partitions.get(tp)
        status = part.produce_status(r.last_offset + 1) if part is not None else ErrorCode.not_leader_or_follower
        if status is None and part is not None:
            fut: asyncio.Future[ErrorCode] = loop.create_future()
            part.add_produce_waiter(r.last_offset + 1, fut)
            waits.append((tp, part, fut))
        elif status is not None and status != ErrorCode.none:
            _fail(results, tp, status)
    return waits


async def complete_waits(waits: Waits, results: dict[TopicPartition, ProduceResult], timeout_ms: int) -> None:
    """Wait (at most timeout_ms) for the registered appends to commit; rewrites `results`."""
    try:
        # awaited one by one in this task (not through asyncio.wait, whose own waiter adds a
        # loop step between the HW move and the answer); the timeout cancels the pending ones
        async with asyncio.timeout(max(timeout_ms, 0) / 1000):
            for _, _, fut in waits:
                await fut
    except TimeoutError:
        pass
    finally:  # also on cancellation (the connection closed): leave nothing behind in the purgatory
        for tp, part, fut in waits:
            if fut.done() and not fut.cancelled():
                code = fut.result()
            else:
                part.remove_produce_waiter(fut)
                fut.cancel()
                code = ErrorCode.request_timed_out
            if code != ErrorCode.none:
                _fail(results, tp, code)


async def await_replication(rm: ReplicaManager, results: dict[TopicPartition, ProduceResult], timeout_ms: int) -> None:
    """Wait (at most timeout_ms) until every successful append is committed; rewrites `results`."""
    await complete_waits(register_waits(rm, results), results, timeout_ms)


def _fail(results: dict[TopicPartition, ProduceResult], tp: TopicPartition, code: ErrorCode) -> None:
    r = results[tp]
    r.error, r.message = code, MESSAGES.get(code, code.name)
    r.base_offset = r.log_append_time_ms = -1
