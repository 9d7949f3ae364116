"""TransactionStateManager: the `__transaction_state` partitions this broker leads, in memory.

The coordinator of a transactional id is the leader of partition
abs(javaHashCode(id)) % transaction.state.log.num.partitions. On becoming leader the partition
is replayed into a `TxnShard` (requests get COORDINATOR_LOAD_IN_PROGRESS meanwhile); its
coordinator epoch is the partition's leader epoch, which is stamped into every marker so a
deposed coordinator's late markers are refused. Losing leadership drops the shard
(NOT_COORDINATOR afterwards). State changes are written through a PartitionWriter and only
applied to the cached metadata once committed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kopfka.coordinator.internal_topic import replay_partition
from kopfka.coordinator.keys import partition_for
from kopfka.coordinator.partition_writer import PartitionWriter
from kopfka.coordinator.record_io import RecordFormatError
from kopfka.coordinator.transaction import records as rec
from kopfka.coordinator.transaction.metadata import TransactionMetadata, TxnState, TxnTransit
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.record_codec import decode_records

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


@dataclass
class TxnShard:
    """The transactions of one `__transaction_state` partition this broker leads."""

    partition: int
    coordinator_epoch: int
    writer: PartitionWriter
    state: ShardState = ShardState.LOADING
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)
    load_task: asyncio.Task[None] | None = None

    def close(self) -> None:
        self.state = ShardState.CLOSED
        if self.load_task is not None:
            self.load_task.cancel()
        self.writer.close(KafkaError(ErrorCode.not_coordinator, "the transaction coordinator moved"))


def append_error(code: ErrorCode, message: str) -> KafkaError:
    """Kafka's mapping of a failed transaction-log append to the coordinator's answer."""
    if code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return KafkaError(ErrorCode.coordinator_not_available, message)
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error, ErrorCode.not_coordinator):
        return KafkaError(ErrorCode.not_coordinator, message)
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return KafkaError(ErrorCode.unknown_server_error, message)
    return KafkaError(code, message)


class TransactionStateManager:
    def __init__(self, services: Any, config: Callable[[str], Any]) -> None:
        self.services = services
        self.config = config
        self.node_id: int = services.node_id
        self.shards: dict[int, TxnShard] = {}
        self.image: Any = None
        # called with (coordinator epoch, metadata, completion transit) for loaded Prepare* states
        self.on_loaded_prepared: Callable[[int, TransactionMetadata, TxnTransit], None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- partitioning ------------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        topic = self.image.topics_by_name.get(TXN_TOPIC) if self.image is not None else None
        if topic is not None:
            return len(topic.partitions)
        return int(self.config("transaction.state.log.num.partitions"))

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def transaction_version(self) -> int:
        """The finalized `transaction.version` feature level of the cluster."""
        return int(self.image.features.get("transaction.version", 0)) if self.image is not None else 0

    # --- lookups ---------------------------------------------------------------------------------
    def shard_for(self, transactional_id: str) -> TxnShard:
        shard = self.shards.get(self.partition_for(transactional_id))
        if shard is None or shard.state is ShardState.CLOSED:
            raise KafkaError(
                ErrorCode.not_coordinator, f"this broker is not the transaction coordinator of {transactional_id}"
            )
        if shard.state is ShardState.LOADING:
            raise KafkaError(
                ErrorCode.coordinator_load_in_progress, f"loading the transaction state of {transactional_id}"
            )
        return shard

    def get(self, transactional_id: str) -> tuple[TxnShard, TransactionMetadata | None]:
        shard = self.shard_for(transactional_id)
        return shard, shard.txns.get(transactional_id)

    def all_transactions(self) -> Iterator[TransactionMetadata]:
        for shard in self.shards.values():
            if shard.state is ShardState.ACTIVE:
                yield from shard.txns.values()

    def loading(self) -> bool:
        return any(s.state is ShardState.LOADING for s in self.shards.values())

    # --- writes ------------------------------------------------------------------------------------
    async def append(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransit,
        *,
        retry_on: frozenset[ErrorCode] = frozenset(),
    ) -> None:
        """Write `transit` and, once committed, complete it on the cached metadata.

        Raises KafkaError with the coordinator's answer. On failure the pending state is reset,
        unless the error is in `retry_on` (the caller retries the same transition)."""
        shard, md = self.get(transactional_id)
        if md is None:
            raise KafkaError(ErrorCode.not_coordinator, f"no metadata for {transactional_id} any more")
        if shard.coordinator_epoch != coordinator_epoch:
            raise KafkaError(ErrorCode.not_coordinator, "the coordinator epoch changed")
        key = rec.encode_key(transactional_id)
        value = rec.encode_value(transit.to_log_value(), 1 if self.transaction_version() >= 1 else 0)
        try:
            await shard.writer.write([(key, value)])
        except KafkaError as exc:
            error = append_error(exc.code, exc.message)
            try:
                cur_shard, cur = self.get(transactional_id)
            except KafkaError:
                raise error from None
            if cur is not None and cur_shard.coordinator_epoch == coordinator_epoch and error.code not in retry_on:
                cur.pending_state = None
            raise error from None
        cur_shard, cur = self.get(transactional_id)
        if cur is None or cur_shard.coordinator_epoch != coordinator_epoch:
            raise KafkaError(ErrorCode.not_coordinator, "the coordinator moved during the write")
        cur.complete_transition(transit)

    async def write_tombstones(self, shard: TxnShard, expired: list[tuple[TransactionMetadata, TxnTransit]]) -> None:
        """Expire transactional ids: tombstones, then drop them from the cache."""
        epochs = {md.transactional_id: t.producer_epoch for md, t in expired}
        try:
            await shard.writer.write([(rec.encode_key(md.transactional_id), None) for md, _ in expired])
            ok = True
        except KafkaError as exc:
            log.warning("Could not expire transactional ids in %s-%d: %s", TXN_TOPIC, shard.partition, exc)
            ok = False
        for md, _ in expired:
            current = shard.txns.get(md.transactional_id)
            if current is not md:
                continue
            if (
                ok
                and md.pending_state == TxnState.DEAD
                and md.producer_epoch == epochs[md.transactional_id]
                and shard.state is ShardState.ACTIVE
            ):
                del shard.txns[md.transactional_id]
            else:
                md.pending_state = None

    # --- leadership ---------------------------------------------------------------------------------
    def on_partition_change(self, pid: int, leader: int, leader_epoch: int) -> None:
        current = self.shards.get(pid)
        if leader == self.node_id:
            if current is None or current.coordinator_epoch != leader_epoch:
                if current is not None:
                    current.close()
                self._start_load(pid, leader_epoch)
        elif current is not None:
            log.info("Resigned as transaction coordinator for %s-%d", TXN_TOPIC, pid)
            current.close()
            del self.shards[pid]

    def close_all(self) -> None:
        for shard in self.shards.values():
            shard.close()
        self.shards.clear()

    def _start_load(self, pid: int, epoch: int) -> None:
        writer = PartitionWriter(
            self.services,
            (TXN_TOPIC, pid),
            epoch,
            timeout_ms=lambda: int(self.config("request.timeout.ms")),
            map_error=append_error,
        )
        shard = TxnShard(pid, epoch, writer)
        self.shards[pid] = shard
        task = asyncio.get_running_loop().create_task(self._load(shard))
        shard.load_task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _load(self, shard: TxnShard) -> None:
        start = time.monotonic()
        tp = (TXN_TOPIC, shard.partition)
        loaded: dict[str, TransactionMetadata] = {}
        try:
            buffer_size = int(self.config("transaction.state.log.load.buffer.size"))
            async for data, header in replay_partition(self.services.replica_manager, tp, buffer_size):
                if not header.is_control:
                    for r in decode_records(data, header):
                        self._replay(loaded, r.key, r.value)
            if shard.state is ShardState.CLOSED:
                return
            shard.txns = loaded
            shard.state = ShardState.ACTIVE
            log.log(
                logging.INFO if loaded else logging.DEBUG,
                "Loaded %d transactional ids from %s-%d (coordinator epoch %d) in %.0f ms",
                len(loaded),
                TXN_TOPIC,
                shard.partition,
                shard.coordinator_epoch,
                (time.monotonic() - start) * 1000,
            )
            for md in loaded.values():
                if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) and self.on_loaded_prepared:
                    self.on_loaded_prepared(shard.coordinator_epoch, md, md.prepare_complete(now_ms()))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Failed to load %s-%d", TXN_TOPIC, shard.partition)
            shard.close()
            if self.shards.get(shard.partition) is shard:
                del self.shards[shard.partition]

    @staticmethod
    def _replay(loaded: dict[str, TransactionMetadata], key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            tid = rec.decode_key(key)
            if tid is None:
                log.warning("Skipping a transaction log record with an unknown key version")
                return
            if value is None:
                loaded.pop(tid, None)
            else:
                loaded[tid] = TransactionMetadata.from_log_value(tid, rec.decode_value(value))
        except RecordFormatError as exc:
            log.warning("Skipping unreadable record in %s: %s", TXN_TOPIC, exc)

    def shutdown(self) -> None:
        self.close_all()
        for t in list(self._tasks):
            t.cancel()
