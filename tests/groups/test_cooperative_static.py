"""Incremental cooperative rebalancing and static membership, with real clients.

Cooperative-sticky (kafka-python and confluent-kafka in one group): when a member joins, the
others give up only the partitions that move, keep the rest without interruption, and the
newcomer receives exactly what was revoked. Static membership: a member with a
group.instance.id that crashes and comes back within the session timeout gets its partitions
back and the other members see no rebalance at all.
"""

from __future__ import annotations

import time
from pathlib import Path

from kopfka_process import KopfkaProcess

from groups.harness import Producer, Worker, assert_no_double_ownership, balanced, create_topic, describe, wait_for

PARTITIONS = 6


def _group_log(broker: KopfkaProcess, group: str) -> str:
    """What the coordinator logged about the group: joins, static rejoins, rebalances and why."""
    text = broker.log_path.read_text(errors="replace") if broker.log_path.exists() else ""
    return "\n".join([line for line in text.splitlines() if group in line][-40:])


def _owned_at(w: Worker, t: float) -> set[int]:
    owns = [e for e in w.events() if e["ev"] == "own" and e["t"] < t]
    return set(owns[-1]["parts"]) if owns else set()


def _events_between(w: Worker, t0: float, t1: float, kind: str) -> list[set[int]]:
    return [set(e["parts"]) for e in w.events() if e["ev"] == kind and t0 <= e["t"] < t1 and e["parts"]]


def test_cooperative_sticky_moves_only_revoked_partitions(broker: KopfkaProcess, tmp_path: Path) -> None:
    bs, topic, group = broker.bootstrap, "coop", "coop-group"
    create_topic(bs, topic, PARTITIONS)
    Producer(bs).send(topic, 60, PARTITIONS)
    opts = ["--assignor", "cooperative-sticky"]
    workers: list[Worker] = []

    def join(client: str, label: str) -> tuple[Worker, float]:
        t0 = time.time()
        w = Worker(client, bs, topic, group, tmp_path / f"{label}.jsonl", label, opts).start()
        workers.append(w)
        wait_for(lambda: balanced(workers, PARTITIONS), 60, f"{label} to get its share", lambda: describe(workers))
        return w, t0

    first, _ = join("confluent", "ck-1")
    assert first.owned() == set(range(PARTITIONS))
    before = {w.label: w.owned() for w in workers}
    second, t1 = join("kafka-python", "kp-2")
    third, t2 = join("confluent", "ck-3")

    for newcomer, t0, t_end, old in ((second, t1, t2, [first]), (third, t2, float("inf"), [first, second])):
        revoked: set[int] = set()
        for w in old:
            revs = _events_between(w, t0, t_end, "revoked")
            for r in revs:
                assert not (r & revoked), "a partition was revoked twice"
                revoked |= r
            # what the member kept it owned throughout: never revoked, never re-assigned
            kept = before[w.label] - revoked
            assert kept <= _owned_at(w, t_end), f"{w.label} lost partitions it should have kept"
            assert not [a for a in _events_between(w, t0, t_end, "assigned") if a & kept]
        got = set().union(*_events_between(newcomer, t0, t_end, "assigned"))
        assert got == revoked, f"{newcomer.label} got {got}, the others revoked {revoked}"
        assert len(revoked) == (3 if newcomer is second else 2)
        before = {w.label: w.owned() for w in workers}
    for w in workers:
        w.stop()
    assert_no_double_ownership(workers)


def test_static_member_rejoin_within_session_timeout_causes_no_rebalance(broker: KopfkaProcess,
                                                                         tmp_path: Path) -> None:
    bs, topic, group = broker.bootstrap, "static", "static-group"
    create_topic(bs, topic, PARTITIONS)
    Producer(bs).send(topic, 60, PARTITIONS)
    session = ["--session-ms", "8000"]
    members = {name: Worker(client, bs, topic, group, tmp_path / f"{name}-a.jsonl", f"{name}-a",
                            ["--instance-id", name, *session])
               for name, client in (("ck", "confluent"), ("kp", "kafka-python"))}
    for w in members.values():
        w.start()
    live = list(members.values())
    wait_for(lambda: balanced(live, PARTITIONS), 60, "two static members sharing the topic", lambda: describe(live))
    for name in ("ck", "kp"):
        old = members[name]
        other = next(w for w in live if w is not old)
        owned_before, other_owned = old.owned(), other.owned()
        other_events = len([e for e in other.events() if e["ev"] in ("own", "assigned", "revoked")])
        old.kill()
        time.sleep(1.0)
        new = Worker(old.client, bs, topic, group, tmp_path / f"{name}-b.jsonl", f"{name}-b", old.extra).start()
        live = [other, new]
        wait_for(lambda n=new, o=owned_before: n.owned() == o, 6,  # type: ignore[misc]
                 f"static member {name} to get its partitions back", lambda ws=live: describe(ws))  # type: ignore[misc]
        time.sleep(1.0)
        assert other.owned() == other_owned
        assert len([e for e in other.events() if e["ev"] in ("own", "assigned", "revoked")]) == other_events, (
            f"the other member saw a rebalance when static member {name} came back; the coordinator logged:\n"
            + _group_log(broker, group)
        )
        members[name] = new
    for w in live:
        w.stop()
    assert_no_double_ownership([w for w in members.values()])
