"""Which pods a roll restarts and in which order; and the roller's steps against a scripted
Kubernetes and Kafka (the e2e tests in e2e/test_roll.py do it for real)."""

from __future__ import annotations

import time
from typing import Any

from kopfka_operator.roll.gates import ClusterSnapshot, PartitionState, QuorumSnapshot, ReplicaProgress
from kopfka_operator.roll.plan import Desired, order, pod_view, stale_pods, stale_reason
from kopfka_operator.roll.roller import RollContext, roll_step

NOW = time.time()


def pod(
    name: str,
    role: str,
    pod_hash: str = "new",
    *,
    ready: bool = True,
    waiting: str = "",
    created: str = "2026-11-25T00:00:00Z",
    manual: bool = False,
    uid: str = "",
) -> dict[str, Any]:
    annotations = {"kopfka.io/pod-hash": pod_hash}
    if manual:
        annotations["kopfka.io/manual-rolling-update"] = "true"
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if waiting:
        status["containerStatuses"] = [{"name": "kopfka", "state": {"waiting": {"reason": waiting}}}]
    return {
        "metadata": {
            "name": name,
            "uid": uid or f"{name}-uid",
            "creationTimestamp": created,
            "labels": {"kopfka.io/cluster": "c", "kopfka.io/role": role},
            "annotations": annotations,
        },
        "spec": {"terminationGracePeriodSeconds": 30},
        "status": status,
    }


def quorum(leader: int, lags: dict[int, int]) -> QuorumSnapshot:
    voters = [ReplicaProgress(leader, 100, int(NOW * 1000))]
    voters += [ReplicaProgress(n, 100 - lag, int(NOW * 1000)) for n, lag in lags.items()]
    return QuorumSnapshot(leader, 3, 100, tuple(voters), int(NOW * 1000))


def test_stale_reasons_and_manual_requests() -> None:
    desired = Desired({"broker": "new", "controller": "new"})
    assert stale_reason(pod_view(pod("c-broker-0", "broker", "old")), desired) == "the pod spec changed"
    assert stale_reason(pod_view(pod("c-broker-0", "broker")), desired) is None
    assert "pod annotation" in (stale_reason(pod_view(pod("c-broker-0", "broker", manual=True)), desired) or "")
    later = Desired({"broker": "new"}, manual_since=NOW)
    assert "KafkaCluster annotation" in (stale_reason(pod_view(pod("c-broker-0", "broker")), later) or "")
    fresh = pod("c-broker-1", "broker", created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW + 5)))
    assert stale_reason(pod_view(fresh), later) is None  # created after the request: done


def test_order_stuck_first_then_controllers_by_lag_leader_last_then_brokers() -> None:
    pods = [
        pod_view(pod("c-broker-1", "broker", "old")),
        pod_view(pod("c-broker-0", "broker", "old")),
        pod_view(pod("c-controller-0", "controller", "old")),
        pod_view(pod("c-controller-1", "controller", "old")),
        pod_view(pod("c-controller-2", "controller", "old")),
        pod_view(pod("c-broker-2", "broker", "old", ready=False, waiting="CrashLoopBackOff")),
    ]
    stale = stale_pods(pods, Desired({"broker": "new", "controller": "new"}))
    names = [p.name for p in order(stale, quorum(1000, {1001: 0, 1002: 500}))]
    assert names == [
        "c-broker-2",  # CrashLoopBackOff: serves nothing, replaced first
        "c-controller-2",  # the lagging follower
        "c-controller-1",
        "c-controller-0",  # the active controller
        "c-broker-0",
        "c-broker-1",
    ]


class FakeApi:
    """Pods and a StatefulSet template hash, as the roller lists, reads and deletes them."""

    def __init__(self, pods: list[dict[str, Any]], hashes: dict[str, str]) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.hashes = hashes
        self.deleted: list[tuple[str, int | None]] = []

    async def list(self, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        if kind == "Pod":
            return list(self.pods.values())
        if kind != "StatefulSet":
            return []
        return [
            {
                "metadata": {"name": f"c-{role}"},
                "spec": {
                    "template": {
                        "metadata": {"labels": {"kopfka.io/role": role}, "annotations": {"kopfka.io/pod-hash": h}}
                    }
                },
            }
            for role, h in self.hashes.items()
        ]

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.pods.get(name)

    async def delete(self, kind: str, namespace: str, name: str, grace_period_seconds: int | None = None) -> None:
        self.deleted.append((name, grace_period_seconds))
        self.pods.pop(name, None)

    async def patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}


class FakeView:
    def __init__(self, snapshot: ClusterSnapshot, q: QuorumSnapshot) -> None:
        self.snapshot, self.q = snapshot, q
        self.elected: list[dict[str, list[int]]] = []

    async def quorum(self) -> QuorumSnapshot:
        return self.q

    async def cluster(self) -> ClusterSnapshot:
        return self.snapshot

    async def leadership(self, avoid: int) -> tuple[frozenset[int], dict[int, int]]:
        return self.snapshot.live_brokers, {}

    async def elect_preferred(self, partitions: dict[str, list[int]]) -> dict[tuple[str, int], str]:
        self.elected.append(partitions)
        return {}

    async def alter_cluster_config(self, set_: dict[str, str], delete: list[str]) -> None:
        pass

    async def features(self) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
        return {}, {}

    async def update_feature(self, name: str, level: int) -> None:
        pass


def body(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "c", "namespace": "ns"}, "spec": {}, "status": {"clusterId": "x", **status}}


async def test_roller_one_pod_at_a_time_gated_then_preferred_leaders() -> None:
    api = FakeApi(
        [pod("c-broker-0", "broker", "old"), pod("c-broker-1", "broker", "old")],
        {"broker": "new"},
    )
    parts = (
        PartitionState("t", 0, 1, (0, 1), (0, 1), 1),  # led by 1, preferred 0
        PartitionState("rf2", 0, 0, (0, 1), (0, 1), 2),  # RF = min.insync: blocks either broker
    )
    view = FakeView(ClusterSnapshot(parts, frozenset({0, 1})), quorum(1000, {}))
    events: list[tuple[str, str, str]] = []
    ctx = RollContext(api, view, lambda *e: events.append(e), blocked_timeout=0)  # type: ignore[arg-type]

    status: dict[str, Any] = {}

    async def step() -> dict[str, Any]:
        """One tick; the roll status as the API server holds it afterwards (a merge patch)."""
        patch = await roll_step(ctx, body(status))
        if patch is not None:
            merged = {**status.get("roll", {}), **patch["roll"]}
            status["roll"] = {k: v for k, v in merged.items() if v is not None}
        return dict(status["roll"])

    roll = await step()
    assert roll["phase"] == "Blocked"
    assert "rf2-0" in roll["waitingFor"] and roll["blocked"]["reported"] is True
    assert api.deleted == [] and ("Warning", "RollBlocked") == events[-1][:2]

    # The RF is raised: broker 0 may go; it is deleted, with a grace period >= its own.
    raised = PartitionState("rf2", 0, 0, (0, 1, 2), (0, 1, 2), 2)
    view.snapshot = ClusterSnapshot((parts[0], raised), frozenset({0, 1}))
    roll = await step()
    assert roll["pod"] == "c-broker-0" and "blocked" not in roll
    assert api.deleted[0][0] == "c-broker-0" and (api.deleted[0][1] or 0) >= 120

    # Not recreated yet: wait, delete nothing else (never two pods down).
    roll = await step()
    assert "recreated" in roll["waitingFor"] and len(api.deleted) == 1

    # Recreated and Ready, but out of the ISR: wait for it to catch up.
    api.pods["c-broker-0"] = pod("c-broker-0", "broker", "new", uid="second")
    view.snapshot = ClusterSnapshot((PartitionState("t", 0, 1, (0, 1), (1,), 1), raised), frozenset({0, 1}))
    roll = await step()
    assert "back in the ISR" in roll["waitingFor"] and len(api.deleted) == 1

    # Caught up: broker 1 is next.
    view.snapshot = ClusterSnapshot((parts[0], raised), frozenset({0, 1}))
    roll = await step()
    assert roll["done"] == ["c-broker-0"] and roll["pod"] == "c-broker-1"
    api.pods["c-broker-1"] = pod("c-broker-1", "broker", "new", uid="second")

    # Last one back: the roll finishes and gives t-0 back to its preferred leader.
    roll = await step()
    assert roll["phase"] == "Done" and roll["done"] == ["c-broker-0", "c-broker-1"]
    assert view.elected == [{"t": [0]}]
    assert [e[1] for e in events].count("RestartingPod") == 2
