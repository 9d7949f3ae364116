"""KIP-932 share groups on the group coordinator: ShareGroupHeartbeat, membership, assignment,
the initialization of share-partition state, describe, and the share-group admin operations.

Members name themselves (a UUID chosen by the client) and join with epoch 0. The group epoch
bumps when membership, subscriptions or the subscribed topics' partitions change; the target
assignment (the `simple` assignor: partitions are shared when members outnumber them) is then
recomputed and a member's assignment is its target at once — share-partitions need no
revocation, since records are handed out one acquisition at a time by the partition leaders.

Only share-partitions whose state the share coordinator holds are assignable. Unlike Kafka,
which answers the first heartbeat with an empty assignment and initializes the state
(InitializeShareGroupState) afterwards, so that members receive partitions on their next
heartbeat (group.share.heartbeat.interval.ms later), kopfka initializes within the heartbeat
that needs it and answers with the assignment: a consumer starts fetching at once. The
initialization is recorded as ShareGroupStatePartitionMetadata and the group epoch as
ShareGroupMetadata in `__consumer_offsets`, so both survive failovers (share_records).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from typing import TYPE_CHECKING, Any

from kopfka import uuids
from kopfka.config.group_config import GROUP_RESOURCE, group_config_value
from kopfka.coordinator.group import share_records as srec
from kopfka.coordinator.group.group_metadata import Assignment, ShareGroup, ShareMember, now_ms
from kopfka.coordinator.group.share_assignor import simple_assign
from kopfka.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kopfka.coordinator.group.coordinator import GroupCoordinator, Shard

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
ASSIGNOR = "simple"
MAX_MEMBER_ID_LENGTH = 36
UNKNOWN_PARTITION = "This server does not host this topic-partition."


def heartbeat_error(exc: KafkaError) -> dict[str, Any]:
    """A ShareGroupHeartbeat response carrying an error."""
    return {
        "throttle_time": 0,
        "error_code": exc.code,
        "error_message": exc.message,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval": 0,
        "assignment": None,
    }


def _copy(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


class ShareProtocol:
    def __init__(self, coord: GroupCoordinator) -> None:
        self.coord = coord

    # --- configuration ----------------------------------------------------------------------------
    def group_config(self, group_id: str, key: str) -> Any:
        overrides = self.coord.image.configs.get((GROUP_RESOURCE, group_id), {})
        return group_config_value(overrides, self.coord.services.config.values, key)

    @property
    def persister(self) -> Any:
        persister = getattr(self.coord.services, "share_persister", None)
        if persister is None:
            raise KafkaError(ErrorCode.coordinator_not_available, "The share coordinator is not running.")
        return persister

    # --- lookups --------------------------------------------------------------------------------
    def share_group(self, shard: Shard, group_id: str, *, create: bool) -> ShareGroup:
        group = shard.groups.get(group_id)
        if group is not None and not isinstance(group, ShareGroup):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
        if group is None or group.dead:
            if not create:
                raise KafkaError(ErrorCode.group_id_not_found, f"Share group {group_id} not found.")
            group = ShareGroup(group_id)
            shard.groups[group_id] = group
        return group

    # --- heartbeat --------------------------------------------------------------------------------
    async def heartbeat(
        self,
        *,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topic_names: list[str] | None,
        client_id: str,
        client_host: str,
    ) -> dict[str, Any]:
        try:
            if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
                raise KafkaError(ErrorCode.invalid_request, "Invalid member id in the request.")
            if not group_id:
                raise KafkaError(ErrorCode.invalid_request, "GroupId can't be empty.")
            if rack_id is not None and not rack_id.strip():
                raise KafkaError(ErrorCode.invalid_request, "RackId can't be empty.")
            if member_epoch == 0 and not subscribed_topic_names:
                raise KafkaError(ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request.")
            if member_epoch < LEAVE_EPOCH:
                raise KafkaError(ErrorCode.invalid_request, "MemberEpoch is invalid.")
            shard = self.coord.shard_for(group_id)
            group = self.share_group(shard, group_id, create=member_epoch == 0)
            async with group.lock:
                if member_epoch == LEAVE_EPOCH:
                    return await self._leave(shard, group, member_id)
                return await self._heartbeat(
                    shard, group, member_id, member_epoch, rack_id, subscribed_topic_names, client_id, client_host
                )
        except KafkaError as exc:
            return heartbeat_error(exc)

    async def _heartbeat(
        self,
        shard: Shard,
        group: ShareGroup,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        names: list[str] | None,
        client_id: str,
        client_host: str,
    ) -> dict[str, Any]:
        member = group.members.get(member_id)
        bump = False
        if member is None:
            if member_epoch != 0:
                raise KafkaError(
                    ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}."
                )
            max_size = int(self.coord.config("group.share.max.size", 200))
            if len(group.members) >= max_size:
                raise KafkaError(
                    ErrorCode.group_max_size_reached,
                    f"The share group has reached its maximum capacity of {max_size} members.",
                )
            member = ShareMember(member_id)
            group.members[member_id] = member
            bump = True
            log.info("[GroupId %s] Member %s joins the share group", group.group_id, member_id)
        elif member_epoch > member.member_epoch:
            raise KafkaError(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a greater member epoch ({member_epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                "all its partitions and rejoin.",
            )
        elif member_epoch != 0 and member_epoch < member.member_epoch and member_epoch != member.previous_member_epoch:
            raise KafkaError(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a smaller member epoch ({member_epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}), and it does not match the "
                f"previous member epoch ({member.previous_member_epoch}). The member must abandon "
                "all its partitions and rejoin.",
            )
        before = _copy(member.assigned)
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if names is not None and sorted(set(names)) != member.subscribed_topic_names:
            member.subscribed_topic_names = sorted(set(names))
            bump = True
        try:
            bump |= await self._maybe_initialize(shard, group)
            metadata_hash = self._metadata_hash(group)
            if bump or metadata_hash != group.metadata_hash:
                await self._write_epoch(shard, group, group.group_epoch + 1, metadata_hash)
        except KafkaError:
            if member_epoch == 0 and not before and member.member_epoch == 0:
                group.members.pop(member_id, None)  # a join that could not be recorded: the client retries
            raise
        if group.assignment_epoch < group.group_epoch:
            self._compute_target(group)
        if member.member_epoch != group.assignment_epoch or member.assigned != group.target.get(member_id, {}):
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
            member.assigned = _copy(group.target.get(member_id, {}))
        self._schedule_session(shard, group, member)
        assignment = None
        if member_epoch == 0 or names is not None or member.assigned != before:
            assignment = {
                "topic_partitions": [
                    {"topic_id": uuids.from_str(t), "partitions": sorted(ps)}
                    for t, ps in sorted(member.assigned.items())
                ]
            }
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "error_message": None,
            "member_id": member_id,
            "member_epoch": member.member_epoch,
            "heartbeat_interval": int(self.group_config(group.group_id, "share.heartbeat.interval.ms")),
            "assignment": assignment,
        }

    async def _leave(self, shard: Shard, group: ShareGroup, member_id: str) -> dict[str, Any]:
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}."
            )
        log.info("[GroupId %s] Member %s left the share group", group.group_id, member_id)
        await self._fence(shard, group, member)
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "error_message": None,
            "member_id": member_id,
            "member_epoch": LEAVE_EPOCH,
            "heartbeat_interval": 0,
            "assignment": None,
        }

    async def _fence(self, shard: Shard, group: ShareGroup, member: ShareMember) -> None:
        member.cancel_timers()
        group.members.pop(member.member_id, None)
        group.target.pop(member.member_id, None)
        if not group.members:
            group.state_timestamp = now_ms()
        await self._write_epoch(shard, group, group.group_epoch + 1, self._metadata_hash(group))

    def _schedule_session(self, shard: Shard, group: ShareGroup, member: ShareMember) -> None:
        member.cancel_timers()
        timeout_ms = int(self.group_config(group.group_id, "share.session.timeout.ms"))
        member.session_timer = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, lambda: self.coord.spawn(self._expire(shard, group, member))
        )

    async def _expire(self, shard: Shard, group: ShareGroup, member: ShareMember) -> None:
        from kopfka.coordinator.group.coordinator import ShardState

        async with group.lock:
            if shard.state is ShardState.CLOSED or group.members.get(member.member_id) is not member:
                return
            log.info(
                "[GroupId %s] Member %s fenced from the group because the member session expired",
                group.group_id,
                member.member_id,
            )
            try:
                await self._fence(shard, group, member)
            except KafkaError as exc:
                log.warning("Could not record the fencing of %s in %s: %s", member.member_id, group.group_id, exc)

    # --- assignment -------------------------------------------------------------------------------
    def _subscribed_topic_ids(self, member: ShareMember) -> set[str]:
        topics = self.coord.image.topics_by_name
        return {topics[n].topic_id for n in member.subscribed_topic_names if n in topics}

    def _metadata_hash(self, group: ShareGroup) -> int:
        """A hash of the subscribed topics' ids, names and partition counts (Kafka keeps one too,
        to notice metadata changes; kopfka's is its own 64-bit blake2b digest)."""
        h = hashlib.blake2b(digest_size=8)
        topics = self.coord.image.topics_by_name
        for name in sorted(group.subscribed_topics()):
            t = topics.get(name)
            if t is not None:
                h.update(f"{name}\0{t.topic_id}\0{len(t.partitions)}\0".encode())
        return int.from_bytes(h.digest(), "big", signed=True)

    def _compute_target(self, group: ShareGroup) -> None:
        subscriptions = {mid: self._subscribed_topic_ids(m) for mid, m in group.members.items()}
        group.target = simple_assign(subscriptions, group.initialized, group.target)
        group.assignment_epoch = group.group_epoch
        log.info(
            "[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor",
            group.group_id,
            group.assignment_epoch,
            ASSIGNOR,
        )

    # --- share-partition state ------------------------------------------------------------------
    async def _maybe_initialize(self, shard: Shard, group: ShareGroup) -> bool:
        """Initialize the state of subscribed share-partitions that have none; True when some
        became assignable (the group epoch then bumps)."""
        image = self.coord.image
        wanted: Assignment = {}
        for name in group.subscribed_topics():
            topic = image.topics_by_name.get(name)
            if topic is None:
                continue
            missing = set(topic.partitions) - group.initialized.get(topic.topic_id, set())
            if missing:
                wanted[topic.topic_id] = missing
                group.topic_names[topic.topic_id] = name
        if not wanted:
            return False
        for tid, ps in wanted.items():
            group.initializing.setdefault(tid, set()).update(ps)
        await self._write_partition_metadata(shard, group)
        epoch = group.group_epoch
        pairs = [(tid, p) for tid, ps in sorted(wanted.items()) for p in sorted(ps)]
        results = await asyncio.gather(
            *(self.persister.initialize(group.group_id, uuids.from_str(tid), p, epoch, -1) for tid, p in pairs)
        )
        done = 0
        for (tid, p), res in zip(pairs, results, strict=True):
            group.initializing.get(tid, set()).discard(p)
            if res.error == ErrorCode.none:
                group.initialized.setdefault(tid, set()).add(p)
                done += 1
            else:
                log.warning(
                    "[GroupId %s] Could not initialize the share state of %s-%d: %s %s",
                    group.group_id,
                    group.topic_names.get(tid, tid),
                    p,
                    res.error.name,
                    res.message,
                )
        group.initializing = {t: ps for t, ps in group.initializing.items() if ps}
        await self._write_partition_metadata(shard, group)
        return done > 0

    def on_topics_deleted(self, shard: Shard, topic_ids: set[str]) -> None:
        """Forget the share-partitions of deleted topics (their state is deleted by the share
        coordinator, Kafka's maybeCleanupShareGroupState)."""
        for group in list(shard.groups.values()):
            if not isinstance(group, ShareGroup):
                continue
            touched = {t for t in topic_ids if t in group.initialized or t in group.initializing or t in group.deleting}
            if not touched:
                continue
            for t in touched:
                group.initialized.pop(t, None)
                group.initializing.pop(t, None)
                group.deleting.discard(t)
            self.coord.spawn(self._write_partition_metadata_logged(shard, group))

    async def _write_partition_metadata_logged(self, shard: Shard, group: ShareGroup) -> None:
        try:
            async with group.lock:
                await self._write_partition_metadata(shard, group)
        except KafkaError as exc:
            log.warning("Could not record the share-partitions of %s: %s", group.group_id, exc)

    # --- records ----------------------------------------------------------------------------------
    async def _write_epoch(self, shard: Shard, group: ShareGroup, epoch: int, metadata_hash: int) -> None:
        key = srec.share_group_key(srec.SHARE_GROUP_METADATA, group.group_id)

        def apply() -> None:
            group.group_epoch, group.metadata_hash = epoch, metadata_hash

        await self.coord.write(shard, [(key, srec.encode_group_metadata(epoch, metadata_hash))], apply)
        log.info("[GroupId %s] Bumped group epoch to %d", group.group_id, epoch)

    def partition_metadata(self, group: ShareGroup) -> srec.StatePartitionMetadata:
        def topics(a: Assignment) -> dict[uuid.UUID, tuple[str, set[int]]]:
            return {uuids.from_str(t): (group.topic_names.get(t, ""), set(ps)) for t, ps in a.items() if ps}

        return srec.StatePartitionMetadata(
            topics(group.initializing),
            topics(group.initialized),
            {uuids.from_str(t): group.topic_names.get(t, "") for t in group.deleting},
        )

    async def _write_partition_metadata(self, shard: Shard, group: ShareGroup) -> None:
        key = srec.share_group_key(srec.SHARE_GROUP_STATE_PARTITION_METADATA, group.group_id)
        value = srec.encode_state_partition_metadata(self.partition_metadata(group))
        await self.coord.write(shard, [(key, value)])

    def replay(self, shard: Shard, key: bytes, value: bytes | None) -> None:
        record_type, group_id = srec.decode_share_group_key(key)
        existing = shard.groups.get(group_id)
        if existing is not None and not isinstance(existing, ShareGroup):
            log.warning("Skipping a share group record of %s: it is a %s group", group_id, existing.kind)
            return
        if value is None:
            if record_type == srec.SHARE_GROUP_METADATA:
                shard.groups.pop(group_id, None)
            elif isinstance(existing, ShareGroup):
                existing.initialized, existing.initializing, existing.deleting = {}, {}, set()
            return
        group = existing if isinstance(existing, ShareGroup) else ShareGroup(group_id)
        shard.groups[group_id] = group
        if record_type == srec.SHARE_GROUP_METADATA:
            group.group_epoch, group.metadata_hash = srec.decode_group_metadata(value)
        else:
            m = srec.decode_state_partition_metadata(value)
            group.initializing = {uuids.to_str(t): set(ps) for t, (_, ps) in m.initializing.items()}
            group.initialized = {uuids.to_str(t): set(ps) for t, (_, ps) in m.initialized.items()}
            group.deleting = {uuids.to_str(t) for t in m.deleting}
            for t, (name, _) in (*m.initializing.items(), *m.initialized.items()):
                group.topic_names[uuids.to_str(t)] = name
            for t, name in m.deleting.items():
                group.topic_names[uuids.to_str(t)] = name

    # --- describe ---------------------------------------------------------------------------------
    def _describe_assignment(self, a: Assignment) -> dict[str, Any]:
        out = []
        for tid, ps in sorted(a.items()):
            t = self.coord.image.topics_by_id.get(tid)
            out.append({"topic_id": uuids.from_str(tid), "topic_name": t.name if t else "", "partitions": sorted(ps)})
        return {"topic_partitions": out}

    def describe(self, group: ShareGroup) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_id": group.group_id,
            "group_state": group.state_name,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": ASSIGNOR,
            "members": [
                {
                    "member_id": m.member_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "assignment": self._describe_assignment(m.assigned),
                }
                for m in group.members.values()
            ],
            "authorized_operations": -(2**31),
        }

    # --- administration ---------------------------------------------------------------------------
    async def describe_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None) -> dict[str, Any]:
        """Start offset, leader epoch and lag of share-partitions (all initialized ones for
        topics=None), read from the share coordinator; lag = latest offset - start offset -
        delivery-complete count, as Kafka computes it."""
        shard = self.coord.shard_for(group_id)
        group = shard.groups.get(group_id)
        image = self.coord.image
        wanted: list[tuple[str, str, list[int]]] = []  # (name, topic id, partitions)
        unknown: list[tuple[str, list[int]]] = []
        if topics is None:
            if not isinstance(group, ShareGroup):
                raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
            for tid, initialized in sorted(group.initialized.items()):
                t = image.topics_by_id.get(tid)
                if t is not None:
                    wanted.append((t.name, tid, sorted(initialized)))
        else:
            for name, parts in topics:
                t = image.topics_by_name.get(name)
                if t is None:
                    unknown.append((name, parts))
                else:
                    wanted.append((name, t.topic_id, parts))
        calls = [(name, tid, p) for name, tid, ps in wanted for p in ps]
        results = await asyncio.gather(
            *(self.persister.read_summary(group_id, uuids.from_str(tid), p) for _, tid, p in calls)
        )
        need_lag = [(n, p) for (n, _, p), r in zip(calls, results, strict=True) if _lag_known(r)]
        latest = await self._latest_offsets(need_lag)
        by_topic: dict[tuple[str, str], list[dict[str, Any]]] = {(n, t): [] for n, t, _ in wanted}
        for (name, tid, p), res in zip(calls, results, strict=True):
            by_topic[(name, tid)].append(_offset_row(p, res, latest.get((name, p))))
        out = [
            {"topic_name": n, "topic_id": uuids.from_str(t), "partitions": rows} for (n, t), rows in by_topic.items()
        ]
        out += [offsetless_topic(n, ps) for n, ps in unknown]
        return {"group_id": group_id, "topics": out, "error_code": ErrorCode.none, "error_message": None}

    async def _latest_offsets(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int | ErrorCode]:
        """The high watermarks of partitions (Kafka's ListOffsets LATEST): read locally where this
        broker leads, asked of the leader otherwise."""
        services = self.coord.services
        out: dict[tuple[str, int], int | ErrorCode] = {}
        remote: dict[int, list[tuple[str, int]]] = {}
        for topic, p in tps:
            part = services.replica_manager.partitions.get((topic, p))
            if part is not None and part.is_leader:
                out[(topic, p)] = int(part.log.high_watermark)
                continue
            t = self.coord.image.topics_by_name.get(topic)
            reg = t.partitions.get(p) if t is not None else None
            if reg is None or reg.leader < 0:
                out[(topic, p)] = ErrorCode.leader_not_available
            else:
                remote.setdefault(reg.leader, []).append((topic, p))
        for leader, parts in remote.items():
            by_topic: dict[str, list[int]] = {}
            for topic, p in parts:
                by_topic.setdefault(topic, []).append(p)
            body = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1} for p in ps],
                    }
                    for topic, ps in by_topic.items()
                ],
            }
            try:
                resp = await services.inter_broker.request(leader, 2, 7, body)
                for t in resp.topics:
                    for pr in t.partitions:
                        code = ErrorCode(int(pr.error_code))
                        out[(t.name, pr.partition_index)] = int(pr.offset) if code == ErrorCode.none else code
            except KafkaError as exc:
                for tp in parts:
                    out[tp] = exc.code
        return out

    async def alter_offsets(self, group_id: str, topics: list[tuple[str, list[tuple[int, int]]]]) -> list[Any]:
        """Re-initialize share-partitions at the given start offsets (the group must be empty)."""
        shard = self.coord.shard_for(group_id)
        group = self.share_group(shard, group_id, create=True)
        image = self.coord.image
        async with group.lock:
            if group.members:
                raise KafkaError(ErrorCode.non_empty_group, "The group is not empty.")
            plan: list[tuple[str, str, int, int]] = []  # (name, topic id, partition, offset)
            out: dict[str, dict[str, Any]] = {}
            for name, parts in topics:
                t = image.topics_by_name.get(name)
                rows = out.setdefault(
                    name,
                    {
                        "topic_name": name,
                        "topic_id": uuids.from_str(t.topic_id) if t else uuids.ZERO_UUID,
                        "partitions": [],
                    },
                )
                for p, offset in parts:
                    if t is None or p not in t.partitions:
                        rows["partitions"].append(
                            {
                                "partition_index": p,
                                "error_code": ErrorCode.unknown_topic_or_partition,
                                "error_message": UNKNOWN_PARTITION,
                            }
                        )
                    else:
                        plan.append((name, t.topic_id, p, offset))
                        group.topic_names[t.topic_id] = name
            for _, tid, p, _ in plan:
                group.initializing.setdefault(tid, set()).add(p)
            await self._write_partition_metadata(shard, group)
            results = await asyncio.gather(
                *(
                    self.persister.initialize(group_id, uuids.from_str(tid), p, group.group_epoch, offset)
                    for _, tid, p, offset in plan
                )
            )
            for (name, tid, p, _), res in zip(plan, results, strict=True):
                group.initializing.get(tid, set()).discard(p)
                if res.error == ErrorCode.none:
                    group.initialized.setdefault(tid, set()).add(p)
                out[name]["partitions"].append(
                    {"partition_index": p, "error_code": res.error, "error_message": res.message if res.error else None}
                )
            group.initializing = {t: ps for t, ps in group.initializing.items() if ps}
            await self._write_partition_metadata(shard, group)
            if group.initialized and group.assignment_epoch >= group.group_epoch:
                await self._write_epoch(shard, group, group.group_epoch + 1, group.metadata_hash)
        return list(out.values())

    async def delete_offsets(self, group_id: str, topic_names: list[str]) -> list[dict[str, Any]]:
        """Delete the share state of whole topics (the group must be empty)."""
        shard = self.coord.shard_for(group_id)
        group = self.share_group(shard, group_id, create=False)
        image = self.coord.image
        out = []
        async with group.lock:
            if group.members:
                raise KafkaError(ErrorCode.non_empty_group, "The group is not empty.")
            for name in topic_names:
                t = image.topics_by_name.get(name)
                if t is None or (t.topic_id not in group.initialized and t.topic_id not in group.deleting):
                    out.append(
                        {
                            "topic_name": name,
                            "topic_id": uuids.from_str(t.topic_id) if t else uuids.ZERO_UUID,
                            "error_code": ErrorCode.unknown_topic_or_partition,
                            "error_message": "There is no offset information to delete." if t else UNKNOWN_PARTITION,
                        }
                    )
                    continue
                group.initialized.pop(t.topic_id, None)
                group.deleting.add(t.topic_id)
                group.topic_names[t.topic_id] = name
                await self._write_partition_metadata(shard, group)
                errors = [
                    r.error
                    for r in await asyncio.gather(
                        *(self.persister.delete(group_id, uuids.from_str(t.topic_id), p) for p in t.partitions)
                    )
                    if r.error != ErrorCode.none
                ]
                if errors:
                    out.append(
                        {
                            "topic_name": name,
                            "topic_id": uuids.from_str(t.topic_id),
                            "error_code": errors[0],
                            "error_message": None,
                        }
                    )
                    continue
                group.deleting.discard(t.topic_id)
                await self._write_partition_metadata(shard, group)
                out.append(
                    {
                        "topic_name": name,
                        "topic_id": uuids.from_str(t.topic_id),
                        "error_code": ErrorCode.none,
                        "error_message": None,
                    }
                )
        return out

    async def delete_group(self, shard: Shard, group: ShareGroup) -> None:
        """DeleteGroups of an empty share group: its share-partition state, then its records."""
        async with group.lock:
            if group.members:
                raise KafkaError(ErrorCode.non_empty_group, f"group {group.group_id} is not empty")
            image = self.coord.image
            targets = [(tid, p) for a in (group.initialized, group.initializing) for tid, ps in a.items() for p in ps]
            for tid in group.deleting:
                t = image.topics_by_id.get(tid)
                targets += [(tid, p) for p in (t.partitions if t else ())]
            targets = sorted({(t, p) for t, p in targets if t in image.topics_by_id})
            results = await asyncio.gather(
                *(self.persister.delete(group.group_id, uuids.from_str(t), p) for t, p in targets)
            )
            failed = [r for r in results if r.error != ErrorCode.none]
            if failed:
                raise KafkaError(failed[0].error, failed[0].message or "could not delete the share group state")
            keys = [
                srec.share_group_key(t, group.group_id)
                for t in (srec.SHARE_GROUP_STATE_PARTITION_METADATA, srec.SHARE_GROUP_METADATA)
            ]

            def apply() -> None:
                if shard.groups.get(group.group_id) is group:
                    del shard.groups[group.group_id]
                    group.dead = True

            await self.coord.write(shard, [(k, None) for k in keys], apply)


def offsetless_topic(
    name: str, partitions: list[int], error: ErrorCode = ErrorCode.none, message: str | None = None
) -> dict[str, Any]:
    """A DescribeShareGroupOffsets topic without offsets: unknown (start offset -1) or refused."""
    row = {"start_offset": -1, "leader_epoch": 0, "lag": -1, "error_code": error, "error_message": message}
    return {
        "topic_name": name,
        "topic_id": uuids.ZERO_UUID,
        "partitions": [{"partition_index": p, **row} for p in partitions],
    }


def _lag_known(res: Any) -> bool:
    st = res.state
    return bool(
        res.error == ErrorCode.none and st is not None and st.start_offset != -1 and st.delivery_complete_count != -1
    )


def _offset_row(partition: int, res: Any, latest: int | ErrorCode | None) -> dict[str, Any]:
    """One DescribeShareGroupOffsets partition: start offset, leader epoch and lag (-1 unknown)."""
    st = res.state
    row: dict[str, Any] = {
        "partition_index": partition,
        "start_offset": -1,
        "leader_epoch": 0,
        "lag": -1,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    if res.error != ErrorCode.none or st is None:
        return row
    row.update(start_offset=st.start_offset, leader_epoch=st.leader_epoch)
    if isinstance(latest, ErrorCode):
        row.update(error_code=latest, error_message=f"The latest offset is not available: {latest.name}")
    elif latest is not None:
        row["lag"] = latest - st.start_offset - st.delivery_complete_count
    return row
