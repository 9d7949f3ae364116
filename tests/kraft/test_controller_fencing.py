"""QuorumController in-process: brokers going away.

Brokers whose sessions expire in the same fencing pass are all taken out of ISRs and leadership
at once. Each partition's change is computed once, against every broker going away: changes
computed one broker at a time from the same image, then applied in sequence, could combine into
a leader outside its own ISR.

A broker in controlled shutdown: its first heartbeat asking to shut down moves its leadership
away and takes it out of every ISR. It may stop only once it leads nothing and both it and every
active broker (unfenced, not shutting down themselves) have applied those records (Kafka's
BrokerHeartbeatManager): before that, a leader that has not seen the ISR shrink would hold
acks=all produces for a follower that no longer fetches, and the broker's own clients would lose
their in-flight requests with its connections instead of reading NOT_LEADER_OR_FOLLOWER with the
new leader."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kopfka import uuids
from kopfka.controller.quorum_controller import QuorumController
from kopfka.metadata import bootstrap
from kopfka.metadata import records as mr
from single_voter import single_voter_controller, stop

CLUSTER = "fencing-cluster"


async def controller_with_brokers(
    tmp_path: Path, session_ms: int, brokers: tuple[int, ...]
) -> tuple[QuorumController, Any, dict[int, int]]:
    """An active single-voter controller with `brokers` registered and unfenced: (controller,
    its raft, each broker's epoch)."""
    c, raft = await single_voter_controller(
        tmp_path / "meta",
        bootstrap.bootstrap_records(),
        cluster_id=CLUSTER,
        static_config={"broker.session.timeout.ms": session_ms, "leader.imbalance.check.interval.seconds": 3600},
    )
    epochs = {}
    for b in brokers:
        epochs[b] = await c.register_broker(
            b, f"00000000-0000-0000-0000-{b:012d}", (), None, (uuids.to_str(uuids.random_uuid()),), CLUSTER
        )
        await c.broker_heartbeat(b, epochs[b], 1 << 40, False, False)
    return c, raft, epochs


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[tuple[QuorumController, dict[int, int]]]:
    c, raft, epochs = await controller_with_brokers(tmp_path, 600_000, (0, 1, 2, 3))
    try:
        yield c, epochs
    finally:
        await stop(c, raft)


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


def applied(c: QuorumController) -> int:
    """The offset a broker reports once it has applied everything committed so far."""
    return c.image.provenance.last_offset


async def _shutdown_setup(c: QuorumController, epochs: dict[int, int]) -> None:
    topic_id = uuids.to_str(uuids.random_uuid())
    await c._write(
        [
            mr.TopicRecord("t", topic_id),
            mr.PartitionRecord(0, topic_id, (0, 1, 2), (0, 1, 2), 0),
            mr.PartitionRecord(1, topic_id, (1, 0, 2), (1, 0, 2), 1),
        ]
    )
    for b in (0, 1, 2, 3):
        await c.broker_heartbeat(b, epochs[b], applied(c), False, False)


async def test_shutdown_waits_until_every_active_broker_applied_the_moves(
    controller: tuple[QuorumController, dict[int, int]],
) -> None:
    c, epochs = controller
    await _shutdown_setup(c, epochs)
    first = await c.broker_heartbeat(0, epochs[0], applied(c), False, True)
    parts = c.image.topics_by_name["t"].partitions
    assert parts[0].leader == 1 and 0 not in parts[0].isr and 0 not in parts[1].isr
    assert not first.should_shutdown  # the broker itself has not applied its moves yet
    moved = applied(c)
    assert not (await c.broker_heartbeat(0, epochs[0], moved, False, True)).should_shutdown  # 1 and 2 have not
    await c.broker_heartbeat(1, epochs[1], moved, False, False)
    assert not (await c.broker_heartbeat(0, epochs[0], moved, False, True)).should_shutdown  # 2 has not
    await c.broker_heartbeat(2, epochs[2], moved, False, False)
    # broker 3 hosts nothing of this topic but is active: it must have applied the moves as well
    assert not (await c.broker_heartbeat(0, epochs[0], moved, False, True)).should_shutdown
    await c.broker_heartbeat(3, epochs[3], applied(c), False, False)
    done = await c.broker_heartbeat(0, epochs[0], applied(c), False, True)
    assert done.should_shutdown and done.is_fenced


async def test_shutdown_waits_for_no_fenced_or_departing_broker(
    controller: tuple[QuorumController, dict[int, int]],
) -> None:
    c, epochs = controller
    await _shutdown_setup(c, epochs)
    await c.broker_heartbeat(3, epochs[3], applied(c), True, False)  # 3 asks to be fenced
    assert c.image.brokers[3].fenced
    await c.broker_heartbeat(0, epochs[0], applied(c), False, True)
    await c.broker_heartbeat(2, epochs[2], applied(c), False, True)  # 2 shuts down at the same time
    await c.broker_heartbeat(1, epochs[1], applied(c), False, False)
    assert (await c.broker_heartbeat(0, epochs[0], applied(c), False, True)).should_shutdown
    assert (await c.broker_heartbeat(2, epochs[2], applied(c), False, True)).should_shutdown


async def test_a_stall_of_the_controllers_own_loop_fences_nobody(tmp_path: Path) -> None:
    """A combined node's loop blocked past the session timeout (e.g. fifty logs created in one
    metadata update: CI saw the broker fenced and its partitions leaderless) heard no heartbeat
    because it heard nothing; a broker that stays silent once the loop runs again is fenced."""
    c, raft, epochs = await controller_with_brokers(tmp_path, 1000, (0, 1))
    try:
        assert not c.image.brokers[0].fenced and not c.image.brokers[1].fenced
        time.sleep(1.6)  # the whole loop stalls: the fencer's pass is due long before it ends
        await asyncio.sleep(0.1)  # the overdue pass runs before any heartbeat is read
        assert not c.image.brokers[0].fenced and not c.image.brokers[1].fenced
        deadline = time.monotonic() + 1.8
        while time.monotonic() < deadline:  # broker 0 heartbeats, broker 1 stays silent
            await c.broker_heartbeat(0, epochs[0], 1 << 40, False, False)
            await asyncio.sleep(0.2)
        assert not c.image.brokers[0].fenced
        assert c.image.brokers[1].fenced
    finally:
        await stop(c, raft)
