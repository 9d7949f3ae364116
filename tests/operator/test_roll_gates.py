"""The rolling restart's safety gates and ordering, on hand-built metadata snapshots."""

from __future__ import annotations

from kopfka_operator.roll.gates import (
    ClusterSnapshot,
    PartitionState,
    QuorumSnapshot,
    ReplicaProgress,
    broker_back,
    controller_order,
    grace_period_seconds,
    may_stop_broker,
    may_stop_voter,
    preferred_leader_drift,
    voter_back,
)

NOW = 1_000_000


def quorum(leader: int = 1000, **lags: tuple[int, int]) -> QuorumSnapshot:
    """lags: "n1001" -> (records behind the leader, ms since the last fetch)."""
    leo = 5000
    voters = [ReplicaProgress(leader, leo, NOW)]
    for key, (lag, age) in lags.items():
        voters.append(ReplicaProgress(int(key[1:]), leo - lag, NOW - age))
    return QuorumSnapshot(leader, 7, leo, tuple(voters), NOW)


def test_voter_may_stop_only_if_a_caught_up_majority_remains() -> None:
    healthy = quorum(n1001=(0, 50), n1002=(3, 80))
    assert may_stop_voter(healthy, 1001).ok
    assert may_stop_voter(healthy, 1000).ok  # the leader: 1001 and 1002 remain caught up

    lagging = quorum(n1001=(0, 50), n1002=(50_000, 80))
    verdict = may_stop_voter(lagging, 1001)
    assert not verdict.ok
    assert "lagging: [1002]" in verdict.waiting_for and "needs 2" in verdict.waiting_for
    assert may_stop_voter(lagging, 1002).ok  # the lagging one itself may go: 1000+1001 remain

    silent = quorum(n1001=(0, 60_000), n1002=(0, 80))  # caught up but no fetch for a minute
    assert not may_stop_voter(silent, 1002).ok
    assert not may_stop_voter(QuorumSnapshot(-1, 7, 0, (), NOW), 1000).ok


def test_lagging_voter_first_active_controller_last() -> None:
    q = quorum(leader=1001, n1000=(0, 10), n1002=(900, 10))
    assert controller_order(q, [1000, 1001, 1002]) == [1002, 1000, 1001]
    # An observer (not in the voter set) goes before every voter.
    assert controller_order(q, [1000, 1001, 1002, 1003]) == [1003, 1002, 1000, 1001]
    assert controller_order(None, [1002, 1000]) == [1000, 1002]


def test_voter_back_needs_membership_and_catch_up() -> None:
    q = quorum(n1001=(0, 10), n1002=(5000, 10))
    assert voter_back(q, 1001).ok
    verdict = voter_back(q, 1002)
    assert not verdict.ok and "caught up (lag 5000)" in verdict.waiting_for
    assert "voter set" in voter_back(q, 1003).waiting_for


def parts(*specs: tuple[str, int, int, tuple[int, ...], tuple[int, ...], int]) -> tuple[PartitionState, ...]:
    return tuple(PartitionState(t, p, leader, reps, isr, mi) for t, p, leader, reps, isr, mi in specs)


def test_broker_blocked_when_a_partition_would_fall_below_min_insync() -> None:
    snap = ClusterSnapshot(
        parts(
            ("orders", 0, 0, (0, 1, 2), (0, 1, 2), 2),
            ("orders", 1, 1, (1, 2, 0), (1, 2), 2),  # 0 already out of ISR: 2 left, fine
            ("audit", 0, 1, (1, 2), (1, 2), 2),  # RF = min.insync: never without 1 or 2
        ),
        frozenset({0, 1, 2}),
    )
    assert may_stop_broker(snap, 0).ok
    verdict = may_stop_broker(snap, 2)
    assert not verdict.ok
    assert verdict.partitions == ("orders-1", "audit-0")  # orders-1: ISR is already {1, 2}
    assert "below min.insync.replicas" in verdict.waiting_for and "audit-0" in verdict.waiting_for
    assert not may_stop_broker(snap, 1).ok


def test_broker_blocked_by_offline_partitions_anywhere() -> None:
    snap = ClusterSnapshot(
        parts(("a", 0, -1, (2,), (), 1), ("b", 0, 0, (0, 1), (0, 1), 1)),
        frozenset({0, 1}),
    )
    verdict = may_stop_broker(snap, 0)
    assert not verdict.ok and "offline partitions: a-0" in verdict.waiting_for


def test_broker_back_needs_unfenced_and_full_isr() -> None:
    snap = ClusterSnapshot(
        parts(("t", 0, 1, (0, 1), (1,), 1), ("t", 1, 1, (1, 2), (1, 2), 1)),
        frozenset({1, 2}),
    )
    assert "registered and unfenced" in broker_back(snap, 0).waiting_for
    snap = ClusterSnapshot(snap.partitions, frozenset({0, 1, 2}))
    verdict = broker_back(snap, 0)
    assert not verdict.ok and verdict.partitions == ("t-0",)
    assert broker_back(snap, 2).ok


def test_many_partitions_named_with_a_count() -> None:
    snap = ClusterSnapshot(
        tuple(PartitionState("x", i, 0, (0, 1), (0, 1), 2) for i in range(25)),
        frozenset({0, 1}),
    )
    verdict = may_stop_broker(snap, 1)
    assert "and 15 more" in verdict.waiting_for and len(verdict.partitions) == 25


def test_preferred_leader_drift_and_grace_period() -> None:
    snap = ClusterSnapshot(
        parts(
            ("t", 0, 1, (0, 1), (0, 1), 1),  # drifted, 0 can lead again
            ("t", 1, 1, (0, 1), (1,), 1),  # drifted but 0 is not in ISR
            ("t", 2, 0, (0, 1), (0, 1), 1),
        ),
        frozenset({0, 1}),
    )
    assert [p.name for p in preferred_leader_drift(snap)] == ["t-0"]
    assert grace_period_seconds(0) == 120
    assert grace_period_seconds(2000) == 460
