"""QuorumController in-process (single-voter KafkaRaftClient): a replica whose log dir is offline
(KIP-858: the dir recorded in PartitionRecord.directories is no longer among the broker's online
dirs, or is LOST) is never chosen as leader, by a leader change, an unfence, a preferred or
unclean election or the auto rebalance; unknown dirs (unassigned / none recorded) still are."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kopfka import uuids
from kopfka.controller.quorum_controller import PREFERRED, UNCLEAN, QuorumController
from kopfka.metadata import bootstrap
from kopfka.metadata import records as mr
from kopfka.metadata.image import DIR_LOST, DIR_UNASSIGNED, PartitionRegistration
from kopfka.protocol.errors import ErrorCode
from single_voter import single_voter_controller, stop

CLUSTER = "offline-dirs-cluster"
DIRS = {b: (uuids.to_str(uuids.random_uuid()), uuids.to_str(uuids.random_uuid())) for b in (1, 2, 3)}


class Ctl:
    def __init__(self, c: QuorumController) -> None:
        self.c = c
        self.epochs: dict[int, int] = {}

    async def register_all(self) -> None:
        for b in (1, 2, 3):
            self.epochs[b] = await self.c.register_broker(
                b, f"00000000-0000-0000-0000-{b:012d}", (), None, DIRS[b], CLUSTER
            )
            await self.heartbeat(b)
        assert not any(self.c.image.brokers[b].fenced for b in (1, 2, 3))

    async def heartbeat(self, b: int, **kw: object) -> None:
        await self.c.broker_heartbeat(b, self.epochs[b], 1 << 40, False, False, **kw)  # type: ignore[arg-type]

    async def partition(
        self, name: str, replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, dirs: tuple[str, ...]
    ) -> str:
        topic_id = uuids.to_str(uuids.random_uuid())
        await self.c._write(
            [mr.TopicRecord(name, topic_id), mr.PartitionRecord(0, topic_id, replicas, isr, leader, directories=dirs)]
        )
        return topic_id

    def p(self, name: str) -> PartitionRegistration:
        return self.c.image.topics_by_name[name].partitions[0]

    async def fail_dir(self, b: int, d: str) -> None:
        """Record the dir as gone from the broker's online dirs without any partition change."""
        online = tuple(x for x in self.c.image.brokers[b].log_dirs if x != d)
        await self.c._write([mr.BrokerRegistrationChangeRecord(b, self.epochs[b], log_dirs=online)])


@pytest.fixture
async def ctl(tmp_path: Path) -> AsyncIterator[Ctl]:
    c, raft = await single_voter_controller(
        tmp_path / "meta",
        bootstrap.bootstrap_records(),
        cluster_id=CLUSTER,
        static_config={"broker.session.timeout.ms": 600_000, "leader.imbalance.check.interval.seconds": 3600},
    )
    t = Ctl(c)
    await t.register_all()
    try:
        yield t
    finally:
        await stop(c, raft)


def d(b: int, i: int = 0) -> str:
    return DIRS[b][i]


async def test_leader_change_skips_isr_member_in_failed_dir(ctl: Ctl) -> None:
    await ctl.partition("t", (1, 2, 3), (1, 2, 3), 1, (d(1), d(2), d(3)))
    await ctl.partition("control", (1, 2, 3), (1, 2, 3), 1, (d(1), d(2, 1), d(3)))
    await ctl.fail_dir(2, d(2))
    await ctl.c.broker_heartbeat(1, ctl.epochs[1], 1 << 40, False, True)  # controlled shutdown of the leader
    assert ctl.p("t").leader == 3  # 2 comes first in the replica order, but its replica's dir is gone
    assert ctl.p("control").leader == 2  # broker 2's other dir is fine


async def test_no_eligible_isr_member_goes_offline_and_unclean_skips_failed_dir(ctl: Ctl) -> None:
    await ctl.partition("t", (1, 2, 3), (1, 2), 1, (d(1), d(2), d(3)))
    await ctl.fail_dir(2, d(2))
    await ctl.c.unregister_broker(1)
    assert ctl.p("t").leader == -1
    [res] = await ctl.c.elect_leaders(UNCLEAN, [("t", 0)])
    assert res.error == ErrorCode.none
    assert ctl.p("t").leader == 3 and ctl.p("t").isr == (3,)


async def test_unfence_does_not_elect_replica_in_failed_dir(ctl: Ctl) -> None:
    # broker 2 is the last ISR member of both; its dir 0 is recorded failed, dir 1 fails now
    await ctl.partition("bad", (2, 3), (2,), -1, (d(2), d(3)))
    await ctl.partition("reported", (2, 3), (2,), -1, (d(2, 1), d(3)))
    await ctl.fail_dir(2, d(2))
    await ctl.c.broker_heartbeat(2, ctl.epochs[2], 1 << 40, True, False)  # fence
    assert ctl.c.image.brokers[2].fenced
    # unfenced while reporting dir 1 failed in the same heartbeat
    await ctl.heartbeat(2, offline_log_dirs=(d(2, 1),))
    assert not ctl.c.image.brokers[2].fenced
    assert ctl.p("bad").leader == -1
    assert ctl.p("reported").leader == -1


async def test_unfence_elects_replica_in_online_or_unknown_dir(ctl: Ctl) -> None:
    await ctl.partition("good", (2, 3), (2,), -1, (d(2, 1), d(3)))
    await ctl.partition("unassigned", (2, 3), (2,), -1, (DIR_UNASSIGNED, d(3)))
    await ctl.partition("none", (2, 3), (2,), -1, ())
    await ctl.partition("lost", (2, 3), (2,), -1, (DIR_LOST, d(3)))
    await ctl.c.broker_heartbeat(2, ctl.epochs[2], 1 << 40, True, False)
    await ctl.heartbeat(2)
    assert [ctl.p(n).leader for n in ("good", "unassigned", "none", "lost")] == [2, 2, 2, -1]


async def test_preferred_election_and_rebalance_refuse_replica_in_failed_dir(ctl: Ctl) -> None:
    await ctl.partition("t", (2, 1), (1, 2), 1, (d(2), d(1)))
    await ctl.partition("ok", (2, 1), (1, 2), 1, (d(2, 1), d(1)))
    await ctl.fail_dir(2, d(2))
    ok_id = ctl.c.image.topics_by_name["ok"].topic_id
    assert [(r.topic_id, r.leader) for r in ctl.c._imbalanced_partitions()] == [(ok_id, 2)]  # type: ignore[attr-defined]
    res = {r.topic: r for r in await ctl.c.elect_leaders(PREFERRED, [("t", 0), ("ok", 0)])}
    assert res["t"].error == ErrorCode.preferred_leader_not_available
    assert ctl.p("t").leader == 1
    assert res["ok"].error == ErrorCode.none and ctl.p("ok").leader == 2


async def test_alter_partition_refuses_replica_in_offline_dir(ctl: Ctl) -> None:
    """A replica whose dir its broker reported offline (or that is recorded LOST) cannot rejoin the
    ISR through the leader's AlterPartition (INELIGIBLE_REPLICA, ISR unchanged); once the replica
    lives in an online dir again it can."""
    topic_id = await ctl.partition("t", (1, 2, 3), (1, 2), 1, (d(1), d(2), d(3)))
    await ctl.fail_dir(3, d(3))
    p = ctl.p("t")
    new_isr = [(1, ctl.epochs[1]), (2, ctl.epochs[2]), (3, ctl.epochs[3])]
    res = await ctl.c.alter_partition(1, ctl.epochs[1], topic_id, 0, p.leader_epoch, p.partition_epoch, new_isr)
    assert res.error == ErrorCode.ineligible_replica
    assert ctl.p("t").isr == (1, 2)
    lost_id = await ctl.partition("lost", (1, 2, 3), (1, 2), 1, (d(1), d(2), DIR_LOST))
    p = ctl.p("lost")
    res = await ctl.c.alter_partition(1, ctl.epochs[1], lost_id, 0, p.leader_epoch, p.partition_epoch, new_isr)
    assert res.error == ErrorCode.ineligible_replica
    # the replica moved to the broker's other (online) dir: it may join
    await ctl.c._write([mr.PartitionChangeRecord(0, topic_id, directories=(d(1), d(2), d(3, 1)))])
    p = ctl.p("t")
    res = await ctl.c.alter_partition(1, ctl.epochs[1], topic_id, 0, p.leader_epoch, p.partition_epoch, new_isr)
    assert res.error == ErrorCode.none and ctl.p("t").isr == (1, 2, 3)


async def test_reassigned_replicas_keep_their_dirs(ctl: Ctl) -> None:
    """The dirs are listed in replica order: a reassignment that reorders the replicas (to change
    the preferred leader) reorders the dirs with them, so each replica still finds its own dir —
    the new preferred replica is electable, and one whose dir failed is still refused."""
    await ctl.partition("t", (1, 2, 3), (1, 2, 3), 1, (d(1), d(2, 1), d(3)))
    [res] = await ctl.c.alter_partition_reassignments([("t", 0, [2, 1, 3])])
    assert res.error == ErrorCode.none
    assert ctl.p("t").replicas == (2, 1, 3) and ctl.p("t").directories == (d(2, 1), d(1), d(3))
    [res] = await ctl.c.elect_leaders(PREFERRED, [("t", 0)])
    assert res.error == ErrorCode.none and ctl.p("t").leader == 2

    await ctl.partition("u", (1, 2, 3), (1, 2, 3), 1, (d(1), d(2), d(3)))
    await ctl.fail_dir(3, d(3))
    await ctl.c.alter_partition_reassignments([("u", 0, [3, 1, 2])])
    assert ctl.p("u").directories == (d(3), d(1), d(2))
    [res] = await ctl.c.elect_leaders(PREFERRED, [("u", 0)])
    assert res.error == ErrorCode.preferred_leader_not_available and ctl.p("u").leader == 1
