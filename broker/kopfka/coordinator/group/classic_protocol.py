"""The classic group protocol: JoinGroup / SyncGroup / Heartbeat / LeaveGroup.

Kafka's state machine: Empty -> PreparingRebalance (members (re)join; the join phase ends when
every known member has rejoined or the rebalance timeout fires, after
`group.initial.rebalance.delay.ms` for a group that was empty) -> CompletingRebalance (the
leader computes the assignment and sends it in SyncGroup; it is persisted before anyone gets
it) -> Stable. Each completed join phase bumps the generation. Members are expired by asyncio
timers when they stop heartbeating, except while a JoinGroup or SyncGroup of theirs is parked.
Static members (group.instance.id) keep their assignment across a restart within the session
timeout: a rejoin with the same instance id replaces the old member id without a rebalance,
and the old member id is fenced (FENCED_INSTANCE_ID).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from kopfka.coordinator.group import records as rec
from kopfka.coordinator.group.group_metadata import (
    ClassicGroup,
    ClassicMember,
    ClassicState,
    ConsumerGroup,
    ShareGroup,
)
from kopfka.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kopfka.coordinator.group.coordinator import GroupCoordinator, Shard

log = logging.getLogger(__name__)


def restore_classic_group(group_id: str, v: rec.GroupValue) -> ClassicGroup:
    g = ClassicGroup(
        group_id,
        generation_id=v.generation,
        protocol_type=v.protocol_type or None,
        protocol_name=v.protocol,
        leader_id=v.leader,
    )
    if v.current_state_timestamp >= 0:
        g.state_timestamp = v.current_state_timestamp
    for m in v.members:
        g.members[m.member_id] = ClassicMember(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout,
            m.session_timeout,
            v.protocol_type,
            [(v.protocol or "", m.subscription)],
            m.assignment,
        )
        if m.group_instance_id is not None:
            g.static_members[m.group_instance_id] = m.member_id
    g.state = ClassicState.STABLE if g.members else ClassicState.EMPTY
    if not g.members:
        g.leader_id = None
    return g


def _error_join(member_id: str, code: ErrorCode) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


class ClassicProtocol:
    def __init__(self, coord: GroupCoordinator) -> None:
        self.coord = coord

    # --- helpers ----------------------------------------------------------------------------------
    def _join_response(
        self, group: ClassicGroup, member_id: str, *, with_members: bool, skip_assignment: bool = False
    ) -> dict[str, Any]:
        members = []
        if with_members:
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata(group.protocol_name),
                }
                for m in group.members.values()
            ]
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "generation_id": group.generation_id,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": group.leader_id or "",
            "skip_assignment": skip_assignment,
            "member_id": member_id,
            "members": members,
        }

    def _sync_response(self, group: ClassicGroup, code: ErrorCode, assignment: bytes = b"") -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "error_code": code,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "assignment": assignment,
        }

    def _schedule_heartbeat(self, shard: Shard, group: ClassicGroup, member: ClassicMember) -> None:
        member.cancel_timer()
        loop = asyncio.get_running_loop()
        member.heartbeat_timer = loop.call_later(
            member.session_timeout_ms / 1000, self._on_session_expired, shard, group, member.member_id
        )

    def _on_session_expired(self, shard: Shard, group: ClassicGroup, member_id: str) -> None:
        from kopfka.coordinator.group.coordinator import ShardState

        if shard.state is ShardState.CLOSED or shard.groups.get(group.group_id) is not group:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        member.heartbeat_timer = None
        if member.awaiting_join or member.awaiting_sync:
            self._schedule_heartbeat(shard, group, member)
            return
        log.info(
            "Member %s in group %s has failed, removing it from the group (session timeout)", member_id, group.group_id
        )
        self._remove_member(shard, group, member_id, "session timeout")

    def _remove_member(self, shard: Shard, group: ClassicGroup, member_id: str, reason: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        self._fail_waiters(group, member, ErrorCode.unknown_member_id)
        if group.is_(ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
            self._prepare_rebalance(shard, group, f"removing member {member_id}: {reason}")
        self._try_complete_join(shard, group)

    def _fail_waiters(self, group: ClassicGroup, member: ClassicMember, code: ErrorCode) -> None:
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(_error_join(member.member_id, code))
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(self._sync_response(group, code))

    def _persist(self, shard: Shard, group: ClassicGroup) -> None:
        """Write the group's current metadata in the background (state changes with nobody waiting)."""
        records = self.coord.group_metadata_records(group)

        async def run() -> None:
            try:
                await self.coord.write(shard, records)
            except KafkaError as exc:
                log.warning("Could not persist metadata of group %s: %s", group.group_id, exc)

        self.coord.spawn(run())

    # --- rebalance --------------------------------------------------------------------------------
    def _prepare_rebalance(self, shard: Shard, group: ClassicGroup, reason: str) -> None:
        loop = asyncio.get_running_loop()
        if group.is_(ClassicState.COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(self._sync_response(group, ErrorCode.rebalance_in_progress))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        was_empty = group.is_(ClassicState.EMPTY)
        group.transition(ClassicState.PREPARING_REBALANCE)
        log.info(
            "Preparing to rebalance group %s in state PreparingRebalance with old generation %d (reason: %s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        if group.join_timer is not None:
            group.join_timer.cancel()
        delay = int(self.coord.config("group.initial.rebalance.delay.ms", 3000))
        if was_empty and delay > 0:
            group.in_initial_delay = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.join_timer = loop.call_later(delay / 1000, self._on_initial_delay, shard, group, delay)
        else:
            group.in_initial_delay = False
            group.join_timer = loop.call_later(
                max(group.max_rebalance_timeout_ms(), 0) / 1000, self._complete_join, shard, group
            )

    def _on_initial_delay(self, shard: Shard, group: ClassicGroup, delay: int) -> None:
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            group.new_member_added = False
            step = min(delay, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= step
            group.join_timer = asyncio.get_running_loop().call_later(
                step / 1000, self._on_initial_delay, shard, group, delay
            )
            return
        group.in_initial_delay = False
        self._complete_join(shard, group)

    def _try_complete_join(self, shard: Shard, group: ClassicGroup) -> None:
        if group.is_(ClassicState.PREPARING_REBALANCE) and not group.in_initial_delay and group.all_joined():
            self._complete_join(shard, group)

    def _complete_join(self, shard: Shard, group: ClassicGroup) -> None:
        from kopfka.coordinator.group.coordinator import ShardState

        if shard.state is ShardState.CLOSED or not group.is_(ClassicState.PREPARING_REBALANCE):
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.in_initial_delay = False
        for m in list(group.members.values()):
            if not m.awaiting_join:
                log.info("Member %s of group %s did not rejoin in time; removing it", m.member_id, group.group_id)
                group.remove(m.member_id)
        group.generation_id += 1
        if group.is_empty:
            group.protocol_name = None
            group.leader_id = None
            group.transition(ClassicState.EMPTY)
            log.info("Group %s with generation %d is now empty", group.group_id, group.generation_id)
            self._persist(shard, group)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(ClassicState.COMPLETING_REBALANCE)
        log.info(
            "Stabilized group %s generation %d with %d members", group.group_id, group.generation_id, len(group.members)
        )
        group.pending_sync = set(group.members)
        for m in group.members.values():
            fut = m.join_future
            m.join_future = None
            m.is_new = False
            if fut is not None and not fut.done():
                fut.set_result(self._join_response(group, m.member_id, with_members=m.member_id == group.leader_id))
            self._schedule_heartbeat(shard, group, m)
        gen = group.generation_id
        group.sync_timer = asyncio.get_running_loop().call_later(
            max(group.max_rebalance_timeout_ms(), 0) / 1000, self._on_sync_timeout, shard, group, gen
        )

    def _on_sync_timeout(self, shard: Shard, group: ClassicGroup, generation: int) -> None:
        group.sync_timer = None
        if not group.is_(ClassicState.COMPLETING_REBALANCE) or group.generation_id != generation:
            return
        for mid in list(group.pending_sync):
            log.info("Member %s of group %s did not sync in time; removing it", mid, group.group_id)
            self._remove_member(shard, group, mid, "pending sync timeout")

    # --- JoinGroup --------------------------------------------------------------------------------
    async def join(
        self,
        *,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        api_version: int,
    ) -> dict[str, Any]:
        coord = self.coord
        try:
            shard = coord.shard_for(group_id)
            lo = int(coord.config("group.min.session.timeout.ms", 6000))
            hi = int(coord.config("group.max.session.timeout.ms", 1800000))
            if not lo <= session_timeout_ms <= hi:
                raise KafkaError(
                    ErrorCode.invalid_session_timeout, f"session timeout {session_timeout_ms} not in [{lo}, {hi}]"
                )
            group = shard.groups.get(group_id)
            if isinstance(group, ShareGroup):
                raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a classic group.")
            if isinstance(group, ConsumerGroup):
                if not group.is_empty:
                    raise KafkaError(
                        ErrorCode.inconsistent_group_protocol, f"group {group_id} uses the consumer protocol"
                    )
                group = None
            if group is None:
                if member_id:
                    raise KafkaError(ErrorCode.unknown_member_id, f"group {group_id} has no member {member_id}")
                group = ClassicGroup(group_id)
                shard.groups[group_id] = group
            if group.is_(ClassicState.DEAD):
                raise KafkaError(ErrorCode.coordinator_not_available, "the group is being unloaded")
            if not group.supports(protocol_type, protocols):
                raise KafkaError(
                    ErrorCode.inconsistent_group_protocol,
                    f"protocols of the member are incompatible with group {group_id}",
                )
            if rebalance_timeout_ms < 0:
                rebalance_timeout_ms = session_timeout_ms
            args = (
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
            if not member_id:
                return await self._join_new(shard, group, api_version, *args)
            return await self._join_known(shard, group, member_id, *args)
        except KafkaError as exc:
            return _error_join(member_id, exc.code)

    async def _join_new(
        self,
        shard: Shard,
        group: ClassicGroup,
        api_version: int,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_ms: int,
        session_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> dict[str, Any]:
        new_id = f"{client_id}-{uuid.uuid4()}"
        if instance_id is not None and instance_id in group.static_members:
            return await self._replace_static_member(
                shard,
                group,
                group.static_members[instance_id],
                new_id,
                client_id,
                client_host,
                rebalance_ms,
                session_ms,
                protocols,
            )
        if len(group.members) >= int(self.coord.config("group.max.size", 2**31 - 1)):
            raise KafkaError(ErrorCode.group_max_size_reached, f"group {group.group_id} is full")
        if instance_id is None and api_version >= 4:
            group.pending_members.add(new_id)
            asyncio.get_running_loop().call_later(session_ms / 1000, self._expire_pending, shard, group, new_id)
            return _error_join(new_id, ErrorCode.member_id_required)
        member = ClassicMember(
            new_id,
            instance_id,
            client_id,
            client_host,
            rebalance_ms,
            session_ms,
            protocol_type,
            list(protocols),
            is_new=True,
        )
        return await self._add_and_rebalance(shard, group, member)

    def _expire_pending(self, shard: Shard, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(shard, group)

    async def _add_and_rebalance(self, shard: Shard, group: ClassicGroup, member: ClassicMember) -> dict[str, Any]:
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        member.join_future = fut
        group.add(member)
        group.new_member_added = True
        self._schedule_heartbeat(shard, group, member)
        if group.is_(ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE, ClassicState.EMPTY):
            self._prepare_rebalance(shard, group, f"adding new member {member.member_id}")
        self._try_complete_join(shard, group)
        return await fut

    async def _replace_static_member(
        self,
        shard: Shard,
        group: ClassicGroup,
        old_id: str,
        new_id: str,
        client_id: str,
        client_host: str,
        rebalance_ms: int,
        session_ms: int,
        protocols: list[tuple[str, bytes]],
    ) -> dict[str, Any]:
        old = group.members[old_id]
        self._fail_waiters(group, old, ErrorCode.fenced_instance_id)
        was_leader = group.leader_id == old_id
        unchanged = (
            old.metadata(group.protocol_name) == dict(protocols).get(group.protocol_name or "", None)
            if group.protocol_name
            else False
        )
        group.remove(old_id)
        member = ClassicMember(
            new_id,
            old.group_instance_id,
            client_id,
            client_host,
            rebalance_ms,
            session_ms,
            old.protocol_type,
            list(protocols),
            old.assignment,
        )
        group.add(member)
        if was_leader:
            group.leader_id = new_id
        log.info("Static member %s of group %s rejoined as %s", old.group_instance_id, group.group_id, new_id)
        if group.is_(ClassicState.STABLE) and unchanged:
            self._schedule_heartbeat(shard, group, member)
            try:
                await self.coord.write(shard, self.coord.group_metadata_records(group))
            except KafkaError as exc:
                return _error_join(new_id, exc.code)
            return self._join_response(group, new_id, with_members=was_leader, skip_assignment=was_leader)
        fut2: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        member.join_future = fut2
        self._schedule_heartbeat(shard, group, member)
        if group.is_(ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
            self._prepare_rebalance(shard, group, f"static member {old.group_instance_id} rejoined with new metadata")
        self._try_complete_join(shard, group)
        return await fut2

    async def _join_known(
        self,
        shard: Shard,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_ms: int,
        session_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> dict[str, Any]:
        if member_id in group.pending_members:
            member = ClassicMember(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_ms,
                session_ms,
                protocol_type,
                list(protocols),
                is_new=True,
            )
            return await self._add_and_rebalance(shard, group, member)
        known = group.members.get(member_id)
        if instance_id is not None and group.static_members.get(instance_id, member_id) != member_id:
            raise KafkaError(ErrorCode.fenced_instance_id, f"instance {instance_id} has a newer member id")
        if known is None or group.is_(ClassicState.EMPTY, ClassicState.DEAD):
            raise KafkaError(ErrorCode.unknown_member_id, f"group {group.group_id} has no member {member_id}")
        member = known
        same = member.protocols == list(protocols)
        if group.is_(ClassicState.COMPLETING_REBALANCE) and same:
            return self._join_response(group, member_id, with_members=member_id == group.leader_id)
        if group.is_(ClassicState.STABLE) and same and member_id != group.leader_id:
            self._schedule_heartbeat(shard, group, member)
            return self._join_response(group, member_id, with_members=False)
        member.protocols = list(protocols)
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_ms, session_ms
        member.client_id, member.client_host = client_id, client_host
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(_error_join(member_id, ErrorCode.rebalance_in_progress))
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        member.join_future = fut
        self._schedule_heartbeat(shard, group, member)
        if group.is_(ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
            self._prepare_rebalance(shard, group, f"member {member_id} rejoined")
        self._try_complete_join(shard, group)
        return await fut

    # --- SyncGroup --------------------------------------------------------------------------------
    def _check_member(
        self, group: ClassicGroup | None, member_id: str, instance_id: str | None, generation: int
    ) -> ClassicMember:
        if group is None or isinstance(group, (ConsumerGroup, ShareGroup)) or group.is_(ClassicState.EMPTY):
            raise KafkaError(ErrorCode.unknown_member_id, "unknown group or member")
        if group.is_(ClassicState.DEAD):
            raise KafkaError(ErrorCode.coordinator_not_available, "the group is being unloaded")
        if instance_id is not None and group.static_members.get(instance_id, member_id) != member_id:
            raise KafkaError(ErrorCode.fenced_instance_id, f"instance {instance_id} has a newer member id")
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"group {group.group_id} has no member {member_id}")
        if generation != group.generation_id:
            raise KafkaError(
                ErrorCode.illegal_generation,
                f"generation {generation} is not group {group.group_id}'s {group.generation_id}",
            )
        return member

    async def sync(
        self,
        *,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> dict[str, Any]:
        group: Any = None
        try:
            shard = self.coord.shard_for(group_id)
            group = shard.groups.get(group_id)
            member = self._check_member(group, member_id, instance_id, generation)
            if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                raise KafkaError(ErrorCode.inconsistent_group_protocol, "protocol mismatch")
            if group.is_(ClassicState.PREPARING_REBALANCE):
                raise KafkaError(ErrorCode.rebalance_in_progress, "the group is rebalancing")
            if group.is_(ClassicState.STABLE):
                self._schedule_heartbeat(shard, group, member)
                return self._sync_response(group, ErrorCode.none, member.assignment)
            fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            member.sync_future = fut
            group.pending_sync.discard(member_id)
            if member_id == group.leader_id:
                self.coord.spawn(self._store_assignment(shard, group, assignments))
            return await fut
        except KafkaError as exc:
            return {
                "throttle_time": 0,
                "error_code": exc.code,
                "protocol_type": None,
                "protocol_name": None,
                "assignment": b"",
            }

    async def _store_assignment(self, shard: Shard, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
        gen = group.generation_id
        saved = {mid: m.assignment for mid, m in group.members.items()}
        for mid, m in group.members.items():
            m.assignment = assignments.get(mid, b"")
        records = self.coord.group_metadata_records(group)
        for mid, m in group.members.items():
            m.assignment = saved.get(mid, b"")
        try:
            await self.coord.write(shard, records)
            error = ErrorCode.none
        except KafkaError as exc:
            error = exc.code
        if not group.is_(ClassicState.COMPLETING_REBALANCE) or group.generation_id != gen:
            return
        if error != ErrorCode.none:
            for m in group.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(self._sync_response(group, error))
            self._prepare_rebalance(shard, group, f"failed to persist the assignment: {error.name}")
            self._try_complete_join(shard, group)
            return
        for mid, m in group.members.items():
            m.assignment = assignments.get(mid, b"")
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.transition(ClassicState.STABLE)
        group.pending_sync.clear()
        for m in group.members.values():
            if m.sync_future is not None and not m.sync_future.done():
                m.sync_future.set_result(self._sync_response(group, ErrorCode.none, m.assignment))
            self._schedule_heartbeat(shard, group, m)

    # --- Heartbeat / LeaveGroup -------------------------------------------------------------------
    async def heartbeat(self, *, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        try:
            shard = self.coord.shard_for(group_id)
            group = shard.groups.get(group_id)
            member = self._check_member(group, member_id, instance_id, generation)  # type: ignore[arg-type]
            assert isinstance(group, ClassicGroup)
            self._schedule_heartbeat(shard, group, member)
            if group.is_(ClassicState.PREPARING_REBALANCE):
                return ErrorCode.rebalance_in_progress
            return ErrorCode.none
        except KafkaError as exc:
            return exc.code

    async def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[ErrorCode]:
        shard = self.coord.shard_for(group_id)
        group = shard.groups.get(group_id)
        out = []
        for member_id, instance_id in members:
            try:
                if not isinstance(group, ClassicGroup) or group.is_(ClassicState.DEAD):
                    raise KafkaError(ErrorCode.unknown_member_id, "unknown group")
                if instance_id is not None:
                    known = group.static_members.get(instance_id)
                    if known is None:
                        raise KafkaError(ErrorCode.unknown_member_id, f"unknown instance {instance_id}")
                    if member_id and member_id != known:
                        raise KafkaError(ErrorCode.fenced_instance_id, f"instance {instance_id} has a newer member id")
                    member_id = known
                if member_id in group.pending_members:
                    group.pending_members.discard(member_id)
                    self._try_complete_join(shard, group)
                elif member_id in group.members:
                    log.info("Member %s is leaving group %s", member_id, group.group_id)
                    self._remove_member(shard, group, member_id, "the consumer is leaving the group")
                else:
                    raise KafkaError(ErrorCode.unknown_member_id, f"group {group_id} has no member {member_id}")
                out.append(ErrorCode.none)
            except KafkaError as exc:
                out.append(exc.code)
        return out

    # --- offsets, loading, describe ---------------------------------------------------------------
    def validate_commit(
        self, group: ClassicGroup, member_id: str, generation: int, instance_id: str | None, transactional: bool = False
    ) -> None:
        if group.is_(ClassicState.DEAD):
            raise KafkaError(ErrorCode.coordinator_not_available, "the group is being unloaded")
        if instance_id is not None and group.static_members.get(instance_id, member_id) != member_id:
            raise KafkaError(ErrorCode.fenced_instance_id, f"instance {instance_id} has a newer member id")
        if generation < 0 and group.is_(ClassicState.EMPTY):
            return
        if transactional and generation < 0 and not member_id and instance_id is None:
            return  # TxnOffsetCommit < v3 carries no member: accepted whatever the group's state
        if group.is_(ClassicState.COMPLETING_REBALANCE) and not transactional:
            raise KafkaError(ErrorCode.rebalance_in_progress, "the group is rebalancing")
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"group {group.group_id} has no member {member_id}")
        if generation != group.generation_id:
            raise KafkaError(ErrorCode.illegal_generation, f"generation {generation} != {group.generation_id}")
        shard = self.coord.shard_for(group.group_id)
        if not (member.awaiting_join or member.awaiting_sync):
            self._schedule_heartbeat(shard, group, member)

    def on_loaded(self, shard: Shard, group: ClassicGroup) -> None:
        """Restored members get a full session timeout to show up again."""
        for m in group.members.values():
            self._schedule_heartbeat(shard, group, m)

    def describe(self, group: ClassicGroup) -> dict[str, Any]:
        stable = group.is_(ClassicState.STABLE)
        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_id": group.group_id,
            "group_state": group.state_name,
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in group.members.values()
            ],
            "authorized_operations": -(2**31),
        }
