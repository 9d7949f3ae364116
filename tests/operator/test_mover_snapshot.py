"""The data mover plans only on a picture of the cluster taken in one go.

Metadata is a broker's image, ListPartitionReassignments the controller's word: a reassignment
that ends between the two reads shows in Metadata at its old and new replicas with nothing under
way, and a plan on that moves a replica again (CI, 2026-12-01: test_spread_onto_a_new_broker
started an extra move of a small partition in its second step). Here the reads are scripted
by a fake admin so that each race happens on cue.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kopfka.client.admin import LogDirInfo, PartitionInfo, Reassignment, ReplicaLog, TopicInfo
from kopfka.protocol.errors import ErrorCode
from kopfka_operator.rebalance.cluster import read_cluster
from kopfka_operator.rebalance.mover import Mover

BROKERS = {b: (f"127.0.0.{b + 1}", 9092, None) for b in range(4)}
# t-0 moves from [0, 1] to [3, 1]: under way it is listed at the union [3, 1, 0]
MOVING = Reassignment([3, 1, 0], [3], [0])
OTHERS = {1: [1, 2], 2: [2, 0], 3: [0, 1], 4: [1, 2], 5: [2, 0]}


class FakeAdmin:
    """Answers Metadata with `replicas_of_t0` for t-0, and ListPartitionReassignments from
    `reads` in turn (the last one again once they run out)."""

    def __init__(self, replicas_of_t0: list[int], reads: list[dict[tuple[str, int], Reassignment]]) -> None:
        self.t0 = replicas_of_t0
        self.reads = reads
        self.altered: list[dict[Any, Any]] = []

    async def list_partition_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        return self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]

    async def metadata(self, _topics: Any) -> tuple[Any, list[TopicInfo], str]:
        parts = [PartitionInfo(0, self.t0[0], 1, self.t0, self.t0, [], ErrorCode.none)]
        parts += [PartitionInfo(p, r[0], 0, r, r, [], ErrorCode.none) for p, r in OTHERS.items()]
        return BROKERS, [TopicInfo("t", None, False, parts)], "c"

    def replicas_on(self, broker: int) -> list[int]:
        held = [0] if broker in self.t0 else []
        return held + [p for p, r in OTHERS.items() if broker in r]

    async def alter_partition_reassignments(self, wanted: dict[Any, Any]) -> dict[Any, Any]:
        self.altered.append(wanted)
        return dict.fromkeys(wanted)


class FakeNode:
    def __init__(self, admin: FakeAdmin, broker: int) -> None:
        self.admin, self.broker = admin, broker

    async def describe_log_dirs(self) -> list[LogDirInfo]:
        held = {("t", p): ReplicaLog(1000, 0, False) for p in self.admin.replicas_on(self.broker)}
        return [LogDirInfo(f"/data/{self.broker}", ErrorCode.none, 10**9, 10**9, False, held)]

    async def alter_replica_log_dirs(self, moves: dict[Any, Any]) -> dict[Any, Any]:
        return dict.fromkeys(moves)


class FakeClusterAdmin:
    def __init__(self, admin: FakeAdmin) -> None:
        self.fake = admin

    @asynccontextmanager
    async def session(self) -> AsyncIterator[FakeAdmin]:
        yield self.fake

    async def node(self, broker: int, _address: str) -> FakeNode:
        return FakeNode(self.fake, broker)


def _state(admin: FakeAdmin) -> Any:
    return asyncio.run(read_cluster(admin, FakeClusterAdmin(admin).node))  # type: ignore[arg-type]


def _spread(admin: FakeAdmin) -> tuple[bool, str]:
    return asyncio.run(Mover(FakeClusterAdmin(admin)).spread([3]))  # type: ignore[arg-type]


def test_a_reassignment_ending_between_the_reads_is_settling_and_nothing_starts() -> None:
    # listed before Metadata, gone after it, Metadata still at the union: the controller finished
    # it in between (or the broker has not applied the end yet)
    admin = FakeAdmin([3, 1, 0], [{("t", 0): MOVING}, {}])
    assert _state(admin).settling == (("t", 0),)
    admin = FakeAdmin([3, 1, 0], [{("t", 0): MOVING}, {}])
    done, progress = _spread(admin)
    assert not done and "t-0" in progress and "settled" in progress, progress
    assert admin.altered == []


def test_without_the_second_read_the_same_picture_moves_a_replica_again() -> None:
    """The race the guard is for: the picture (union in Metadata, nothing under way) makes a plan
    that starts a move -- so the guard above is what keeps it from starting."""
    admin = FakeAdmin([3, 1, 0], [{}])
    assert _state(admin).settling == ()
    done, progress = _spread(admin)
    assert not done and admin.altered, progress


def test_a_reassignment_metadata_does_not_show_yet_is_settling() -> None:
    admin = FakeAdmin([0, 1], [{("t", 0): MOVING}])  # listed twice, Metadata still at the old replicas
    assert _state(admin).settling == (("t", 0),)
    done, progress = _spread(admin)
    assert not done and "settled" in progress and admin.altered == []


def test_a_consistent_picture_is_planned_on() -> None:
    admin = FakeAdmin([3, 1, 0], [{("t", 0): MOVING}])  # listed twice, Metadata at the union
    state = _state(admin)
    assert state.settling == ()
    t0 = next(p for p in state.model.partitions if p.tp == ("t", 0))
    assert t0.replicas == (3, 1) and t0.reassigning  # counted where it is going
    done, progress = _spread(admin)
    assert not done and "settled" not in progress, progress
