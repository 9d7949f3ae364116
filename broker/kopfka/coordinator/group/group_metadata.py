"""Group state: classic groups (the JoinGroup/SyncGroup state machine), KIP-848 consumer
groups (epochs, target and current assignments) and KIP-932 share groups. Pure data plus the transitions' invariants;
the protocols that drive them live in classic_protocol.py and consumer_protocol.py."""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass, field
from typing import Any

from kopfka.protocol.errors import ErrorCode, KafkaError


def now_ms() -> int:
    return int(time.time() * 1000)


class ClassicState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's allowed previous states: a transition from anywhere else is a coordinator bug.
_VALID_PREVIOUS: dict[ClassicState, set[ClassicState]] = {
    ClassicState.EMPTY: {ClassicState.PREPARING_REBALANCE},
    ClassicState.PREPARING_REBALANCE: {ClassicState.EMPTY, ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE},
    ClassicState.COMPLETING_REBALANCE: {ClassicState.PREPARING_REBALANCE},
    ClassicState.STABLE: {ClassicState.COMPLETING_REBALANCE},
    ClassicState.DEAD: set(ClassicState),
}


@dataclass
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[dict[str, Any]] | None = None
    sync_future: asyncio.Future[dict[str, Any]] | None = None
    heartbeat_timer: asyncio.TimerHandle | None = None
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def cancel_timer(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None


@dataclass
class ClassicGroup:
    group_id: str
    state: ClassicState = ClassicState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # MEMBER_ID_REQUIRED issued, not yet joined
    pending_sync: set[str] = field(default_factory=set)
    state_timestamp: int = field(default_factory=now_ms)
    join_timer: asyncio.TimerHandle | None = None
    sync_timer: asyncio.TimerHandle | None = None
    initial_delay_remaining_ms: int = 0
    in_initial_delay: bool = False
    new_member_added: bool = False

    kind = "classic"

    def transition(self, new: ClassicState) -> None:
        if self.state not in _VALID_PREVIOUS[new]:
            raise KafkaError(ErrorCode.unknown_server_error,
                             f"group {self.group_id}: illegal transition {self.state.value} -> {new.value}")
        self.state = new
        self.state_timestamp = now_ms()

    def is_(self, *states: ClassicState) -> bool:
        return self.state in states

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def is_empty(self) -> bool:
        return not self.members

    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicMember | None:
        m = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if m is None:
            return None
        m.cancel_timer()
        if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return m

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; most votes wins."""
        cands = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in cands)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda n: votes[n])

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only; None if unknown)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        from kopfka.coordinator.group.consumer_protocol import parse_subscription_topics

        out: set[str] = set()
        for m in self.members.values():
            topics = parse_subscription_topics(m.metadata(self.protocol_name))
            if topics is None:
                return None
            out |= topics
        return out

    def cancel_timers(self) -> None:
        for t in (self.join_timer, self.sync_timer):
            if t is not None:
                t.cancel()
        self.join_timer = self.sync_timer = None
        for m in self.members.values():
            m.cancel_timer()


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


Assignment = dict[str, set[int]]  # topic id -> partitions


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    rebalance_timeout_ms: int
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # KIP-1251: the member epoch at which each assigned (or pending-revocation) partition was
    # given to the member; a commit with an older member epoch is accepted for the partitions
    # it already owned at that epoch
    assignment_epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None
    left_static: bool = False

    def cancel_timers(self) -> None:
        for t in (self.session_timer, self.rebalance_timer):
            if t is not None:
                t.cancel()
        self.session_timer = self.rebalance_timer = None


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    subscription_metadata: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (id, partitions)
    assignor_name: str = "uniform"
    state_timestamp: int = field(default_factory=now_ms)
    dead: bool = False

    kind = "consumer"
    protocol_type = "consumer"

    @property
    def state_name(self) -> str:
        if self.dead:
            return "Dead"
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    @property
    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out |= set(m.subscribed_topic_names)
        out |= set(self.subscription_metadata)
        return out

    def cancel_timers(self) -> None:
        for m in self.members.values():
            m.cancel_timers()




# --- share groups (KIP-932) --------------------------------------------------------------------


@dataclass
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None

    def cancel_timers(self) -> None:
        if self.session_timer is not None:
            self.session_timer.cancel()
            self.session_timer = None


@dataclass
class ShareGroup:
    """A share group: members share partitions; the share-partitions' delivery state lives with
    the partition leaders and the share coordinator. `initialized` (and `initializing`,
    `deleting`) are the share-partitions whose state the share coordinator holds, as
    ShareGroupStatePartitionMetadata records them: topic id -> partitions."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    initialized: Assignment = field(default_factory=dict)
    initializing: Assignment = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    topic_names: dict[str, str] = field(default_factory=dict)  # topic id -> name, as recorded
    state_timestamp: int = field(default_factory=now_ms)
    dead: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    kind = "share"
    protocol_type = "share"

    @property
    def state_name(self) -> str:
        if self.dead:
            return "Dead"
        return "Stable" if self.members else "Empty"

    @property
    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out |= set(m.subscribed_topic_names)
        return out

    def cancel_timers(self) -> None:
        for m in self.members.values():
            m.cancel_timers()


Group = ClassicGroup | ConsumerGroup | ShareGroup
