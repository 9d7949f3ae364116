"""Scaling: what is rendered while a shrink or a voter change is pending, and the scaler's steps
against a scripted quorum and metadata (e2e/test_scale.py does it on real pods)."""

from __future__ import annotations

import time
from typing import Any

from kopfka_operator.naming import data_dir
from kopfka_operator.roll.gates import ClusterSnapshot, PartitionState, QuorumSnapshot, ReplicaProgress
from kopfka_operator.scale.replicas import rendered_replicas
from kopfka_operator.scale.scaler import ScaleContext, scale_step
from kopfka_operator.spec import parse_spec


def test_rendered_replicas_hold_a_shrink_until_it_is_safe_and_grow_voters_one_by_one() -> None:
    assert rendered_replicas("broker", 3, None, {}) == 3  # creation: as asked
    assert rendered_replicas("broker", 5, 3, {}) == 5  # brokers grow at once
    assert rendered_replicas("broker", 2, 4, {}) == 4  # held: nothing emptied yet
    assert rendered_replicas("broker", 2, 4, {"dataShrinkTo": 3}) == 3  # one emptied so far
    assert rendered_replicas("broker", 2, 4, {"dataShrinkTo": 2}) == 2
    assert rendered_replicas("controller", 5, 3, {}) == 3  # voters: only when allowed
    assert rendered_replicas("controller", 5, 3, {"votersGrowTo": 4}) == 4
    assert rendered_replicas("controller", 1, 3, {"votersShrinkTo": 2}) == 2
    # combined: both the vote and the data must be gone
    assert rendered_replicas("combined", 2, 3, {"votersShrinkTo": 2}) == 3
    assert rendered_replicas("combined", 2, 3, {"votersShrinkTo": 2, "dataShrinkTo": 2}) == 2


NOW = int(time.time() * 1000)


def quorum(ids: list[int], leader: int = 1000) -> QuorumSnapshot:
    return QuorumSnapshot(leader, 1, 10, tuple(ReplicaProgress(i, 10, NOW, f"dir-{i}") for i in ids), NOW)


class Fakes:
    def __init__(self, q: QuorumSnapshot, snapshot: ClusterSnapshot) -> None:
        self.q, self.snapshot = q, snapshot
        self.removed: list[tuple[int, str]] = []
        self.unregistered: list[int] = []
        self.events: list[tuple[str, str, str]] = []
        self.cordoned: dict[int, list[str]] = {}  # the brokers' cordoned.log.dirs, as set
        self.cordon_calls: list[tuple[int, list[str]]] = []
        self.refuse_cordon = False
        self.before_cordoning = False  # a metadata.version before 4.3-IV0

    async def quorum(self) -> QuorumSnapshot:
        return self.q

    async def cluster(self) -> ClusterSnapshot:
        return self.snapshot

    async def remove_voter(self, node_id: int, directory_id: str) -> None:
        self.removed.append((node_id, directory_id))

    async def unregister_broker(self, node_id: int) -> None:
        self.unregistered.append(node_id)

    async def set_cordoned_dirs(self, node_id: int, dirs: list[str]) -> bool:
        if self.refuse_cordon:
            raise RuntimeError("BROKER_NOT_AVAILABLE: broker not in the cluster metadata")
        if self.before_cordoning:
            return False
        self.cordon_calls.append((node_id, list(dirs)))
        if dirs:
            self.cordoned[node_id] = list(dirs)
        else:
            self.cordoned.pop(node_id, None)
        return True


class Mover:
    """A data mover that is not done until told, and records what was cordoned when it was asked."""

    def __init__(self, fakes: Fakes) -> None:
        self.fakes = fakes
        self.done = False
        self.seen: list[tuple[str, Any, dict[int, list[str]]]] = []

    async def evacuate(self, brokers: list[int]) -> tuple[bool, str]:
        self.seen.append(("evacuate", brokers, dict(self.fakes.cordoned)))
        return self.done, "1 partition moving"

    async def spread(self, brokers: list[int]) -> tuple[bool, str]:
        return True, "nothing to spread"

    async def evacuate_dirs(self, broker_dirs: dict[int, list[str]]) -> tuple[bool, str]:
        self.seen.append(("evacuate_dirs", broker_dirs, dict(self.fakes.cordoned)))
        return self.done, "1 replica moving"


def cluster(controllers: int, brokers: int) -> tuple[dict[str, Any], Any]:
    raw = {
        "image": "kopfka:test",
        "controllers": {"replicas": controllers, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "brokers": {"replicas": brokers, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
    }
    return {"metadata": {"name": "c"}, "spec": raw, "status": {}}, parse_spec(raw)


async def test_voters_grow_one_at_a_time_and_shrink_through_remove_raft_voter() -> None:
    fakes = Fakes(quorum([1000, 1001, 1002]), ClusterSnapshot((), frozenset({0, 1, 2})))
    ctx = ScaleContext(fakes, fakes, None, lambda *e: fakes.events.append(e))  # type: ignore[arg-type]
    body, spec = cluster(5, 3)
    patch = await scale_step(ctx, body, spec, {"controller": 3, "broker": 3})
    assert patch is not None and patch["controller"]["votersGrowTo"] == 4
    # 1003's pod exists but it has not joined yet: no further growth
    body["status"]["scale"] = patch
    patch = await scale_step(ctx, body, spec, {"controller": 4, "broker": 3})
    assert patch is not None and "1003" in patch["controller"]["voters"] and patch["controller"]["votersGrowTo"] == 4
    fakes.q = quorum([1000, 1001, 1002, 1003])
    patch = await scale_step(ctx, {**body, "status": {"scale": patch}}, spec, {"controller": 4, "broker": 3})
    assert patch is not None and patch["controller"]["votersGrowTo"] == 5

    # Shrink 4 -> 3: 1003's pod goes first (the others are a caught-up majority), then it is
    # removed from the voter set; removed while running, it would join again by itself.
    body, spec = cluster(3, 3)
    patch = await scale_step(ctx, body, spec, {"controller": 4, "broker": 3})
    assert patch is not None and patch["controller"]["votersShrinkTo"] == 3 and fakes.removed == []
    assert patch["controller"]["removeVoters"] == [{"nodeId": 1003, "directoryId": "dir-1003"}]
    patch = await scale_step(ctx, {**body, "status": {"scale": patch}}, spec, {"controller": 3, "broker": 3})
    assert fakes.removed == [(1003, "dir-1003")]
    assert patch is not None and patch["controller"].get("removeVoters") is None  # null: removed


async def test_broker_shrink_refused_below_a_topics_rf_and_empty_brokers_go_at_once() -> None:
    parts = tuple(PartitionState("orders", i, i, (0, 1, 2), (0, 1, 2), 2) for i in range(3))
    fakes = Fakes(quorum([1000]), ClusterSnapshot(parts, frozenset({0, 1, 2, 3})))
    ctx = ScaleContext(fakes, fakes, None, lambda *e: fakes.events.append(e))  # type: ignore[arg-type]
    body, spec = cluster(1, 2)
    patch = await scale_step(ctx, body, spec, {"controller": 1, "broker": 4})
    assert patch is not None and "orders (RF 3)" in patch["broker"]["refused"]
    assert ("Warning", "ScaleDownRefused") == fakes.events[-1][:2]
    # To 3: broker 3 holds nothing, every ISR is full: it may go without moving anything.
    body, spec = cluster(1, 3)
    patch = await scale_step(ctx, body, spec, {"controller": 1, "broker": 4})
    assert patch is not None and patch["broker"]["dataShrinkTo"] == 3 and "refused" not in patch["broker"]
    assert patch["broker"]["unregister"] == [3]
    # Once the StatefulSet has shrunk, broker 3 is unregistered.
    patch = await scale_step(ctx, {**body, "status": {"scale": patch}}, spec, {"controller": 1, "broker": 3})
    assert fakes.unregistered == [3] and patch is not None and patch["broker"].get("unregister") is None


def step_with(body: dict[str, Any], patch: dict[str, Any] | None) -> dict[str, Any]:
    """The body after a merge patch of status.scale (nulls drop keys)."""
    scale = {role: dict(v) for role, v in ((body.get("status") or {}).get("scale") or {}).items()}
    for role, changes in (patch or {}).items():
        merged = {**scale.get(role, {}), **(changes or {})}
        scale[role] = {k: v for k, v in merged.items() if v is not None}
    return {**body, "status": {**(body.get("status") or {}), "scale": scale}}


async def test_brokers_going_away_are_cordoned_before_they_are_emptied_and_until_their_pods_are_gone() -> None:
    parts = (PartitionState("orders", 0, 3, (3, 0), (3, 0), 2), PartitionState("orders", 1, 0, (0, 1), (0, 1), 2))
    fakes = Fakes(quorum([1000]), ClusterSnapshot(parts, frozenset({0, 1, 2, 3})))
    mover = Mover(fakes)
    ctx = ScaleContext(fakes, fakes, mover, lambda *e: fakes.events.append(e))  # type: ignore[arg-type]
    body, spec = cluster(1, 3)
    running = {"controller": 1, "broker": 4}

    # the cordon cannot be set (broker unreachable): nothing is moved, the shrink waits
    fakes.refuse_cordon = True
    patch = await scale_step(ctx, body, spec, running)
    assert (
        patch is not None
        and "waiting to cordon brokers [3] before moving replicas off: BROKER_NOT_AVAILABLE" in patch["broker"]["data"]
    )
    assert mover.seen == [] and not patch["broker"].get("dataShrinkTo")
    fakes.refuse_cordon = False

    # broker 3 is cordoned (all its dirs) before the mover is asked to empty it; not done: no shrink
    body = step_with(body, patch)
    patch = await scale_step(ctx, body, spec, running)
    assert mover.seen == [("evacuate", [3], {3: ["*"]})]
    assert patch is not None and not patch["broker"].get("dataShrinkTo")
    body = step_with(body, patch)
    assert body["status"]["scale"]["broker"]["cordoned"] == {"3": ["*"]}
    # the next tick sends nothing again (idempotent)
    calls = len(fakes.cordon_calls)
    body = step_with(body, await scale_step(ctx, body, spec, running))
    assert len(fakes.cordon_calls) == calls

    # the scale-down is undone (4 again): broker 3 is uncordoned
    body4, spec4 = cluster(1, 4)
    body = step_with(
        {**body4, "status": body["status"]}, await scale_step(ctx, {**body4, "status": body["status"]}, spec4, running)
    )
    assert fakes.cordoned == {} and fakes.cordon_calls[-1] == (3, [])
    assert "cordoned" not in body["status"]["scale"]["broker"]

    # shrink again, this time emptied: the cordon stays while the pod goes, and after
    mover.done = True
    body = step_with({**body, "spec": body["spec"] | {"brokers": {**body["spec"]["brokers"], "replicas": 3}}}, None)
    body = step_with(body, await scale_step(ctx, body, spec, running))
    assert body["status"]["scale"]["broker"]["dataShrinkTo"] == 3 and fakes.cordoned == {3: ["*"]}
    body = step_with(body, await scale_step(ctx, body, spec, {"controller": 1, "broker": 3}))
    assert fakes.cordoned == {3: ["*"]} and body["status"]["scale"]["broker"]["cordoned"] == {"3": ["*"]}

    # broker 3 comes back (a grow): its stored cordon is lifted once it can be reached
    fakes.refuse_cordon = True
    body = step_with(body, await scale_step(ctx, body, spec4, {"controller": 1, "broker": 4}))
    assert body["status"]["scale"]["broker"]["cordoned"] == {"3": ["*"]}
    fakes.refuse_cordon = False
    body = step_with(body, await scale_step(ctx, body, spec4, {"controller": 1, "broker": 4}))
    assert fakes.cordoned == {} and "cordoned" not in body["status"]["scale"]["broker"]


def stateful_set(volumes: list[int], replicas: int, updated: int) -> dict[str, Any]:
    claims = [
        {"metadata": {"name": f"data-{v}"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}} for v in volumes
    ]
    return {
        "metadata": {"name": "c-broker", "generation": 2},
        "spec": {"replicas": replicas, "volumeClaimTemplates": claims},
        "status": {"observedGeneration": 2, "updatedReplicas": updated},
    }


def jbod(volumes: list[int]) -> tuple[dict[str, Any], Any]:
    raw = {
        "image": "kopfka:test",
        "controllers": {"replicas": 1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
        "brokers": {"replicas": 3, "storage": {"volumes": [{"id": v, "size": "1Gi"} for v in volumes]}},
    }
    return {"metadata": {"name": "c", "namespace": "ns"}, "spec": raw, "status": {}}, parse_spec(raw)


async def test_a_removed_volume_is_cordoned_on_every_broker_before_it_is_emptied() -> None:
    fakes = Fakes(quorum([1000]), ClusterSnapshot((), frozenset({0, 1, 2})))
    mover = Mover(fakes)
    ctx = ScaleContext(fakes, fakes, mover, lambda *e: fakes.events.append(e))  # type: ignore[arg-type]
    running = {"controller": 1, "broker": 3}
    d1 = data_dir(1)
    body, spec = jbod([0])  # volume 1 removed from the spec, still in the set
    sets = {"broker": stateful_set([0, 1], 3, 3)}

    fakes.refuse_cordon = True
    patch = await scale_step(ctx, body, spec, running, sets)
    assert patch is not None and "waiting to cordon volume(s) [1]" in patch["broker"]["volumes"] and mover.seen == []
    fakes.refuse_cordon = False
    body = step_with(body, patch)

    body = step_with(body, await scale_step(ctx, body, spec, running, sets))
    assert mover.seen == [("evacuate_dirs", {0: [d1], 1: [d1], 2: [d1]}, {0: [d1], 1: [d1], 2: [d1]})]
    assert "volumesEvacuated" not in body["status"]["scale"]["broker"]  # not done yet

    # the volume is put back in the spec: uncordoned on every broker
    back, spec01 = jbod([0, 1])
    body = step_with(
        {**back, "status": body["status"]},
        await scale_step(ctx, {**back, "status": body["status"]}, spec01, running, sets),
    )
    assert fakes.cordoned == {} and "cordoned" not in body["status"]["scale"]["broker"]

    # removed again and emptied: cordoned until the set has dropped it and every pod rolled
    mover.done = True
    body = step_with({**body, "spec": jbod([0])[0]["spec"]}, None)
    body = step_with(body, await scale_step(ctx, body, spec, running, sets))
    assert body["status"]["scale"]["broker"]["volumesEvacuated"] == [1]
    assert fakes.cordoned == {0: [d1], 1: [d1], 2: [d1]}
    not_rolled = {"broker": stateful_set([0], 3, 1)}
    body = step_with(body, await scale_step(ctx, body, spec, running, not_rolled))
    assert fakes.cordoned == {0: [d1], 1: [d1], 2: [d1]}, "pods still mount it: kept cordoned"
    rolled = {"broker": stateful_set([0], 3, 3)}
    body = step_with(body, await scale_step(ctx, body, spec, running, rolled))
    assert fakes.cordoned == {} and "cordoned" not in body["status"]["scale"]["broker"]


async def test_a_broker_going_away_while_a_volume_is_removed_keeps_both_cordons() -> None:
    """`*` and the volume's dir are both recorded; the broker is sent `*`; when the shrink is
    undone it gets the volume's dir back without ever being uncordoned in between."""
    parts = (PartitionState("orders", 0, 3, (3, 0), (3, 0), 2),)
    fakes = Fakes(quorum([1000]), ClusterSnapshot(parts, frozenset({0, 1, 2, 3})))
    ctx = ScaleContext(fakes, fakes, Mover(fakes), lambda *e: fakes.events.append(e))  # type: ignore[arg-type]
    d1 = data_dir(1)
    body, spec = jbod([0])  # 3 brokers wanted, 4 running, volume 1 being removed
    running, sets = {"controller": 1, "broker": 4}, {"broker": stateful_set([0, 1], 4, 4)}
    body = step_with(body, await scale_step(ctx, body, spec, running, sets))
    assert fakes.cordoned == {0: [d1], 1: [d1], 2: [d1], 3: ["*"]}
    assert body["status"]["scale"]["broker"]["cordoned"]["3"] == sorted(["*", d1])
    raw = {**body["spec"], "brokers": {**body["spec"]["brokers"], "replicas": 4}}
    body = step_with({**body, "spec": raw}, None)
    body = step_with(body, await scale_step(ctx, body, parse_spec(raw), running, sets))
    assert fakes.cordoned == {0: [d1], 1: [d1], 2: [d1], 3: [d1]}
    assert (3, []) not in fakes.cordon_calls


async def test_before_metadata_version_4_3_a_shrink_goes_on_without_a_cordon() -> None:
    parts = (PartitionState("orders", 0, 3, (3, 0), (3, 0), 2),)
    fakes = Fakes(quorum([1000]), ClusterSnapshot(parts, frozenset({0, 1, 2, 3})))
    fakes.before_cordoning = True
    mover = Mover(fakes)
    mover.done = True
    ctx = ScaleContext(fakes, fakes, mover, lambda *e: fakes.events.append(e))  # type: ignore[arg-type]
    body, spec = cluster(1, 3)
    patch = await scale_step(ctx, body, spec, {"controller": 1, "broker": 4})
    assert mover.seen == [("evacuate", [3], {})]
    assert patch is not None and patch["broker"]["dataShrinkTo"] == 3 and not patch["broker"].get("cordoned")
