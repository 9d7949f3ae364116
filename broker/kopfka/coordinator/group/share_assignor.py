"""The share groups' `simple` assignor (Kafka's SimpleAssignor, group.share.assignors).

Members of a share group may share partitions: with M members subscribed to the same P
partitions each partition goes to ceil(M / P) members (the desired sharing), and the
resulting ceil(M / P) * P assignments are spread evenly over the members (member i gets
ceil(S*(i+1)/M) - ceil(S*i/M) of the S slots). The assignment is sticky: a member keeps what it
had while that fits its quota and the sharing. Only share-partitions whose state the share
coordinator has initialized are assignable.

Members with different subscriptions are assigned per distinct subscription, each set as above
(kopfka's choice; Kafka's heterogeneous builder balances across sets, so a partition of a topic
several sets subscribe to may be shared by more members here).
"""

from __future__ import annotations

from collections.abc import Mapping

Assignment = dict[str, set[int]]  # topic id -> partitions
TopicPartition = tuple[str, int]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def assign_homogeneous(
    members: list[str], partitions: list[TopicPartition], previous: Mapping[str, Assignment]
) -> dict[str, set[TopicPartition]]:
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members or not partitions:
        return out
    sharing = _ceil_div(len(members), len(partitions))
    slots = sharing * len(partitions)
    quota = {
        m: _ceil_div(slots * (i + 1), len(members)) - _ceil_div(slots * i, len(members)) for i, m in enumerate(members)
    }
    holders: dict[TopicPartition, set[str]] = {tp: set() for tp in partitions}
    for m in members:  # keep what still fits
        for tid, ps in sorted(previous.get(m, {}).items()):
            for p in sorted(ps):
                tp = (tid, p)
                if tp in holders and len(out[m]) < quota[m] and len(holders[tp]) < sharing:
                    out[m].add(tp)
                    holders[tp].add(m)
    order = {m: i for i, m in enumerate(members)}
    for tp in partitions:
        while len(holders[tp]) < sharing:
            candidates = [m for m in members if len(out[m]) < quota[m] and m not in holders[tp]]
            if not candidates:
                break
            m = min(candidates, key=lambda c: (len(out[c]), order[c]))
            out[m].add(tp)
            holders[tp].add(m)
    return out


def simple_assign(
    subscriptions: Mapping[str, set[str]],
    assignable: Mapping[str, set[int]],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """subscriptions: member -> subscribed topic ids; assignable: topic id -> initialized
    partitions. Returns member -> topic id -> partitions."""
    by_subscription: dict[frozenset[str], list[str]] = {}
    for m, topics in subscriptions.items():
        by_subscription.setdefault(frozenset(t for t in topics if assignable.get(t)), []).append(m)
    result: dict[str, Assignment] = {m: {} for m in subscriptions}
    for subscribed, members in by_subscription.items():
        partitions = sorted((t, p) for t in subscribed for p in assignable[t])
        for m, tps in assign_homogeneous(sorted(members), partitions, previous).items():
            for t, p in tps:
                result[m].setdefault(t, set()).add(p)
    return result
