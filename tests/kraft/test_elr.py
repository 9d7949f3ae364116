"""Eligible leader replicas (KIP-966) in the QuorumController, in-process on a single-voter quorum.

min.insync.replicas is 2 unless a test says otherwise. With ELR enabled (release 4.1 on) a replica
that leaves an ISR below min ISR joins the ELR and may be elected cleanly when the ISR is empty; a
broker that restarts without a clean shutdown leaves the ELR; the last known leader comes back as
before ELR; a min.insync.replicas change clears the ELR; the feature brings Kafka's config rules.
The same scenarios with ELR off (release 4.0) show what it changes.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from kopfka import uuids
from kopfka.config.definitions import OP_DELETE, OP_SET
from kopfka.controller.quorum_controller import UNCLEAN, QuorumController
from kopfka.metadata import bootstrap
from kopfka.metadata import records as mr
from kopfka.metadata.features import ELIGIBLE_LEADER_REPLICAS_VERSION, METADATA_VERSION
from kopfka.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, PartitionRegistration
from kopfka.protocol.errors import ErrorCode
from kopfka.raft.kafka_raft import KafkaRaftClient
from single_voter import single_voter_controller, stop

CLUSTER = "elr-cluster"
MIN_ISR = "min.insync.replicas"


class Ctl:
    def __init__(self, c: QuorumController) -> None:
        self.c = c
        self.epochs: dict[int, int] = {}
        self.incarnation = 0

    async def register(self, b: int, previous_epoch: int = -1) -> None:
        self.incarnation += 1
        self.epochs[b] = await self.c.register_broker(
            b,
            f"00000000-0000-0000-{self.incarnation:04d}-{b:012d}",
            (),
            None,
            (),
            CLUSTER,
            previous_broker_epoch=previous_epoch,
        )

    async def unfence(self, b: int) -> None:
        await self.c.broker_heartbeat(b, self.epochs[b], 1 << 40, False, False)
        assert not self.c.image.brokers[b].fenced

    async def clean_shutdown(self, b: int) -> int:
        """Controlled shutdown to the end; the epoch the broker records in its clean shutdown file."""
        await self.c.broker_heartbeat(b, self.epochs[b], 1 << 40, False, True)
        assert self.c.image.brokers[b].fenced
        return self.epochs[b]

    async def crash(self, b: int) -> None:
        """No heartbeat within broker.session.timeout.ms: fenced by the controller."""
        self.c._last_heartbeat[b] = time.monotonic() - 10_000
        assert b in await self.c.fence_expired_brokers()

    async def partition(self, name: str, replicas: tuple[int, ...], configs: dict[str, str] | None = None) -> str:
        topic_id = uuids.to_str(uuids.random_uuid())
        recs: list[mr.MetadataRecord] = [
            mr.TopicRecord(name, topic_id),
            mr.PartitionRecord(0, topic_id, replicas, replicas, replicas[0]),
        ]
        recs += [mr.ConfigRecord(TOPIC_RESOURCE, name, k, v) for k, v in (configs or {}).items()]
        await self.c._write(recs)
        return topic_id

    def p(self, name: str) -> PartitionRegistration:
        return self.c.image.topics_by_name[name].partitions[0]

    def state(self, name: str) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        p = self.p(name)
        return p.leader, p.isr, p.elr, p.last_known_elr


async def _controller(tmp: Path, release: str, brokers: tuple[int, ...] = (1, 2, 3)) -> tuple[Ctl, KafkaRaftClient]:
    c, raft = await single_voter_controller(
        tmp / "meta",
        bootstrap.bootstrap_records(release),
        cluster_id=CLUSTER,
        static_config={
            "broker.session.timeout.ms": 600_000,
            "leader.imbalance.check.interval.seconds": 3600,
            MIN_ISR: 2,
        },
    )
    t = Ctl(c)
    for b in brokers:
        await t.register(b)
        await t.unfence(b)
    return t, raft


Make = Callable[..., Awaitable[Ctl]]


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Make]:
    made: list[tuple[Ctl, KafkaRaftClient]] = []

    async def build(release: str = "4.3", brokers: tuple[int, ...] = (1, 2, 3)) -> Ctl:
        made.append(await _controller(tmp_path / str(len(made)), release, brokers))
        return made[-1][0]

    yield build
    for t, raft in made:
        await stop(t.c, raft)


async def test_replicas_leaving_an_isr_below_min_isr_join_the_elr_and_lead_after_a_clean_restart(make: Make) -> None:
    ctl = await make()
    await ctl.partition("t", (1, 2, 3))
    await ctl.clean_shutdown(3)
    assert ctl.state("t") == (1, (1, 2), (), ())  # still at min ISR: no ELR
    await ctl.clean_shutdown(2)
    assert ctl.state("t") == (1, (1,), (2,), ())  # below min ISR: 2 holds every committed record
    epoch1 = await ctl.clean_shutdown(1)
    # the ISR may become empty: both are eligible, the last leader is remembered
    assert ctl.state("t") == (-1, (), (1, 2), (1,))
    await ctl.register(2, previous_epoch=ctl.epochs[2])  # clean restart: stays eligible
    assert ctl.state("t") == (-1, (), (1, 2), (1,))
    await ctl.unfence(2)
    assert ctl.state("t") == (2, (2,), (1,), ())  # a clean election from the ELR
    await ctl.register(1, previous_epoch=epoch1)
    await ctl.unfence(1)
    assert ctl.state("t")[0] == 2


async def test_without_elr_the_partition_waits_for_its_last_isr_member(make: Make) -> None:
    ctl = await make("4.0")
    await ctl.partition("t", (1, 2, 3))
    await ctl.clean_shutdown(3)
    await ctl.clean_shutdown(2)
    await ctl.crash(1)
    assert ctl.state("t") == (-1, (1,), (), ())
    await ctl.register(2, previous_epoch=ctl.epochs[2])
    await ctl.unfence(2)
    assert ctl.state("t") == (-1, (1,), (), ()), "only the last ISR member may lead without ELR"


async def test_an_unclean_shutdown_leaves_the_elr(make: Make) -> None:
    ctl = await make()
    await ctl.partition("t", (1, 2, 3))
    await ctl.clean_shutdown(3)
    await ctl.crash(2)
    await ctl.crash(1)
    assert ctl.state("t") == (-1, (), (1, 2), (1,))
    await ctl.register(2)  # no clean shutdown file: previous epoch -1
    assert ctl.state("t") == (-1, (), (1,), (1,))
    await ctl.unfence(2)
    assert ctl.state("t") == (-1, (), (1,), (1,)), "a replica that may have lost records must not lead"
    await ctl.register(1, previous_epoch=ctl.epochs[1])  # the registered epoch: a clean shutdown
    await ctl.unfence(1)
    assert ctl.state("t") == (1, (1,), (), ())


async def test_the_last_known_leader_comes_back_after_a_crash(make: Make) -> None:
    """RF=1 (effective min ISR 1): the only replica crashes and loses its ELR place, but as the last
    known leader it is elected when it returns, as it was before ELR."""
    ctl = await make()
    await ctl.partition("one", (1,))
    await ctl.crash(1)
    assert ctl.state("one") == (-1, (), (1,), (1,))
    await ctl.register(1)
    assert ctl.state("one") == (-1, (), (), (1,))
    await ctl.unfence(1)
    assert ctl.state("one") == (1, (1,), (), ())


async def test_unclean_election_and_isr_recovery_clear_the_elr(make: Make) -> None:
    ctl = await make()
    await ctl.partition("u", (1, 2, 3))
    await ctl.partition("r", (1, 2, 3))
    await ctl.clean_shutdown(3)
    await ctl.clean_shutdown(2)
    assert ctl.state("r") == (1, (1,), (2,), ())
    # the leader takes 2 back into the ISR: at min ISR again, nothing is kept
    await ctl.register(2, previous_epoch=ctl.epochs[2])
    await ctl.unfence(2)
    p = ctl.p("r")
    topic_id = ctl.c.image.topics_by_name["r"].topic_id
    res = await ctl.c.alter_partition(
        1, ctl.epochs[1], topic_id, 0, p.leader_epoch, p.partition_epoch, [(1, ctl.epochs[1]), (2, ctl.epochs[2])]
    )
    assert res.error == ErrorCode.none and ctl.state("r") == (1, (1, 2), (), ())
    # "u": both ELR members down, an unclean election elects broker 3 and forgets the ELR
    await ctl.crash(1)
    await ctl.crash(2)
    await ctl.register(3, previous_epoch=ctl.epochs[3])
    await ctl.unfence(3)
    # 2 (clean restart, in the ELR) led once 1 crashed, then crashed in turn
    assert ctl.state("u") == (-1, (), (1, 2), (2,))
    [res2] = await ctl.c.elect_leaders(UNCLEAN, [("u", 0)])
    assert res2.error == ErrorCode.none and ctl.state("u") == (3, (3,), (), ())


async def test_min_isr_changes_clear_the_elr_and_broker_level_min_isr_is_refused(make: Make) -> None:
    ctl = await make()
    assert ctl.c.image.broker_config(None)[MIN_ISR] == "2"  # written with the bootstrap records
    await ctl.partition("a", (1, 2, 3))
    await ctl.partition("b", (1, 2, 3))
    await ctl.clean_shutdown(3)
    await ctl.clean_shutdown(2)
    assert ctl.state("a")[2] == ctl.state("b")[2] == (2,)
    [res] = await ctl.c.incremental_alter_configs([(TOPIC_RESOURCE, "a", [(MIN_ISR, OP_SET, "2")])])
    assert res.error == ErrorCode.none
    assert ctl.state("a") == (1, (1,), (), ()) and ctl.state("b")[2] == (2,)  # same value, still cleared
    [res] = await ctl.c.incremental_alter_configs([(BROKER_RESOURCE, "", [(MIN_ISR, OP_SET, "3")])])
    assert res.error == ErrorCode.none and ctl.state("b")[2] == ()
    [res] = await ctl.c.incremental_alter_configs([(BROKER_RESOURCE, "2", [(MIN_ISR, OP_SET, "1")])])
    assert res.error == ErrorCode.invalid_config and "Broker-level" in (res.message or "")
    [res] = await ctl.c.incremental_alter_configs([(BROKER_RESOURCE, "", [(MIN_ISR, OP_DELETE, None)])])
    assert res.error == ErrorCode.invalid_config and "removed" in (res.message or "")


async def test_enabling_and_disabling_the_feature(make: Make) -> None:
    ctl = await make("4.0")
    c = ctl.c
    assert ELIGIBLE_LEADER_REPLICAS_VERSION not in c.image.features and MIN_ISR not in c.image.broker_config(None)
    [res] = await c.incremental_alter_configs([(BROKER_RESOURCE, "2", [(MIN_ISR, OP_SET, "3")])])
    assert res.error == ErrorCode.none  # allowed without ELR
    # ELR 1 needs metadata.version 4.0-IV1 (23); 4.0 is 25: fine, and the config rules take effect
    code, msg = await c.update_features([(ELIGIBLE_LEADER_REPLICAS_VERSION, 1, 1)])
    assert code == ErrorCode.none, msg
    assert c.image.features[ELIGIBLE_LEADER_REPLICAS_VERSION] == 1
    assert c.image.broker_config(None)[MIN_ISR] == "2"  # the controller's static value
    assert MIN_ISR not in c.image.configs.get((BROKER_RESOURCE, "2"), {})  # broker-level override removed
    code, msg = await c.update_features([(METADATA_VERSION, 22, 2)])
    assert code == ErrorCode.invalid_update_version and "eligible.leader.replicas.version 1 requires" in (msg or "")
    await ctl.partition("t", (1, 2, 3))
    await ctl.clean_shutdown(3)
    await ctl.clean_shutdown(2)
    assert ctl.state("t")[2] == (2,)
    code, msg = await c.update_features([(ELIGIBLE_LEADER_REPLICAS_VERSION, 0, 2)])
    assert code == ErrorCode.none, msg
    assert ctl.state("t")[2:] == ((), ())  # nothing keeps it current once disabled


async def test_elr_needs_metadata_version_23(make: Make) -> None:
    ctl = await make("3.9")
    code, msg = await ctl.c.update_features([(ELIGIBLE_LEADER_REPLICAS_VERSION, 1, 1)])
    assert code == ErrorCode.invalid_update_version and "requires metadata.version 23" in (msg or "")
