"""The rebalance planner on hand-built and random cluster models: balance after scale-up,
evacuation of the highest ordinal, racks, minimal moves, dir removal, refusals, determinism, and
invariants that hold for any cluster (hypothesis)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kopfka_operator.rebalance.model import Broker, ClusterModel, Goal, LogDir, Partition, Plan, PlanRefused
from kopfka_operator.rebalance.planner import PlanOptions, plan_rebalance

MB = 1 << 20


def brokers(n: int, *, racks: list[str] | None = None, dirs: int = 1, first: int = 0) -> list[Broker]:
    return [
        Broker(
            b,
            racks[(b - first) % len(racks)] if racks else None,
            tuple(LogDir(f"/data/{b}/d{i}") for i in range(dirs)),
        )
        for b in range(first, first + n)
    ]


def spread(
    bs: list[Broker], topics: dict[str, tuple[int, int]], size: Callable[[str, int], int] = lambda t, p: MB
) -> ClusterModel:
    """Partitions placed round-robin with a shifting follower offset (as Kafka's placement does),
    each broker's replicas round-robin over its dirs: a balanced cluster."""
    ids = [b.id for b in bs]
    n = len(ids)
    parts = []
    per_dir: Counter[tuple[int, str]] = Counter()
    k = 0
    for topic, (count, rf) in sorted(topics.items()):
        for p in range(count):
            first = k % n
            shift = 1 + (k // n) % max(1, n - 1)
            replicas = [ids[first]] + [ids[(first + shift + j) % n] for j in range(rf - 1)]
            if len(set(replicas)) < rf:
                replicas = [ids[(first + j) % n] for j in range(rf)]
            dirs = []
            for b in replicas:
                broker = next(x for x in bs if x.id == b)
                d = min(broker.dirs, key=lambda d: (per_dir[(b, d.path)], d.path))
                per_dir[(b, d.path)] += 1
                dirs.append(d.path)
            parts.append(Partition(topic, p, tuple(replicas), replicas[0], tuple(dirs), size(topic, p)))
            k += 1
    return ClusterModel(tuple(bs), tuple(parts))


def with_brokers(model: ClusterModel, extra: list[Broker]) -> ClusterModel:
    return ClusterModel((*model.brokers, *extra), model.partitions)


def apply(model: ClusterModel, plan: Plan) -> dict[tuple[str, int], list[tuple[int, str | None]]]:
    """Each partition's replicas and their dirs once the plan has run."""
    out = {p.tp: [(b, p.dir_of(b)) for b in p.replicas] for p in model.partitions}
    for r in plan.reassignments:
        before = dict(out[r.tp])
        out[r.tp] = [(b, before[b] if b in before else r.dir_for(b)) for b in r.replicas]
    for m in plan.dir_moves:
        out[m.tp] = [(b, m.target if b == m.broker else d) for b, d in out[m.tp]]
    return out


def loads(
    model: ClusterModel, final: dict[tuple[str, int], list[tuple[int, str | None]]]
) -> tuple[Counter[int], Counter[int], Counter[int]]:
    sizes = {p.tp: p.size for p in model.partitions}
    count: Counter[int] = Counter()
    nbytes: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for tp, reps in final.items():
        leaders[reps[0][0]] += 1
        for b, _ in reps:
            count[b] += 1
            nbytes[b] += sizes[tp]
    return count, nbytes, leaders


def check_hard(model: ClusterModel, goal: Goal, plan: Plan) -> dict[tuple[str, int], list[tuple[int, str | None]]]:
    """The hard constraints: RF kept, distinct brokers, nothing on removed brokers/dirs, new
    replicas only in online uncordoned dirs, racks distinct where the racks allow (for every
    replica after a rebalance, for the replicas a plan places otherwise)."""
    final = apply(model, plan)
    by_id = {b.id: b for b in model.brokers}
    eligible = [b for b in model.brokers if b.id not in goal.remove_brokers]
    racks = {b.rack for b in eligible}
    rack_aware = all(b.rack is not None for b in eligible)
    for p in model.partitions:
        reps = final[p.tp]
        ids = [b for b, _ in reps]
        assert len(ids) == len(p.replicas), (p.tp, ids)
        assert len(set(ids)) == len(ids), (p.tp, ids)
        assert not set(ids) & goal.remove_brokers, (p.tp, ids)
        for b, d in reps:
            assert (b, d) not in goal.remove_dirs, (p.tp, b, d)
            if b not in p.replicas or d != p.dir_of(b):  # placed by the plan
                ld = by_id[b].dir(d)
                assert ld is not None and ld.online and not ld.cordoned, (p.tp, b, d)
        if rack_aware and len(racks) >= len(ids):
            placed = [b for b in ids if b not in p.replicas]
            if goal.is_rebalance:  # a rebalance fixes any rack it finds shared
                placed = ids
            for b in placed:  # other goals never put a replica on a rack that holds another
                assert [by_id[o].rack for o in ids].count(by_id[b].rack) == 1, (p.tp, [(o, by_id[o].rack) for o in ids])
    return final


def within_band(values: list[int]) -> bool:
    total = sum(values)
    lo, hi = total // len(values), -(-total // len(values))
    return all(lo <= v <= hi for v in values)


def check_balanced(model: ClusterModel, plan: Plan, members: list[int], tolerance: float = 0.10) -> None:
    count, nbytes, leaders = loads(model, apply(model, plan))
    assert within_band([count[b] for b in members]), {b: count[b] for b in members}
    assert within_band([leaders[b] for b in members]), {b: leaders[b] for b in members}
    mean = sum(nbytes[b] for b in members) / len(members)
    assert all(abs(nbytes[b] - mean) <= tolerance * mean + 1 for b in members), {b: nbytes[b] for b in members}


TOPICS = {"orders": (24, 3), "clicks": (12, 2), "audit": (6, 3)}


def sized(t: str, p: int) -> int:
    return (1 + (p * 7 + len(t)) % 5) * 10 * MB  # 10..50 MB


@pytest.mark.parametrize("old,new", [(3, 4), (3, 6)])
def test_scale_up_spreads_onto_the_new_brokers_only(old: int, new: int) -> None:
    model = with_brokers(spread(brokers(old), TOPICS, sized), brokers(new - old, first=old))
    added = set(range(old, new))
    goal = Goal.adding(added)
    plan = plan_rebalance(model, goal)
    check_hard(model, goal, plan)
    check_balanced(model, plan, list(range(new)))
    for r in plan.reassignments:
        assert set(r.adding) <= added, r  # copies go onto the added brokers only
        assert all(r.dir_for(b) == f"/data/{b}/d0" for b in r.adding)
    replicas = sum(len(p.replicas) for p in model.partitions)
    moved = sum(len(r.adding) for r in plan.reassignments)
    # fewest moves: the new brokers get their share, not more
    assert moved <= -(-replicas // new) * len(added), (moved, replicas)
    assert plan.after.brokers[new - 1].leaders > 0
    assert not plan.dir_moves


def test_evacuating_the_highest_ordinal_moves_only_its_replicas() -> None:
    model = spread(brokers(4), TOPICS, sized)
    goal = Goal.removing({3})
    plan = plan_rebalance(model, goal)
    final = check_hard(model, goal, plan)
    check_balanced(model, plan, [0, 1, 2])
    on_3 = [p for p in model.partitions if 3 in p.replicas]
    # exactly one copy per replica broker 3 held: nothing else moved between the others
    assert sorted(r.tp for r in plan.reassignments if r.adding) == sorted(p.tp for p in on_3)
    assert all(r.removing == (3,) and len(r.adding) == 1 for r in plan.reassignments if r.adding)
    assert plan.bytes_to_move == sum(p.size for p in on_3)
    assert all(3 not in [b for b, _ in reps] for reps in final.values())
    assert plan.after.brokers[3].replicas == 0


def test_rf_above_the_brokers_left_is_refused_naming_the_topics() -> None:
    model = spread(brokers(3), {"three": (4, 3), "two": (4, 2), "also-three": (2, 3)})
    with pytest.raises(PlanRefused) as exc:
        plan_rebalance(model, Goal.removing({2}))
    assert exc.value.topics == ("also-three", "three")
    assert "also-three (RF 3), three (RF 3)" in exc.value.reason
    assert "2 broker(s)" in exc.value.reason
    # with RF 2 only, the same removal is fine
    ok = spread(brokers(3), {"two": (6, 2)})
    check_hard(ok, Goal.removing({2}), plan_rebalance(ok, Goal.removing({2})))


def test_unknown_brokers_and_contradictions_are_refused() -> None:
    model = spread(brokers(3), {"t": (3, 2)})
    with pytest.raises(PlanRefused, match="not in the cluster"):
        plan_rebalance(model, Goal.removing({7}))
    with pytest.raises(PlanRefused, match="both added and removed"):
        plan_rebalance(model, Goal(add_brokers=frozenset({1}), remove_brokers=frozenset({1})))
    with pytest.raises(PlanRefused, match="no log dir"):
        plan_rebalance(model, Goal.removing_dirs({1: ["/nope"]}))


def test_a_balanced_cluster_yields_an_empty_plan() -> None:
    model = spread(brokers(3), TOPICS)
    plan = plan_rebalance(model, Goal.rebalance())
    assert plan.empty, plan.summary()
    plan_jbod = plan_rebalance(spread(brokers(4, dirs=2), TOPICS), Goal.rebalance())
    assert plan_jbod.empty, plan_jbod.summary()
    # and a cluster already spread onto a broker that is "added" again needs nothing either
    assert plan_rebalance(model, Goal.adding({2})).empty


def test_racks_are_kept_distinct_and_a_one_rack_layout_is_fixed() -> None:
    racks = ["a", "b", "c"]
    model = spread(brokers(6, racks=racks), {"t": (18, 3)})
    # everything on rack a's brokers (0 and 3) plus one other: rack a holds two replicas of each
    bad = ClusterModel(
        model.brokers,
        tuple(
            Partition("t", i, (0, 3, 1 + i % 2), 0, ("/data/0/d0", "/data/3/d0", f"/data/{1 + i % 2}/d0"), MB)
            for i in range(18)
        ),
    )
    goal = Goal.rebalance()
    plan = plan_rebalance(bad, goal)
    final = check_hard(bad, goal, plan)
    by_id = {b.id: b.rack for b in bad.brokers}
    assert all(len({by_id[b] for b, _ in reps}) == 3 for reps in final.values())
    check_balanced(bad, plan, list(range(6)))
    # scaling up into the racks keeps them distinct
    up = with_brokers(model, brokers(3, racks=racks, first=6))
    plan_up = plan_rebalance(up, Goal.adding({6, 7, 8}))
    final_up = check_hard(up, Goal.adding({6, 7, 8}), plan_up)
    by_id = {b.id: b.rack for b in up.brokers}
    assert all(len({by_id[b] for b, _ in reps}) == 3 for reps in final_up.values())


def test_fewer_racks_than_replicas_spreads_as_far_as_the_racks_allow() -> None:
    model = spread(brokers(4, racks=["a", "b"]), {"t": (8, 3)})
    plan = plan_rebalance(model, Goal.rebalance())
    final = apply(model, plan)
    by_id = {b.id: b.rack for b in model.brokers}
    for reps in final.values():
        assert max(Counter(by_id[b] for b, _ in reps).values()) == 2
    assert any("up to 2 replicas per rack" in n for n in plan.notes)


def test_preferred_leaders_are_evened_by_reordering_only() -> None:
    bs = brokers(3)
    parts = tuple(Partition("t", i, (0, 1 + i % 2, 2 - i % 2), 0, (), MB) for i in range(9))
    model = ClusterModel(tuple(bs), parts)
    plan = plan_rebalance(model, Goal.rebalance())
    assert plan.bytes_to_move == 0
    assert all(not r.adding for r in plan.reassignments)
    _, _, leaders = loads(model, apply(model, plan))
    assert sorted(leaders.values()) == [3, 3, 3]
    assert len(plan.reassignments) == 6  # only the partitions whose leader changes


def test_removing_a_dir_moves_its_replicas_to_the_brokers_other_dirs() -> None:
    model = spread(brokers(3, dirs=3), TOPICS, sized)
    goal = Goal.removing_dirs({1: ["/data/1/d0"]})
    plan = plan_rebalance(model, goal)
    check_hard(model, goal, plan)
    assert not plan.reassignments
    on_dir = sorted(p.tp for p in model.partitions if p.dir_of(1) == "/data/1/d0")
    assert sorted(m.tp for m in plan.dir_moves) == on_dir and on_dir
    assert all(m.broker == 1 and m.source == "/data/1/d0" and m.target != m.source for m in plan.dir_moves)
    left = Counter(m.target for m in plan.dir_moves)
    assert abs(left["/data/1/d1"] - left["/data/1/d2"]) <= 1
    assert plan.after.dirs[(1, "/data/1/d0")].replicas == 0


def test_removing_a_dir_is_refused_without_room_or_another_dir() -> None:
    bs = brokers(3, dirs=1)
    model = spread(bs, {"t": (3, 2)})
    with pytest.raises(PlanRefused, match="no other online, uncordoned log dir"):
        plan_rebalance(model, Goal.removing_dirs({0: ["/data/0/d0"]}))
    small = [
        Broker(
            b.id,
            None,
            (
                LogDir(f"/data/{b.id}/d0", total_bytes=1000 * MB, usable_bytes=500 * MB),
                LogDir(f"/data/{b.id}/d1", total_bytes=1000 * MB, usable_bytes=20 * MB),
            ),
        )
        for b in bs
    ]
    full = spread(small, {"t": (6, 2)}, lambda t, p: 30 * MB)
    with pytest.raises(PlanRefused, match="lack the room") as exc:
        plan_rebalance(full, Goal.removing_dirs({0: ["/data/0/d0"]}))
    assert exc.value.topics == ("t",)


def test_cordoned_and_offline_dirs_never_receive_replicas() -> None:
    def dirs(b: int) -> tuple[LogDir, ...]:
        return (LogDir(f"/data/{b}/d0"), LogDir(f"/data/{b}/d1", cordoned=True), LogDir(f"/data/{b}/d2", online=False))

    base = spread(brokers(3), TOPICS)
    model = ClusterModel(
        (*base.brokers, *(Broker(b, None, dirs(b)) for b in (3, 4))),
        base.partitions,
    )
    plan = plan_rebalance(model, Goal.adding({3, 4}))
    for r in plan.reassignments:
        for b in r.adding:
            assert r.dir_for(b) == f"/data/{b}/d0"
    # a broker whose every dir is cordoned gets nothing
    dead = ClusterModel((*base.brokers, Broker(3, None, (LogDir("/data/3/d0", cordoned=True),))), base.partitions)
    assert plan_rebalance(dead, Goal.rebalance()).empty


def test_a_plain_rebalance_evens_out_the_dirs_of_a_broker() -> None:
    bs = brokers(3, dirs=2)
    parts = tuple(
        Partition("t", i, (i % 3, (i + 1) % 3), i % 3, (f"/data/{i % 3}/d0", f"/data/{(i + 1) % 3}/d0"), MB)
        for i in range(12)
    )
    model = ClusterModel(tuple(bs), parts)  # a new empty d1 on every broker
    plan = plan_rebalance(model, Goal.rebalance())
    assert not plan.reassignments
    assert len(plan.dir_moves) == 12  # 8 replicas per broker, 4 move to d1
    for b in range(3):
        assert plan.after.dirs[(b, f"/data/{b}/d0")].replicas == 4
        assert plan.after.dirs[(b, f"/data/{b}/d1")].replicas == 4


def test_bytes_are_balanced_when_counts_already_are() -> None:
    bs = brokers(2)
    sizes = {0: 100, 1: 100, 2: 10, 3: 10}
    parts = tuple(
        Partition("t", i, ((0,) if i < 2 else (1,)), -1, ("/data/0/d0",) if i < 2 else ("/data/1/d0",), sizes[i] * MB)
        for i in range(4)
    )
    model = ClusterModel(tuple(bs), parts)
    plan = plan_rebalance(model, Goal.rebalance())
    count, nbytes, _ = loads(model, apply(model, plan))
    assert count[0] == count[1] == 2
    assert nbytes[0] == nbytes[1] == 110 * MB  # one swap: a 100 MB for a 10 MB replica
    assert plan.bytes_to_move == 110 * MB


def test_the_plan_is_deterministic_and_round_trips_through_json() -> None:
    model = with_brokers(spread(brokers(4, racks=["a", "b"]), TOPICS, sized), brokers(2, racks=["a", "b"], first=4))
    goal = Goal.adding({4, 5})
    plan = plan_rebalance(model, goal)
    rng = random.Random(7)
    for _ in range(5):
        bs, ps = list(model.brokers), list(model.partitions)
        rng.shuffle(bs)
        rng.shuffle(ps)
        assert plan_rebalance(ClusterModel(tuple(bs), tuple(ps)), goal) == plan
    text = json.dumps(plan.to_dict())
    assert Plan.from_dict(json.loads(text)) == plan


def test_partitions_being_reassigned_are_left_alone() -> None:
    model = spread(brokers(3), {"t": (6, 2)})
    busy = Partition("busy", 0, (0, 1, 2), 0, (), MB, reassigning=True)
    m2 = with_brokers(ClusterModel(model.brokers, (*model.partitions, busy)), brokers(1, first=3))
    plan = plan_rebalance(m2, Goal.adding({3}))
    assert all(r.tp != ("busy", 0) for r in plan.reassignments)
    with pytest.raises(PlanRefused, match="in progress for busy-0"):
        plan_rebalance(m2, Goal.removing({2}))


def test_plans_a_large_cluster_quickly_enough_for_a_timer() -> None:
    model = with_brokers(
        spread(brokers(6, racks=["a", "b", "c"], dirs=2), {f"t{i}": (50, 3) for i in range(20)}, sized),
        brokers(3, racks=["a", "b", "c"], dirs=2, first=6),
    )
    plan = plan_rebalance(model, Goal.adding({6, 7, 8}))  # 1000 partitions, 3000 replicas
    check_hard(model, Goal.adding({6, 7, 8}), plan)
    check_balanced(model, plan, list(range(9)))


# --- invariants on random clusters ------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterModel, Goal]:
    n = draw(st.integers(1, 7))
    use_racks = draw(st.booleans())
    rack_names = ["r0", "r1", "r2"][: draw(st.integers(1, 3))]
    bs = []
    for b in range(n):
        ndirs = draw(st.integers(1, 3))
        dirs = tuple(
            LogDir(f"/d/{b}/{i}", online=i == 0 or draw(st.booleans()), cordoned=i > 0 and draw(st.booleans()))
            for i in range(ndirs)
        )
        bs.append(Broker(b, draw(st.sampled_from(rack_names)) if use_racks else None, dirs))
    parts = []
    for i in range(draw(st.integers(0, 25))):
        rf = draw(st.integers(1, n))
        replicas = draw(st.permutations(range(n)))[:rf]
        dirs = tuple(draw(st.sampled_from([d.path for d in bs[b].dirs])) for b in replicas)
        parts.append(Partition(f"t{i % 3}", i, tuple(replicas), replicas[0], dirs, draw(st.integers(0, 100)) * MB))
    kind = draw(st.sampled_from(["rebalance", "add", "remove", "dirs"]))
    if kind == "add":
        goal = Goal.adding(draw(st.sets(st.integers(0, n - 1), min_size=1)))
    elif kind == "remove":
        goal = Goal.removing(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=max(1, n - 1))))
    elif kind == "dirs":
        b = draw(st.integers(0, n - 1))
        goal = Goal.removing_dirs({b: [draw(st.sampled_from([d.path for d in bs[b].dirs]))]})
    else:
        goal = Goal.rebalance()
    return ClusterModel(tuple(bs), tuple(parts)), goal


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_invariants_hold_on_random_clusters(case: tuple[ClusterModel, Goal]) -> None:
    model, goal = case
    try:
        plan = plan_rebalance(model, goal)
    except PlanRefused as exc:
        # a refusal must be for a real reason
        usable = [
            b
            for b in model.brokers
            if b.id not in goal.remove_brokers and any(d.online and not d.cordoned for d in b.dirs)
        ]
        needs = [p for p in model.partitions if set(p.replicas) & goal.remove_brokers]
        if goal.remove_brokers:
            assert any(len(p.replicas) > len(usable) for p in needs) or "can take" in exc.reason, exc.reason
        else:
            assert goal.remove_dirs, exc.reason
        return
    final = check_hard(model, goal, plan)
    assert plan_rebalance(model, goal) == plan  # deterministic
    if goal.add_brokers:
        for r in plan.reassignments:
            assert set(r.adding) <= goal.add_brokers
    if goal.remove_dirs:
        assert not plan.reassignments
    if goal.remove_brokers:
        # only the replicas on removed brokers were copied
        assert sum(len(r.adding) for r in plan.reassignments) == sum(
            len(set(p.replicas) & goal.remove_brokers) for p in model.partitions
        )
    # nothing moves twice and a plan's replica lists are what it says
    assert len({r.tp for r in plan.reassignments}) == len(plan.reassignments)
    for r in plan.reassignments:
        assert [b for b, _ in final[r.tp]] == list(r.replicas)
    # the count balance holds where every broker could take any replica
    if goal.is_rebalance and all(all(d.online and not d.cordoned for d in b.dirs) for b in model.brokers):
        racks = {b.rack for b in model.brokers}
        if len(racks) == 1 or any(b.rack is None for b in model.brokers):
            count, _, _ = loads(model, final)
            assert within_band([count[b.id] for b in model.brokers]), count


def test_options_tolerance_is_respected() -> None:
    bs = brokers(2)
    parts = tuple(Partition("t", i, ((0,) if i < 2 else (1,)), -1, (), s * MB) for i, s in enumerate((100, 80, 90, 60)))
    model = ClusterModel(tuple(bs), parts)
    assert plan_rebalance(
        model, Goal.rebalance(), PlanOptions(bytes_tolerance=0.10)
    ).empty  # 180 vs 150 around 165: within 10%
    assert not plan_rebalance(model, Goal.rebalance(), PlanOptions(bytes_tolerance=0.01)).empty
