"""ReplicaManager: the partitions this broker hosts, produce appends and delayed fetches.

It is a metadata publisher: when the image says this broker is a replica of a partition it
creates (or loads) the log and takes the leader or follower role; when a topic is removed it
deletes the logs. Produce and Fetch handlers call into it.

Replication (once `start_replication` wired the controller channel): a follower partition is
handed to the ReplicaFetcherManager, which pulls from the leader; as leader it learns follower
LEOs from their fetches (`fetch_for_follower`), moves the HW, and proposes ISR changes to the
controller through AlterPartition — expansion on fetch, shrinking from a periodic check of
replica.lag.time.max.ms. Partitions whose ISR is just this broker never touch any of that.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any

from kopfka.log.log_manager import LogManager
from kopfka.metadata.image import TOPIC_RESOURCE, MetadataDelta, MetadataImage, replica_dir_online
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.partition import Partition
from kopfka.storage.file_records import FileSlice
from kopfka.storage.producer_state import AppendOrigin
from kopfka.storage.unified_log import UnifiedLog
from kopfka.timeouts import wait_quietly

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass
class ProduceResult:
    """One partition's produce outcome: error and message, or the assigned offsets, append time and log start."""

    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None
    last_offset: int = -1


@dataclass
class FetchRequestPartition:
    """One partition of a fetch: offset, byte limit, and the epochs for fencing and divergence checks."""

    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


@dataclass
class FetchPartitionData:
    """One partition's fetch result: error, watermarks, records, aborted transactions and diverging epoch."""

    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    aborted_transactions: list[tuple[int, int]] | None = None
    diverging_epoch: tuple[int, int] | None = None

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


@dataclass
class ReplicaManager:
    """Kafka's ReplicaManager: this broker's partitions, kept in step with the metadata image."""

    node_id: int
    log_manager: LogManager
    partitions: dict[TopicPartition, Partition] = field(default_factory=dict)
    name: str = "ReplicaManager"
    image: MetadataImage = field(default_factory=MetadataImage)
    controller: Any = None  # QuorumController or RemoteController (AlterPartition)
    broker_epoch: Any = None  # () -> int
    config: Any = None
    fetchers: Any = None  # ReplicaFetcherManager
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    _isr_task: asyncio.Task[None] | None = None

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
        for _topic_id, old in changes.deleted.items():
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
        # broker-level defaults (BROKER resources) reach the logs through the dynamic config
        # publisher (kopfka.server.dynamic_config), which runs first
        for rtype, rname in delta.changed_configs:
            if rtype == TOPIC_RESOURCE:
                self._reconfigure_topic(rname)

    def update_replication_quotas(self, values: Mapping[str, Any]) -> None:
        """The replication throttles of the broker's current config (dynamic ones included)."""
        # intra-broker moves (AlterReplicaLogDirs) are paced as Kafka's ReplicaAlterLogDirsThread
        self.log_manager.move_rate = int(values["replica.alter.log.dirs.io.max.bytes.per.second"])
        if self.fetchers is not None:
            self.fetchers.update_throttle_rates(
                int(values["leader.replication.throttled.rate"]), int(values["follower.replication.throttled.rate"])
            )

    def _apply_partition(self, topic: str, topic_id: str, pid: int, image: MetadataImage) -> None:
        reg = image.topics_by_id[topic_id].partitions[pid]
        tp = (topic, pid)
        if self.node_id not in reg.replicas:
            part = self.partitions.pop(tp, None)
            if self.fetchers is not None:
                self.fetchers.remove_partition(tp)
            if part is not None:
                part.make_follower()
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
            part.on_isr_change = self._send_alter_partition
            part.is_eligible = functools.partial(self._is_eligible, tp=tp)
            self.partitions[tp] = part
        new_epoch = part.leader_id != reg.leader or part.leader_epoch != reg.leader_epoch
        became_leader = reg.leader == self.node_id and new_epoch
        became_follower = reg.leader != self.node_id and (new_epoch or part.is_leader)
        part.leader_id = reg.leader
        part.leader_epoch = reg.leader_epoch
        part.replicas = reg.replicas
        part.adding_replicas, part.removing_replicas = reg.adding_replicas, reg.removing_replicas
        if reg.partition_epoch > part.partition_epoch or new_epoch:  # an AlterPartition answer may have come first
            part.partition_epoch = reg.partition_epoch
            part.isr = reg.isr
            part.clear_pending_isr()
        if became_leader:
            if self.fetchers is not None:
                self.fetchers.remove_partition(tp)
            part.make_leader()
        elif became_follower:
            part.make_follower()
            if self.fetchers is not None:
                if reg.leader >= 0:
                    self.fetchers.add_partition(tp, reg.leader)
                else:
                    self.fetchers.remove_partition(tp)
        if part.is_leader:
            from kopfka.server.partition import ReplicaState

            for r in reg.replicas:  # reassignment may add replicas under the same leader epoch
                if r != self.node_id and r not in part.replica_states:
                    part.replica_states[r] = ReplicaState(r)
            for r in list(part.replica_states):
                if r not in reg.replicas:
                    del part.replica_states[r]
            part.maybe_advance_high_watermark()
            part.check_produce_waiters()
        part.notify()

    def _reconfigure_topic(self, topic: str) -> None:
        cfg = self.log_manager.config_for(topic)
        for tp, part in self.partitions.items():
            if tp[0] == topic:
                part.log.update_config(cfg)
                if part.is_leader:  # e.g. a lower min.insync.replicas lets the high watermark advance
                    part.maybe_advance_high_watermark()
                    part.check_produce_waiters()

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
        """The local leader of `tp`. As Kafka's Partition.getLocalLog, the request's leader epoch is
        checked before the leadership: a follower (or client) that already knows of a newer epoch
        than this broker learns UNKNOWN_LEADER_EPOCH — this broker has not applied the change yet
        and may be the leader in a moment — and one that knows an older epoch FENCED_LEADER_EPOCH."""
        part = self.get_partition_or_error(tp)
        if current_leader_epoch >= 0:
            if current_leader_epoch < part.leader_epoch:
                raise KafkaError(
                    ErrorCode.fenced_leader_epoch, "The leader epoch in the request is older than the broker's"
                )
            if current_leader_epoch > part.leader_epoch:
                raise KafkaError(
                    ErrorCode.unknown_leader_epoch, "The leader epoch in the request is newer than the broker's"
                )
        if not part.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"Leader not local for partition {tp[0]}-{tp[1]}")
        return part

    # --- produce ---------------------------------------------------------------------------
    def append_records(
        self,
        entries: Sequence[tuple[TopicPartition, bytes | None]],
        required_acks: int,
        *,
        internal: bool = False,
        verification_guards: dict[TopicPartition, object] | None = None,
    ) -> dict[TopicPartition, ProduceResult]:
        """Append as leader. `verification_guards` (KIP-890) is given for client produces when
        transaction.partition.verification.enable is on: a partition's guard, or none."""
        results: dict[TopicPartition, ProduceResult] = {}
        for tp, records in entries:
            try:
                if tp[0] in INTERNAL_TOPICS and not internal:
                    raise KafkaError(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {tp[0]}")
                if records is None or len(records) == 0:
                    raise KafkaError(ErrorCode.invalid_record, "Produce request carries no records")
                part = self.get_leader_partition(tp)
                min_isr = part.effective_min_isr
                if required_acks == -1 and len(part.isr) < min_isr:
                    raise KafkaError(
                        ErrorCode.not_enough_replicas,
                        f"The size of the current ISR {list(part.isr)} is insufficient to satisfy "
                        f"the min.isr requirement of {min_isr} for partition {tp[0]}-{tp[1]}",
                    )
                info = part.log.append_as_leader(
                    records,
                    leader_epoch=part.leader_epoch,
                    origin=AppendOrigin.COORDINATOR if internal else AppendOrigin.CLIENT,
                    require_verification=verification_guards is not None,
                    verification_guard=verification_guards.get(tp) if verification_guards is not None else None,
                )
                part.notify_appended()  # the followers' parked fetches first: they carry the write on
                part.maybe_advance_high_watermark()  # moves only with an ISR of one
                results[tp] = ProduceResult(
                    ErrorCode.none,
                    info.first_offset,
                    info.log_append_time_ms,
                    part.log.log_start_offset,
                    last_offset=info.last_offset,
                )
            except KafkaError as exc:
                results[tp] = ProduceResult(exc.code, -1, -1, -1, exc.message)
            except OSError as exc:
                log.exception("I/O error appending to %s-%d", *tp)
                self.log_manager.report_io_error(tp, exc)
                results[tp] = ProduceResult(ErrorCode.kafka_storage_error, message=str(exc))
        return results

    # --- fetch -----------------------------------------------------------------------------
    def _read_once(
        self,
        requests: Sequence[FetchRequestPartition],
        max_bytes: int,
        isolation: str,
        from_follower: bool,
        held_back: Set[TopicPartition] = frozenset(),
    ) -> tuple[dict[TopicPartition, FetchPartitionData], int]:
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
                budget = min(req.max_bytes, max(max_bytes - total, 0))
                if (budget <= 0 and total > 0) or req.tp in held_back:
                    continue
                iso = "log_end" if from_follower else isolation
                info = ulog.read(req.fetch_offset, max(budget, 1), isolation=iso, min_one_message=total == 0)
                data.records = info.records
                if iso == "txn_committed":
                    data.aborted_transactions = [
                        (a.producer_id, a.first_offset) for a in (info.aborted_transactions or [])
                    ]
                total += data.size
            except KafkaError as exc:
                data.error = exc.code
            except OSError as exc:
                log.exception("I/O error reading %s-%d", *req.tp)
                self.log_manager.report_io_error(req.tp, exc)
                data.error = ErrorCode.kafka_storage_error
        return out, total

    async def fetch_messages(
        self,
        requests: Sequence[FetchRequestPartition],
        *,
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
        isolation: str = "high_watermark",
        from_follower: bool = False,
        held_back: Set[TopicPartition] = frozenset(),
        held_until: float | None = None,
    ) -> dict[TopicPartition, FetchPartitionData]:
        """Read now; if less than min_bytes is ready, wait (long poll) for new data or the deadline.
        `held_back` partitions (replication throttle) are answered without records, and the wait
        ends at `held_until` (monotonic), when the throttle lets them move again."""
        deadline = time.monotonic() + max_wait_ms / 1000
        if held_back and held_until is not None:
            deadline = min(deadline, held_until)
        loop = asyncio.get_running_loop()
        while True:
            result, total = self._read_once(requests, max_bytes, isolation, from_follower, held_back)
            remaining = deadline - time.monotonic()
            if total >= min_bytes or remaining <= 0 or not requests or any(d.error for d in result.values()):
                return result
            fut: asyncio.Future[None] = loop.create_future()
            parts = [p for r in requests if r.tp not in held_back and (p := self.partitions.get(r.tp)) is not None]
            for p in parts:
                p.add_waiter(fut, to_log_end=from_follower)
            try:
                await wait_quietly(fut, remaining)
            finally:
                for p in parts:
                    p.remove_waiter(fut, to_log_end=from_follower)

    # --- replication: leader side ---------------------------------------------------------------
    def start_replication(self, config: Any, controller: Any, broker_epoch: Any, security: Any = None) -> None:
        """Wire the controller channel and start the fetchers and the ISR-shrink check."""
        from kopfka.server.replica_fetcher import ReplicaFetcherManager

        self.config = config
        self.controller = controller
        self.broker_epoch = broker_epoch
        self.fetchers = ReplicaFetcherManager(self, config, security)
        lag_ms = int(config["replica.lag.time.max.ms"])
        self._isr_task = asyncio.get_running_loop().create_task(
            self._isr_expiry_loop(lag_ms / 1000), name="isr-expiration"
        )

    async def _isr_expiry_loop(self, lag_s: float) -> None:
        """Kafka's isr-expiration task: every lag/2, shrink out followers that stopped catching up."""
        while True:
            await asyncio.sleep(max(lag_s / 2, 0.05))
            now = time.monotonic()
            for part in list(self.partitions.values()):
                if part.is_leader and len(part.isr) > 1:
                    part.maybe_shrink_isr(lag_s, now)

    def _is_eligible(self, broker_id: int, broker_epoch: int, tp: TopicPartition) -> bool:
        """KIP-841: fenced or shutting-down brokers (or a stale incarnation) never join the ISR; nor
        does a replica whose log dir its broker reported offline (KIP-858: the controller would
        refuse the AlterPartition anyway)."""
        b = self.image.brokers.get(broker_id)
        if b is None or b.fenced or b.in_controlled_shutdown:
            return False
        if broker_epoch >= 0 and broker_epoch != b.epoch:
            return False
        topic = self.image.topics_by_name.get(tp[0])
        reg = topic.partitions.get(tp[1]) if topic is not None else None
        return reg is None or replica_dir_online(self.image, broker_id, reg)

    def _send_alter_partition(self, part: Partition, new_isr: tuple[int, ...], generation: int) -> None:
        if self.controller is None or not hasattr(self.controller, "alter_partition"):
            part.complete_isr_change(generation, None, -1, -1)
            return
        task = asyncio.get_running_loop().create_task(self._alter_partition(part, new_isr, generation))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter_partition(self, part: Partition, new_isr: tuple[int, ...], generation: int) -> None:
        states = []
        for b in new_isr:
            st = part.replica_states.get(b)
            states.append((b, st.broker_epoch if st is not None else -1))
        epoch = int(self.broker_epoch()) if self.broker_epoch is not None else -1
        log.info(
            "[Partition %s-%d broker=%d] proposing ISR %s (was %s, leader epoch %d, partition epoch %d)",
            part.topic,
            part.partition,
            self.node_id,
            list(new_isr),
            list(part.isr),
            part.leader_epoch,
            part.partition_epoch,
        )
        try:
            res = await self.controller.alter_partition(
                self.node_id, epoch, part.topic_id, part.partition, part.leader_epoch, part.partition_epoch, states
            )
        except (TimeoutError, KafkaError, OSError) as exc:
            log.info("AlterPartition for %s-%d failed: %s", part.topic, part.partition, exc)
            await asyncio.sleep(0.1)
            part.complete_isr_change(generation, None, -1, -1)
            return
        if res.error != ErrorCode.none:
            log.info("AlterPartition for %s-%d refused: %s", part.topic, part.partition, res.error.name)
            if res.error in (ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version):
                # our view is stale: keep the maximal ISR until the metadata update settles it
                return
            if res.error in (ErrorCode.ineligible_replica, ErrorCode.operation_not_attempted):
                await asyncio.sleep(0.2)  # don't hammer the controller with the same proposal
            part.complete_isr_change(generation, None, -1, -1)
            return
        part.complete_isr_change(generation, tuple(res.isr), res.partition_epoch, res.leader_epoch)

    async def fetch_for_follower(
        self,
        replica_id: int,
        replica_epoch: int,
        requests: Sequence[FetchRequestPartition],
        *,
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
    ) -> dict[TopicPartition, FetchPartitionData]:
        """A follower's fetch: check divergence first (no records then), record its fetch offset
        (its LEO) so the HW and ISR can move, then read up to our LEO."""
        early: dict[TopicPartition, FetchPartitionData] = {}
        reads: list[FetchRequestPartition] = []
        held: set[TopicPartition] = set()
        for req in requests:
            try:
                part = self.get_leader_partition(req.tp, req.current_leader_epoch)
                if req.last_fetched_epoch >= 0:
                    div = part.diverging_epoch(req.last_fetched_epoch, req.fetch_offset)
                    if div is not None:
                        early[req.tp] = FetchPartitionData(
                            high_watermark=part.log.high_watermark,
                            last_stable_offset=part.log.last_stable_offset,
                            log_start_offset=part.log.log_start_offset,
                            diverging_epoch=div,
                        )
                        continue
                if replica_id not in part.replicas:
                    raise KafkaError(ErrorCode.not_leader_or_follower, f"{replica_id} is not a replica of {req.tp}")
                if req.fetch_offset <= part.log.log_end_offset:
                    part.update_follower_fetch(replica_id, req.fetch_offset, replica_epoch)
                fetchers = self.fetchers
                if fetchers is not None and replica_id not in part.isr and fetchers.is_leader_throttled(req.tp):
                    if fetchers.leader_holds_back(part, replica_id):
                        # no data, and no wake-up by its appends: the long poll lasts until the
                        # throttle frees (a kopfka deviation: Kafka waits replica.fetch.wait.max.ms,
                        # which leaves a paced rate mostly unused)
                        held.add(req.tp)
                    else:
                        req = replace(req, max_bytes=fetchers.leader_quota.chunk(req.max_bytes))
                reads.append(req)
            except KafkaError as exc:
                early[req.tp] = FetchPartitionData(error=exc.code)
        result = (
            await self.fetch_messages(
                reads,
                max_bytes=max_bytes,
                min_bytes=min_bytes,
                max_wait_ms=0 if early else max_wait_ms,
                from_follower=True,
                held_back=held,
                held_until=self.fetchers.leader_quota.free_at() if held and self.fetchers is not None else None,
            )
            if reads
            else {}
        )
        if self.fetchers is not None:
            self.fetchers.record_leader_bytes(result)
        result.update(early)
        return result

    def shutdown(self) -> None:
        if self._isr_task is not None:
            self._isr_task.cancel()
        for t in list(self._tasks):
            t.cancel()
        if self.fetchers is not None:
            self.fetchers.shutdown()
        for part in self.partitions.values():
            part.fail_produce_waiters(ErrorCode.not_leader_or_follower)
            part.notify()
