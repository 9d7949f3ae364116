"""The rolling restart, one step at a time, resumable from what the API server holds.

`roll_step` is called every few seconds per KafkaCluster (a kopf timer). Each call looks at the
pods and, through a KafkaView, at the quorum and the partitions, then does at most one thing:
waits for the pod restarted last to be whole again, or restarts the next stale pod if its gate
is open, or finishes the roll (preferred leaders back), or applies dynamic config live, or
raises metadata.version after an upgrade. Progress lives in `status.roll` and in the pods
themselves (a restarted pod carries the new spec hash), so an operator restarted mid-roll picks
up where it was without restarting any pod twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..dynamic_config import live_changes, split
from ..kube import KubeApi
from ..naming import LABEL_CLUSTER, LABEL_ROLE
from .gates import (
    ClusterSnapshot,
    QuorumSnapshot,
    Verdict,
    broker_back,
    grace_period_seconds,
    may_stop_broker,
    may_stop_voter,
    preferred_leader_drift,
    voter_back,
)
from .kafka_view import KafkaView
from .plan import MANUAL_ROLL_ANNOTATION, Desired, PodView, order, pod_view, stale_pods, stale_reason

log = logging.getLogger(__name__)
Emit = Callable[[str, str, str], None]  # (type, reason, message) -> a Kubernetes Event
DEFAULT_BLOCKED_TIMEOUT = 120.0
SHUTDOWN_POLL = 0.25


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class RollContext:
    api: KubeApi
    view: KafkaView | None
    emit: Emit
    blocked_timeout: float = DEFAULT_BLOCKED_TIMEOUT
    watchers: dict[str, asyncio.Task[None]] = field(default_factory=dict)


async def _safe(what: str, coro: Awaitable[Any]) -> Any:
    """A Kafka read that may fail while nodes restart: None instead of an exception."""
    try:
        return await coro
    except Exception as exc:
        log.info("roller: %s unavailable: %s", what, exc)
        return None


def _desired(sets: list[dict[str, Any]], roll: Mapping[str, Any]) -> Desired:
    from ..status import Observed, desired_state

    return desired_state(Observed({s["metadata"]["name"]: s for s in sets}, []), roll)


async def _gate(ctx: RollContext, pod: PodView, *, back: bool) -> tuple[Verdict, ClusterSnapshot | None]:
    """The gate for stopping `pod` (back=False) or for calling it whole again (back=True)."""
    if ctx.view is None:
        return Verdict.go(), None
    snapshot: ClusterSnapshot | None = None
    if pod.is_voter:
        quorum: QuorumSnapshot | None = await _safe("DescribeQuorum", ctx.view.quorum())
        if quorum is None:
            return Verdict.wait("DescribeQuorum answered"), None
        verdict = voter_back(quorum, pod.node_id) if back else may_stop_voter(quorum, pod.node_id)
        if not verdict.ok:
            return verdict, None
    if pod.is_broker:
        snapshot = await _safe("Metadata", ctx.view.cluster())
        if snapshot is None:
            return Verdict.wait("Metadata answered"), None
        verdict = broker_back(snapshot, pod.node_id) if back else may_stop_broker(snapshot, pod.node_id)
        if not verdict.ok:
            return verdict, snapshot
    return Verdict.go(), snapshot


def _grace(pod: dict[str, Any], snapshot: ClusterSnapshot | None, node_id: int) -> int:
    own = int((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 30)
    if snapshot is None:
        return own
    hosted = sum(1 for p in snapshot.partitions if node_id in p.replicas)
    return max(own, grace_period_seconds(hosted))


async def _watch_shutdown(ctx: RollContext, namespace: str, cluster: str, pod: PodView) -> None:
    """While a broker stops, follow how many partitions it leads (asking the other brokers)
    until its pod is gone, i.e. its process exited; report the count last seen. Its controlled
    shutdown should have moved every leadership away by then: 0."""
    assert ctx.view is not None
    last_led: int | None = None
    deadline = time.monotonic() + 900
    gone = False
    while time.monotonic() < deadline:
        seen = await _safe("Metadata", ctx.view.leadership(avoid=pod.node_id))
        if seen is not None:
            last_led = seen[1].get(pod.node_id, 0)
        try:
            current = await ctx.api.get("Pod", namespace, pod.name)
        except Exception:
            current = {"metadata": {"uid": pod.uid}}
        if current is None or current["metadata"].get("uid") != pod.uid:
            gone = True
            break
        await asyncio.sleep(SHUTDOWN_POLL)
    if last_led is None or not gone:
        return
    note = {"pod": pod.name, "nodeId": pod.node_id, "ledPartitionsAtStop": last_led, "at": now_iso()}
    try:
        await ctx.api.patch("KafkaCluster", namespace, cluster, {"status": {"roll": {"lastShutdown": note}}}, "status")
    except Exception as exc:
        log.info("roller: could not record the shutdown of %s: %s", pod.name, exc)
    if last_led:
        ctx.emit(
            "Warning", "LeadershipNotMoved", f"broker {pod.node_id} still led {last_led} partition(s) when it stopped"
        )
    else:
        ctx.emit("Normal", "ControlledShutdown", f"broker {pod.node_id} led no partition when it stopped")


async def _apply_live_config(ctx: RollContext, body: Mapping[str, Any], status: dict[str, Any]) -> bool:
    """spec.config's dynamic keys, applied with IncrementalAlterConfigs (no restart)."""
    if ctx.view is None:
        return False
    _, wanted = split({k: str(v) for k, v in ((body.get("spec") or {}).get("config") or {}).items()})
    config = dict(status.get("config") or {})
    applied = {k: str(v) for k, v in (config.get("appliedLive") or {}).items()}
    to_set, to_delete = live_changes(applied, wanted)
    if not to_set and not to_delete:
        return False
    try:
        await ctx.view.alter_cluster_config(to_set, to_delete)
    except Exception as exc:
        config["liveError"] = f"IncrementalAlterConfigs failed: {exc}"[:500]
        status["config"] = config
        return True
    config.update(
        appliedLive=wanted,
        lastAppliedLive=sorted([*to_set, *to_delete]),
        appliedAt=now_iso(),
        liveError=None,
    )
    status["config"] = config
    ctx.emit(
        "Normal",
        "ConfigAppliedLive",
        "applied without restart: "
        + ", ".join(f"{k}={v}" for k, v in sorted(to_set.items()))
        + (f"; removed {', '.join(to_delete)}" if to_delete else ""),
    )
    return True


async def _maybe_raise_metadata_version(ctx: RollContext, body: Mapping[str, Any], status: dict[str, Any]) -> bool:
    """After every node runs the new image: metadata.version up to spec.metadataVersion (a release
    such as "4.3" or a level), or to the highest level the brokers support when it is unset.
    A target below the finalized level is refused: Kafka cannot go back safely."""
    if ctx.view is None:
        return False
    from kopfka.metadata.features import METADATA_VERSION, metadata_level_for

    features = await _safe("ApiVersions", ctx.view.features())
    if features is None:
        return False
    supported, finalized = features
    current = finalized.get(METADATA_VERSION)
    if current is None or METADATA_VERSION not in supported:
        return False
    wanted_text = (body.get("spec") or {}).get("metadataVersion")
    info: dict[str, Any] = {"finalized": current, "supported": supported[METADATA_VERSION][1]}
    if wanted_text:
        try:
            target = int(wanted_text) if str(wanted_text).isdigit() else metadata_level_for(str(wanted_text))
        except (KeyError, ValueError):
            info["refused"] = f"unknown metadataVersion {wanted_text!r}"
            target = current
    else:
        target = supported[METADATA_VERSION][1]
    if target < current:
        info["refused"] = (
            f"metadataVersion {wanted_text} (level {target}) is below the finalized level {current}: "
            "a metadata.version downgrade is refused"
        )
    elif target > current:
        try:
            await ctx.view.update_feature(METADATA_VERSION, target)
        except Exception as exc:
            info["error"] = str(exc)[:300]
        else:
            ctx.emit("Normal", "MetadataVersionUpgraded", f"metadata.version {current} -> {target}")
            info["finalized"] = target
    if info != status.get("metadataVersion"):
        status["metadataVersion"] = info
        return True
    return False


async def roll_step(ctx: RollContext, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """One step; returns the status patch to write (None: nothing changed)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    status = dict(body.get("status") or {})
    if not status.get("clusterId"):
        return None  # not rendered yet
    roll = dict(status.get("roll") or {})
    before = dict(roll)
    selector = f"{LABEL_CLUSTER}={name}"
    raw_pods = {p["metadata"]["name"]: p for p in await ctx.api.list("Pod", namespace, selector)}
    sets = await ctx.api.list("StatefulSet", namespace, selector)
    pods = {n: pod_view(p) for n, p in raw_pods.items() if (p["metadata"].get("labels") or {}).get(LABEL_ROLE)}

    manual_requested = (meta.get("annotations") or {}).get(MANUAL_ROLL_ANNOTATION) == "true"
    if manual_requested and not roll.get("manualSince"):
        roll["manualSince"] = time.time()
    desired = _desired(sets, roll)
    changed_other = False

    # 1. A pod restarted last: is it whole again?
    if roll.get("pod"):
        current = pods.get(roll["pod"])
        verdict: Verdict
        if current is None or current.uid == roll.get("podUid") or current.deleting:
            verdict = Verdict.wait(f"pod {roll['pod']} recreated")
        elif current.stuck:
            verdict = Verdict.wait(f"pod {roll['pod']} running ({current.stuck})")
        elif not current.ready:
            verdict = Verdict.wait(f"pod {roll['pod']} Ready")
        else:
            verdict, _ = await _gate(ctx, current, back=True)
        if verdict.ok:
            ctx.emit("Normal", "PodRestarted", f"{roll['pod']} runs the current spec and is whole again")
            roll["done"] = [*(roll.get("done") or []), roll["pod"]]
            for key in ("pod", "podUid", "restartedAt", "reason", "waitingFor", "since"):
                roll.pop(key, None)
        else:
            _wait(roll, verdict)
            return _patch(status, roll, before)

    stale = stale_pods(pods.values(), desired)
    if not stale:
        if roll.get("phase") in ("Rolling", "Blocked"):
            finished = await _finish(ctx, roll)
            from ..reconcile import prune_config_revisions

            await prune_config_revisions(ctx.api, namespace, name)
            if manual_requested:
                await ctx.api.patch(
                    "KafkaCluster", namespace, name, {"metadata": {"annotations": {MANUAL_ROLL_ANNOTATION: None}}}
                )
            roll = finished
        elif roll.get("manualSince") and not manual_requested:
            roll.pop("manualSince")
        changed_other = await _apply_live_config(ctx, body, status)
        if roll.get("phase") in (None, "Done", "Idle"):
            changed_other = await _maybe_raise_metadata_version(ctx, body, status) or changed_other
        return _patch(status, roll, before, force=changed_other)

    # 2. The next stale pod, if its gate is open.
    quorum = await _safe("DescribeQuorum", ctx.view.quorum()) if ctx.view is not None else None
    candidate = order(stale, quorum)[0]
    if roll.get("phase") not in ("Rolling", "Blocked"):
        roll = {
            "phase": "Rolling",
            "startedAt": now_iso(),
            "done": [],
            **({"manualSince": roll["manualSince"]} if roll.get("manualSince") else {}),
        }
        ctx.emit(
            "Normal",
            "RollStarted",
            f"{len(stale)} pod(s) to restart: {', '.join(p.name for p in order(stale, quorum))}",
        )
    roll["remaining"] = [p.name for p in order(stale, quorum)]
    snapshot: ClusterSnapshot | None = None
    if not candidate.stuck:
        unready = [
            p.name for p in pods.values() if not p.ready and not p.deleting and p.name != candidate.name and not p.stuck
        ]
        if unready:
            _wait(roll, Verdict.wait(f"pods Ready before the next restart: {', '.join(sorted(unready))}"))
            return _patch(status, roll, before)
        verdict, snapshot = await _gate(ctx, candidate, back=False)
        if not verdict.ok:
            _blocked(ctx, roll, verdict)
            return _patch(status, roll, before)
    reason = stale_reason(candidate, desired) or "outdated"
    grace = _grace(raw_pods[candidate.name], snapshot, candidate.node_id)
    ctx.emit("Normal", "RestartingPod", f"restarting {candidate.name} (node {candidate.node_id}): {reason}")
    await ctx.api.delete("Pod", namespace, candidate.name, grace_period_seconds=grace)
    roll.update(phase="Rolling", pod=candidate.name, podUid=candidate.uid, restartedAt=now_iso(), reason=reason)
    roll.pop("blocked", None)
    _wait(roll, Verdict.wait(f"pod {candidate.name} recreated"))
    if candidate.is_broker and ctx.view is not None and not candidate.stuck:
        old = ctx.watchers.pop(candidate.name, None)
        if old is not None:
            old.cancel()
        ctx.watchers[candidate.name] = asyncio.create_task(_watch_shutdown(ctx, namespace, name, candidate))
    return _patch(status, roll, before)


def _wait(roll: dict[str, Any], verdict: Verdict) -> None:
    if roll.get("waitingFor") != verdict.waiting_for:
        roll["waitingFor"] = verdict.waiting_for
        roll["since"] = now_iso()


def _blocked(ctx: RollContext, roll: dict[str, Any], verdict: Verdict) -> None:
    """A closed gate: wait; once it has stayed closed past the timeout, say so as RollBlocked."""
    blocked = dict(roll.get("blocked") or {})
    if blocked.get("waitingFor") != verdict.waiting_for:
        blocked = {"waitingFor": verdict.waiting_for, "since": time.time(), "partitions": list(verdict.partitions)}
    if not blocked.get("reported") and time.time() - float(blocked["since"]) >= ctx.blocked_timeout:
        blocked["reported"] = True
        ctx.emit("Warning", "RollBlocked", verdict.waiting_for)
    roll["blocked"] = blocked
    roll["phase"] = "Blocked"
    _wait(roll, verdict)


async def _finish(ctx: RollContext, roll: dict[str, Any]) -> dict[str, Any]:
    """Every pod runs the current spec: bring preferred leaders back where they drifted."""
    result: dict[str, Any] = {
        "phase": "Done",
        "startedAt": roll.get("startedAt"),
        "finishedAt": now_iso(),
        "done": roll.get("done") or [],
    }
    if "lastShutdown" in roll:
        result["lastShutdown"] = roll["lastShutdown"]
    if ctx.view is not None:
        snapshot = await _safe("Metadata", ctx.view.cluster())
        drifted = preferred_leader_drift(snapshot) if snapshot is not None else []
        if drifted:
            partitions: dict[str, list[int]] = {}
            for p in drifted:
                partitions.setdefault(p.topic, []).append(p.partition)
            errors = await _safe("ElectLeaders", ctx.view.elect_preferred(partitions)) or {}
            result["preferredElections"] = len(drifted)
            ctx.emit(
                "Normal",
                "PreferredLeadersRestored",
                f"preferred leader election for {len(drifted)} partition(s)"
                + (f"; failed: {sorted(errors.items())[:5]}" if errors else ""),
            )
    ctx.emit("Normal", "RollFinished", f"every pod runs the current spec ({len(result['done'])} restarted)")
    return result


def _patch(
    status: dict[str, Any], roll: dict[str, Any], before: Mapping[str, Any], *, force: bool = False
) -> dict[str, Any] | None:
    if roll == before and not force:
        return None
    patch: dict[str, Any] = {"roll": roll}
    # keys the roller removed must be nulled in a merge patch
    for key in before:
        if key not in roll:
            roll[key] = None
    for key in ("config", "metadataVersion"):
        if key in status:
            patch[key] = status[key]
    return patch
