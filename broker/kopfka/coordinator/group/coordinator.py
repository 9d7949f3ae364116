"""GroupCoordinator: partition ownership, loading by replay, batched writes, offsets, admin.

Seed 004: the group's coordinator is the leader of `__consumer_offsets` partition
abs(javaHashCode(group)) % offsets.topic.num.partitions. This object is a metadata publisher:
when this broker becomes leader of such a partition it replays the partition into a `Shard`
(groups + offset cache) and answers COORDINATOR_LOAD_IN_PROGRESS meanwhile; when it loses
leadership it drops the shard (NOT_COORDINATOR afterwards). Every state change is a record
appended to the partition; concurrent writes to one partition are coalesced into one batch per
event-loop turn, which is what keeps frequent offset commits cheap.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kopfka.controller.quorum_controller import CreateTopicSpec
from kopfka.coordinator.group import records as rec
from kopfka.coordinator.group.classic_protocol import ClassicProtocol, restore_classic_group
from kopfka.coordinator.group.consumer_protocol import ConsumerProtocol
from kopfka.coordinator.group.group_metadata import (
    ClassicGroup,
    ClassicState,
    ConsumerGroup,
    Group,
    ShareGroup,
    now_ms,
)
from kopfka.coordinator.group.offsets import CommittedOffset, OffsetCache
from kopfka.coordinator.group.share_protocol import ShareProtocol
from kopfka.coordinator.group.share_records import SHARE_RECORD_TYPES
from kopfka.coordinator.group.txn_offsets import PendingTxnOffsets
from kopfka.coordinator.internal_topic import coordinator_endpoint, ensure_topic, follow_leadership, replay_partition
from kopfka.coordinator.keys import OFFSETS_TOPIC, partition_for
from kopfka.coordinator.partition_writer import PartitionWriter
from kopfka.metadata.image import MetadataDelta, MetadataImage
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.record_codec import CONTROL_COMMIT, control_record_type, decode_records

log = logging.getLogger(__name__)

class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


@dataclass
class Shard:
    """The state of one __consumer_offsets partition this broker leads."""

    partition: int
    leader_epoch: int
    state: ShardState = ShardState.LOADING
    groups: dict[str, Group] = field(default_factory=dict)
    offsets: OffsetCache = field(default_factory=OffsetCache)
    txn_offsets: PendingTxnOffsets = field(default_factory=PendingTxnOffsets)
    writer: PartitionWriter | None = None
    load_task: asyncio.Task[None] | None = None

    def close(self) -> None:
        self.state = ShardState.CLOSED
        if self.load_task is not None:
            self.load_task.cancel()
        for g in self.groups.values():
            g.cancel_timers()
            if isinstance(g, ClassicGroup):
                for m in g.members.values():
                    for fut in (m.join_future, m.sync_future):
                        if fut is not None and not fut.done():
                            fut.set_exception(KafkaError(ErrorCode.not_coordinator, "coordinator moved"))
        if self.writer is not None:
            self.writer.close(KafkaError(ErrorCode.not_coordinator, "coordinator moved"))


def _write_error(code: ErrorCode, message: str) -> KafkaError:
    """Kafka's mapping of a failed offsets-topic append to the coordinator's answer."""
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition):
        return KafkaError(ErrorCode.not_coordinator, message)
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return KafkaError(ErrorCode.invalid_commit_offset_size, message)
    if code in (
        ErrorCode.invalid_producer_epoch,
        ErrorCode.producer_fenced,
        ErrorCode.invalid_txn_state,
        ErrorCode.invalid_producer_id_mapping,
        ErrorCode.transaction_coordinator_fenced,
    ):
        return KafkaError(code, message)  # a fenced transactional offset commit
    if code == ErrorCode.request_timed_out:
        return KafkaError(code, "the write was not replicated in time")
    return KafkaError(ErrorCode.coordinator_not_available, f"{code.name}: {message}")


class GroupCoordinator:
    name = "GroupCoordinator"

    def __init__(self, services: Any) -> None:
        self.services = services
        self.node_id: int = services.node_id
        self.shards: dict[int, Shard] = {}
        self.image = MetadataImage()
        self._create_lock = asyncio.Lock()
        self.classic = ClassicProtocol(self)
        self.consumer = ConsumerProtocol(self)
        self.share = ShareProtocol(self)
        self._expiry_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- configuration ---------------------------------------------------------------------
    def config(self, key: str, default: Any = None) -> Any:
        cfg = self.services.config
        if key in cfg.values:
            return cfg.values[key]
        raw = cfg.originals.get(key)
        if raw is None:
            return default
        if isinstance(default, int):
            try:
                return int(raw)
            except ValueError:
                return default
        return raw

    @property
    def num_partitions(self) -> int:
        topic = self.image.topics_by_name.get(OFFSETS_TOPIC)
        if topic is not None:
            return len(topic.partitions)
        return int(self.config("offsets.topic.num.partitions", 50))

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- metadata publisher ------------------------------------------------------------------
    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        changes = delta.topic_changes
        deleted_names = [t.name for t in changes.deleted.values()]
        if OFFSETS_TOPIC in deleted_names:
            for shard in self.shards.values():
                shard.close()
            self.shards.clear()
        topic = image.topics_by_name.get(OFFSETS_TOPIC)
        if topic is not None:
            changed = changes.changed_partitions.get(topic.topic_id, ())
            follow_leadership(topic, changed, self.node_id, self.shards, self._start_load, "group coordinator")
        gone = [n for n in deleted_names if n != OFFSETS_TOPIC]
        gone_ids = {t.topic_id for t in changes.deleted.values()}
        for shard in self.shards.values():
            if gone_ids and shard.state is ShardState.ACTIVE:
                self.share.on_topics_deleted(shard, gone_ids)
        if gone:
            self.spawn(self._delete_topic_offsets(set(gone)))
        if self.shards and self._expiry_task is None:
            self._expiry_task = self.spawn(self._expiry_loop())

    def _start_load(self, pid: int, epoch: int) -> None:
        shard = Shard(pid, epoch)
        self.shards[pid] = shard
        shard.load_task = self.spawn(self._load(shard))

    async def _load(self, shard: Shard) -> None:
        start = asyncio.get_running_loop().time()
        tp = (OFFSETS_TOPIC, shard.partition)
        count = 0
        try:
            async for data, header in replay_partition(self.services.replica_manager, tp):
                if header.is_control:
                    if header.is_transactional and header.producer_id >= 0:
                        commit = control_record_type(data, header) == CONTROL_COMMIT
                        self._complete_txn(shard, header.producer_id, commit)
                    continue
                pid = header.producer_id if header.is_transactional else -1
                for r in decode_records(data, header):
                    count += 1
                    self._replay(shard, r.key, r.value, r.offset, pid)
            if shard.state is ShardState.CLOSED:
                return
            for group in shard.groups.values():
                if isinstance(group, ClassicGroup):
                    self.classic.on_loaded(shard, group)
            shard.state = ShardState.ACTIVE
            log.log(
                logging.INFO if count else logging.DEBUG,
                "Loaded %s-%d (%d records, %d groups) in %.0f ms",
                OFFSETS_TOPIC,
                shard.partition,
                count,
                len(shard.groups),
                (asyncio.get_running_loop().time() - start) * 1000,
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Failed to load %s-%d", OFFSETS_TOPIC, shard.partition)
            shard.close()
            if self.shards.get(shard.partition) is shard:
                del self.shards[shard.partition]

    def _replay(
        self, shard: Shard, key: bytes | None, value: bytes | None, offset: int = -1, producer_id: int = -1
    ) -> None:
        """Fold one record into the shard; `producer_id` >= 0 marks a transactional offset commit."""
        if key is None:
            return
        try:
            k = rec.decode_key(key)
            if isinstance(k, rec.OffsetKey) and producer_id >= 0:
                if value is not None:
                    shard.txn_offsets.add(
                        producer_id,
                        k.group,
                        (k.topic, k.partition),
                        CommittedOffset.from_value(rec.decode_offset_value(value), offset),
                    )
            elif isinstance(k, rec.OffsetKey):
                if value is None:
                    shard.offsets.delete(k.group, (k.topic, k.partition))
                else:
                    shard.offsets.put(
                        k.group,
                        (k.topic, k.partition),
                        CommittedOffset.from_value(rec.decode_offset_value(value), offset),
                    )
                    if k.group not in shard.groups:
                        shard.groups[k.group] = ClassicGroup(k.group)
            elif isinstance(k, rec.OtherKey) and k.record_type in SHARE_RECORD_TYPES:
                self.share.replay(shard, key, value)
            elif isinstance(k, rec.GroupKey):
                if value is None:
                    old = shard.groups.pop(k.group, None)
                    if old is not None:
                        old.cancel_timers()
                else:
                    shard.groups[k.group] = restore_classic_group(k.group, rec.decode_group_value(value))
        except rec.RecordFormatError as exc:
            log.warning("Skipping unreadable record in %s-%d: %s", OFFSETS_TOPIC, shard.partition, exc)

    # --- ownership ---------------------------------------------------------------------------
    def shard_for(self, group_id: str) -> Shard:
        if not group_id:
            raise KafkaError(ErrorCode.invalid_group_id, "The group id is empty")
        if OFFSETS_TOPIC not in self.image.topics_by_name:
            raise KafkaError(ErrorCode.coordinator_not_available, "The offsets topic does not exist yet")
        found = self.shards.get(partition_for(group_id, self.num_partitions))
        if found is None or found.state is ShardState.CLOSED:
            raise KafkaError(ErrorCode.not_coordinator, f"This broker is not the coordinator for {group_id}")
        shard = found
        if shard is None or shard.state is ShardState.CLOSED:
            raise KafkaError(ErrorCode.not_coordinator, f"This broker is not the coordinator for {group_id}")
        if shard.state is ShardState.LOADING:
            raise KafkaError(ErrorCode.coordinator_load_in_progress, f"Loading the coordinator state of {group_id}")
        return shard

    async def find_coordinator(self, key: str, key_type: int, listener: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": key,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        try:
            if key_type == 1:
                raise KafkaError(ErrorCode.coordinator_not_available, "transactions are not available yet")
            if key_type != 0:
                raise KafkaError(ErrorCode.invalid_request, f"unsupported coordinator key type {key_type}")
            if not key:
                raise KafkaError(ErrorCode.invalid_request, "empty group id")
            topic = self.image.topics_by_name.get(OFFSETS_TOPIC)
            if topic is None:
                await self.ensure_offsets_topic()
                raise KafkaError(ErrorCode.coordinator_not_available, "creating the offsets topic")
            out.update(coordinator_endpoint(self.image, topic, partition_for(key, len(topic.partitions)), listener))
        except KafkaError as exc:
            out.update(error_code=exc.code, error_message=exc.message)
        return out

    async def ensure_offsets_topic(self) -> None:
        spec = CreateTopicSpec(
            OFFSETS_TOPIC,
            int(self.config("offsets.topic.num.partitions", 50)),
            int(self.config("offsets.topic.replication.factor", 3)),
            None,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config("offsets.topic.segment.bytes", 104857600)),
                "compression.type": "producer",
            },
        )
        await ensure_topic(
            self.services.controller, self._create_lock, lambda: OFFSETS_TOPIC in self.image.topics_by_name, spec
        )

    # --- writes --------------------------------------------------------------------------------
    async def write(
        self, shard: Shard, records: list[tuple[bytes, bytes | None]], apply: Callable[[], None] | None = None
    ) -> None:
        """Append records to the shard's partition; `apply` runs once they are committed."""
        if shard.state is ShardState.CLOSED:
            raise KafkaError(ErrorCode.not_coordinator, "coordinator moved")
        if shard.writer is None:
            shard.writer = self._writer(shard.partition, shard.leader_epoch)
        await shard.writer.write(records, None if apply is None else (lambda _first: apply()))

    async def write_at(
        self,
        shard: Shard,
        records: list[tuple[bytes, bytes | None]],
        apply: Callable[[int], None],
        producer: tuple[int, int] | None = None,
    ) -> int:
        """Like `write`; `apply` gets the log offset of the first record (transactional with `producer`)."""
        if shard.state is ShardState.CLOSED:
            raise KafkaError(ErrorCode.not_coordinator, "coordinator moved")
        if shard.writer is None:
            shard.writer = self._writer(shard.partition, shard.leader_epoch)
        return await shard.writer.write(records, apply, producer=producer)

    def _writer(self, pid: int, epoch: int) -> PartitionWriter:
        return PartitionWriter(
            self.services,
            (OFFSETS_TOPIC, pid),
            epoch,
            timeout_ms=lambda: int(self.config("offsets.commit.timeout.ms", 5000)),
            map_error=_write_error,
        )

    def group_metadata_records(self, group: ClassicGroup) -> list[tuple[bytes, bytes | None]]:
        if group.state is ClassicState.DEAD:
            return [(rec.group_key(group.group_id), None)]
        value = rec.GroupValue(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp,
            [
                rec.MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(group.protocol_name),
                    m.assignment,
                )
                for m in group.members.values()
            ],
        )
        return [(rec.group_key(group.group_id), rec.encode_group_value(value))]

    # --- offsets --------------------------------------------------------------------------------
    def topic_name(self, topic_id: Any) -> str | None:
        from kopfka import uuids

        t = self.image.topics_by_id.get(uuids.to_str(topic_id))
        return t.name if t is not None else None

    def topic_id(self, name: str) -> Any:
        from kopfka import uuids

        t = self.image.topics_by_name.get(name)
        return uuids.from_str(t.topic_id) if t is not None else uuids.ZERO_UUID

    def _partition_exists(self, topic: str, partition: int) -> bool:
        t = self.image.topics_by_name.get(topic)
        return t is not None and partition in t.partitions

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
        *,
        api_version: int,
        retention_ms: int = -1,
        producer: tuple[int, int] | None = None,
    ) -> dict[tuple[str, int], ErrorCode]:
        """offsets: (topic, partition, offset, leader_epoch, metadata). Returns per-partition errors.

        With `producer` (id, epoch) this is a TxnOffsetCommit: the offsets are written in the
        producer's transaction and stay pending until its marker (see txn_offsets)."""
        shard = self.shard_for(group_id)
        group = shard.groups.get(group_id)
        created = False
        if group is None:
            created = True
            if generation >= 0:
                missing = ErrorCode.illegal_generation if api_version < 9 or producer else ErrorCode.group_id_not_found
                raise KafkaError(missing, f"group {group_id} does not exist")
            group = ClassicGroup(group_id)
            shard.groups[group_id] = group
        if isinstance(group, ShareGroup):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        if isinstance(group, ConsumerGroup):
            try:
                self.consumer.validate_commit(group, member_id, generation, instance_id,
                                              [(topic, p) for topic, p, *_ in offsets])
            except KafkaError as exc:
                if producer is None or exc.code != ErrorCode.stale_member_epoch:
                    raise
                raise KafkaError(ErrorCode.illegal_generation, exc.message) from None
        else:
            self.classic.validate_commit(group, member_id, generation, instance_id, transactional=producer is not None)
        max_meta = int(self.config("offset.metadata.max.bytes", 4096))
        results: dict[tuple[str, int], ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        accepted: list[tuple[tuple[str, int], CommittedOffset]] = []
        ts = now_ms()
        expire = ts + retention_ms if retention_ms >= 0 else -1
        for topic, p, offset, epoch, metadata in offsets:
            if not self._partition_exists(topic, p):
                results[(topic, p)] = ErrorCode.unknown_topic_or_partition
                continue
            if metadata is not None and len(metadata.encode()) > max_meta:
                results[(topic, p)] = ErrorCode.offset_metadata_too_large
                continue
            off = CommittedOffset(offset, epoch, metadata or "", ts, expire)
            records.append((rec.offset_key(group_id, topic, p), rec.encode_offset_value(off.to_value())))
            accepted.append(((topic, p), off))
            results[(topic, p)] = ErrorCode.none

        def apply(first: int) -> None:
            for i, (tp, off) in enumerate(accepted):
                off.record_offset = first + i
                if producer is None:
                    shard.offsets.put(group_id, tp, off)
                else:
                    shard.txn_offsets.add(producer[0], group_id, tp, off)

        try:
            await self.write_at(shard, records, apply, producer)
        except KafkaError as exc:
            for tp, _ in accepted:
                results[tp] = exc.code
        if (
            created
            and not shard.offsets.has_offsets(group_id)
            and not shard.txn_offsets.has_group(group_id)
            and shard.groups.get(group_id) is group
        ):
            shard.groups.pop(group_id, None)  # nothing was committed: don't leave an empty simple group behind
        return results

    async def fetch_offsets(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> dict[tuple[str, int], CommittedOffset | ErrorCode | None]:
        """Committed offsets (None where nothing is committed); topics=None means all. With
        `require_stable`, partitions with a pending transactional commit are UNSTABLE_OFFSET_COMMIT."""
        shard = self.shard_for(group_id)
        group = shard.groups.get(group_id)
        if isinstance(group, ShareGroup):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        if isinstance(group, ConsumerGroup) and member_id:
            self.consumer.validate_fetch(group, member_id, member_epoch)
        committed = shard.offsets.get(group_id)
        out: dict[tuple[str, int], CommittedOffset | ErrorCode | None]
        if topics is None:
            out = dict(committed)
        else:
            out = {(t, p): committed.get((t, p)) for t, parts in topics for p in parts}
        if require_stable and shard.txn_offsets.by_producer:
            for tp in out:
                if shard.txn_offsets.has_pending(group_id, tp):
                    out[tp] = ErrorCode.unstable_offset_commit
        return out

    def on_transaction_completed(self, producer_id: int, partitions: list[int], commit: bool) -> None:
        """A COMMIT/ABORT marker of `producer_id` was written to these offsets partitions."""
        for pid in partitions:
            shard = self.shards.get(pid)
            if shard is not None and shard.state is ShardState.ACTIVE:
                self._complete_txn(shard, producer_id, commit)

    def _complete_txn(self, shard: Shard, producer_id: int, commit: bool) -> None:
        for gid in shard.txn_offsets.complete(producer_id, commit, shard.offsets):
            if gid not in shard.groups:
                shard.groups[gid] = ClassicGroup(gid)

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        shard = self.shard_for(group_id)
        group = shard.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.group_id_not_found, f"group {group_id} does not exist")
        if isinstance(group, ShareGroup):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        subscribed: set[str] | None
        if group.is_empty:
            subscribed = set()
        else:
            subscribed = group.subscribed_topics()
            if subscribed is None:
                raise KafkaError(ErrorCode.non_empty_group, f"group {group_id} is not empty")
        results: dict[tuple[str, int], ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        to_delete: list[tuple[str, int]] = []
        committed = shard.offsets.get(group_id)
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.group_subscribed_to_topic
                continue
            results[tp] = ErrorCode.none
            if tp in committed:
                records.append((rec.offset_key(group_id, *tp), None))
                to_delete.append(tp)

        def apply() -> None:
            for tp in to_delete:
                shard.offsets.delete(group_id, tp)

        await self.write(shard, records, apply)
        return results

    async def _delete_topic_offsets(self, topics: set[str]) -> None:
        for shard in list(self.shards.values()):
            if shard.state is not ShardState.ACTIVE:
                continue
            victims = [(g, tp) for g in shard.offsets.all_groups() for tp in shard.offsets.get(g) if tp[0] in topics]
            if not victims:
                continue

            def apply(shard: Shard = shard, victims: list[tuple[str, tuple[str, int]]] = victims) -> None:
                for g, tp in victims:
                    shard.offsets.delete(g, tp)

            try:
                await self.write(shard, [(rec.offset_key(g, *tp), None) for g, tp in victims], apply)
            except KafkaError as exc:
                log.warning("Could not delete offsets of deleted topics %s: %s", sorted(topics), exc)

    # --- expiry ----------------------------------------------------------------------------------
    async def _expiry_loop(self) -> None:
        interval = int(self.config("offsets.retention.check.interval.ms", 600_000)) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets(now_ms())
            except Exception:
                log.exception("offset expiry failed")

    async def expire_offsets(self, now: int) -> int:
        """One expiry pass over every active shard; returns the number of offsets removed."""
        retention_ms = int(self.config("offsets.retention.minutes", 10080)) * 60_000
        removed = 0
        for shard in list(self.shards.values()):
            if shard.state is not ShardState.ACTIVE:
                continue
            records: list[tuple[bytes, bytes | None]] = []
            expired_all: list[tuple[str, list[tuple[str, int]]]] = []
            dead: list[ClassicGroup] = []
            for gid in list(shard.groups):
                group = shard.groups[gid]
                if isinstance(group, ShareGroup):
                    continue  # share groups commit no offsets; they live until DeleteGroups
                empty_since = group.state_timestamp if group.is_empty else None
                subs = None if group.is_empty else group.subscribed_topics()
                if subs is None and not group.is_empty:
                    continue  # members with an opaque protocol: their offsets stay
                expired = shard.offsets.expired(
                    gid, now, retention_ms, empty_since_ms=empty_since, subscribed=(subs or set()).__contains__
                )
                records.extend((rec.offset_key(gid, *tp), None) for tp in expired)
                expired_all.append((gid, expired))
                remaining = set(shard.offsets.get(gid)) - set(expired)
                if (
                    isinstance(group, ClassicGroup)
                    and group.is_empty
                    and group.state is ClassicState.EMPTY
                    and not remaining
                ):
                    dead.append(group)
                    records.append((rec.group_key(gid), None))
            if not records:
                continue

            def apply(
                shard: Shard = shard,
                expired_all: list[tuple[str, list[tuple[str, int]]]] = expired_all,
                dead: list[ClassicGroup] = dead,
            ) -> None:
                for gid, tps in expired_all:
                    for tp in tps:
                        shard.offsets.delete(gid, tp)
                for g in dead:
                    if shard.groups.get(g.group_id) is g and g.is_empty and not shard.offsets.has_offsets(g.group_id):
                        g.transition(ClassicState.DEAD)
                        del shard.groups[g.group_id]

            await self.write(shard, records, apply)
            removed += sum(len(t) for _, t in expired_all)
            if removed:
                log.info("Removed %d expired offsets from %s-%d", removed, OFFSETS_TOPIC, shard.partition)
        return removed

    # --- admin -----------------------------------------------------------------------------------
    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[dict[str, Any]]:
        want_states = {s.lower() for s in states}
        want_types = {t.lower() for t in types}
        out = []
        for shard in self.shards.values():
            if shard.state is not ShardState.ACTIVE:
                continue
            for gid, g in shard.groups.items():
                if want_states and g.state_name.lower() not in want_states:
                    continue
                if want_types and g.kind not in want_types:
                    continue
                out.append(
                    {
                        "group_id": gid,
                        "protocol_type": g.protocol_type or "",
                        "group_state": g.state_name,
                        "group_type": g.kind,
                    }
                )
        return sorted(out, key=lambda g: g["group_id"])

    def loading(self) -> bool:
        return any(s.state is ShardState.LOADING for s in self.shards.values())

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            try:
                shard = self.shard_for(gid)
                group = shard.groups.get(gid)
                if group is None or (isinstance(group, ClassicGroup) and group.state is ClassicState.DEAD):
                    raise KafkaError(ErrorCode.group_id_not_found, f"group {gid} does not exist")
                if not group.is_empty:
                    raise KafkaError(ErrorCode.non_empty_group, f"group {gid} is not empty")
                if isinstance(group, ShareGroup):
                    await self.share.delete_group(shard, group)
                    out[gid] = ErrorCode.none
                    continue
                records: list[tuple[bytes, bytes | None]] = [
                    (rec.offset_key(gid, *tp), None) for tp in shard.offsets.get(gid)
                ]
                records.append((rec.group_key(gid), None))

                def apply(shard: Shard = shard, gid: str = gid, group: Group = group) -> None:
                    shard.offsets.delete_group(gid)
                    if shard.groups.get(gid) is group:
                        del shard.groups[gid]
                        if isinstance(group, ClassicGroup):
                            group.transition(ClassicState.DEAD)
                        else:
                            group.dead = True

                await self.write(shard, records, apply)
                out[gid] = ErrorCode.none
            except KafkaError as exc:
                out[gid] = exc.code
        return out

    def shutdown(self) -> None:
        for shard in self.shards.values():
            shard.close()
        self.shards.clear()
        for t in list(self._tasks):
            t.cancel()
