"""TransactionMarkerChannelManager: sends the markers of completing transactions, until written.

After PrepareCommit/PrepareAbort is committed, the coordinator answers the producer and hands
the transaction here: its partitions are grouped by leader and queued per broker; one sender
task per broker drains its queue into WriteTxnMarkers requests (markers for this broker's own
partitions are written in-process, without a round trip). A partition leaves the transaction
once its marker is written; retriable errors (leader moved, not enough replicas, timeout,
unknown leader) put it back in the queue, so markers are retried until written. When no
partition is left, CompleteCommit/CompleteAbort is written and the transactional id may start
its next transaction. A coordinator that lost its partition (or whose epoch was fenced by a
newer coordinator) stops sending: the new coordinator resends from the loaded log.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kopfka.coordinator.transaction.metadata import TransactionMetadata, TxnState, TxnTransit
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.txn_markers import TxnMarker, write_txn_markers

if TYPE_CHECKING:
    from kopfka.coordinator.transaction.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
RETRY_BACKOFF_S = 0.1
UNKNOWN_BROKER = -1

RETRIABLE = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.broker_not_available,
    }
)
FENCED = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})
SKIPPED = frozenset({ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version})


@dataclass
class PendingCompleteTxn:
    transactional_id: str
    coordinator_epoch: int
    md: TransactionMetadata
    transit: TxnTransit  # the CompleteCommit/CompleteAbort transition to write once all markers are


@dataclass
class _Entry:
    pending: PendingCompleteTxn
    marker: TxnMarker


class TransactionMarkerChannelManager:
    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coord = coordinator
        self.services = coordinator.services
        self.node_id: int = coordinator.services.node_id
        self.pending: dict[str, PendingCompleteTxn] = {}
        self._queues: dict[int, list[_Entry]] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    # --- entry points ------------------------------------------------------------------------------
    def add_markers(self, coordinator_epoch: int, commit: bool, md: TransactionMetadata, transit: TxnTransit) -> None:
        """Start writing the markers of `md` (in PrepareCommit/PrepareAbort, pending `transit`)."""
        p = PendingCompleteTxn(md.transactional_id, coordinator_epoch, md, transit)
        prev = self.pending.get(md.transactional_id)
        if prev is not None:
            log.info("Replacing the pending completion of %s", md.transactional_id)
        self.pending[md.transactional_id] = p
        self._enqueue(p, md.producer_id, md.producer_epoch, commit, set(md.partitions))
        self.maybe_write_completion(md.transactional_id)

    def remove_for_partition(self, txn_partition: int) -> None:
        """The coordinator lost (or is reloading) a `__transaction_state` partition."""
        for tid in list(self.pending):
            if self.coord.state.partition_for(tid) == txn_partition:
                del self.pending[tid]
        for q in self._queues.values():
            q[:] = [e for e in q if self.coord.state.partition_for(e.pending.transactional_id) != txn_partition]

    # --- queueing ---------------------------------------------------------------------------------
    def _enqueue(
        self,
        p: PendingCompleteTxn,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        partitions: set[TopicPartition],
    ) -> None:
        image = self.services.metadata.image
        by_broker: dict[int, list[TopicPartition]] = {}
        gone: list[TopicPartition] = []
        for tp in sorted(partitions):
            topic = image.topics_by_name.get(tp[0])
            reg = topic.partitions.get(tp[1]) if topic is not None else None
            if reg is None:
                gone.append(tp)
                continue
            broker = image.brokers.get(reg.leader)
            dest = reg.leader if broker is not None and not broker.fenced and reg.leader >= 0 else UNKNOWN_BROKER
            by_broker.setdefault(dest, []).append(tp)
        if gone:
            log.info("Skipping markers of %s for deleted partitions %s", p.transactional_id, gone)
            if self._still_current(p):
                for tp in gone:
                    p.md.remove_partition(tp)
        for dest, tps in by_broker.items():
            marker = TxnMarker(
                producer_id, producer_epoch, p.coordinator_epoch, commit, tuple(tps), p.transit.client_tv
            )
            self._queues.setdefault(dest, []).append(_Entry(p, marker))
            self._wake(dest)

    def _wake(self, dest: int) -> None:
        if self._closed:
            return
        ev = self._wakeups.get(dest)
        if ev is None:
            ev = self._wakeups[dest] = asyncio.Event()
            self._senders[dest] = self._spawn(self._send_loop(dest, ev))
        ev.set()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _still_current(self, p: PendingCompleteTxn) -> bool:
        """Is this pending completion still ours to drive (same coordinator epoch, same txn)?"""
        try:
            shard, md = self.coord.state.get(p.transactional_id)
        except KafkaError:
            return False
        return (
            md is p.md and shard.coordinator_epoch == p.coordinator_epoch and self.pending.get(p.transactional_id) is p
        )

    # --- sending ------------------------------------------------------------------------------------
    async def _send_loop(self, dest: int, ev: asyncio.Event) -> None:
        while not self._closed:
            await ev.wait()
            ev.clear()
            entries = self._queues.pop(dest, [])
            entries = [e for e in entries if self._still_current(e.pending)]
            if not entries:
                continue
            if dest == UNKNOWN_BROKER:
                await asyncio.sleep(RETRY_BACKOFF_S)  # wait for a leader, then re-resolve
                for e in entries:
                    self._requeue(e, set(e.marker.partitions))
                continue
            try:
                results = await self._send(dest, [e.marker for e in entries])
            except KafkaError as exc:
                log.info("WriteTxnMarkers to broker %d failed (%s); retrying", dest, exc.code.name)
                await asyncio.sleep(RETRY_BACKOFF_S)
                for e in entries:
                    self._requeue(e, set(e.marker.partitions))
                continue
            except Exception:
                log.exception("WriteTxnMarkers to broker %d failed; retrying", dest)
                await asyncio.sleep(RETRY_BACKOFF_S)
                for e in entries:
                    self._requeue(e, set(e.marker.partitions))
                continue
            retried = False
            for e, errors in zip(entries, results, strict=True):
                retried |= self._on_result(e, errors)
            if retried:
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _send(self, dest: int, markers: list[TxnMarker]) -> list[dict[TopicPartition, ErrorCode]]:
        if dest == self.node_id:
            return await write_txn_markers(self.services, markers)
        body = {
            "markers": [
                {
                    "producer_id": m.producer_id,
                    "producer_epoch": m.producer_epoch,
                    "transaction_result": m.commit,
                    "coordinator_epoch": m.coordinator_epoch,
                    "transaction_version": m.transaction_version,
                    "topics": [
                        {"name": t, "partition_indexes": [p for tt, p in m.partitions if tt == t]}
                        for t in dict.fromkeys(t for t, _ in m.partitions)
                    ],
                }
                for m in markers
            ]
        }
        timeout = int(self.services.config["request.timeout.ms"]) / 1000 + 5
        resp = await self.coord.inter_broker.request(dest, 27, 2, body, timeout=timeout)
        out: list[dict[TopicPartition, ErrorCode]] = []
        by_pid = {int(r.producer_id): r for r in resp.markers}
        for m in markers:
            r = by_pid.get(m.producer_id)
            errors: dict[TopicPartition, ErrorCode] = dict.fromkeys(m.partitions, ErrorCode.network_exception)
            if r is not None:
                for t in r.topics:
                    for p in t.partitions:
                        errors[(t.name, int(p.partition_index))] = ErrorCode(int(p.error_code))
            out.append(errors)
        return out

    def _requeue(self, e: _Entry, partitions: set[TopicPartition]) -> None:
        if self._still_current(e.pending):
            m = e.marker
            self._enqueue(e.pending, m.producer_id, m.producer_epoch, m.commit, partitions)

    def _on_result(self, e: _Entry, errors: dict[TopicPartition, ErrorCode]) -> bool:
        """Apply one marker's per-partition results; True if some partitions are retried."""
        p = e.pending
        if not self._still_current(p):
            return False
        md = p.md
        retry: set[TopicPartition] = set()
        for tp, code in errors.items():
            if code == ErrorCode.none or code in SKIPPED:
                if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                    md.remove_partition(tp)
            elif code in FENCED:
                log.info(
                    "Markers of %s were fenced (%s): a newer coordinator or producer epoch took over",
                    p.transactional_id,
                    code.name,
                )
                self.pending.pop(p.transactional_id, None)
                return False
            else:
                if code not in RETRIABLE:
                    log.error(
                        "Unexpected %s writing a marker of %s to %s-%d; retrying", code.name, p.transactional_id, *tp
                    )
                retry.add(tp)
        if retry:
            self._requeue(e, retry)
            return True
        self.maybe_write_completion(p.transactional_id)
        return False

    # --- completion ----------------------------------------------------------------------------------
    def maybe_write_completion(self, transactional_id: str) -> None:
        p = self.pending.get(transactional_id)
        if p is None or p.md.partitions:
            return
        del self.pending[transactional_id]
        self._spawn(self._write_completion(p))

    async def _write_completion(self, p: PendingCompleteTxn) -> None:
        while not self._closed:
            try:
                shard, md = self.coord.state.get(p.transactional_id)
                if md is not p.md or shard.coordinator_epoch != p.coordinator_epoch:
                    return
                await self.coord.state.append(
                    p.transactional_id,
                    p.coordinator_epoch,
                    p.transit,
                    retry_on=frozenset({ErrorCode.coordinator_not_available}),
                )
                self.coord.on_transaction_completed(p.md)
                return
            except KafkaError as exc:
                if exc.code != ErrorCode.coordinator_not_available:
                    log.info("Not completing %s: %s", p.transactional_id, exc.code.name)
                    return
                await asyncio.sleep(RETRY_BACKOFF_S)

    def shutdown(self) -> None:
        self._closed = True
        for t in list(self._tasks):
            t.cancel()
        self.pending.clear()
        self._queues.clear()
