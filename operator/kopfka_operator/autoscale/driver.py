"""The operator's side of autoscaling: one step per roll/scale timer tick.

Each tick samples the broker pods (or Prometheus), keeps the trimmed history in memory (a
restarted operator starts a new history: its windows then wait for samples again, which only
delays a change), asks `decide`, and acts by writing `spec.brokers.replicas` -- the same field
`kubectl scale` and an HPA write through the scale subresource -- so every autoscale step goes
through the scaler's safe paths (voters one at a time, data moved off a broker before its pod
goes). The decision, its reason and the load it saw are in `status.autoscaling`, and every
change is an Event.

A scale-down is never decided while the cluster is busy: a roll, a scale still under way
(brokers being emptied or filled, the StatefulSet not yet at the count), or under-replicated
partitions. A scale-up waits only for the previous change to complete.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kube import KubeApi
from ..naming import LABEL_CLUSTER, pool_name
from ..roll.kafka_view import KafkaView
from ..spec import ClusterSpec, SpecError
from .metrics import MetricsSource, pod_targets, source_for
from .policy import AutoscalingSpec, decide, trim
from .samples import Sample

log = logging.getLogger(__name__)
Emit = Callable[[str, str, str], None]
STATUS_REFRESH_SECONDS = 30.0  # the levels change every tick; the status need not


@dataclass
class _ClusterState:
    spec: AutoscalingSpec
    source: MetricsSource
    history: list[Sample] = field(default_factory=list)
    written_at: float = 0.0


def _busy(body: Mapping[str, Any], role: str, running: int, wanted: int) -> str | None:
    status = body.get("status") or {}
    if (status.get("roll") or {}).get("phase") in ("Rolling", "Blocked"):
        return "a rolling restart is in progress"
    if running != wanted:
        return f"the broker StatefulSet is at {running} pod(s), not yet {wanted}"
    scale = (status.get("scale") or {}).get(role) or {}
    for key in ("spreadTo", "dataShrinkTo", "unregister", "data"):
        if scale.get(key):
            return f"brokers are being added or removed ({scale.get('data') or key})"
    return None


class Autoscaler:
    """Per-cluster sources and histories, kept across ticks."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        source_factory: Callable[[AutoscalingSpec, str], MetricsSource] = source_for,
    ) -> None:
        self.clusters: dict[tuple[str, str], _ClusterState] = {}
        self.clock = clock
        self.source_factory = source_factory

    async def forget(self, key: tuple[str, str]) -> None:
        state = self.clusters.pop(key, None)
        if state is not None:
            await state.source.close()

    async def close(self) -> None:
        for key in list(self.clusters):
            await self.forget(key)

    async def step(
        self,
        api: KubeApi,
        body: Mapping[str, Any],
        spec: ClusterSpec,
        view: KafkaView | None,
        emit: Emit,
    ) -> dict[str, Any] | None:
        """One tick; returns the status.autoscaling patch (None: nothing to write)."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        raw = ((body.get("spec") or {}).get("brokers") or {}).get("autoscaling")
        written = (body.get("status") or {}).get("autoscaling")
        if raw is None:
            await self.forget(key)
            return {"autoscaling": None} if written else None
        try:
            policy = AutoscalingSpec.from_mapping(raw)
        except SpecError as exc:
            await self.forget(key)
            error = {"error": exc.message}
            return None if (written or {}).get("error") == exc.message else {"autoscaling": error}
        state = self.clusters.get(key)
        if state is None or state.spec.prometheus_url != policy.prometheus_url:
            await self.forget(key)
            state = self.clusters[key] = _ClusterState(policy, self.source_factory(policy, key[0]))
        state.spec = policy

        role = spec.brokers.role
        wanted = spec.brokers.replicas
        sts = await api.get("StatefulSet", key[0], pool_name(key[1], role))
        running = int(((sts or {}).get("spec") or {}).get("replicas") or 0)
        pods = await api.list("Pod", key[0], f"{LABEL_CLUSTER}={key[1]}")
        now = self.clock()
        try:
            sample = await state.source.sample(pod_targets(pods), brokers=running)
        except Exception as exc:  # a scrape that fails is a missing sample, not a failed tick
            log.info("autoscaler %s/%s: no sample: %s", *key, exc)
        else:
            state.history.append(sample)
        state.history = trim(state.history, policy, now)

        busy = _busy(body, role, running, wanted)
        if busy is None and view is not None:
            try:
                snapshot = await view.cluster()
            except Exception as exc:
                busy = f"the cluster's metadata cannot be read ({exc})"
            else:
                urp = [p for p in snapshot.partitions if set(p.isr) != set(p.replicas)]
                if urp:
                    busy = f"{len(urp)} partition(s) are under-replicated"
        last = (written or {}).get("lastScaleTime")
        decision = decide(state.history, wanted, policy, now, float(last) if last else None, busy)
        if decision.desired > wanted and busy is not None and running != wanted:
            # the previous change is not complete: it is what the next decision builds on
            decision = type(decision)(wanted, wanted, f"{decision.reason}; waiting: {busy}", decision.recommendation)

        out: dict[str, Any] = {
            "currentBrokers": wanted,
            "desiredBrokers": decision.desired,
            "recommendation": decision.recommendation,
            "reason": decision.reason,
            "held": decision.held,
            "levels": {k: round(v, 4) for k, v in (decision.levels or {}).items()} or None,
            "lastScaleTime": last,
            "error": None,
        }
        if decision.scale:
            await api.patch("KafkaCluster", key[0], key[1], {"spec": {"brokers": {"replicas": decision.desired}}})
            out["lastScaleTime"] = now
            out["currentBrokers"] = decision.desired
            emit(
                "Normal",
                "AutoscaledUp" if decision.direction == "up" else "AutoscaledDown",
                f"brokers {wanted} -> {decision.desired}: {decision.reason}",
            )
        steady = {k: v for k, v in out.items() if k not in ("levels", "reason")}
        before = {k: (written or {}).get(k) for k in steady}
        if steady == before and now - state.written_at < STATUS_REFRESH_SECONDS:
            return None
        state.written_at = now
        return {"autoscaling": out}


__all__ = ["Autoscaler"]
