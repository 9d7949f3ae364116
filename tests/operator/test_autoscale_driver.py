"""The operator's autoscaler step: it writes spec.brokers.replicas (the path `kubectl scale`
takes, so the scaler's safe paths run), says why in status and an Event, never scales down while
the cluster is busy, waits for a change to complete before the next, and reports a bad spec."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from kopfka_operator.autoscale.driver import Autoscaler
from kopfka_operator.autoscale.metrics import ScrapeTarget
from kopfka_operator.autoscale.samples import BYTES_IN, Sample
from kopfka_operator.roll.gates import ClusterSnapshot, PartitionState
from kopfka_operator.spec import parse_spec

MB = 1 << 20


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class ScriptedSource:
    """bytes in per broker, as the load script says at the clock's time."""

    def __init__(self, clock: Clock, per_broker: float) -> None:
        self.clock, self.per_broker = clock, per_broker
        self.closed = False

    async def sample(self, targets: Sequence[ScrapeTarget], brokers: int | None = None) -> Sample:
        n = brokers or 1
        return Sample(self.clock(), n, {BYTES_IN: {b: self.per_broker for b in range(n)}})

    async def close(self) -> None:
        self.closed = True


class FakeApi:
    def __init__(self, body: dict[str, Any], running: int) -> None:
        self.body, self.running = body, running
        self.patches: list[dict[str, Any]] = []

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        assert kind == "StatefulSet" and name == "demo-broker"
        return {"spec": {"replicas": self.running}}

    async def list(self, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        return []

    async def patch(self, kind: str, namespace: str, name: str, patch: dict[str, Any], subresource: Any = None):
        self.patches.append(patch)
        self.body["spec"]["brokers"]["replicas"] = patch["spec"]["brokers"]["replicas"]
        return self.body


class FakeView:
    def __init__(self) -> None:
        self.urp = False

    async def cluster(self) -> ClusterSnapshot:
        isr = (0,) if self.urp else (0, 1)
        return ClusterSnapshot((PartitionState("t", 0, 0, (0, 1), isr),), frozenset({0, 1}))


def body(replicas: int = 3, **autoscaling: Any) -> dict[str, Any]:
    auto = {
        "minBrokers": 3,
        "maxBrokers": 6,
        "targets": {BYTES_IN: "1Mi"},
        "scaleUpStabilizationWindowSeconds": 10,
        "scaleDownStabilizationWindowSeconds": 30,
        "cooldownSeconds": 20,
        **autoscaling,
    }
    return {
        "metadata": {"name": "demo", "namespace": "ns"},
        "spec": {
            "controllers": {"replicas": 3, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}},
            "brokers": {"replicas": replicas, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}, "autoscaling": auto},
        },
        "status": {},
    }


class Harness:
    def __init__(self, b: dict[str, Any], per_broker: float) -> None:
        self.clock = Clock()
        self.source = ScriptedSource(self.clock, per_broker)
        self.scaler = Autoscaler(clock=self.clock, source_factory=lambda spec, ns: self.source)
        self.api = FakeApi(b, b["spec"]["brokers"]["replicas"])
        self.view = FakeView()
        self.events: list[tuple[str, str, str]] = []
        self.writes: list[dict[str, Any]] = []

    async def tick(self, seconds: float = 3.0) -> dict[str, Any] | None:
        self.clock.now += seconds
        b = self.api.body
        patch = await self.scaler.step(
            self.api,  # type: ignore[arg-type]
            copy.deepcopy(b),
            parse_spec(b["spec"], "img"),
            self.view,  # type: ignore[arg-type]
            lambda *e: self.events.append(e),
        )
        if patch is not None:
            self.writes.append(patch)
            b["status"]["autoscaling"] = patch["autoscaling"]
        return patch


async def test_a_sustained_load_adds_a_broker_after_the_window_and_says_why() -> None:
    h = Harness(body(), per_broker=2.5 * MB)
    for _ in range(3):  # 9 s: inside the 10 s scale-up window
        await h.tick()
    assert h.api.patches == []
    while not h.api.patches and h.clock.now < 1_030:
        await h.tick()
    scaled_at = h.clock.now
    assert scaled_at - 1_000 in (12, 15)  # the window's first sample is at 3 s; it lasts 10 s
    assert h.api.patches[0] == {"spec": {"brokers": {"replicas": 4}}}, h.api.patches  # maxStep 1
    (event,) = [e for e in h.events if e[1] == "AutoscaledUp"]
    assert "brokers 3 -> 4" in event[2] and "bytes in per broker 2.62 MB/s over target 1.05 MB/s" in event[2]
    status = h.api.body["status"]["autoscaling"]
    assert status["desiredBrokers"] == 4 and status["lastScaleTime"] == scaled_at
    # the StatefulSet is not at 4 yet: nothing more is decided, whatever the load
    h.source.per_broker = 9 * MB
    for _ in range(10):
        await h.tick()
    assert len(h.api.patches) == 1


async def test_no_scale_down_while_under_replicated_or_rolling_and_the_cooldown_holds() -> None:
    h = Harness(body(replicas=5), per_broker=0.2 * MB)
    h.view.urp = True
    for _ in range(20):  # 60 s, past the 30 s scale-down window
        await h.tick()
    assert h.api.patches == []
    assert h.api.body["status"]["autoscaling"]["held"] == "busy"
    assert "under-replicated" in h.api.body["status"]["autoscaling"]["reason"]
    h.view.urp = False
    h.api.body["status"]["roll"] = {"phase": "Rolling"}
    await h.tick()
    assert h.api.patches == [] and "rolling restart" in h.api.body["status"]["autoscaling"]["reason"]
    del h.api.body["status"]["roll"]
    await h.tick()
    assert h.api.patches == [{"spec": {"brokers": {"replicas": 4}}}]  # one at a time (maxStep 1)
    h.api.running = 4
    h.source.per_broker = 5 * MB
    for _ in range(5):  # 15 s of overload: past the window but inside the 20 s cooldown
        await h.tick()
    assert len(h.api.patches) == 1 and h.api.body["status"]["autoscaling"]["held"] == "cooldown"


async def test_status_is_not_rewritten_every_tick_and_a_bad_spec_is_reported() -> None:
    h = Harness(body(), per_broker=1 * MB)  # on target: nothing to do
    for _ in range(8):  # 24 s
        await h.tick()
    assert len(h.writes) == 1, h.writes  # the first decision; then only every 30 s
    for _ in range(3):
        await h.tick()
    assert len(h.writes) == 2
    bad = body(maxBrokers=2)
    h.api.body["spec"] = bad["spec"]
    patch = await h.tick()
    assert patch is not None and "maxBrokers (2) is below minBrokers (3)" in patch["autoscaling"]["error"]
    assert h.source.closed and ("ns", "demo") not in h.scaler.clusters
    del h.api.body["spec"]["brokers"]["autoscaling"]
    assert await h.tick() == {"autoscaling": None}
