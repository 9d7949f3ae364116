"""Safety gates of a rolling restart, as pure functions over snapshots of the cluster.

A gate answers one question ("may this node go down now?", "is the node that came back whole
again?") from a snapshot the roller read (DescribeQuorum, Metadata, topic configs) and says, when
the answer is no, what exactly it waits for. Nothing here does I/O, so every rule is unit-tested
on hand-built snapshots (tests/operator/test_roll_gates.py).

The rules, stronger than "wait for the pod to be Ready":
- a voter goes down only if the voters left are still a caught-up majority (lag within a bound,
  fetched recently), and the next one only once it is back in the voter set and caught up;
- followers before the active controller, the most lagging follower first (it is the least use
  to the quorum now);
- a broker goes down only if no partition is offline and every partition it hosts keeps
  ISR >= min.insync.replicas without it; the next one only once it is unfenced and back in the
  ISR of every partition it hosts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# A voter more than this many records behind the leader's log end offset is not caught up.
DEFAULT_MAX_VOTER_LAG = 1000
# A voter that has not fetched for this long is not counted (Kafka's fetch timeout is 2 s).
DEFAULT_MAX_FETCH_AGE_MS = 10_000
# How many partitions a gate message names before it says "and N more".
NAMED_PARTITIONS = 10


@dataclass(frozen=True)
class Verdict:
    ok: bool
    waiting_for: str = ""
    partitions: tuple[str, ...] = ()

    @classmethod
    def go(cls) -> Verdict:
        return cls(True)

    @classmethod
    def wait(cls, why: str, partitions: Iterable[str] = ()) -> Verdict:
        return cls(False, why, tuple(partitions))


@dataclass(frozen=True)
class ReplicaProgress:
    node_id: int
    log_end_offset: int
    last_fetch_ms: int  # -1: never
    directory_id: str = ""


@dataclass(frozen=True)
class QuorumSnapshot:
    """DescribeQuorum of __cluster_metadata as the active controller reports it."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaProgress, ...]
    now_ms: int
    observers: tuple[ReplicaProgress, ...] = ()

    @property
    def voter_ids(self) -> frozenset[int]:
        return frozenset(v.node_id for v in self.voters)

    def leader_log_end(self) -> int:
        for v in self.voters:
            if v.node_id == self.leader_id:
                return v.log_end_offset
        return self.high_watermark

    def lag(self, node_id: int) -> int | None:
        for v in self.voters:
            if v.node_id == node_id:
                return max(0, self.leader_log_end() - v.log_end_offset)
        return None


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1: offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_insync: int = 1

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class ClusterSnapshot:
    """Metadata as a client sees it, plus each topic's effective min.insync.replicas."""

    partitions: tuple[PartitionState, ...]
    live_brokers: frozenset[int]  # registered and unfenced
    extra: dict[str, object] = field(default_factory=dict, compare=False)


def _names(parts: Sequence[PartitionState]) -> str:
    shown = ", ".join(p.name for p in parts[:NAMED_PARTITIONS])
    more = len(parts) - NAMED_PARTITIONS
    return shown + (f" and {more} more" if more > 0 else "")


def voter_caught_up(
    quorum: QuorumSnapshot,
    node_id: int,
    *,
    max_lag: int = DEFAULT_MAX_VOTER_LAG,
    max_fetch_age_ms: int = DEFAULT_MAX_FETCH_AGE_MS,
) -> bool:
    if node_id == quorum.leader_id:
        return True
    for v in quorum.voters:
        if v.node_id == node_id:
            fresh = v.last_fetch_ms >= 0 and quorum.now_ms - v.last_fetch_ms <= max_fetch_age_ms
            return fresh and quorum.leader_log_end() - v.log_end_offset <= max_lag
    return False


def may_stop_voter(
    quorum: QuorumSnapshot,
    node_id: int,
    *,
    max_lag: int = DEFAULT_MAX_VOTER_LAG,
    max_fetch_age_ms: int = DEFAULT_MAX_FETCH_AGE_MS,
) -> Verdict:
    """The voters left without `node_id` must still be a caught-up majority of the voter set."""
    if quorum.leader_id < 0:
        return Verdict.wait("the quorum has no leader")
    if node_id not in quorum.voter_ids:
        return Verdict.go()  # an observer: the quorum does not depend on it
    majority = len(quorum.voters) // 2 + 1
    others = [
        v.node_id
        for v in quorum.voters
        if v.node_id != node_id
        and voter_caught_up(quorum, v.node_id, max_lag=max_lag, max_fetch_age_ms=max_fetch_age_ms)
    ]
    if len(others) >= majority:
        return Verdict.go()
    lagging = sorted(quorum.voter_ids - {node_id} - set(others))
    return Verdict.wait(
        f"controller {node_id}: only {len(others)} other voter(s) caught up, a majority of "
        f"{len(quorum.voters)} needs {majority} (lagging: {lagging})"
    )


def voter_back(
    quorum: QuorumSnapshot,
    node_id: int,
    *,
    max_lag: int = DEFAULT_MAX_VOTER_LAG,
    max_fetch_age_ms: int = DEFAULT_MAX_FETCH_AGE_MS,
) -> Verdict:
    if node_id not in quorum.voter_ids:
        return Verdict.wait(f"controller {node_id} back in the voter set")
    if not voter_caught_up(quorum, node_id, max_lag=max_lag, max_fetch_age_ms=max_fetch_age_ms):
        return Verdict.wait(f"controller {node_id} caught up (lag {quorum.lag(node_id)})")
    return Verdict.go()


def controller_order(quorum: QuorumSnapshot | None, nodes: Iterable[int]) -> list[int]:
    """Non-voters first (the quorum does not count them), then followers, the most lagging
    first (it serves the quorum least now), the active controller last (one election, at the
    very end). Without a quorum snapshot: id order."""
    if quorum is None:
        return sorted(nodes)

    def key(n: int) -> tuple[int, int, int]:
        if n == quorum.leader_id:
            return (2, 0, n)
        lag = quorum.lag(n)
        return (0, 0, n) if lag is None else (1, -lag, n)

    return sorted(nodes, key=key)


def offline_partitions(snapshot: ClusterSnapshot) -> list[PartitionState]:
    return [p for p in snapshot.partitions if p.leader < 0 or p.leader not in snapshot.live_brokers]


def may_stop_broker(snapshot: ClusterSnapshot, broker: int) -> Verdict:
    offline = offline_partitions(snapshot)
    if offline:
        return Verdict.wait(f"offline partitions: {_names(offline)}", (p.name for p in offline))
    at_risk = [
        p for p in snapshot.partitions if broker in p.replicas and len([r for r in p.isr if r != broker]) < p.min_insync
    ]
    if at_risk:
        return Verdict.wait(
            f"broker {broker}: {len(at_risk)} partition(s) would fall below min.insync.replicas "
            f"without it: {_names(at_risk)}",
            (p.name for p in at_risk),
        )
    return Verdict.go()


def broker_back(snapshot: ClusterSnapshot, broker: int) -> Verdict:
    if broker not in snapshot.live_brokers:
        return Verdict.wait(f"broker {broker} registered and unfenced")
    behind = [p for p in snapshot.partitions if broker in p.replicas and broker not in p.isr]
    if behind:
        return Verdict.wait(
            f"broker {broker} back in the ISR of {len(behind)} partition(s): {_names(behind)}",
            (p.name for p in behind),
        )
    return Verdict.go()


def leaders_on(snapshot: ClusterSnapshot, broker: int) -> list[PartitionState]:
    return [p for p in snapshot.partitions if p.leader == broker]


def preferred_leader_drift(snapshot: ClusterSnapshot) -> list[PartitionState]:
    """Partitions whose preferred replica (the first) could lead again: it is live and in ISR."""
    return [
        p
        for p in snapshot.partitions
        if p.replicas
        and p.leader != p.replicas[0]
        and p.replicas[0] in p.isr
        and p.replicas[0] in snapshot.live_brokers
    ]


def grace_period_seconds(partitions_hosted: int, *, floor: int = 120) -> int:
    """Enough for a controlled shutdown to move leadership of every hosted partition away
    and flush: a fixed floor plus a generous per-partition allowance."""
    return max(floor, 60 + partitions_hosted // 5)
