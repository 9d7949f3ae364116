"""ShareCoordinator: the durable state of share-partitions, kept in `__share_group_state`.

KIP-932: the state of share-partition (group, topic id, partition) — its start offset (SPSO),
state epoch, leader epoch and the delivery state and count of the in-flight records above the
start offset — belongs to the leader of `__share_group_state` partition
abs(javaHashCode("group:topicId:partition")) % share.coordinator.state.topic.num.partitions.
Partition leaders read it when they start serving a share-partition and write the changes of
acknowledgements, releases and lock timeouts; the group coordinator initializes it (and resets
it for AlterShareGroupOffsets) and deletes it with the group.

Every state change is a record: a ShareSnapshot (the whole state) or a ShareUpdate (the changed
batches, laid over the state by the same rule on replay). After
`share.coordinator.snapshot.update.records.per.snapshot` updates of a key the next write is a
snapshot, and keys not snapshotted for `share.coordinator.cold.partition.snapshot.interval.ms`
get one, so everything before the oldest live snapshot can be deleted: the topic is
cleanup.policy=delete with infinite retention, and the coordinator advances its log start
offset (Kafka's share coordinator prunes with DeleteRecords the same way).

Writes are applied to the cached state once committed; writes of one key are serialized (a
snapshot is built from the state the previous write left), writes of different keys in one
event-loop turn share a batch.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from kopfka import uuids
from kopfka.controller.quorum_controller import CreateTopicSpec
from kopfka.coordinator.internal_topic import coordinator_endpoint, ensure_topic, follow_leadership, replay_partition
from kopfka.coordinator.keys import partition_for
from kopfka.coordinator.partition_writer import PartitionWriter
from kopfka.coordinator.share import records as rec
from kopfka.coordinator.share.records import StateBatch
from kopfka.coordinator.share.state_batches import combine
from kopfka.coordinator.transaction.state_manager import append_error
from kopfka.metadata.image import MetadataDelta, MetadataImage
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.record_codec import decode_records

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"

Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: what FindCoordinator(SHARE) is asked about."""
    return f"{group_id}:{uuids.to_str(topic_id)}:{partition}"


@dataclass
class ShareGroupOffset:
    """The state of one share-partition, as the share coordinator holds it (Kafka's name)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1
    batches: list[StateBatch] = field(default_factory=list)
    create_timestamp: int = 0
    write_timestamp: int = 0

    def snapshot(self) -> rec.ShareSnapshot:
        return rec.ShareSnapshot(
            self.snapshot_epoch,
            self.state_epoch,
            self.leader_epoch,
            self.start_offset,
            self.create_timestamp,
            self.write_timestamp,
            list(self.batches),
            self.delivery_complete_count,
        )

    @classmethod
    def from_snapshot(cls, v: rec.ShareSnapshot) -> ShareGroupOffset:
        return cls(
            v.snapshot_epoch,
            v.state_epoch,
            v.leader_epoch,
            v.start_offset,
            v.delivery_complete_count,
            combine([], v.state_batches, v.start_offset),
            v.create_timestamp,
            v.write_timestamp,
        )

    def merged(self, u: rec.ShareUpdate) -> ShareGroupOffset:
        start = self.start_offset if u.start_offset == -1 else u.start_offset
        return replace(
            self,
            start_offset=start,
            leader_epoch=self.leader_epoch if u.leader_epoch == -1 else u.leader_epoch,
            delivery_complete_count=u.delivery_complete_count,
            batches=combine(self.batches, u.state_batches, start),
        )


@dataclass
class PartitionResult:
    """One share-partition's answer to a state request (error_code NONE on success)."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    state: ShareGroupOffset | None = None


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


@dataclass
class StateShard:
    """The share-partition states of one `__share_group_state` partition this broker leads."""

    partition: int
    leader_epoch: int
    writer: PartitionWriter
    state: ShardState = ShardState.LOADING
    states: dict[Key, ShareGroupOffset] = field(default_factory=dict)
    updates_since_snapshot: dict[Key, int] = field(default_factory=dict)
    snapshot_offsets: dict[Key, int] = field(default_factory=dict)  # key -> offset of its latest snapshot
    next_offset: int = 0  # one past the last record replayed or applied
    key_locks: dict[Key, asyncio.Lock] = field(default_factory=dict)
    load_task: asyncio.Task[None] | None = None

    def close(self) -> None:
        self.state = ShardState.CLOSED
        if self.load_task is not None:
            self.load_task.cancel()
        self.writer.close(KafkaError(ErrorCode.not_coordinator, "the share coordinator moved"))

    def replay(self, key: rec.ShareKey, value: bytes | None, offset: int) -> None:
        k = (key.group_id, key.topic_id, key.partition)
        self.next_offset = max(self.next_offset, offset + 1)
        if key.record_type == rec.SNAPSHOT:
            if value is None:
                self.states.pop(k, None)
                self.updates_since_snapshot.pop(k, None)
                self.snapshot_offsets.pop(k, None)
                self.key_locks.pop(k, None)
                return
            self.states[k] = ShareGroupOffset.from_snapshot(rec.decode_snapshot(value))
            self.updates_since_snapshot[k] = 0
            self.snapshot_offsets[k] = offset
        elif value is not None:
            update = rec.decode_update(value)
            current = self.states.get(k)
            if current is None:  # an update whose snapshot was pruned away cannot happen; keep what it says
                current = ShareGroupOffset(update.snapshot_epoch, 0, update.leader_epoch, update.start_offset)
            self.states[k] = current.merged(update)
            self.updates_since_snapshot[k] = self.updates_since_snapshot.get(k, 0) + 1

    def redundant_offset(self) -> int:
        """Every record below this offset is superseded by a later snapshot (or a tombstone)."""
        return min(self.snapshot_offsets.values(), default=self.next_offset)


class ShareCoordinator:
    """The share coordinator of the `__share_group_state` partitions this broker leads."""

    name = "ShareCoordinator"

    def __init__(self, services: Any) -> None:
        self.services = services
        self.node_id: int = services.node_id
        self.image = MetadataImage()
        self.shards: dict[int, StateShard] = {}
        self._create_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._housekeeping: asyncio.Task[None] | None = None

    def config(self, key: str) -> Any:
        return self.services.config[key]

    # --- partitioning -------------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        topic = self.image.topics_by_name.get(SHARE_STATE_TOPIC)
        if topic is not None:
            return len(topic.partitions)
        return int(self.config("share.coordinator.state.topic.num.partitions"))

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(coordinator_key(group_id, topic_id, partition), self.num_partitions)

    def coordinator_node(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """The broker leading this share-partition's state partition (-1: none, or no topic yet)."""
        topic = self.image.topics_by_name.get(SHARE_STATE_TOPIC)
        if topic is None:
            return -1
        reg = topic.partitions.get(self.partition_for(group_id, topic_id, partition))
        return reg.leader if reg is not None else -1

    async def find_coordinator(self, key: str, listener: str) -> dict[str, Any]:
        """FindCoordinator with key type SHARE: the key is "group:topicId:partition"."""
        out: dict[str, Any] = {"key": key, "node_id": -1, "host": "", "port": -1}
        try:
            group, tid, part = _parse_coordinator_key(key)
            topic = self.image.topics_by_name.get(SHARE_STATE_TOPIC)
            if topic is None:
                await self.ensure_topic()
                raise KafkaError(ErrorCode.coordinator_not_available, "creating the share-group state topic")
            out.update(coordinator_endpoint(self.image, topic, self.partition_for(group, tid, part), listener))
            out.update(error_code=ErrorCode.none, error_message=None)
        except KafkaError as exc:
            out.update(error_code=exc.code, error_message=exc.message)
        return out

    async def ensure_topic(self) -> None:
        spec = CreateTopicSpec(
            SHARE_STATE_TOPIC,
            int(self.config("share.coordinator.state.topic.num.partitions")),
            int(self.config("share.coordinator.state.topic.replication.factor")),
            None,
            {
                "cleanup.policy": "delete",
                "retention.ms": "-1",
                "compression.type": "producer",
                "min.insync.replicas": str(self.config("share.coordinator.state.topic.min.isr")),
                "segment.bytes": str(self.config("share.coordinator.state.topic.segment.bytes")),
            },
        )
        await ensure_topic(
            self.services.controller, self._create_lock, lambda: SHARE_STATE_TOPIC in self.image.topics_by_name, spec
        )

    # --- metadata publisher ---------------------------------------------------------------------
    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        changes = delta.topic_changes
        if any(t.name == SHARE_STATE_TOPIC for t in changes.deleted.values()):
            self.close_all()
        topic = image.topics_by_name.get(SHARE_STATE_TOPIC)
        if topic is not None:
            changed = changes.changed_partitions.get(topic.topic_id, ())
            follow_leadership(topic, changed, self.node_id, self.shards, self._start_load, "share coordinator")
        gone = {uuids.from_str(t.topic_id) for t in changes.deleted.values() if t.name != SHARE_STATE_TOPIC}
        if gone:
            self._spawn(self._delete_states_of_topics(gone))
        if self.shards and self._housekeeping is None:
            self._housekeeping = self._spawn(self._housekeeping_loop())

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _start_load(self, pid: int, epoch: int) -> None:
        writer = PartitionWriter(
            self.services,
            (SHARE_STATE_TOPIC, pid),
            epoch,
            timeout_ms=lambda: int(self.config("share.coordinator.write.timeout.ms")),
            map_error=append_error,
        )
        shard = StateShard(pid, epoch, writer)
        self.shards[pid] = shard
        shard.load_task = self._spawn(self._load(shard))

    async def _load(self, shard: StateShard) -> None:
        start = time.monotonic()
        tp = (SHARE_STATE_TOPIC, shard.partition)
        count = 0
        try:
            part = self.services.replica_manager.partitions.get(tp)
            if part is not None:
                shard.next_offset = part.log.log_start_offset
            buffer_size = int(self.config("share.coordinator.load.buffer.size"))
            async for data, header in replay_partition(self.services.replica_manager, tp, buffer_size):
                if header.is_control:
                    continue
                for r in decode_records(data, header):
                    count += 1
                    self._replay(shard, r.key, r.value, r.offset)
            if shard.state is ShardState.CLOSED:
                return
            shard.state = ShardState.ACTIVE
            log.log(
                logging.INFO if count else logging.DEBUG,
                "Loaded %s-%d (%d records, %d share-partitions) in %.0f ms",
                SHARE_STATE_TOPIC,
                shard.partition,
                count,
                len(shard.states),
                (time.monotonic() - start) * 1000,
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Failed to load %s-%d", SHARE_STATE_TOPIC, shard.partition)
            shard.close()
            if self.shards.get(shard.partition) is shard:
                del self.shards[shard.partition]

    @staticmethod
    def _replay(shard: StateShard, key: bytes | None, value: bytes | None, offset: int) -> None:
        if key is None:
            return
        try:
            k = rec.decode_key(key)
            if k is None:
                log.warning("Skipping a %s record of an unknown type", SHARE_STATE_TOPIC)
                return
            shard.replay(k, value, offset)
        except rec.RecordFormatError as exc:
            log.warning("Skipping unreadable record in %s-%d: %s", SHARE_STATE_TOPIC, shard.partition, exc)

    def close_all(self) -> None:
        for shard in self.shards.values():
            shard.close()
        self.shards.clear()

    def shutdown(self) -> None:
        self.close_all()
        for t in list(self._tasks):
            t.cancel()

    def loading(self) -> bool:
        return any(s.state is ShardState.LOADING for s in self.shards.values())

    # --- lookups ------------------------------------------------------------------------------
    def _shard(self, key: Key) -> StateShard:
        shard = self.shards.get(self.partition_for(*key))
        if shard is None or shard.state is ShardState.CLOSED:
            raise KafkaError(ErrorCode.not_coordinator, "This broker is not the share coordinator of the key.")
        if shard.state is ShardState.LOADING:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, "The share coordinator is loading.")
        return shard

    def _check_topic(self, topic_id: uuid.UUID | None, partition: int) -> None:
        if topic_id is None:
            raise KafkaError(ErrorCode.invalid_request, "The topic id cannot be null.")
        if partition < 0:
            raise KafkaError(ErrorCode.invalid_request, "The partition id cannot be a negative number.")
        topic = self.image.topics_by_id.get(uuids.to_str(topic_id))
        if topic is None or partition >= len(topic.partitions):
            raise KafkaError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")

    def _checked_key(self, group_id: str, topic_id: uuid.UUID | None, partition: int) -> Key:
        self._check_topic(topic_id, partition)
        assert topic_id is not None
        return group_id, topic_id, partition

    # --- writes -------------------------------------------------------------------------------
    async def _write(
        self, shard: StateShard, key: Key, record_type: int, value: bytes | None, new_state: ShareGroupOffset | None
    ) -> None:
        """Append one record of `key` and, once committed, make `new_state` (None: gone) current."""
        k = rec.encode_key(record_type, *key)

        def apply(offset: int) -> None:
            shard.next_offset = max(shard.next_offset, offset + 1)
            if new_state is None:
                shard.states.pop(key, None)
                shard.updates_since_snapshot.pop(key, None)
                shard.snapshot_offsets.pop(key, None)
                return
            shard.states[key] = new_state
            if record_type == rec.SNAPSHOT:
                shard.updates_since_snapshot[key] = 0
                shard.snapshot_offsets[key] = offset
            else:
                shard.updates_since_snapshot[key] = shard.updates_since_snapshot.get(key, 0) + 1

        await shard.writer.write([(k, value)], apply)

    async def _locked(self, key: Key, action: Callable[[StateShard], Any]) -> PartitionResult:
        """Run `action` on the key's shard with the key's writes serialized; errors become results."""
        try:
            shard = self._shard(key)
            lock = shard.key_locks.setdefault(key, asyncio.Lock())
            async with lock:
                if shard.state is not ShardState.ACTIVE or self.shards.get(shard.partition) is not shard:
                    raise KafkaError(ErrorCode.not_coordinator, "The share coordinator moved.")
                result: PartitionResult = await action(shard)
                return result
        except KafkaError as exc:
            return PartitionResult(exc.code, exc.message)

    def _state_record(
        self,
        shard: StateShard,
        key: Key,
        current: ShareGroupOffset,
        start_offset: int,
        delivery_complete_count: int,
        leader_epoch: int,
        batches: list[StateBatch],
    ) -> tuple[int, bytes, ShareGroupOffset]:
        """The record of a write: a snapshot once enough updates piled up, else an update."""
        new_start = current.start_offset if start_offset == -1 else start_offset
        merged = replace(
            current,
            start_offset=new_start,
            leader_epoch=leader_epoch,
            delivery_complete_count=delivery_complete_count,
            batches=combine(current.batches, batches, new_start),
        )
        limit = int(self.config("share.coordinator.snapshot.update.records.per.snapshot"))
        if shard.updates_since_snapshot.get(key, 0) >= limit:
            ts = now_ms()
            snap = replace(merged, snapshot_epoch=current.snapshot_epoch + 1, create_timestamp=ts, write_timestamp=ts)
            return rec.SNAPSHOT, rec.encode_snapshot(snap.snapshot()), snap
        update = rec.ShareUpdate(
            current.snapshot_epoch,
            leader_epoch,
            start_offset,
            combine([], batches, start_offset),
            delivery_complete_count,
        )
        return rec.UPDATE, rec.encode_update(update), merged

    async def initialize_state(
        self, group_id: str, topic_id: uuid.UUID | None, partition: int, state_epoch: int, start_offset: int
    ) -> PartitionResult:
        """A fresh state (the group coordinator's InitializeShareGroupState): no batches, the
        given start offset (-1: the partition leader applies share.auto.offset.reset)."""
        try:
            key = self._checked_key(group_id, topic_id, partition)
        except KafkaError as exc:
            return PartitionResult(exc.code, exc.message)

        async def action(shard: StateShard) -> PartitionResult:
            current = shard.states.get(key)
            if state_epoch != -1 and current is not None and current.state_epoch > state_epoch:
                raise KafkaError(ErrorCode.fenced_state_epoch, "The share-partition state epoch is newer.")
            ts = now_ms()
            new = ShareGroupOffset(
                current.snapshot_epoch + 1 if current is not None else 0,
                state_epoch,
                0,
                start_offset,
                -1 if start_offset == -1 else 0,
                [],
                ts,
                ts,
            )
            await self._write(shard, key, rec.SNAPSHOT, rec.encode_snapshot(new.snapshot()), new)
            return PartitionResult(state=new)

        return await self._locked(key, action)

    async def read_state(
        self, group_id: str, topic_id: uuid.UUID | None, partition: int, leader_epoch: int
    ) -> PartitionResult:
        """The state a partition leader starts from; a new leader epoch is recorded, and an older
        one is fenced (FENCED_LEADER_EPOCH)."""
        if topic_id is None or partition < 0:
            return _invalid(topic_id, partition)
        key = (group_id, topic_id, partition)

        async def action(shard: StateShard) -> PartitionResult:
            current = shard.states.get(key)
            if current is None:
                raise KafkaError(ErrorCode.invalid_request, READ_UNINITIALIZED)
            if leader_epoch != -1 and current.leader_epoch > leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch, "The leader epoch is older than the recorded one.")
            self._check_topic(topic_id, partition)
            if leader_epoch == -1 or leader_epoch == current.leader_epoch:
                return PartitionResult(state=current)
            log.info(
                "Share-partition %s-%s-%d read by a leader of epoch %d",
                group_id,
                uuids.to_str(topic_id),
                partition,
                leader_epoch,
            )
            rtype, value, new = self._state_record(
                shard, key, current, current.start_offset, current.delivery_complete_count, leader_epoch, []
            )
            await self._write(shard, key, rtype, value, new)
            return PartitionResult(state=current)

        return await self._locked(key, action)

    async def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID | None,
        partition: int,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: Iterable[StateBatch],
    ) -> PartitionResult:
        """A partition leader's changes: a new start offset (-1: unchanged) and changed batches."""
        if topic_id is None or partition < 0:
            return _invalid(topic_id, partition)
        key = (group_id, topic_id, partition)
        new_batches = list(batches)

        async def action(shard: StateShard) -> PartitionResult:
            current = shard.states.get(key)
            if current is None:
                raise KafkaError(ErrorCode.invalid_request, WRITE_UNINITIALIZED)
            if leader_epoch != -1 and current.leader_epoch > leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch, "The leader epoch is older than the recorded one.")
            if state_epoch != -1 and current.state_epoch > state_epoch:
                raise KafkaError(ErrorCode.fenced_state_epoch, "The share-partition state epoch is newer.")
            self._check_topic(topic_id, partition)
            rtype, value, new = self._state_record(
                shard, key, current, start_offset, delivery_complete_count, current.leader_epoch, new_batches
            )
            await self._write(shard, key, rtype, value, new)
            return PartitionResult(state=new)

        return await self._locked(key, action)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID | None, partition: int) -> PartitionResult:
        try:
            key = self._checked_key(group_id, topic_id, partition)
        except KafkaError as exc:
            return PartitionResult(exc.code, exc.message)

        async def action(shard: StateShard) -> PartitionResult:
            if key not in shard.states:
                return PartitionResult()
            await self._write(shard, key, rec.SNAPSHOT, None, None)
            return PartitionResult()

        return await self._locked(key, action)

    def read_summary(self, group_id: str, topic_id: uuid.UUID | None, partition: int) -> PartitionResult:
        """Start offset, epochs and delivery-complete count (for describe and lag); no state yet
        is start offset -1, not an error."""
        try:
            if topic_id is None or partition < 0:
                return _invalid(topic_id, partition)
            shard = self._shard((group_id, topic_id, partition))
            self._check_topic(topic_id, partition)
        except KafkaError as exc:
            return PartitionResult(exc.code, exc.message)
        state = shard.states.get((group_id, topic_id, partition))
        # no state: start offset and delivery-complete count -1, epochs 0 (as Kafka answers)
        return PartitionResult(state=state or ShareGroupOffset(0, 0, 0, -1, -1))

    # --- housekeeping ---------------------------------------------------------------------------
    async def _delete_states_of_topics(self, topic_ids: set[uuid.UUID]) -> None:
        """Tombstone the states of deleted topics (Kafka's maybeCleanupShareState)."""
        for shard in list(self.shards.values()):
            if shard.state is not ShardState.ACTIVE:
                continue
            for key in [k for k in shard.states if k[1] in topic_ids]:
                try:
                    await self._write(shard, key, rec.SNAPSHOT, None, None)
                except KafkaError as exc:
                    log.warning("Could not delete the share state of deleted topic %s: %s", key, exc)

    async def _housekeeping_loop(self) -> None:
        while True:
            interval_ms = min(
                int(self.config("share.coordinator.cold.partition.snapshot.interval.ms")),
                int(self.config("share.coordinator.state.topic.prune.interval.ms")),
            )
            await asyncio.sleep(interval_ms / 1000)
            try:
                await self.snapshot_cold_partitions()
                self.prune()
            except KafkaError as exc:
                log.info("Share state housekeeping deferred: %s", exc)
            except Exception:
                log.exception("Share state housekeeping failed")

    async def snapshot_cold_partitions(self) -> int:
        """A fresh snapshot of every key updated since a snapshot older than the cold interval, so
        the records before it can be pruned."""
        interval = int(self.config("share.coordinator.cold.partition.snapshot.interval.ms"))
        written = 0
        for shard in list(self.shards.values()):
            if shard.state is not ShardState.ACTIVE:
                continue
            now = now_ms()
            for key, state in list(shard.states.items()):
                if now - state.write_timestamp < interval or shard.updates_since_snapshot.get(key, 0) == 0:
                    continue  # recent, or its last record is a snapshot already

                async def action(shard: StateShard, key: Key = key) -> PartitionResult:
                    cur = shard.states.get(key)
                    if cur is None:
                        return PartitionResult()
                    snap = replace(cur, snapshot_epoch=cur.snapshot_epoch + 1, write_timestamp=now_ms())
                    await self._write(shard, key, rec.SNAPSHOT, rec.encode_snapshot(snap.snapshot()), snap)
                    return PartitionResult()

                result = await self._locked(key, action)
                if result.error == ErrorCode.none:
                    written += 1
        return written

    def prune(self) -> None:
        """Advance the log start offset of each led state partition to its redundant offset."""
        rm = self.services.replica_manager
        for shard in self.shards.values():
            if shard.state is not ShardState.ACTIVE:
                continue
            part = rm.partitions.get((SHARE_STATE_TOPIC, shard.partition))
            if part is None or not part.is_leader:
                continue
            target = min(shard.redundant_offset(), part.log.high_watermark)
            if target > part.log.log_start_offset:
                if part.log.maybe_increment_log_start_offset(target, "share coordinator pruning"):
                    log.info("Pruned %s-%d below offset %d", SHARE_STATE_TOPIC, shard.partition, target)


def _invalid(topic_id: uuid.UUID | None, partition: int) -> PartitionResult:
    if topic_id is None:
        return PartitionResult(ErrorCode.invalid_request, "The topic id cannot be null.")
    return PartitionResult(ErrorCode.invalid_request, "The partition id cannot be a negative number.")


def _parse_coordinator_key(key: str) -> Key:
    group, sep1, rest = key.rpartition(":")
    group2, sep2, tid = group.rpartition(":")
    try:
        if not sep1 or not sep2 or not group2:
            raise ValueError(key)
        return group2, uuids.from_str(tid), int(rest)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, f"Invalid share coordinator key {key!r}") from None
