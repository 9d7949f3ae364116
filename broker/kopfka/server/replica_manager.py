"""ReplicaManager: the partitions this broker hosts, produce appends and delayed fetches.

It is a metadata publisher: when the image says this broker is a replica of a partition it
creates (or loads) the log and takes the leader or follower role; when a topic is removed it
deletes the logs. Produce and Fetch handlers call into it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kopfka.log.log_manager import LogManager
from kopfka.metadata.image import TOPIC_RESOURCE, MetadataDelta, MetadataImage
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.partition import Partition
from kopfka.storage.file_records import FileSlice
from kopfka.storage.unified_log import UnifiedLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass
class ProduceResult:
    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None


@dataclass
class FetchRequestPartition:
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1


@dataclass
class FetchPartitionData:
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    aborted_transactions: list[tuple[int, int]] | None = None
    leader_id: int = -1
    leader_epoch: int = -1

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


@dataclass
class ReplicaManager:
    node_id: int
    log_manager: LogManager
    partitions: dict[TopicPartition, Partition] = field(default_factory=dict)
    name: str = "ReplicaManager"
    image: MetadataImage = field(default_factory=MetadataImage)

    def __post_init__(self) -> None:
        # an intra-broker move (AlterReplicaLogDirs) swaps a partition's log object
        listeners = getattr(self.log_manager, "log_replaced_listeners", None)
        if listeners is not None:
            listeners.append(self._on_log_replaced)

    def _on_log_replaced(self, tp: TopicPartition, new_log: UnifiedLog) -> None:
        part = self.partitions.get(tp)
        if part is not None:
            part.log = new_log
            part.notify()

    # --- metadata publisher ----------------------------------------------------------------
    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        changes = delta.topic_changes
        for topic_id, old in changes.deleted.items():
            for pid in old.partitions:
                tp = (old.name, pid)
                part = self.partitions.pop(tp, None)
                if part is not None:
                    part.notify()
                self.log_manager.delete_log(tp)
        for topic_id, pids in changes.changed_partitions.items():
            topic = image.topics_by_id.get(topic_id)
            if topic is None:
                continue
            for pid in pids:
                self._apply_partition(topic.name, topic_id, pid, image)
        for rtype, rname in delta.changed_configs:
            if rtype == TOPIC_RESOURCE:
                self._reconfigure_topic(rname)
            else:
                for tp in list(self.partitions):
                    self._reconfigure_topic(tp[0])

    def _apply_partition(self, topic: str, topic_id: str, pid: int, image: MetadataImage) -> None:
        reg = image.topics_by_id[topic_id].partitions[pid]
        tp = (topic, pid)
        if self.node_id not in reg.replicas:
            part = self.partitions.pop(tp, None)
            if part is not None:
                part.notify()
                self.log_manager.delete_log(tp)
            return
        part = self.partitions.get(tp)
        if part is None:
            try:
                ulog = self.log_manager.get_or_create_log(tp, topic_id)
            except KafkaError as exc:  # e.g. its log dir is offline
                log.error("Cannot host %s-%d: %s", topic, pid, exc.message)
                return
            part = Partition(topic, pid, topic_id, ulog, self.node_id)
            self.partitions[tp] = part
        became_leader = reg.leader == self.node_id and (part.leader_id != self.node_id or part.leader_epoch != reg.leader_epoch)
        part.leader_id = reg.leader
        part.leader_epoch = reg.leader_epoch
        part.partition_epoch = reg.partition_epoch
        part.replicas = reg.replicas
        part.isr = reg.isr
        if became_leader:
            part.maybe_advance_high_watermark()
        part.notify()

    def _reconfigure_topic(self, topic: str) -> None:
        cfg = self.log_manager.config_for(topic)
        for tp, part in self.partitions.items():
            if tp[0] == topic:
                part.log.update_config(cfg)

    # --- lookups ---------------------------------------------------------------------------
    def get_partition_or_error(self, tp: TopicPartition) -> Partition:
        part = self.partitions.get(tp)
        if part is None:
            topic = self.image.topics_by_name.get(tp[0])
            if topic is not None and tp[1] in topic.partitions:
                raise KafkaError(ErrorCode.not_leader_or_follower, f"This broker does not host {tp[0]}-{tp[1]}")
            raise KafkaError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
        if part.log.offline:
            raise KafkaError(ErrorCode.kafka_storage_error, f"The log dir of {tp[0]}-{tp[1]} is offline")
        return part

    def get_leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Partition:
        part = self.get_partition_or_error(tp)
        if not part.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"Leader not local for partition {tp[0]}-{tp[1]}")
        if current_leader_epoch >= 0:
            if current_leader_epoch < part.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch, "The leader epoch in the request is older than the broker's")
            if current_leader_epoch > part.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch, "The leader epoch in the request is newer than the broker's")
        return part

    # --- produce ---------------------------------------------------------------------------
    def append_records(self, entries: Sequence[tuple[TopicPartition, bytes | None]], required_acks: int,
                       *, internal: bool = False) -> dict[TopicPartition, ProduceResult]:
        results: dict[TopicPartition, ProduceResult] = {}
        for tp, records in entries:
            try:
                if tp[0] in INTERNAL_TOPICS and not internal:
                    raise KafkaError(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {tp[0]}")
                if records is None or len(records) == 0:
                    raise KafkaError(ErrorCode.invalid_record, "Produce request carries no records")
                part = self.get_leader_partition(tp)
                min_isr = int(part.log.config["min.insync.replicas"])
                if required_acks == -1 and len(part.isr) < min_isr:
                    raise KafkaError(ErrorCode.not_enough_replicas,
                                     f"The size of the current ISR {list(part.isr)} is insufficient to satisfy "
                                     f"the min.isr requirement of {min_isr} for partition {tp[0]}-{tp[1]}")
                info = part.log.append_as_leader(records, leader_epoch=part.leader_epoch)
                part.maybe_advance_high_watermark()
                part.notify()
                results[tp] = ProduceResult(ErrorCode.none, info.first_offset, info.log_append_time_ms,
                                            part.log.log_start_offset)
            except KafkaError as exc:
                results[tp] = ProduceResult(exc.code, -1, -1, -1, exc.message)
            except OSError as exc:
                log.exception("I/O error appending to %s-%d", *tp)
                self.log_manager.report_io_error(tp, exc)
                results[tp] = ProduceResult(ErrorCode.kafka_storage_error, message=str(exc))
        return results

    # --- fetch -----------------------------------------------------------------------------
    def _read_once(self, requests: Sequence[FetchRequestPartition], max_bytes: int, isolation: str,
                   from_follower: bool) -> tuple[dict[TopicPartition, FetchPartitionData], int]:
        out: dict[TopicPartition, FetchPartitionData] = {}
        total = 0
        for req in requests:
            data = FetchPartitionData()
            out[req.tp] = data
            try:
                part = self.get_leader_partition(req.tp, req.current_leader_epoch)
                ulog = part.log
                data.high_watermark = ulog.high_watermark
                data.last_stable_offset = ulog.last_stable_offset
                data.log_start_offset = ulog.log_start_offset
                data.leader_id, data.leader_epoch = part.leader_id, part.leader_epoch
                budget = min(req.max_bytes, max(max_bytes - total, 0))
                if budget <= 0 and total > 0:
                    continue
                iso = "log_end" if from_follower else isolation
                info = ulog.read(req.fetch_offset, max(budget, 1), isolation=iso, min_one_message=total == 0)
                data.records = info.records
                if iso == "txn_committed":
                    data.aborted_transactions = [(a.producer_id, a.first_offset) for a in (info.aborted_transactions or [])]
                total += data.size
            except KafkaError as exc:
                data.error = exc.code
            except OSError as exc:
                log.exception("I/O error reading %s-%d", *req.tp)
                self.log_manager.report_io_error(req.tp, exc)
                data.error = ErrorCode.kafka_storage_error
        return out, total

    async def fetch_messages(self, requests: Sequence[FetchRequestPartition], *, max_bytes: int, min_bytes: int,
                             max_wait_ms: int, isolation: str = "high_watermark",
                             from_follower: bool = False) -> dict[TopicPartition, FetchPartitionData]:
        """Read now; if less than min_bytes is ready, wait (long poll) for new data or the deadline."""
        deadline = time.monotonic() + max_wait_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            result, total = self._read_once(requests, max_bytes, isolation, from_follower)
            remaining = deadline - time.monotonic()
            if total >= min_bytes or remaining <= 0 or not requests or any(d.error for d in result.values()):
                return result
            fut: asyncio.Future[None] = loop.create_future()
            parts = [p for r in requests if (p := self.partitions.get(r.tp)) is not None]
            for p in parts:
                p.add_waiter(fut)
            try:
                await asyncio.wait_for(fut, remaining)
            except TimeoutError:
                pass
            finally:
                for p in parts:
                    p.remove_waiter(fut)

    def shutdown(self) -> None:
        for part in self.partitions.values():
            part.notify()
