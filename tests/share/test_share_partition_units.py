"""SharePartition's state machine on its own: acquisition, acknowledgement, release, lock expiry,
the delivery count limit, the in-flight limit, the start offset, persistence and its failure."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kopfka.coordinator.share.coordinator import PartitionResult, ShareGroupOffset
from kopfka.coordinator.share.records import StateBatch
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.share.share_partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    SharePartition,
)

TOPIC = uuid.UUID(int=1234)


class FakePersister:
    def __init__(self, state: ShareGroupOffset | None = None) -> None:
        self.state = state or ShareGroupOffset(0, 1, 0, -1)
        self.writes: list[dict[str, Any]] = []
        self.fail_with: ErrorCode | None = None
        self.gate: asyncio.Event | None = None

    async def read(self, group: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PartitionResult:
        return PartitionResult(state=self.state)

    async def write(self, group: str, topic_id: uuid.UUID, partition: int, **kw: Any) -> PartitionResult:
        if self.gate is not None:
            await self.gate.wait()
        self.writes.append(kw)
        if self.fail_with is not None:
            return PartitionResult(self.fail_with, "injected")
        return PartitionResult()


def settings(**overrides: Any) -> Any:
    values = {
        "share.delivery.count.limit": 3,
        "share.partition.max.record.locks": 100,
        "share.record.lock.duration.ms": 60000,
        "share.auto.offset.reset": "earliest",
        "share.renew.acknowledge.enable": True,
        **overrides,
    }
    return values.__getitem__


async def make(persister: FakePersister | None = None, log: tuple[int, int] = (0, 100), **cfg: Any) -> SharePartition:
    sp = SharePartition("g", "t", TOPIC, 0, 0, persister=persister or FakePersister(), settings=settings(**cfg))
    await sp.initialize(lambda: log, lambda ts: None)
    return sp


def batches(*ranges: tuple[int, int]) -> list[tuple[int, int]]:
    return list(ranges)


async def test_acquire_whole_batches_then_only_what_is_available() -> None:
    sp = await make()
    assert sp.acquire("a", batches((0, 4), (5, 9)), 3, False) == [(0, 4, 1)]  # batch-aligned: all of 0-4
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("b", batches((0, 4), (5, 9)), 100, False) == [(5, 9, 1)]  # 0-4 belong to a
    assert sp.counts() == {ACQUIRED: 10}
    # record-limit mode takes exactly what is asked
    assert sp.acquire("c", batches((10, 19)), 4, True) == [(10, 13, 1)]
    assert sp.next_offset == 14


async def test_accept_moves_the_start_offset_and_is_persisted() -> None:
    persister = FakePersister()
    sp = await make(persister)
    sp.acquire("a", batches((0, 9)), 100, False)
    assert await sp.acknowledge("a", [(0, 4, [ACCEPT])]) == ErrorCode.none
    assert sp.start_offset == 5 and sp.counts() == {ACQUIRED: 5}
    w = persister.writes[-1]
    assert w["start_offset"] == 5 and w["batches"] == [StateBatch(0, 4, ACKNOWLEDGED, 1)]
    # per-offset types: accept, gap, reject, accept
    assert await sp.acknowledge("a", [(5, 8, [ACCEPT, GAP, REJECT, ACCEPT])]) == ErrorCode.none
    assert sp.start_offset == 9 and sp.delivery_complete_count() == 0


async def test_release_redelivers_with_a_higher_count_until_the_limit_archives() -> None:
    sp = await make()  # delivery count limit 3
    counts = []
    for _ in range(5):
        got = sp.acquire("a", batches((0, 0)), 10, False)
        if not got:
            break
        counts.append(got[0][2])
        assert await sp.acknowledge("a", [(0, 0, [RELEASE])]) == ErrorCode.none
    assert counts == [1, 2, 3]
    assert sp.counts() == {} and sp.start_offset == 1  # archived after the 3rd delivery, then passed


async def test_only_the_owner_acknowledges_and_only_acquired_records() -> None:
    sp = await make()
    sp.acquire("a", batches((0, 9)), 100, False)
    assert await sp.acknowledge("b", [(0, 0, [ACCEPT])]) == ErrorCode.invalid_record_state
    assert await sp.acknowledge("a", [(5, 12, [ACCEPT])]) == ErrorCode.invalid_request  # past the acquired
    assert await sp.acknowledge("a", [(0, 0, [ACCEPT])]) == ErrorCode.none
    assert await sp.acknowledge("a", [(1, 1, [ACCEPT]), (1, 1, [ACCEPT])]) == ErrorCode.invalid_record_state
    assert sp.start_offset == 1  # the failed request changed nothing: 1 is still acquired
    assert await sp.acknowledge("a", [(0, 0, [ACCEPT])]) == ErrorCode.none  # below the start: ignored


async def test_lock_expiry_releases_and_archives_at_the_limit() -> None:
    sp = await make(**{"share.record.lock.duration.ms": 50, "share.delivery.count.limit": 2})
    assert sp.acquire("a", batches((0, 1)), 10, False) == [(0, 1, 1)]
    await asyncio.sleep(0.15)
    assert sp.counts() == {AVAILABLE: 2}
    assert sp.acquire("b", batches((0, 1)), 10, False) == [(0, 1, 2)]
    assert await sp.acknowledge("a", [(0, 1, [ACCEPT])]) == ErrorCode.invalid_record_state  # b's now
    await asyncio.sleep(0.15)  # the 2nd lock expires: the limit of 2 deliveries is reached
    assert sp.counts() == {} and sp.start_offset == 2


async def test_renew_extends_the_lock() -> None:
    sp = await make(**{"share.record.lock.duration.ms": 100})
    sp.acquire("a", batches((0, 0)), 10, False)
    await asyncio.sleep(0.06)
    assert await sp.acknowledge("a", [(0, 0, [RENEW])]) == ErrorCode.none
    await asyncio.sleep(0.06)
    assert sp.counts() == {ACQUIRED: 1}  # the first lock would have expired by now
    await asyncio.sleep(0.08)
    assert sp.counts() == {AVAILABLE: 1}


async def test_in_flight_limit_stops_new_acquisitions() -> None:
    sp = await make(**{"share.partition.max.record.locks": 10})
    assert sp.acquire("a", batches((0, 5)), 100, False) == [(0, 5, 1)]
    assert sp.acquire("a", batches((6, 11)), 100, False) == [(6, 11, 1)]  # a batch may overshoot
    assert sp.acquire("a", batches((12, 13)), 100, False) == []
    assert await sp.acknowledge("a", [(0, 5, [ACCEPT])]) == ErrorCode.none
    assert sp.acquire("a", batches((12, 13)), 100, False) == [(12, 13, 1)]


async def test_release_of_a_member_and_markers_skipped() -> None:
    sp = await make()
    sp.acquire("a", batches((0, 3), (4, 4), (5, 6)), 100, False, skip={(4, 4)})  # 4: a transaction marker
    assert sp.counts() == {ACQUIRED: 6, ARCHIVED: 1}
    assert await sp.release_member("a") == ErrorCode.none
    assert sp.counts() == {AVAILABLE: 6, ARCHIVED: 1}
    assert sp.acquire("b", batches((0, 3), (4, 4), (5, 6)), 100, False) == [(0, 3, 2), (5, 6, 2)]


async def test_failed_write_rolls_back_and_in_flight_changes_are_exclusive() -> None:
    persister = FakePersister()
    sp = await make(persister)
    sp.acquire("a", batches((0, 4)), 100, False)
    persister.fail_with = ErrorCode.coordinator_not_available
    assert await sp.acknowledge("a", [(0, 4, [ACCEPT])]) == ErrorCode.coordinator_not_available
    assert sp.counts() == {ACQUIRED: 5} and sp.start_offset == 0
    persister.fail_with = None
    persister.gate = asyncio.Event()
    first = asyncio.ensure_future(sp.acknowledge("a", [(0, 4, [ACCEPT])]))
    await asyncio.sleep(0)
    # while it is being persisted the records can be neither acknowledged again nor acquired
    assert await sp.acknowledge("a", [(0, 0, [REJECT])]) == ErrorCode.invalid_record_state
    assert sp.acquire("b", batches((0, 4)), 100, False) == []
    persister.gate.set()
    assert await first == ErrorCode.none and sp.start_offset == 5
    persister.fail_with = ErrorCode.fenced_state_epoch
    sp.acquire("a", batches((5, 5)), 100, False)
    assert await sp.acknowledge("a", [(5, 5, [ACCEPT])]) == ErrorCode.not_leader_or_follower


async def test_restored_state_skips_what_was_done() -> None:
    # persisted: start 10, 10-12 acknowledged, 13-14 never recorded (acquired when the leader died),
    # 15-16 available after 2 deliveries, 17 archived
    state = ShareGroupOffset(
        3,
        2,
        0,
        10,
        3,
        [StateBatch(10, 12, ACKNOWLEDGED, 1), StateBatch(15, 16, AVAILABLE, 2), StateBatch(17, 17, ARCHIVED, 3)],
    )
    sp = await make(FakePersister(state))
    assert sp.start_offset == 13 and sp.next_offset == 18 and sp.state_epoch == 2
    assert sp.acquire("a", batches((10, 19)), 100, False) == [(13, 14, 1), (15, 16, 3), (18, 19, 1)]


async def test_auto_offset_reset_and_log_start() -> None:
    assert (await make(log=(5, 42))).start_offset == 5  # earliest
    sp = SharePartition(
        "g", "t", TOPIC, 0, 0, persister=FakePersister(), settings=settings(**{"share.auto.offset.reset": "latest"})
    )
    await sp.initialize(lambda: (5, 42), lambda ts: None)
    assert sp.start_offset == 42
    sp = await make()
    sp.acquire("a", batches((0, 9)), 100, False)
    assert await sp.acknowledge("a", [(0, 4, [RELEASE])]) == ErrorCode.none
    sp.maybe_move_to_log_start(7)  # retention removed 0-6: the available 0-4 are gone, 5-6 still a's
    assert sp.start_offset == 7 and sp.next_fetch_offset() == 10
    assert await sp.acknowledge("a", [(5, 9, [ACCEPT])]) == ErrorCode.none
    assert sp.start_offset == 10


async def test_fenced_partition_refuses() -> None:
    sp = await make()
    sp.fence()
    with pytest.raises(KafkaError) as exc:
        await sp.acknowledge("a", [(0, 0, [ACCEPT])])
    assert exc.value.code == ErrorCode.not_leader_or_follower
