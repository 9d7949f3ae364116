"""TransactionCoordinator: the transactional-id state machine behind the transaction APIs.

InitProducerId (epoch bump, fencing the previous producer, aborting its unfinished
transaction), AddPartitionsToTxn / AddOffsetsToTxn (and KIP-890 verification by partition
leaders), EndTxn (PrepareCommit/PrepareAbort, then markers, then CompleteCommit/CompleteAbort),
the abort of transactions open longer than their timeout and the expiry of idle transactional
ids, and the admin views (DescribeTransactions, ListTransactions). Error codes follow Kafka's
TransactionCoordinator. It is a metadata publisher: it follows the leadership of
`__transaction_state` partitions through the TransactionStateManager.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from kopfka.controller.quorum_controller import CreateTopicSpec
from kopfka.coordinator.internal_topic import coordinator_endpoint, ensure_topic
from kopfka.coordinator.transaction.markers import TransactionMarkerChannelManager
from kopfka.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    epoch_exhausted,
)
from kopfka.coordinator.transaction.state_manager import TXN_TOPIC, TransactionStateManager, now_ms
from kopfka.metadata.image import MetadataDelta, MetadataImage
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.inter_broker import InterBrokerClient

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def _err(code: ErrorCode, message: str = "") -> KafkaError:
    return KafkaError(code, message or code.name)


class TransactionCoordinator:
    name = "TransactionCoordinator"

    def __init__(self, services: Any) -> None:
        self.services = services
        self.node_id: int = services.node_id
        self.image = MetadataImage()
        self.state = TransactionStateManager(services, self.config)
        self.state.on_loaded_prepared = self._resume_loaded
        self.markers = TransactionMarkerChannelManager(self)
        self.inter_broker = services.inter_broker or InterBrokerClient(services)
        self._create_lock = asyncio.Lock()
        self._timers: list[asyncio.Task[None]] = []

    def config(self, key: str) -> Any:
        return self.services.config[key]

    # --- metadata publisher ------------------------------------------------------------------
    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        self.state.image = image
        changes = delta.topic_changes
        if any(t.name == TXN_TOPIC for t in changes.deleted.values()):
            for pid in list(self.state.shards):
                self.markers.remove_for_partition(pid)
            self.state.close_all()
        topic = image.topics_by_name.get(TXN_TOPIC)
        if topic is not None:
            for pid in sorted(changes.changed_partitions.get(topic.topic_id, ())):
                reg = topic.partitions.get(pid)
                if reg is None:
                    continue
                current = self.state.shards.get(pid)
                if current is not None and (
                    reg.leader != self.node_id or reg.leader_epoch != current.coordinator_epoch
                ):
                    self.markers.remove_for_partition(pid)
                self.state.on_partition_change(pid, reg.leader, reg.leader_epoch)
        if self.state.shards and not self._timers:
            self._start_timers()

    def _start_timers(self) -> None:
        loop = asyncio.get_running_loop()
        self._timers = [
            loop.create_task(
                self._every(
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms", self.abort_timed_out_transactions
                )
            ),
            loop.create_task(
                self._every(
                    "transaction.remove.expired.transaction.cleanup.interval.ms", self.remove_expired_transactional_ids
                )
            ),
        ]

    async def _every(self, key: str, fn: Any) -> None:
        while True:
            await asyncio.sleep(int(self.config(key)) / 1000)
            try:
                await fn()
            except Exception:
                log.exception("%s failed", getattr(fn, "__name__", fn))

    def shutdown(self) -> None:
        for t in self._timers:
            t.cancel()
        self.markers.shutdown()
        self.state.shutdown()

    # --- FindCoordinator -------------------------------------------------------------------------
    async def find_coordinator(self, key: str, listener: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": key,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        try:
            if not key:
                raise _err(ErrorCode.invalid_request, "empty transactional id")
            topic = self.image.topics_by_name.get(TXN_TOPIC)
            if topic is None:
                await self.ensure_topic()
                raise _err(ErrorCode.coordinator_not_available, "creating the transaction state topic")
            out.update(coordinator_endpoint(self.image, topic, self.state.partition_for(key), listener))
        except KafkaError as exc:
            out.update(error_code=exc.code, error_message=exc.message)
        return out

    async def ensure_topic(self) -> None:
        spec = CreateTopicSpec(
            TXN_TOPIC,
            int(self.config("transaction.state.log.num.partitions")),
            int(self.config("transaction.state.log.replication.factor")),
            None,
            {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "unclean.leader.election.enable": "false",
                "min.insync.replicas": str(self.config("transaction.state.log.min.isr")),
                "segment.bytes": str(self.config("transaction.state.log.segment.bytes")),
            },
        )
        await ensure_topic(
            self.services.controller, self._create_lock, lambda: TXN_TOPIC in self.image.topics_by_name, spec
        )

    # --- InitProducerId --------------------------------------------------------------------------
    async def init_producer_id(
        self, transactional_id: str | None, timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> tuple[int, int]:
        """(producer id, epoch) for the producer; raises KafkaError with Kafka's answer."""
        if transactional_id is None:
            return await self.services.producer_ids.generate(), 0
        if not transactional_id:
            raise _err(ErrorCode.invalid_request, "the transactional id is empty")
        if not 0 < timeout_ms <= int(self.config("transaction.max.timeout.ms")):
            raise _err(
                ErrorCode.invalid_transaction_timeout,
                f"transaction.timeout.ms {timeout_ms} exceeds transaction.max.timeout.ms "
                f"{self.config('transaction.max.timeout.ms')}"
                if timeout_ms > 0
                else f"transaction.timeout.ms {timeout_ms} must be positive",
            )
        shard, md = self.state.get(transactional_id)
        if md is None:
            pid = await self.services.producer_ids.generate()
            shard, md = self.state.get(transactional_id)
            if md is None:
                md = TransactionMetadata(
                    transactional_id, pid, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY, last_update_ms=now_ms()
                )
                shard.txns[transactional_id] = md
        new_pid: int | None = None
        while True:
            coordinator_epoch = shard.coordinator_epoch
            transit = self._prepare_init(md, timeout_ms, expected, new_pid)
            if transit is not None:
                break
            new_pid = await self.services.producer_ids.generate()  # the epoch is exhausted: rotate
            shard, md2 = self.state.get(transactional_id)
            if md2 is not md:
                raise _err(ErrorCode.concurrent_transactions, "the transactional id changed meanwhile")
        if transit.state == TxnState.PREPARE_EPOCH_FENCE:
            # abort the fenced producer's open transaction; the caller retries and gets the next epoch
            await self._end_transaction(
                transactional_id,
                transit.producer_id,
                transit.producer_epoch,
                False,
                from_client=False,
                client_tv=self.state.transaction_version(),
            )
            raise _err(ErrorCode.concurrent_transactions, "aborting the previous producer's transaction")
        await self.state.append(transactional_id, coordinator_epoch, transit)
        log.info(
            "Initialized transactional id %s with producer id %d and epoch %d on %s-%d",
            transactional_id,
            transit.producer_id,
            transit.producer_epoch,
            TXN_TOPIC,
            self.state.partition_for(transactional_id),
        )
        return transit.producer_id, transit.producer_epoch

    def _prepare_init(
        self, md: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None, new_pid: int | None
    ) -> TxnTransit | None:
        """The InitProducerId transition; None when a new producer id is needed first."""
        if md.pending:
            raise _err(ErrorCode.concurrent_transactions, f"{md.transactional_id} has a pending state change")
        if expected is not None and not (
            md.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == md.producer_id
            or (expected[0] == md.prev_producer_id and epoch_exhausted(expected[1]))
        ):
            raise _err(ErrorCode.producer_fenced, f"producer id {expected[0]} is not the current one")
        if md.state in (TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT):
            raise _err(ErrorCode.concurrent_transactions, f"{md.transactional_id} is completing a transaction")
        if md.state in (TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT, TxnState.EMPTY):
            if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                if new_pid is None:
                    return None
                return md.prepare_producer_id_rotation(new_pid, timeout_ms, now_ms(), expected is not None)
            transit = md.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now_ms()
            )
            if transit is None:
                raise _err(ErrorCode.producer_fenced, f"epoch {expected[1] if expected else -1} is fenced")
            return transit
        if md.state == TxnState.ONGOING:
            return md.prepare_fence_producer_epoch()
        raise _err(ErrorCode.unknown_server_error, f"{md.transactional_id} is in state {md.state.name}")

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------
    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        client_tv: int = 0,
    ) -> None:
        """Add partitions to the ongoing (or a new) transaction; raises KafkaError for all of them."""
        if not transactional_id:
            raise _err(ErrorCode.invalid_request, "the transactional id is empty")
        parts = set(partitions)
        shard, md = self.state.get(transactional_id)
        if md is None:
            raise _err(ErrorCode.invalid_producer_id_mapping, f"unknown transactional id {transactional_id}")
        if md.producer_id != producer_id:
            raise _err(ErrorCode.invalid_producer_id_mapping, f"producer id {producer_id} is not the current one")
        if md.producer_epoch != producer_epoch:
            raise _err(ErrorCode.producer_fenced, f"epoch {producer_epoch} is not the current {md.producer_epoch}")
        if md.pending or md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise _err(ErrorCode.concurrent_transactions, f"{transactional_id} is completing a transaction")
        if md.state == TxnState.ONGOING and parts <= md.partitions:
            return
        transit = md.prepare_add_partitions(parts, now_ms(), client_tv)
        await self.state.append(transactional_id, shard.coordinator_epoch, transit)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890: are these partitions part of the producer's ongoing transaction?"""
        parts = list(partitions)
        if not transactional_id:
            return dict.fromkeys(parts, ErrorCode.invalid_request)
        try:
            _shard, md = self.state.get(transactional_id)
            if md is None or md.producer_id != producer_id:
                raise _err(ErrorCode.invalid_producer_id_mapping)
            if md.producer_epoch != producer_epoch:
                raise _err(ErrorCode.producer_fenced)
            if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                raise _err(ErrorCode.concurrent_transactions)
        except KafkaError as exc:
            return dict.fromkeys(parts, exc.code)
        return {tp: ErrorCode.none if tp in md.partitions else ErrorCode.transaction_abortable for tp in parts}

    # --- EndTxn ------------------------------------------------------------------------------------------
    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, client_tv: int = 0
    ) -> tuple[int, int]:
        """Commit or abort; returns the (producer id, epoch) the producer continues with."""
        return await self._end_transaction(
            transactional_id, producer_id, producer_epoch, commit, from_client=True, client_tv=client_tv
        )

    async def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        from_client: bool,
        client_tv: int,
    ) -> tuple[int, int]:
        if not transactional_id:
            raise _err(ErrorCode.invalid_request, "the transactional id is empty")
        shard, md = self.state.get(transactional_id)
        if md is None:
            raise _err(ErrorCode.invalid_producer_id_mapping, f"unknown transactional id {transactional_id}")
        coordinator_epoch = shard.coordinator_epoch
        transit, is_epoch_fence, done = await self._prepare_end(
            md, producer_id, producer_epoch, commit, from_client, client_tv
        )
        if done:
            return md.producer_id, md.producer_epoch
        assert transit is not None
        try:
            await self.state.append(transactional_id, coordinator_epoch, transit)
        except KafkaError:
            if is_epoch_fence:
                try:
                    s2, md2 = self.state.get(transactional_id)
                    if md2 is md and s2.coordinator_epoch == coordinator_epoch:
                        md.has_failed_epoch_fence = True
                except KafkaError:
                    pass
            raise
        shard, cur = self.state.get(transactional_id)
        if cur is not md or shard.coordinator_epoch != coordinator_epoch:
            raise _err(ErrorCode.not_coordinator, "the coordinator moved")
        if md.producer_id != producer_id:
            raise _err(ErrorCode.invalid_producer_id_mapping)
        if md.producer_epoch not in (producer_epoch, producer_epoch + 1):
            raise _err(ErrorCode.producer_fenced)
        if md.pending:
            raise _err(ErrorCode.concurrent_transactions)
        want = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if md.state != want:
            raise _err(ErrorCode.invalid_txn_state, f"{transactional_id} is {md.state.wire_name}")
        complete = md.prepare_complete(now_ms())
        self.markers.add_markers(coordinator_epoch, commit, md, complete)
        return complete.producer_id, complete.producer_epoch  # after an exhausted epoch: the next producer id

    async def _prepare_end(
        self,
        md: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        client_tv: int,
    ) -> tuple[TxnTransit | None, bool, bool]:
        """(transition, is an epoch fence, already done) for EndTxn; raises KafkaError.

        Kafka's two tables, chosen by the client's transaction version (EndTxn v5 is version 2):
        version 1 accepts the same epoch and answers a repeated end as done; version 2 bumps the
        epoch at every end, so a retry carries the epoch before the bump (or, after an exhausted
        epoch, the previous producer id), and an abort of a transaction that added nothing
        (Empty, CompleteCommit, CompleteAbort) is allowed: it bumps the epoch."""
        is_fence = md.pending_state == TxnState.PREPARE_EPOCH_FENCE
        tv2 = client_tv >= 2
        retry_on_overflow = (
            tv2
            and not is_fence
            and md.prev_producer_id == producer_id
            and producer_epoch == SHORT_MAX - 1
            and md.producer_epoch == 0
        )
        retry_on_bump = tv2 and not is_fence and md.producer_epoch == producer_epoch + 1
        is_retry = retry_on_bump or retry_on_overflow
        if not tv2 or is_fence:
            valid_epoch = (
                not from_client or producer_epoch == md.producer_epoch
            ) and producer_epoch >= md.producer_epoch
        elif md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        elif md.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid_epoch = is_retry or producer_epoch == md.producer_epoch
        else:
            valid_epoch = producer_epoch == md.producer_epoch
        if md.producer_id != producer_id and not retry_on_overflow:
            raise _err(ErrorCode.invalid_producer_id_mapping, f"producer id {producer_id} is not the current one")
        if not valid_epoch:
            raise _err(ErrorCode.producer_fenced, f"epoch {producer_epoch} is fenced (current {md.producer_epoch})")
        if md.pending and not is_fence:
            raise _err(ErrorCode.concurrent_transactions, f"{md.transactional_id} has a pending state change")
        invalid = _err(
            ErrorCode.invalid_txn_state,
            f"cannot {'commit' if commit else 'abort'} {md.transactional_id} in state {md.state.wire_name}",
        )
        state = md.state
        if state == TxnState.ONGOING:
            return (
                await self._prepare_completion(md, commit, producer_epoch, client_tv, is_fence, False),
                is_fence,
                False,
            )
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            if state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
                raise _err(ErrorCode.concurrent_transactions, f"{md.transactional_id} is already completing")
            raise invalid
        if not tv2:  # version 1: a repeated end is answered as done, anything else is refused
            if state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
                return None, False, True
            raise invalid
        if state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            if is_retry:
                return None, False, True
            if commit:
                raise invalid
        elif commit or is_retry:
            raise invalid
        if state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):  # an empty abort
            return await self._prepare_completion(md, False, producer_epoch, client_tv, False, True), False, False
        raise invalid

    async def _prepare_completion(
        self,
        md: TransactionMetadata,
        commit: bool,
        producer_epoch: int,
        client_tv: int,
        is_fence: bool,
        no_partition_added: bool,
    ) -> TxnTransit:
        next_state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        next_pid = NO_PRODUCER_ID
        if client_tv >= 2 and not is_fence and md.epoch_exhausted:  # the bump would overflow: a new producer id
            next_pid = await self.services.producer_ids.generate()
            if md.pending:
                raise _err(ErrorCode.concurrent_transactions)
        if is_fence:
            md.pending_state = None
            md.producer_epoch = producer_epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
        return md.prepare_abort_or_commit(next_state, client_tv, next_pid, now_ms(), no_partition_added)

    def _resume_loaded(self, coordinator_epoch: int, md: TransactionMetadata, complete: TxnTransit) -> None:
        """A loaded transaction in PrepareCommit/PrepareAbort: finish writing its markers."""
        log.info("Resuming the markers of %s (%s) after loading", md.transactional_id, md.state.wire_name)
        self.markers.add_markers(coordinator_epoch, md.state == TxnState.PREPARE_COMMIT, md, complete)

    def on_transaction_completed(self, md: TransactionMetadata) -> None:
        log.debug("Completed the transaction of %s (%s)", md.transactional_id, md.state.wire_name)

    # --- timeouts and expiry -----------------------------------------------------------------------------
    async def abort_timed_out_transactions(self) -> int:
        """Abort every transaction open longer than its timeout (fencing its producer)."""
        now = now_ms()
        victims = [
            md
            for md in self.state.all_transactions()
            if not md.pending and md.state == TxnState.ONGOING and md.start_ms + md.timeout_ms < now
        ]
        for md in victims:
            tid = md.transactional_id
            try:
                _shard, cur = self.state.get(tid)
                if cur is not md or md.pending or md.state != TxnState.ONGOING:
                    continue
                transit = md.prepare_fence_producer_epoch()
                log.info(
                    "Aborting the transaction of %s (producer id %d), open for %d ms > timeout %d ms",
                    tid,
                    md.producer_id,
                    now - md.start_ms,
                    md.timeout_ms,
                )
                await self._end_transaction(
                    tid,
                    transit.producer_id,
                    transit.producer_epoch,
                    False,
                    from_client=False,
                    client_tv=self.state.transaction_version(),
                )
            except KafkaError as exc:
                log.info("Rolling back the timed-out transaction of %s failed: %s", tid, exc.code.name)
        return len(victims)

    async def remove_expired_transactional_ids(self) -> int:
        """Tombstone transactional ids idle for transactional.id.expiration.ms."""
        expiration = int(self.config("transactional.id.expiration.ms"))
        now = now_ms()
        removed = 0
        for shard in list(self.state.shards.values()):
            expired = []
            for md in list(shard.txns.values()):
                if not md.pending and md.state.expiration_allowed and md.last_update_ms <= now - expiration:
                    expired.append((md, md.prepare_dead()))
            if expired:
                await self.state.write_tombstones(shard, expired)
                removed += len(expired)
                log.info("Expired %d transactional ids in %s-%d", len(expired), TXN_TOPIC, shard.partition)
        return removed

    # --- admin ----------------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "transactional_id": transactional_id,
            "error_code": ErrorCode.none,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        try:
            if not transactional_id:
                raise _err(ErrorCode.invalid_request)
            _shard, md = self.state.get(transactional_id)
            if md is None or md.state == TxnState.DEAD:
                raise _err(ErrorCode.transactional_id_not_found)
        except KafkaError as exc:
            out["error_code"] = exc.code
            return out
        topics: dict[str, list[int]] = {}
        for t, p in sorted(md.partitions):
            topics.setdefault(t, []).append(p)
        out.update(
            transaction_state=md.state.wire_name,
            transaction_timeout_ms=md.timeout_ms,
            transaction_start_time_ms=md.start_ms,
            producer_id=md.producer_id,
            producer_epoch=md.producer_epoch,
            topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
        )
        return out

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
        pattern: str | None = None,
    ) -> dict[str, Any]:
        import re

        if self.state.loading():
            return {
                "error_code": ErrorCode.coordinator_load_in_progress,
                "unknown_state_filters": [],
                "transaction_states": [],
            }
        state_names = list(states)
        wanted: set[TxnState] = set()
        unknown = []
        for name in state_names:
            s = TxnState.from_wire_name(name)
            if s is None:
                unknown.append(name)
            else:
                wanted.add(s)
        pids = set(producer_ids)
        regex = re.compile(pattern) if pattern else None
        now = now_ms()
        out = []
        for md in self.state.all_transactions():
            if md.state == TxnState.DEAD:
                continue
            if pids and md.producer_id not in pids:
                continue
            if state_names and md.state not in wanted:
                continue
            if duration_ms >= 0 and now - md.start_ms <= duration_ms:
                continue
            if regex is not None and not regex.fullmatch(md.transactional_id):
                continue
            out.append(
                {
                    "transactional_id": md.transactional_id,
                    "producer_id": md.producer_id,
                    "transaction_state": md.state.wire_name,
                }
            )
        return {
            "error_code": ErrorCode.none,
            "unknown_state_filters": unknown,
            "transaction_states": sorted(out, key=lambda t: t["transactional_id"]),
        }
