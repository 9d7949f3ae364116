"""Leader-side replication state on real logs: HW from the ISR, ISR expand/shrink proposals
(KIP-841 eligibility), the acks=all purgatory outcomes and truncation by diverging epoch."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "storage"))

from helpers import batch, small_config
from kopfka.protocol.errors import ErrorCode
from kopfka.protocol.record_codec import Record, encode_batch
from kopfka.server.partition import Partition
from kopfka.server.replica_fetcher import divergence_truncation_offset
from kopfka.storage.unified_log import UnifiedLog


def _log(tmp: Path, name: str = "t-0", **cfg: object) -> UnifiedLog:
    return UnifiedLog.load(tmp / name, small_config(**cfg))


def _leader(tmp: Path, isr: tuple[int, ...] = (1, 2, 3), min_isr: int = 2) -> tuple[Partition, list[tuple[int, ...]]]:
    proposals: list[tuple[int, ...]] = []
    p = Partition(
        "t",
        0,
        "id",
        _log(tmp, min_insync_replicas=min_isr),
        1,
        leader_id=1,
        leader_epoch=5,
        partition_epoch=3,
        replicas=(1, 2, 3),
        isr=isr,
    )
    p.on_isr_change = lambda part, new, gen: proposals.append(new)
    p.is_eligible = lambda b, e: True
    p.make_leader(now=100.0)
    return p, proposals


def test_hw_is_the_smallest_isr_leo(tmp_path: Path) -> None:
    p, _ = _leader(tmp_path)
    p.log.append_as_leader(batch([b"a", b"b", b"c"]), leader_epoch=5)
    p.maybe_advance_high_watermark()
    assert p.log.high_watermark == 0  # followers' LEOs unknown: no commit
    p.update_follower_fetch(2, 3, -1, now=101.0)
    assert p.log.high_watermark == 0  # replica 3 still unknown
    p.update_follower_fetch(3, 1, -1, now=101.0)
    assert p.log.high_watermark == 1
    p.update_follower_fetch(3, 3, -1, now=101.0)
    assert p.log.high_watermark == 3


def test_single_replica_isr_commits_on_append(tmp_path: Path) -> None:
    p, _ = _leader(tmp_path, isr=(1,), min_isr=1)
    p.log.append_as_leader(batch([b"a"]), leader_epoch=5)
    p.maybe_advance_high_watermark()
    assert p.log.high_watermark == 1
    assert p.produce_status(1) == ErrorCode.none


def test_isr_shrinks_a_lagging_follower_and_expands_when_caught_up(tmp_path: Path) -> None:
    p, proposals = _leader(tmp_path)
    p.log.append_as_leader(batch([b"a", b"b"]), leader_epoch=5)
    p.update_follower_fetch(2, 2, -1, now=101.0)
    p.update_follower_fetch(3, 0, -1, now=101.0)  # replica 3 fetches but never catches up
    p.maybe_shrink_isr(lag_max_s=5.0, now=104.0)
    assert proposals == []  # within replica.lag.time.max.ms
    p.maybe_shrink_isr(lag_max_s=5.0, now=106.0)
    assert proposals == [(1, 2)]
    assert p.maximal_isr == (1, 2, 3)  # until the controller answers, HW still waits for 3
    p.complete_isr_change(p.pending_isr.generation if p.pending_isr else -1, (1, 2), 4, 5)
    assert p.isr == (1, 2) and p.log.high_watermark == 2
    p.update_follower_fetch(3, 1, -1, now=107.0)
    assert proposals == [(1, 2)]  # below the HW: not in sync
    p.update_follower_fetch(3, 2, -1, now=108.0)
    assert proposals[-1] == (1, 2, 3)


def test_an_answer_from_a_newer_leader_epoch_keeps_the_expanded_isr(tmp_path: Path) -> None:
    """A reassignment completes on the ISR expansion that brings its last new replica in: the
    controller commits the expanded ISR, drops this leader from the replicas and elects another
    (the new replica) in the same step, and answers the AlterPartition with the new leader epoch.
    Until the metadata update makes this broker a follower, its high watermark must still wait for
    the new replica: committing (and acknowledging acks=all writes) with the old, smaller ISR
    would acknowledge records the new leader does not have (seen as acknowledged records lost and
    an idempotent producer's OUT_OF_ORDER_SEQUENCE_NUMBER, after a rebalance under load)."""

    async def main() -> None:
        p, proposals = _leader(tmp_path, isr=(1, 2), min_isr=2)
        p.replicas = (1, 2, 3)
        p.log.append_as_leader(batch([b"a", b"b"]), leader_epoch=5)
        p.update_follower_fetch(2, 2, -1, now=101.0)
        p.update_follower_fetch(3, 2, -1, now=101.0)  # the new replica caught up: expansion
        assert proposals == [(1, 2, 3)] and p.log.high_watermark == 2
        p.log.append_as_leader(batch([b"c", b"d"]), leader_epoch=5)
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        p.add_produce_waiter(4, fut)
        p.update_follower_fetch(2, 4, -1, now=102.0)  # replica 2 has it, the new replica 3 not yet
        assert p.log.high_watermark == 2 and not fut.done()
        # the controller's answer: ISR (2, 3) under a new leader epoch (this broker leaves)
        assert p.pending_isr is not None
        p.complete_isr_change(p.pending_isr.generation, (2, 3), 4, 6)
        assert p.log.high_watermark == 2 and not fut.done(), "acknowledged without the new leader"
        assert 3 in p.maximal_isr
        # the metadata update makes it a follower: the write fails retriably
        p.leader_id, p.leader_epoch = 3, 6
        p.make_follower()
        assert fut.result() == ErrorCode.not_leader_or_follower

    asyncio.run(main())


def test_ineligible_follower_never_proposed(tmp_path: Path) -> None:
    """KIP-841: a fenced / shutting-down broker (or a stale broker epoch) is not added."""
    p, proposals = _leader(tmp_path, isr=(1, 2))
    p.is_eligible = lambda b, e: e == 7
    p.update_follower_fetch(3, 0, 6, now=101.0)
    assert proposals == []
    p.update_follower_fetch(3, 0, 7, now=102.0)
    assert proposals == [(1, 2, 3)]


def test_produce_purgatory_outcomes(tmp_path: Path) -> None:
    async def main() -> None:
        p, _ = _leader(tmp_path, isr=(1, 2))
        p.log.append_as_leader(batch([b"a"]), leader_epoch=5)
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        assert p.produce_status(1) is None
        p.add_produce_waiter(1, fut)
        p.update_follower_fetch(2, 1, -1)
        assert fut.done() and fut.result() == ErrorCode.none
        # the ISR shrank below min.insync.replicas before the write committed: the high watermark
        # holds (KIP-966's strict min ISR) even though the follower has the record, so the write
        # waits (and times out) instead of committing with too few replicas
        p.log.append_as_leader(batch([b"b"]), leader_epoch=5)
        fut2: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        p.add_produce_waiter(2, fut2)
        p.isr = (1,)
        p.update_follower_fetch(2, 2, -1)
        assert p.log.high_watermark == 1 and not fut2.done()
        p.isr = (1, 2)  # back at min ISR: the high watermark moves and the write commits
        p.maybe_advance_high_watermark()
        assert p.log.high_watermark == 2 and fut2.result() == ErrorCode.none
        # committed, then the ISR shrank before the produce was answered
        p.log.append_as_leader(batch([b"b2"]), leader_epoch=5)
        p.update_follower_fetch(2, 3, -1)
        p.isr = (1,)
        assert p.produce_status(3) == ErrorCode.not_enough_replicas_after_append
        # losing leadership fails the waiters with a retriable error
        p.log.append_as_leader(batch([b"c"]), leader_epoch=5)
        p.isr = (1, 2)
        fut3: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        p.add_produce_waiter(4, fut3)
        p.leader_id = 2
        p.make_follower()
        assert fut3.result() == ErrorCode.not_leader_or_follower

    asyncio.run(main())


def _epoch_batch(values: list[bytes], epoch: int) -> bytes:
    return encode_batch(
        [Record(i, 1_700_000_000_000, None, v) for i, v in enumerate(values)], partition_leader_epoch=epoch
    )


@pytest.mark.parametrize("leader_appended_in_new_epoch", [True, False])
def test_truncation_by_diverging_epoch(tmp_path: Path, leader_appended_in_new_epoch: bool) -> None:
    """Follower F led epoch 1 and wrote 3 records nobody else got; L became leader in epoch 2.
    L answers F's fetch (offset 8, last epoch 1) with a diverging epoch; F truncates to 5 and
    then takes L's records — even before L appended anything in epoch 2 (epoch start stamped)."""
    leader = Partition(
        "t", 0, "id", _log(tmp_path, "leader-0"), 1, leader_id=1, leader_epoch=2, replicas=(1, 2), isr=(1, 2)
    )
    follower = _log(tmp_path, "follower-0")
    for lg in (leader.log, follower):
        lg.append_as_leader(_epoch_batch([b"a"] * 5, 0), leader_epoch=0)
    follower.append_as_leader(_epoch_batch([b"x"] * 3, 1), leader_epoch=1)
    leader.make_leader()
    if leader_appended_in_new_epoch:
        leader.log.append_as_leader(_epoch_batch([b"y"] * 2, 2), leader_epoch=2)
    div = leader.diverging_epoch(follower.latest_epoch or -1, follower.log_end_offset)
    assert div == (0, 5)
    target = divergence_truncation_offset(follower, *div)
    assert target == 5
    follower.truncate_to(target)
    assert follower.log_end_offset == 5
    # no further divergence: the follower's next fetch is served
    assert leader.diverging_epoch(follower.latest_epoch or -1, follower.log_end_offset) is None


def test_truncation_when_follower_lacks_the_leaders_epoch(tmp_path: Path) -> None:
    """Leader answers (epoch 1, 7) but the follower's log has no epoch 1 (it has 0 then 3):
    truncate to the end of our epoch 0 first, the next fetch settles the rest."""
    follower = _log(tmp_path, "f-0")
    follower.append_as_leader(_epoch_batch([b"a"] * 4, 0), leader_epoch=0)
    follower.append_as_leader(_epoch_batch([b"b"] * 4, 3), leader_epoch=3)
    assert divergence_truncation_offset(follower, 1, 7) == 4
    assert divergence_truncation_offset(follower, 0, 2) == 2


def test_leader_does_not_propose_a_replica_in_an_offline_dir(tmp_path: Path) -> None:
    """KIP-858 on the leader side: a follower whose replica sits in a log dir its broker reported
    offline is not proposed for the ISR, however caught up it looks; in an online dir it is."""
    from kopfka.metadata import records as mr
    from kopfka.metadata.image import replay
    from kopfka.server.replica_manager import ReplicaManager

    dirs = {b: (f"{b:032x}", f"{b + 100:032x}") for b in (1, 2, 3)}
    tid = "x" * 22
    image = replay(
        [
            *(
                mr.RegisterBrokerRecord(b, f"00000000-0000-0000-0000-{b:012d}", 7, (), fenced=False, log_dirs=dirs[b])
                for b in (1, 2, 3)
            ),
            mr.BrokerRegistrationChangeRecord(3, 7, log_dirs=(dirs[3][1],)),  # broker 3's first dir failed
            mr.TopicRecord("t", tid),
            mr.PartitionRecord(0, tid, (1, 2, 3), (1, 2), 1, directories=(dirs[1][0], dirs[2][0], dirs[3][0])),
            mr.TopicRecord("u", "y" * 22),
            mr.PartitionRecord(0, "y" * 22, (1, 2, 3), (1, 2), 1, directories=(dirs[1][0], dirs[2][0], dirs[3][1])),
        ]
    )
    rm = ReplicaManager(1, None)  # type: ignore[arg-type]
    rm.image = image
    assert not rm._is_eligible(3, 7, tp=("t", 0))
    assert rm._is_eligible(3, 7, tp=("u", 0))
    assert rm._is_eligible(2, 7, tp=("t", 0)) and not rm._is_eligible(2, 8, tp=("t", 0))
    p, proposals = _leader(tmp_path, isr=(1, 2))
    p.is_eligible = lambda b, e: rm._is_eligible(b, e, tp=("t", 0))
    p.log.append_as_leader(batch([b"a"]), leader_epoch=5)
    p.update_follower_fetch(3, p.log.log_end_offset, 7, now=101.0)
    assert proposals == []


def test_appends_wake_followers_and_hw_moves_wake_consumers(tmp_path: Path) -> None:
    """A parked fetch is woken only by what it can read: a follower's (up to the LEO) by an
    append, a consumer's (up to the HW) by a HW move, so neither re-reads for nothing on the
    write path; an acks=all produce is answered before the consumers are woken by its HW."""
    from kopfka.server.replica_manager import FetchRequestPartition, ReplicaManager

    async def main() -> None:
        p, _ = _leader(tmp_path)
        rm = ReplicaManager(1, None)  # type: ignore[arg-type]
        rm.partitions[p.tp] = p
        reads: list[bool] = []  # from_follower of every read
        real = rm._read_once
        rm._read_once = lambda reqs, mb, iso, ff, held=frozenset(): reads.append(ff) or real(reqs, mb, iso, ff, held)  # type: ignore[method-assign,func-returns-value]

        def fetch(offset: int, follower: bool) -> asyncio.Task[object]:
            req = [FetchRequestPartition(p.tp, offset, 1 << 20)]
            return asyncio.create_task(
                rm.fetch_messages(req, max_bytes=1 << 20, min_bytes=1, max_wait_ms=10_000, from_follower=follower)
            )

        consumer, follower = fetch(0, False), fetch(0, True)
        await asyncio.sleep(0)
        assert reads == [False, True]  # both parked after one read each
        rm.append_records([(p.tp, batch([b"a"]))], -1)
        await asyncio.wait_for(follower, 5)  # the follower gets the record at once
        await asyncio.sleep(0.01)
        assert reads == [False, True, True] and not consumer.done()  # the consumer was not re-read
        follower = fetch(1, True)
        await asyncio.sleep(0)
        order: list[str] = []
        acked: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        acked.add_done_callback(lambda _: order.append("produce"))
        consumer.add_done_callback(lambda _: order.append("consumer"))
        p.add_produce_waiter(1, acked)
        p.update_follower_fetch(2, 1, -1)
        p.update_follower_fetch(3, 1, -1)  # the HW moves to 1
        await asyncio.wait_for(consumer, 5)
        assert order == ["produce", "consumer"]
        assert reads.count(True) == 3 and not follower.done()  # the parked follower fetch was not re-read
        follower.cancel()

    asyncio.run(main())
