"""SharePartitionManager: the share-partitions this broker leads, and what ShareFetch and
ShareAcknowledge do with them (KIP-932, Kafka's SharePartitionManager and DelayedShareFetch).

A share-partition is created on the first fetch of its group and reads its state from the share
coordinator. A fetch acquires records of each partition of the member's share session, in turn
(rotated by the session epoch), up to the request's MaxRecords and MaxBytes; when nothing can be
acquired it waits, up to MaxWaitMs, for new records or for records released by others. The
response carries the log batches holding the acquired records and the acquired ranges with their
delivery counts. Records of aborted transactions (share.isolation.level=read_committed) and
transaction markers are archived without being delivered (Kafka delivers markers as offsets the
consumer acknowledges as GAP; kopfka spares the consumer that round trip).

It is a metadata publisher: a share-partition whose leadership moved or whose topic was deleted
is fenced and dropped (clients get NOT_LEADER_OR_FOLLOWER and the new leader takes over from the
persisted state).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from kopfka import uuids
from kopfka.config.group_config import GROUP_RESOURCE, group_config_value
from kopfka.metadata.features import share_groups_supported
from kopfka.metadata.image import MetadataDelta, MetadataImage
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.records import CorruptRecordError, iter_batches
from kopfka.server.share.share_partition import PartitionState, SharePartition
from kopfka.server.share.share_session import ShareSessionCache
from kopfka.timeouts import wait_quietly

log = logging.getLogger(__name__)

Key = tuple[str, str, int]  # (group id, topic id, partition)


@dataclass
class PartitionFetch:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    records: bytes = b""
    acquired: list[tuple[int, int, int]] = field(default_factory=list)  # (first, last, delivery count)


class SharePartitionManager:
    name = "SharePartitionManager"

    def __init__(self, services: Any) -> None:
        self.services = services
        self.sessions = ShareSessionCache(int(services.config["group.share.max.share.sessions"]))
        self.partitions: dict[Key, SharePartition] = {}
        self.image = MetadataImage()
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- configuration ------------------------------------------------------------------------
    def settings(self, group_id: str) -> Any:
        def get(key: str) -> Any:
            overrides = self.image.configs.get((GROUP_RESOURCE, group_id), {})
            return group_config_value(overrides, self.services.config.values, key)

        return get

    # --- metadata publisher ---------------------------------------------------------------------
    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        if not share_groups_supported(image.features):  # Kafka's onShareVersionToggle
            self.sessions.sessions.clear()
            for key in list(self.partitions):
                self._drop(key)
            return
        for key, sp in list(self.partitions.items()):
            topic = image.topics_by_id.get(key[1])
            reg = topic.partitions.get(key[2]) if topic is not None else None
            if reg is None or reg.leader != self.services.node_id or reg.leader_epoch != sp.leader_epoch:
                self._drop(key)

    def _drop(self, key: Key) -> None:
        sp = self.partitions.pop(key, None)
        if sp is not None:
            log.info(
                "Share-partition %s-%s-%d dropped (leadership moved, topic deleted or fenced)", key[0], sp.topic, key[2]
            )
            sp.fence()

    def _fenced(self, sp: SharePartition) -> None:
        key = (sp.group_id, uuids.to_str(sp.topic_id), sp.partition)
        if self.partitions.get(key) is sp:
            self._drop(key)

    # --- share-partitions ------------------------------------------------------------------------
    def _leader(self, topic: str, partition: int) -> Any:
        return self.services.replica_manager.get_leader_partition((topic, partition))

    def get_or_create(self, group_id: str, topic: str, topic_id: str, partition: int) -> SharePartition:
        part = self._leader(topic, partition)
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is not None and (
            sp.state in (PartitionState.FAILED, PartitionState.FENCED) or sp.leader_epoch != part.leader_epoch
        ):
            self._drop(key)
            sp = None
        if sp is None:
            sp = SharePartition(
                group_id,
                topic,
                uuids.from_str(topic_id),
                partition,
                part.leader_epoch,
                persister=self.services.share_persister,
                settings=self.settings(group_id),
            )
            sp.on_fenced = self._fenced
            self.partitions[key] = sp
        return sp

    async def _initialized(self, sp: SharePartition) -> None:
        part = self._leader(sp.topic, sp.partition)

        def log_offsets() -> tuple[int, int]:
            return part.log.log_start_offset, part.log.high_watermark

        def offset_for_time(ts: int) -> int | None:
            found = part.log.fetch_offset_by_timestamp(ts)
            return found.offset if found is not None else None

        try:
            await sp.initialize(log_offsets, offset_for_time)
        except KafkaError:
            key = (sp.group_id, uuids.to_str(sp.topic_id), sp.partition)
            if self.partitions.get(key) is sp:
                self.partitions.pop(key, None)
            raise

    # --- fetch ------------------------------------------------------------------------------------
    async def fetch(
        self,
        group_id: str,
        member_id: str,
        partitions: list[tuple[str, str, int]],
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        max_records: int,
        record_limit: bool,
        rotation: int = 0,
    ) -> dict[tuple[str, int], PartitionFetch]:
        """Acquire records for `member_id` from (topic, topic id, partition)s, waiting up to
        max_wait_ms while none can be acquired. Keyed by (topic id, partition)."""
        out: dict[tuple[str, int], PartitionFetch] = {(tid, p): PartitionFetch() for _, tid, p in partitions}
        if not partitions:
            return out
        shift = rotation % len(partitions)
        order = partitions[shift:] + partitions[:shift]
        isolation = (
            "txn_committed"
            if self.settings(group_id)("share.isolation.level") == "read_committed"
            else "high_watermark"
        )
        deadline = time.monotonic() + max_wait_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            total_bytes = total_records = 0
            waits: list[Any] = []
            per_partition_bytes = max(max_bytes // len(order), 1)
            for topic, tid, p in order:
                res = out[(tid, p)]
                if res.error != ErrorCode.none:
                    continue
                try:
                    sp = self.get_or_create(group_id, topic, tid, p)
                    await self._initialized(sp)
                    if total_records < max_records and total_bytes < max_bytes:
                        got, nbytes = self._acquire(
                            sp,
                            member_id,
                            max_records - total_records,
                            min(per_partition_bytes, max_bytes - total_bytes),
                            record_limit,
                            isolation,
                            res,
                        )
                        total_records += got
                        total_bytes += nbytes
                    waits += [sp, self.services.replica_manager.partitions.get((topic, p))]
                except KafkaError as exc:
                    res.error, res.message = exc.code, exc.message
            remaining = deadline - time.monotonic()
            if total_records > 0 or remaining <= 0 or all(r.error != ErrorCode.none for r in out.values()):
                return out
            if total_bytes >= max(min_bytes, 1):
                return out
            fut: asyncio.Future[None] = loop.create_future()
            for w in waits:
                if w is not None:
                    w.add_waiter(fut)
            try:
                await wait_quietly(fut, remaining)
            finally:
                for w in waits:
                    if w is not None:
                        w.remove_waiter(fut)

    def _acquire(
        self,
        sp: SharePartition,
        member: str,
        max_records: int,
        max_bytes: int,
        record_limit: bool,
        isolation: str,
        res: PartitionFetch,
    ) -> tuple[int, int]:
        """One read of the log and acquisition; returns (records acquired, bytes answered)."""
        part = self._leader(sp.topic, sp.partition)
        ulog = part.log
        sp.maybe_move_to_log_start(ulog.log_start_offset)
        offset = sp.next_fetch_offset()
        bound = ulog.last_stable_offset if isolation == "txn_committed" else ulog.high_watermark
        if offset >= bound:
            return 0, 0
        if offset >= sp.next_offset and sp.in_flight() >= sp.max_in_flight:
            return 0, 0
        info = ulog.read(offset, max_bytes, isolation=isolation, min_one_message=True)
        data = info.records.read() if info.records is not None else b""
        if not data:
            return 0, 0
        try:
            headers = list(iter_batches(data, allow_partial_tail=True))
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.corrupt_message, str(exc)) from exc
        skip = _undeliverable(headers, info.aborted_transactions if isolation == "txn_committed" else None)
        acquired = sp.acquire(
            member, [(h.base_offset, h.last_offset) for h in headers], max_records, record_limit, skip=skip
        )
        if not acquired:
            return 0, 0
        lo, hi = acquired[0][0], acquired[-1][1]
        chosen = [h for h in headers if h.last_offset >= lo and h.base_offset <= hi]
        start, end = chosen[0].position, chosen[-1].position + chosen[-1].size
        res.records += data[start:end]
        res.acquired += acquired
        return sum(b - a + 1 for a, b, _ in acquired), end - start

    # --- acknowledgements and sessions ------------------------------------------------------------
    async def acknowledge(
        self, group_id: str, member_id: str, acks: dict[tuple[str, int], list[tuple[int, int, list[int]]]]
    ) -> dict[tuple[str, int], ErrorCode]:
        async def one(key: tuple[str, int], batches: list[tuple[int, int, list[int]]]) -> ErrorCode:
            sp = self.partitions.get((group_id, key[0], key[1]))
            if sp is None:
                return ErrorCode.unknown_topic_or_partition
            try:
                return await sp.acknowledge(member_id, batches)
            except KafkaError as exc:
                return exc.code

        keys = list(acks)
        results = await asyncio.gather(*(one(k, acks[k]) for k in keys))
        return dict(zip(keys, results, strict=True))

    async def release(self, group_id: str, member_id: str, partitions: list[tuple[str, int]]) -> None:
        """Release what `member_id` holds in these (topic id, partition)s: its session ended."""
        sps = [sp for tid, p in partitions if (sp := self.partitions.get((group_id, tid, p))) is not None]
        results = await asyncio.gather(*(sp.release_member(member_id) for sp in sps), return_exceptions=True)
        for sp, r in zip(sps, results, strict=True):
            if r not in (ErrorCode.none, None):
                log.info("Releasing the records of %s in %s failed: %s", member_id, sp, r)
        if not any(s.group_id == group_id for s in self.sessions.sessions.values()):
            self._maybe_unload(group_id)

    def _maybe_unload(self, group_id: str) -> None:
        """No member of the group fetches here any more: drop its idle share-partitions (their
        state is persisted; the next fetch reads it again), as Kafka's onGroupEmpty does."""
        for key, sp in list(self.partitions.items()):
            if key[0] == group_id and not any(r.pending or r.state == 1 for r in sp.runs):
                self.partitions.pop(key, None)
                sp.fence()

    def close_session_later(self, group_id: str, member_id: str) -> None:
        session = self.sessions.remove(group_id, member_id)
        if session is not None:
            self._spawn(self.release(group_id, member_id, list(session.partitions)))

    def on_disconnect(self, connection: object) -> None:
        """A client connection closed: its share sessions end and their records are released."""
        for session in self.sessions.of_connection(connection):
            log.debug("Share session of %s in %s ended with its connection", session.member_id, session.group_id)
            self.close_session_later(session.group_id, session.member_id)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def shutdown(self) -> None:
        for key in list(self.partitions):
            self._drop(key)
        for t in list(self._tasks):
            t.cancel()


def _undeliverable(headers: list[Any], aborted: list[Any] | None) -> set[tuple[int, int]]:
    """Log batches to archive instead of delivering: control batches (transaction markers) and,
    with read_committed, the batches of aborted transactions (`aborted` lists each aborted
    transaction's producer id and first offset; the producer's next marker ends it)."""
    out: set[tuple[int, int]] = set()
    firsts: dict[int, list[int]] = {}
    for a in aborted or ():
        firsts.setdefault(a.producer_id, []).append(a.first_offset)
    for offsets in firsts.values():
        offsets.sort()
    aborting: set[int] = set()
    for h in headers:
        pid = h.producer_id
        pending = firsts.get(pid)
        if pending and pending[0] <= h.base_offset:
            pending.pop(0)
            aborting.add(pid)
        if h.is_control:
            out.add((h.base_offset, h.last_offset))
            aborting.discard(pid)
        elif h.is_transactional and pid in aborting:
            out.add((h.base_offset, h.last_offset))
    return out
