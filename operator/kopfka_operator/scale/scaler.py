"""Scaling without losing a replica or a vote, one step per timer tick (as the roller).

Voters (the dedicated controllers, or the combined pool) grow one pod at a time: each new node
joins the voter set by itself (KIP-853 auto-join) and catches up before the next is created.
They shrink one at a time: the highest ordinal is removed from the voter set (RemoveRaftVoter)
while the others remain a caught-up majority, and only then is its pod let go.

Brokers: a shrink below the largest replication factor of any topic is refused with the topics
named. Otherwise the brokers going away (the highest ordinals, as a StatefulSet removes them)
are emptied first by the data mover, and the StatefulSet shrinks only once they hold nothing and
every partition is fully in ISR elsewhere; then they are unregistered. New brokers (a grow) get
replicas spread onto them by the data mover unless spec.rebalance.onScaleUp is false.

What is being emptied is cordoned first (KIP-1066 `cordoned.log.dirs`, a dynamic per-broker
config): every dir (`*`) of a broker going away, the removed volume's dir on every broker, so
the controller places no new replica there while the mover works. The cordon stays until the
pod or the volume is gone, and is lifted if the removal is undone (replicas raised again, the
volume put back); `status.scale.<role>.cordoned` records what the operator cordoned.

Each role's progress is in `status.scale.<role>`; replicas.py turns it into what is rendered.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..manifests.statefulset import METADATA_VOLUME_ANNOTATION
from ..naming import data_dir, node_id_base, pool_name, volume_name
from ..reconcile import removed_volumes
from ..roll.gates import QuorumSnapshot, may_stop_voter, voter_caught_up
from ..roll.kafka_view import KafkaView
from ..spec import ClusterSpec, Pool
from .replicas import BROKER_ROLES, VOTER_ROLES

log = logging.getLogger(__name__)
Emit = Callable[[str, str, str], None]


class DataMover(Protocol):
    """Moves replicas for the scaler: one bounded step per call, resumable, (done, progress).
    The operator's is rebalance.mover.Mover."""

    async def evacuate(self, brokers: list[int]) -> tuple[bool, str]: ...
    async def spread(self, brokers: list[int]) -> tuple[bool, str]: ...
    async def evacuate_dirs(self, broker_dirs: dict[int, list[str]]) -> tuple[bool, str]: ...


class ClaimDeleter(Protocol):
    async def delete(self, kind: str, namespace: str, name: str) -> Any: ...


class NodeAdmin(Protocol):
    async def remove_voter(self, node_id: int, directory_id: str) -> None: ...
    async def unregister_broker(self, node_id: int) -> None: ...
    async def set_cordoned_dirs(self, node_id: int, dirs: list[str]) -> bool: ...


ALL_DIRS = "*"  # cordoned.log.dirs: every log dir of the broker


@dataclass
class ScaleContext:
    view: KafkaView | None
    admin: NodeAdmin | None
    mover: DataMover | None
    emit: Emit
    kube: ClaimDeleter | None = None


async def _safe(coro: Awaitable[Any]) -> Any:
    try:
        return await coro
    except Exception as exc:
        log.info("scaler: %s", exc)
        return None


async def _ok(coro: Awaitable[Any]) -> bool:
    try:
        await coro
    except Exception as exc:
        log.info("scaler: %s", exc)
        return False
    return True


def _ids(pool: Pool, first: int, last: int) -> list[int]:
    return [node_id_base(pool.role) + i for i in range(first, last)]


def _say(ctx: ScaleContext, state: dict[str, Any], key: str, text: str, event: tuple[str, str] | None = None) -> None:
    """Record what the role waits for; emit an Event the first time it is said."""
    if state.get(key) != text and event is not None:
        ctx.emit(event[0], event[1], text)
    state[key] = text


async def _voters(ctx: ScaleContext, pool: Pool, running: int, state: dict[str, Any]) -> None:
    wanted = pool.replicas
    quorum: QuorumSnapshot | None = await _safe(ctx.view.quorum()) if ctx.view is not None else None
    # A voter whose pod is gone is removed from the voter set (not before: a removed controller
    # that still runs would join again by itself, KIP-853 auto-join).
    pending = [dict(r) for r in state.get("removeVoters") or []]
    if pending and quorum is not None and ctx.admin is not None:
        left = []
        for r in pending:
            if r["nodeId"] not in quorum.voter_ids:
                continue
            if int(r["nodeId"]) - node_id_base(pool.role) < running:
                left.append(r)  # its pod is still there
            elif await _ok(ctx.admin.remove_voter(int(r["nodeId"]), str(r["directoryId"]))):
                ctx.emit("Normal", "RemovedVoter", f"controller {r['nodeId']} removed from the voter set")
            else:
                left.append(r)
        pending = left
    state["removeVoters"] = pending or None
    if wanted == running:
        for key in ("votersGrowTo", "votersShrinkTo"):
            state.pop(key, None)
        state["voters"] = f"removing voters {[r['nodeId'] for r in pending]}" if pending else None
        return
    if quorum is None:
        state["voters"] = "waiting for DescribeQuorum"
        return
    if wanted > running:
        present = _ids(pool, 0, running)
        missing = [n for n in present if not (n in quorum.voter_ids and voter_caught_up(quorum, n))]
        if missing:
            state["voters"] = f"waiting for voters {missing} in the quorum and caught up"
            return
        nxt = node_id_base(pool.role) + running
        state["votersGrowTo"] = running + 1
        _say(
            ctx,
            state,
            "voters",
            f"adding controller {nxt}: its pod formats and joins the voter set",
            ("Normal", "AddingVoter"),
        )
        return
    state.pop("votersGrowTo", None)
    leaving = node_id_base(pool.role) + running - 1
    voter = next((v for v in quorum.voters if v.node_id == leaving), None)
    if voter is not None:
        verdict = may_stop_voter(quorum, leaving)
        if not verdict.ok:
            state["voters"] = f"before removing controller {leaving}: {verdict.waiting_for}"
            return
        state["removeVoters"] = [*pending, {"nodeId": leaving, "directoryId": voter.directory_id}]
    state["votersShrinkTo"] = running - 1
    _say(
        ctx,
        state,
        "voters",
        f"controller {leaving}: its pod goes, then it leaves the voter set",
        ("Normal", "RemovingVoter"),
    )


async def _send_cordons(ctx: ScaleContext, state: dict[str, Any], wanted: Mapping[int, set[str]]) -> dict[int, str]:
    """Set each broker's cordoned dirs to `wanted` where the record differs; returns the
    brokers not set with why (the record keeps what they had)."""
    record = {k: list(v) for k, v in (state.get("cordoned") or {}).items()}
    failed: dict[int, str] = {}
    for broker, dirs in sorted(wanted.items()):
        # the record keeps every reason (`*` and a removed volume's dir); the broker gets `*` alone
        have = set(record.get(str(broker)) or [])
        value = [ALL_DIRS] if ALL_DIRS in dirs else sorted(dirs)
        if ([ALL_DIRS] if ALL_DIRS in have else sorted(have)) == value:
            if dirs:
                record[str(broker)] = sorted(dirs)
            continue
        if ctx.admin is None:
            failed[broker] = "no admin connection"
            continue
        try:
            supported = await ctx.admin.set_cordoned_dirs(broker, value)
        except Exception as exc:
            log.info("scaler: cordoning %s on broker %d: %s", value, broker, exc)
            failed[broker] = str(exc) or type(exc).__name__
            continue
        if not supported:  # metadata.version before 4.3-IV0: no cordoning, the move goes on without
            log.info("scaler: metadata.version predates cordoned.log.dirs: broker %d not cordoned", broker)
            record.pop(str(broker), None)
            continue
        if dirs:
            record[str(broker)] = sorted(dirs)
        else:
            record.pop(str(broker), None)
    state["cordoned"] = record or None
    return failed


def _not_cordoned(failed: Mapping[int, str]) -> str:
    return f"brokers {sorted(failed)} before moving replicas off: {failed[min(failed)]}"


async def _cordon(ctx: ScaleContext, state: dict[str, Any], dirs: Mapping[int, set[str]]) -> dict[int, str]:
    """Add `dirs` to what each broker has cordoned (before anything is moved off them)."""
    record = state.get("cordoned") or {}
    return await _send_cordons(ctx, state, {b: {*(record.get(str(b)) or []), *d} for b, d in dirs.items()})


def _rolled_out(sts: Mapping[str, Any]) -> bool:
    """Every pod of the StatefulSet runs its current template (OnDelete: once rolled)."""
    spec, status = sts.get("spec") or {}, sts.get("status") or {}
    generation = (sts.get("metadata") or {}).get("generation")
    if generation is not None and status.get("observedGeneration") != generation:
        return False
    return int(status.get("updatedReplicas") or 0) >= int(spec.get("replicas") or 0)


async def _lift_cordons(
    ctx: ScaleContext, pool: Pool, running: int, state: dict[str, Any], sts: Mapping[str, Any] | None
) -> None:
    """Lift what the operator cordoned once nothing is to be emptied there any more: `*` of a
    broker the spec keeps again (scale-down undone, or its id back after a grow); a volume's dir
    when the volume is in the spec again, or gone from the set and every pod rolled without it.
    A broker whose pod is gone keeps its record (its config is lifted if the id comes back)."""
    record = state.get("cordoned") or {}
    in_spec = {data_dir(v.id) for v in pool.volumes}
    mounted = in_spec | {data_dir(v.id) for v in removed_volumes(pool, sts)}
    gone_and_rolled = sts is not None and _rolled_out(sts)
    wanted: dict[int, set[str]] = {}
    for key, dirs in record.items():
        broker = int(key)
        ordinal = broker - node_id_base(pool.role)
        if not 0 <= ordinal < running:
            continue  # its pod is gone (or not ours): nothing to reach
        keep = set(dirs)
        if ALL_DIRS in keep and ordinal < pool.replicas:
            keep.discard(ALL_DIRS)
        keep -= {d for d in keep if d != ALL_DIRS and (d in in_spec or (d not in mounted and gone_and_rolled))}
        if keep != set(dirs):
            wanted[broker] = keep
    if wanted:
        await _send_cordons(ctx, state, wanted)


async def _brokers(ctx: ScaleContext, pool: Pool, running: int, state: dict[str, Any], on_scale_up: bool) -> None:
    wanted = pool.replicas
    known = state.get("brokers")
    if isinstance(known, int) and running > known and on_scale_up:
        state["spreadTo"] = sorted({*(state.get("spreadTo") or []), *_ids(pool, known, running)})
    state["brokers"] = running
    # brokers that have gone again are nothing to spread onto
    state["spreadTo"] = [b for b in state.get("spreadTo") or [] if b - node_id_base(pool.role) < running] or None
    if wanted < running:
        snapshot = await _safe(ctx.view.cluster()) if ctx.view is not None else None
        if snapshot is None:
            state["data"] = "waiting for Metadata"
            return
        rf: dict[str, int] = {}
        for p in snapshot.partitions:
            rf[p.topic] = max(rf.get(p.topic, 0), len(p.replicas))
        too_big = sorted(t for t, n in rf.items() if n > wanted)
        if too_big:
            names = ", ".join(f"{t} (RF {rf[t]})" for t in too_big[:20])
            _say(
                ctx,
                state,
                "refused",
                f"scaling to {wanted} broker(s) refused: a larger replication factor: {names}",
                ("Warning", "ScaleDownRefused"),
            )
            return
        state.pop("refused", None)
        leaving = _ids(pool, wanted, running)
        not_cordoned = await _cordon(ctx, state, {b: {ALL_DIRS} for b in leaving})
        if not_cordoned:
            state["data"] = f"waiting to cordon {_not_cordoned(not_cordoned)}"
            return
        hosted = [p for p in snapshot.partitions if set(leaving) & set(p.replicas)]
        lagging = [p for p in snapshot.partitions if set(p.isr) != set(p.replicas)]
        if not hosted and not lagging:
            done, progress = True, "nothing to move"
        elif ctx.mover is None:
            state["data"] = f"waiting for {len(hosted)} partition(s) to move off brokers {leaving}"
            return
        else:
            done, progress = await ctx.mover.evacuate(leaving)
        state["data"] = f"moving replicas off brokers {leaving}: {progress}"
        if done:
            state["dataShrinkTo"] = wanted
            state["unregister"] = sorted({*(state.get("unregister") or []), *leaving})
            _say(
                ctx,
                state,
                "data",
                f"brokers {leaving} hold no replica: the StatefulSet shrinks to {wanted}",
                ("Normal", "BrokersEmptied"),
            )
        return
    state.pop("refused", None)
    state.pop("dataShrinkTo", None)
    if not state.get("spreadTo"):
        state.pop("data", None)  # the last shrink's progress line is history now
    if state.get("unregister") and ctx.admin is not None:
        left = []
        for node in state["unregister"]:
            if not await _ok(ctx.admin.unregister_broker(node)):
                left.append(node)
        if len(left) < len(state["unregister"]):
            ctx.emit("Normal", "BrokersUnregistered", f"unregistered: {sorted(set(state['unregister']) - set(left))}")
        state["unregister"] = left or None
    if state.get("spreadTo") and ctx.mover is not None:
        done, progress = await ctx.mover.spread(list(state["spreadTo"]))
        state["data"] = f"spreading replicas onto brokers {state['spreadTo']}: {progress}"
        if done:
            ctx.emit("Normal", "Rebalanced", f"replicas spread onto brokers {state['spreadTo']}")
            state["spreadTo"] = None
            state["data"] = None


async def _volumes(
    ctx: ScaleContext, pool: Pool, running: int, state: dict[str, Any], sts: Mapping[str, Any], where: tuple[str, str]
) -> None:
    """A JBOD volume removed from the spec: its replicas are moved to the broker's other disks
    (AlterReplicaLogDirs), then the rendering drops it (volumesEvacuated), the set is re-created
    and the pods rolled; last, its claims are deleted if it was a deleteClaim volume."""
    gone = removed_volumes(pool, sts)
    ids = [v.id for v in gone]
    if not ids:
        if state.get("removeVolumes"):
            deleted = []
            if ctx.kube is not None:
                for vid in state.get("deleteClaims") or []:
                    for ordinal in range(running):
                        claim = f"{volume_name(vid)}-{pool_name(where[1], pool.role)}-{ordinal}"
                        if await _ok(ctx.kube.delete("PersistentVolumeClaim", where[0], claim)):
                            deleted.append(claim)
            ctx.emit(
                "Normal", "VolumesRemoved", f"volume(s) {state['removeVolumes']} removed; claims deleted: {deleted}"
            )
        for key in ("removeVolumes", "volumesEvacuated", "deleteClaims", "volumes"):
            state.pop(key, None)
        return
    state["removeVolumes"] = ids
    state["deleteClaims"] = [v.id for v in gone if v.delete_claim] or None
    meta_volume = ((sts.get("metadata") or {}).get("annotations") or {}).get(METADATA_VOLUME_ANNOTATION)
    if meta_volume is not None and int(meta_volume) in ids:
        _say(
            ctx,
            state,
            "volumes",
            f"volume {meta_volume} holds the metadata log and cannot be removed",
            ("Warning", "VolumeRemovalRefused"),
        )
        return
    if set(ids) <= set(state.get("volumesEvacuated") or []):
        state["volumes"] = f"volume(s) {ids} empty: the StatefulSet is re-created without them and the pods rolled"
        return
    if pool.role not in BROKER_ROLES or running == 0:
        done, progress = True, "no partition replicas on a controller"
    elif ctx.mover is None:
        state["volumes"] = f"waiting to move the replicas off volume(s) {ids}"
        return
    else:
        brokers = _ids(pool, 0, running)
        not_cordoned = await _cordon(ctx, state, {b: {data_dir(i) for i in ids} for b in brokers})
        if not_cordoned:
            state["volumes"] = f"waiting to cordon volume(s) {ids} on {_not_cordoned(not_cordoned)}"
            return
        done, progress = await ctx.mover.evacuate_dirs({b: [data_dir(i) for i in ids] for b in brokers})
    state["volumes"] = f"moving replicas off volume(s) {ids}: {progress}"
    if done:
        state["volumesEvacuated"] = ids
        _say(
            ctx,
            state,
            "volumes",
            f"volume(s) {ids} hold no replica: they are removed from the pods",
            ("Normal", "VolumesEvacuated"),
        )


async def scale_step(
    ctx: ScaleContext,
    body: Mapping[str, Any],
    spec: ClusterSpec,
    running: Mapping[str, int],
    stateful_sets: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """One step over every pool (`running`: role -> its StatefulSet's spec.replicas;
    `stateful_sets`: role -> the set, for its volumes); returns the new status.scale when it
    changed."""
    status = body.get("status") or {}
    before = status.get("scale") or {}
    after: dict[str, Any] = {}
    rolling = (status.get("roll") or {}).get("phase") in ("Rolling", "Blocked")
    on_scale_up = spec.rebalance.on_scale_up
    for pool in spec.pools:
        state = dict(before.get(pool.role) or {})
        if pool.role in running:
            if pool.role in VOTER_ROLES:
                await _voters(ctx, pool, running[pool.role], state)
            sts = (stateful_sets or {}).get(pool.role)
            if pool.role in BROKER_ROLES and state.get("cordoned"):
                await _lift_cordons(ctx, pool, running[pool.role], state, sts)
            if pool.role in BROKER_ROLES and not rolling:
                await _brokers(ctx, pool, running[pool.role], state, on_scale_up)
            if sts is not None and not rolling:
                meta = body.get("metadata") or {}
                await _volumes(ctx, pool, running[pool.role], state, sts, (meta.get("namespace", ""), meta["name"]))
        kept = {k: v for k, v in state.items() if v is not None}
        if kept or pool.role in before:
            after[pool.role] = kept
    if after == before:
        return None
    # a merge patch: keys that went away must be sent as null, or the API server keeps them
    patch: dict[str, Any] = {}
    for role in {*before, *after}:
        old_state, new_state = before.get(role) or {}, after.get(role)
        if new_state is None:
            patch[role] = None
        else:
            patch[role] = {key: new_state.get(key) for key in {*old_state, *new_state}}
    return patch
