"""Server-side assignors for KIP-848 consumer groups: `uniform` (sticky, balanced) and `range`.

Both take each member's subscribed topics and current partitions and return the target
assignment as {member_id: {topic_id: set(partitions)}}. Uniform keeps a member's partitions
when it can (so a rebalance moves as few partitions as possible), then balances counts
between members that share a subscription; range gives each member a contiguous block of every
topic it subscribes to, so co-partitioned topics line up (Kafka's range semantics).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Assignment = dict[str, set[int]]  # topic_id -> partitions


@dataclass
class MemberSpec:
    subscribed_topic_ids: set[str]
    current: Assignment = field(default_factory=dict)
    instance_id: str | None = None


def _topic_members(members: Mapping[str, MemberSpec]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for mid in sorted(members):
        for t in members[mid].subscribed_topic_ids:
            out.setdefault(t, []).append(mid)
    return out


def uniform_assign(members: Mapping[str, MemberSpec], partition_counts: Mapping[str, int]) -> dict[str, Assignment]:
    """Sticky balanced assignment; works for homogeneous and heterogeneous subscriptions."""
    result: dict[str, Assignment] = {m: {} for m in members}
    counts = dict.fromkeys(members, 0)
    subscribers = _topic_members(members)
    owner: dict[tuple[str, int], str] = {}
    # 1. stickiness: keep current partitions that still exist and are still subscribed
    for mid in sorted(members):
        spec = members[mid]
        for t, parts in spec.current.items():
            if t not in spec.subscribed_topic_ids or t not in partition_counts:
                continue
            for p in sorted(parts):
                if p < partition_counts[t] and (t, p) not in owner:
                    owner[(t, p)] = mid
                    counts[mid] += 1
    # 2. unowned partitions go to the least loaded subscriber
    for t in sorted(subscribers):
        if t not in partition_counts:
            continue
        for p in range(partition_counts[t]):
            if (t, p) not in owner:
                mid = min(subscribers[t], key=lambda m: (counts[m], m))
                owner[(t, p)] = mid
                counts[mid] += 1
    # 3. balance: move a partition from the most to a less loaded member that can take it
    by_member: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    for tp, mid in sorted(owner.items()):
        by_member[mid].append(tp)
    for _ in range(sum(partition_counts.values()) + 1):
        moved = False
        for src in sorted(members, key=lambda m: (-counts[m], m)):
            for tp in reversed(by_member[src]):
                cands = [m for m in subscribers.get(tp[0], []) if counts[m] + 1 < counts[src]]
                if cands:
                    dst = min(cands, key=lambda m: (counts[m], m))
                    by_member[src].remove(tp)
                    by_member[dst].append(tp)
                    counts[src] -= 1
                    counts[dst] += 1
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    for mid, tps in by_member.items():
        for t, p in tps:
            result[mid].setdefault(t, set()).add(p)
    return result


def range_assign(members: Mapping[str, MemberSpec], partition_counts: Mapping[str, int]) -> dict[str, Assignment]:
    """Per topic: sorted subscribers get contiguous ranges, the first ones one extra partition."""
    result: dict[str, Assignment] = {m: {} for m in members}
    for t, subs in _topic_members(members).items():
        n = partition_counts.get(t, 0)
        if not n:
            continue
        # static members sort by instance id so a restarted static member gets the same range
        subs = sorted(subs, key=lambda m: (members[m].instance_id or "\uffff" + m))
        quota, extra = divmod(n, len(subs))
        start = 0
        for i, mid in enumerate(subs):
            size = quota + (1 if i < extra else 0)
            if size:
                result[mid][t] = set(range(start, start + size))
            start += size
    return result


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
DEFAULT_ASSIGNOR = "uniform"
