"""Scaling: what is rendered while a shrink or a voter change is pending, and the scaler's steps
against a scripted quorum and metadata (e2e/test_scale.py does it on real pods)."""

from __future__ import annotations

import time
from typing import Any

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

    async def quorum(self) -> QuorumSnapshot:
        return self.q

    async def cluster(self) -> ClusterSnapshot:
        return self.snapshot

    async def remove_voter(self, node_id: int, directory_id: str) -> None:
        self.removed.append((node_id, directory_id))

    async def unregister_broker(self, node_id: int) -> None:
        self.unregistered.append(node_id)


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
