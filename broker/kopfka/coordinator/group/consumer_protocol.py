"""KIP-848 consumer groups: ConsumerGroupHeartbeat with server-side assignment.

The group epoch bumps whenever membership, subscriptions or the subscribed topics' partitions
change; the coordinator then computes a new target assignment with a server-side assignor
(`uniform` or `range`) and reconciles each member towards it on its heartbeats, like Kafka's
CurrentAssignmentBuilder: a member that owns partitions no longer in its target must first
revoke them (it keeps its epoch and gets its assignment minus those partitions); a member may
only receive a partition once its previous owner has released it; when a member's partitions
agree with its target it moves to the assignment epoch. So no partition is ever owned by two
members, without a group-wide barrier. Members are fenced by the session timeout, or by the
rebalance timeout when they do not revoke in time.

Consumer group state is held in memory (offsets are persisted): after a coordinator failover
members get UNKNOWN_MEMBER_ID and rejoin with epoch 0, keeping their committed offsets.
"""

from __future__ import annotations

import asyncio
import logging
import re
import struct
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kopfka import uuids
from kopfka.coordinator.group.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, MemberSpec
from kopfka.coordinator.group.group_metadata import (
    Assignment,
    ClassicGroup,
    ClassicState,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    ShareGroup,
)
from kopfka.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kopfka.coordinator.group.coordinator import GroupCoordinator, Shard

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


# --- the classic consumer protocol's embedded formats (for describe, OffsetDelete, expiry, CLI) ----

def _read_string(data: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", data, pos)
    pos += 2
    if n < 0:
        return None, pos
    return data[pos:pos + n].decode("utf-8", "replace"), pos + n


def parse_subscription_topics(data: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: topics come first); None if unreadable."""
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out = set()
        for _ in range(max(count, 0)):
            t, pos = _read_string(data, pos)
            if t is not None:
                out.add(t)
        return out
    except (struct.error, IndexError):
        return None


def parse_assignment(data: bytes) -> dict[str, list[int]] | None:
    """Partitions of a ConsumerProtocolAssignment; None if unreadable."""
    if not data:
        return {}
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out: dict[str, list[int]] = {}
        for _ in range(max(count, 0)):
            t, pos = _read_string(data, pos)
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            parts = list(struct.unpack_from(f">{max(n, 0)}i", data, pos))
            pos += 4 * max(n, 0)
            out.setdefault(t or "", []).extend(parts)
        return out
    except (struct.error, IndexError):
        return None


def _minus(a: Assignment, b: Assignment) -> Assignment:
    out = {}
    for t, ps in a.items():
        rest = ps - b.get(t, set())
        if rest:
            out[t] = rest
    return out


def _intersect(a: Assignment, b: Assignment) -> Assignment:
    out = {}
    for t, ps in a.items():
        both = ps & b.get(t, set())
        if both:
            out[t] = both
    return out


def _union(a: Assignment, b: Assignment) -> Assignment:
    out = {t: set(ps) for t, ps in a.items()}
    for t, ps in b.items():
        out.setdefault(t, set()).update(ps)
    return out


def _keep_epochs(member: ConsumerMember) -> None:
    """Forget the assignment epochs of partitions the member neither holds nor still revokes."""
    held = _union(member.assigned, member.pending_revocation)
    member.assignment_epochs = {tp: e for tp, e in member.assignment_epochs.items() if tp[1] in held.get(tp[0], ())}


def _norm(a: Assignment) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in a.items() if ps}


class ConsumerProtocol:
    def __init__(self, coord: GroupCoordinator) -> None:
        self.coord = coord

    # --- configuration ------------------------------------------------------------------------------
    def _assignors(self) -> list[str]:
        raw = self.coord.config("group.consumer.assignors", "uniform,range")
        names: list[str] = []
        for n in (raw if isinstance(raw, list) else str(raw).split(",")):
            n = n.strip().rsplit(".", 1)[-1].lower().replace("assignor", "")
            n = {"uniform": "uniform", "range": "range"}.get(n, n)
            if n in ASSIGNORS and n not in names:
                names.append(n)
        return names or [DEFAULT_ASSIGNOR]

    def _session_timeout_ms(self) -> int:
        return int(self.coord.config("group.consumer.session.timeout.ms", 45000))

    def _heartbeat_interval_ms(self) -> int:
        return int(self.coord.config("group.consumer.heartbeat.interval.ms", 5000))

    # --- heartbeat ----------------------------------------------------------------------------------
    async def heartbeat(self, *, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                        rack_id: str | None, rebalance_timeout_ms: int, subscribed_topic_names: list[str] | None,
                        subscribed_topic_regex: str | None, server_assignor: str | None,
                        owned: list[tuple[Any, list[int]]] | None, client_id: str, client_host: str,
                        api_version: int) -> dict[str, Any]:
        try:
            return self._heartbeat(group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                                   subscribed_topic_names, subscribed_topic_regex, server_assignor, owned, client_id,
                                   client_host, api_version)
        except KafkaError as exc:
            return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message, "member_id": None,
                    "member_epoch": -1, "heartbeat_interval": 0, "assignment": None}

    def _heartbeat(self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                   rack_id: str | None, rebalance_timeout_ms: int, subscribed_topic_names: list[str] | None,
                   subscribed_topic_regex: str | None, server_assignor: str | None,
                   owned_raw: list[tuple[Any, list[int]]] | None, client_id: str, client_host: str,
                   api_version: int) -> dict[str, Any]:
        if not group_id:
            raise KafkaError(ErrorCode.invalid_request, "GroupId can't be empty.")
        if member_epoch == 0:
            if rebalance_timeout_ms < 0:
                raise KafkaError(ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request.")
            if subscribed_topic_names is None and subscribed_topic_regex is None:
                raise KafkaError(ErrorCode.invalid_request,
                                 "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif not member_id:
            raise KafkaError(ErrorCode.invalid_request, "MemberId can't be empty.")
        if member_epoch < STATIC_LEAVE_EPOCH:
            raise KafkaError(ErrorCode.invalid_request, f"MemberEpoch {member_epoch} is invalid.")
        if server_assignor is not None and server_assignor not in self._assignors():
            raise KafkaError(ErrorCode.unsupported_assignor, f"ServerAssignor {server_assignor} is not supported.")
        if subscribed_topic_regex is not None:
            try:
                re.compile(subscribed_topic_regex)
            except re.error as exc:
                raise KafkaError(ErrorCode.invalid_regular_expression, str(exc)) from exc
        shard = self.coord.shard_for(group_id)
        group = self._group(shard, group_id, create=member_epoch == 0)
        if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(shard, group, member_id, member_epoch, instance_id)
        owned: Assignment | None = None
        if owned_raw is not None:
            owned = {}
            for tid, parts in owned_raw:
                owned.setdefault(uuids.to_str(tid), set()).update(parts)
        bump = False
        if member_epoch == 0:
            if not member_id:
                member_id = str(uuid.uuid4())
            member, bump = self._join(shard, group, member_id, instance_id)
        else:
            known = group.members.get(member_id)
            if known is None:
                raise KafkaError(ErrorCode.unknown_member_id, f"Member {member_id} is not in group {group_id}.")
            member = known
            if instance_id is not None and group.static_members.get(instance_id) != member_id:
                raise KafkaError(ErrorCode.fenced_instance_id, f"Instance {instance_id} belongs to another member.")
            if member_epoch != member.member_epoch:
                lost_response = (member_epoch == member.previous_member_epoch and owned is not None
                                 and not _minus(owned, member.assigned))
                if not lost_response:
                    raise KafkaError(ErrorCode.fenced_member_epoch,
                                     f"The consumer group member has a smaller or larger member epoch ({member_epoch}) "
                                     f"than the one known by the group coordinator ({member.member_epoch}).")
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        names = None if subscribed_topic_names is None else sorted(set(subscribed_topic_names))
        if names is not None and names != member.subscribed_topic_names:
            member.subscribed_topic_names = names
            bump = True
        if subscribed_topic_regex is not None and subscribed_topic_regex != (member.subscribed_topic_regex or ""):
            member.subscribed_topic_regex = subscribed_topic_regex or None
            bump = True
        if server_assignor is not None and server_assignor != member.server_assignor:
            member.server_assignor = server_assignor
            bump = True
        if self._subscription_metadata(group) != group.subscription_metadata:
            bump = True
        if bump:
            group.group_epoch += 1
            log.info("Group %s epoch bumped to %d (member %s)", group_id, group.group_epoch, member_id)
        self._schedule_session(shard, group, member)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
        before = (member.member_epoch, _norm(member.assigned))
        self._reconcile(shard, group, member, owned)
        send = (member_epoch == 0 or before != (member.member_epoch, _norm(member.assigned))
                or member.member_epoch != member_epoch
                or (owned is not None and _norm(owned) != _norm(member.assigned)))
        assignment = None
        if send:
            assignment = {"topic_partitions": [{"topic_id": uuids.from_str(t), "partitions": sorted(ps)}
                                               for t, ps in sorted(member.assigned.items()) if ps]}
        return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "member_id": member.member_id,
                "member_epoch": member.member_epoch, "heartbeat_interval": self._heartbeat_interval_ms(),
                "assignment": assignment}

    def _group(self, shard: Shard, group_id: str, *, create: bool) -> ConsumerGroup:
        group = shard.groups.get(group_id)
        if isinstance(group, ShareGroup):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        if isinstance(group, ClassicGroup):
            if not group.is_empty or not group.is_(ClassicState.EMPTY):
                raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
            group = None
        if group is None or group.dead:
            if not create:
                raise KafkaError(ErrorCode.unknown_member_id, f"Group {group_id} has no such member.")
            group = ConsumerGroup(group_id, assignor_name=self._assignors()[0])
            shard.groups[group_id] = group
        return group

    def _join(self, shard: Shard, group: ConsumerGroup, member_id: str,
              instance_id: str | None) -> tuple[ConsumerMember, bool]:
        previous: ConsumerMember | None = None
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is not None and holder != member_id:
                old = group.members.get(holder)
                if old is not None and not old.left_static:
                    raise KafkaError(ErrorCode.unreleased_instance_id,
                                     f"Static member {instance_id} is still in use by member {holder}.")
                previous = old
        existing = group.members.get(member_id)
        if existing is not None and previous is None:
            # A rejoin with epoch 0 (the member lost its state): start it over.
            self._remove(group, existing)
            bump = True
        else:
            bump = previous is None
        member = ConsumerMember(member_id, instance_id, None, "", "", [], None, None, -1)
        if previous is not None:
            # a static member coming back: it takes over the old member's identity and partitions
            member.subscribed_topic_names = list(previous.subscribed_topic_names)
            member.subscribed_topic_regex = previous.subscribed_topic_regex
            member.server_assignor = previous.server_assignor
            member.member_epoch = previous.previous_member_epoch if previous.member_epoch < 0 else previous.member_epoch
            member.previous_member_epoch = previous.previous_member_epoch
            member.assigned = {t: set(ps) for t, ps in previous.assigned.items()}
            member.pending_revocation = {t: set(ps) for t, ps in previous.pending_revocation.items()}
            member.assignment_epochs = dict(previous.assignment_epochs)
            member.state = previous.state
            previous.cancel_timers()
            del group.members[previous.member_id]
            if previous.member_id in group.target:
                group.target[member_id] = group.target.pop(previous.member_id)
            log.info("Static member %s of group %s rejoined as %s", instance_id, group.group_id, member_id)
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        return member, bump

    def _leave(self, shard: Shard, group: ConsumerGroup, member_id: str, epoch: int,
               instance_id: str | None) -> dict[str, Any]:
        member = group.members.get(member_id)
        if member is None and instance_id is not None:
            mid = group.static_members.get(instance_id)
            member = group.members.get(mid) if mid else None
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"Member {member_id} is not in group {group.group_id}.")
        if epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # keep the assignment for the session timeout: the same instance may come back
            member.left_static = True
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            self._schedule_session(shard, group, member)
            log.info("Static member %s of group %s left temporarily", member.instance_id, group.group_id)
        else:
            log.info("Member %s left group %s", member.member_id, group.group_id)
            self._fence(group, member)
        return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "member_id": member_id,
                "member_epoch": epoch, "heartbeat_interval": 0, "assignment": None}

    def _remove(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.cancel_timers()
        group.members.pop(member.member_id, None)
        group.target.pop(member.member_id, None)
        if member.instance_id is not None and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]

    def _fence(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self._remove(group, member)
        group.group_epoch += 1
        if group.is_empty:
            from kopfka.coordinator.group.group_metadata import now_ms

            group.state_timestamp = now_ms()

    def _schedule_session(self, shard: Shard, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = asyncio.get_running_loop().call_later(
            self._session_timeout_ms() / 1000, self._expire, shard, group, member, "session timeout")

    def _expire(self, shard: Shard, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        from kopfka.coordinator.group.coordinator import ShardState

        if shard.state is ShardState.CLOSED or group.members.get(member.member_id) is not member:
            return
        log.info("Member %s of group %s fenced: %s", member.member_id, group.group_id, why)
        self._fence(group, member)

    # --- assignment -------------------------------------------------------------------------------
    def _subscribed_names(self, group: ConsumerGroup, member: ConsumerMember) -> set[str]:
        names = {n for n in member.subscribed_topic_names if n in self.coord.image.topics_by_name}
        if member.subscribed_topic_regex:
            pattern = re.compile(member.subscribed_topic_regex)
            names |= {n for n in self.coord.image.topics_by_name if not n.startswith("__") and pattern.fullmatch(n)}
        return names

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, tuple[str, int]]:
        out = {}
        topics = self.coord.image.topics_by_name
        for m in group.members.values():
            for name in self._subscribed_names(group, m):
                t = topics[name]
                out[name] = (t.topic_id, len(t.partitions))
        return out

    def _compute_target(self, group: ConsumerGroup) -> None:
        meta = self._subscription_metadata(group)
        chosen = [m.server_assignor for m in group.members.values() if m.server_assignor]
        name = max(set(chosen), key=chosen.count) if chosen else self._assignors()[0]
        specs = {}
        for mid, m in group.members.items():
            ids = {meta[n][0] for n in self._subscribed_names(group, m) if n in meta}
            current = group.target.get(mid, m.assigned)
            specs[mid] = MemberSpec(ids, {t: set(ps) for t, ps in current.items()}, m.instance_id)
        counts = {tid: n for tid, n in meta.values()}
        group.target = ASSIGNORS[name](specs, counts)
        group.assignor_name = name
        group.subscription_metadata = meta
        group.assignment_epoch = group.group_epoch
        log.info("Computed target assignment of group %s at epoch %d with %s", group.group_id,
                 group.assignment_epoch, name)

    def _owned_by_others(self, group: ConsumerGroup, member: ConsumerMember) -> Assignment:
        out: Assignment = {}
        for m in group.members.values():
            if m is not member:
                out = _union(out, _union(m.assigned, m.pending_revocation))
        return out

    def _reconcile(self, shard: Shard, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> None:
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _intersect(owned, member.pending_revocation):
                return
            member.pending_revocation = {}
            _keep_epochs(member)
            if member.rebalance_timer is not None:
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
        target = group.target.get(member.member_id, {})
        if member.member_epoch == group.assignment_epoch and member.state is MemberState.STABLE:
            return
        revoke = _minus(member.assigned, target)
        if revoke:
            member.assigned = _intersect(member.assigned, target)
            member.pending_revocation = revoke
            _keep_epochs(member)
            member.state = MemberState.UNREVOKED_PARTITIONS
            if member.rebalance_timer is not None:
                member.rebalance_timer.cancel()
            member.rebalance_timer = asyncio.get_running_loop().call_later(
                max(member.rebalance_timeout_ms, 0) / 1000, self._expire, shard, group, member,
                "did not revoke its partitions within the rebalance timeout")
            return
        wanted = _minus(target, member.assigned)
        taken = self._owned_by_others(group, member)
        free = _minus(wanted, taken)
        member.assigned = _union(member.assigned, free)
        for t, ps in free.items():
            for p in ps:
                member.assignment_epochs[(t, p)] = group.assignment_epoch
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.state = MemberState.UNRELEASED_PARTITIONS if _minus(wanted, free) else MemberState.STABLE

    # --- offsets and describe ---------------------------------------------------------------------
    def validate_commit(self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str | None,
                        partitions: Iterable[tuple[str, int]] = ()) -> None:
        """Kafka 4.3's rule (KIP-1251): the current member epoch commits anything; an older one
        only partitions the member still holds that were assigned to it at or before that epoch
        (a commit racing the heartbeat that bumped the epoch is not a zombie's)."""
        if epoch < 0 and not member_id:
            if group.is_empty:
                return
            raise KafkaError(ErrorCode.unknown_member_id, "only members may commit offsets of a non-empty group")
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"Member {member_id} is not in group {group.group_id}.")
        if epoch == member.member_epoch:
            return
        if epoch > member.member_epoch:
            raise KafkaError(ErrorCode.stale_member_epoch,
                             f"Received member epoch {epoch} is newer than current member epoch {member.member_epoch}.")
        topics = self.coord.image.topics_by_name
        for name, p in partitions:
            t = topics.get(name)
            assigned_at = member.assignment_epochs.get((t.topic_id, p)) if t is not None else None
            if assigned_at is None:
                raise KafkaError(ErrorCode.stale_member_epoch,
                                 f"Partition {name}-{p} is not assigned or pending revocation for member.")
            if epoch < assigned_at:
                raise KafkaError(ErrorCode.stale_member_epoch,
                                 f"Received member epoch {epoch} is older than assignment epoch {assigned_at} "
                                 f"for partition {name}-{p}.")

    def validate_fetch(self, group: ConsumerGroup, member_id: str, epoch: int) -> None:
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"Member {member_id} is not in group {group.group_id}.")
        if epoch >= 0 and epoch != member.member_epoch:
            raise KafkaError(ErrorCode.stale_member_epoch,
                             f"The member epoch {epoch} is not the current one ({member.member_epoch}).")

    def _describe_assignment(self, a: Assignment) -> dict[str, Any]:
        tps = []
        for tid, ps in sorted(a.items()):
            t = self.coord.image.topics_by_id.get(tid)
            tps.append({"topic_id": uuids.from_str(tid), "topic_name": t.name if t else "", "partitions": sorted(ps)})
        return {"topic_partitions": tps}

    def describe(self, group: ConsumerGroup) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.none, "error_message": None, "group_id": group.group_id,
            "group_state": group.state_name, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "assignor_name": group.assignor_name,
            "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                         "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                         "subscribed_topic_names": list(m.subscribed_topic_names),
                         "subscribed_topic_regex": m.subscribed_topic_regex or "",  # Kafka: "" when none
                         "assignment": self._describe_assignment(m.assigned),
                         "target_assignment": self._describe_assignment(group.target.get(m.member_id, {})),
                         "member_type": 1} for m in group.members.values()],
            "authorized_operations": -(2**31),
        }
