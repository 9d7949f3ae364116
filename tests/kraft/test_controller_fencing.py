"""QuorumController in-process: brokers whose sessions expire in the same fencing pass are all
taken out of ISRs and leadership at once. Each partition's change is computed once, against
every broker going away: changes computed one broker at a time from the same image, then
applied in sequence, could combine into a leader outside its own ISR."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kopfka import uuids
from kopfka.controller.quorum_controller import QuorumController
from kopfka.metadata import bootstrap
from kopfka.metadata import records as mr
from kopfka.raft.local_raft import LocalRaftClient

CLUSTER = "fencing-cluster"


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[tuple[QuorumController, dict[int, int]]]:
    raft = LocalRaftClient(1, tmp_path / "meta")
    c = QuorumController(
        raft,
        node_id=1,
        cluster_id=CLUSTER,
        static_config={"broker.session.timeout.ms": 600_000, "leader.imbalance.check.interval.seconds": 3600},
    )
    raft.replay_committed()
    await c.bootstrap(bootstrap.bootstrap_records())
    epochs = {}
    for b in (0, 1, 2, 3):
        epochs[b] = await c.register_broker(b, f"inc-{b}", (), None, (uuids.to_str(uuids.random_uuid()),), CLUSTER)
        await c.broker_heartbeat(b, epochs[b], 1 << 40, False, False)
    try:
        yield c, epochs
    finally:
        await c.close()
        raft.close()


async def test_two_brokers_fenced_in_one_pass_leave_every_leader_in_its_isr(
    controller: tuple[QuorumController, dict[int, int]],
) -> None:
    c, _ = controller
    topic_id = uuids.to_str(uuids.random_uuid())
    # leader 0; 0 and 1 expire together: 1 must not be elected (it is going too), and the ISR
    # shrink of one must not be undone by the other's.
    await c._write(
        [
            mr.TopicRecord("t", topic_id),
            mr.PartitionRecord(0, topic_id, (0, 1, 2), (0, 1, 2), 0),
            mr.PartitionRecord(1, topic_id, (1, 0, 3), (1, 0, 3), 1),
            mr.PartitionRecord(2, topic_id, (2, 3, 0), (2, 3, 0), 2),
        ]
    )
    stale = time.monotonic() - 3600
    c._last_heartbeat[0] = c._last_heartbeat[1] = stale
    assert sorted(await c.fence_expired_brokers()) == [0, 1]
    parts = c.image.topics_by_name["t"].partitions
    for pid, p in parts.items():
        assert p.leader in p.isr, (pid, p)
        assert not {0, 1} & set(p.isr) or len(p.isr) == 1, (pid, p)
    assert parts[0].leader == 2 and parts[0].isr == (2,)
    assert parts[1].leader == 3 and parts[1].isr == (3,)
    assert parts[2].leader == 2 and parts[2].isr == (2, 3)
