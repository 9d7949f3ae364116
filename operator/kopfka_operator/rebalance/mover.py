"""The data mover: runs rebalance plans on a live cluster, one bounded step per call.

The scaler calls it from the operator's 3-second timer, so a call never waits for data to move:
it reads the cluster (cluster.py), plans the goal on what it read (planner.py), and, while
fewer than `max_concurrent_moves` moves are under way, starts the next ones:
- replica moves between brokers as AlterPartitionReassignments, throttled the way
  kafka-reassign-partitions --throttle does (throttles.py); each added replica's log dir is sent
  first with AlterReplicaLogDirs, so the new broker creates it in the dir the plan chose;
- moves between the log dirs of one broker as AlterReplicaLogDirs, throttled by
  replica.alter.log.dirs.io.max.bytes.per.second.
When nothing is left to move and nothing moves, it takes the throttles off, elects the preferred
leaders the plan set, and answers done once every partition is fully in sync.

It keeps no state between calls: what is under way and what is left both come from the
cluster, and the plan is deterministic, so an operator restarted mid-way picks up where the
last one stopped (a reassignment under way counts where it is going).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kopfka.client.admin import Admin, AdminError
from kopfka.protocol.errors import ErrorCode
from kopfka.security.client import ClientSecurity

from ..kafka_pool import ClusterAdmin, ClusterPool, ClusterUnavailable
from ..security.credentials import admin_bootstrap
from ..spec import RebalanceSpec, SpecError, parse_rebalance
from ..throttles import (
    ALTER_LOG_DIRS_RATE,
    BROKER,
    DELETE,
    RATE_KEYS,
    REPLICA_KEYS,
    SET,
    TOPIC,
    Ops,
    alter_brokers,
    rate_ops,
    replica_throttles,
)
from .cluster import ClusterState, read_cluster
from .model import DirMove, Goal, Plan, PlanRefused, Reassignment, TopicPartition
from .planner import PlanOptions, plan_rebalance

log = logging.getLogger(__name__)

DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG = 1, 2  # DescribeConfigs config_source
BROKER_THROTTLE_KEYS = (*RATE_KEYS, ALTER_LOG_DIRS_RATE)  # what Kafka's --verify clears per broker


@dataclass(frozen=True)
class MoverSettings:
    throttle_bytes_per_second: int = 0  # 0: unthrottled
    max_concurrent_moves: int = 5
    plan_options: PlanOptions = field(default_factory=PlanOptions)


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _names(tps: Iterable[TopicPartition], limit: int = 5) -> str:
    items = [f"{t}-{p}" for t, p in sorted(tps)]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _as_reported(goal: Goal, state: ClusterState) -> Goal:
    """Dirs to empty named as their brokers report them (log.dirs as rendered may differ by a
    trailing slash or a `..` from the normalized path DescribeLogDirs answers with)."""
    if not goal.remove_dirs:
        return goal
    reported = {(b.id, os.path.normpath(d.path)): d.path for b in state.model.brokers for d in b.dirs}
    dirs = frozenset((b, reported.get((b, os.path.normpath(p)), p)) for b, p in goal.remove_dirs)
    return replace(goal, remove_dirs=dirs)


class Mover:
    """The scaler's DataMover (scale/scaler.py), plus `evacuate_dirs` for JBOD volume removal.
    Each call answers (done, progress): progress says what moves, what is left, or why it
    waits or refuses."""

    def __init__(self, admin: ClusterAdmin, settings: MoverSettings | None = None) -> None:
        self.admin = admin
        self.settings = settings or MoverSettings()
        self.last_plan: Plan | None = None  # the plan the last step made (for status and tests)

    async def evacuate(self, brokers: list[int]) -> tuple[bool, str]:
        """Move every replica off these brokers (to be removed)."""
        return await self.step(Goal.removing(brokers))

    async def spread(self, brokers: list[int]) -> tuple[bool, str]:
        """Give these (new) brokers their share of replicas and preferred leaders."""
        return await self.step(Goal.adding(brokers))

    async def evacuate_dirs(self, broker_dirs: Mapping[int, list[str]]) -> tuple[bool, str]:
        """Move every replica off these log dirs to the same broker's other dirs."""
        return await self.step(Goal.removing_dirs(broker_dirs))

    async def step(self, goal: Goal) -> tuple[bool, str]:
        try:
            async with self.admin.session() as admin:
                return await self._step(admin, goal)
        except ClusterUnavailable as exc:
            return False, f"waiting for the cluster: {exc}"

    async def _step(self, admin: Admin, goal: Goal) -> tuple[bool, str]:
        state = await read_cluster(admin, self.admin.node)
        live = set(state.addresses)
        missing = sorted(goal.add_brokers - live)
        if missing:
            return False, f"waiting for broker(s) {','.join(map(str, missing))} to register"
        if state.settling:
            return False, (
                f"reassignment(s) of {_names(state.settling)} started or ended while the cluster was read;"
                " the next step plans on settled metadata"
            )
        goal = _as_reported(goal, state)
        try:
            plan = self.last_plan = plan_rebalance(state.model, goal, self.settings.plan_options)
        except PlanRefused as exc:
            return False, f"refused: {exc.reason}"
        if not plan.empty or state.ongoing or state.dir_moves:
            started, failed = await self._start(admin, state, plan)
            return False, self._progress(state, plan, started, failed)
        # nothing left to move, nothing moving -- unless a replica still sits where it must not
        # (the plan's word is not taken for it: an emptied disk is unmounted next)
        left = [
            f"{p.topic}-{p.partition}@{b}:{d}"
            for p in state.model.partitions
            for b, d in zip(p.replicas, p.dirs, strict=False)
            if (b in goal.remove_brokers) or (d is not None and (b, d) in goal.remove_dirs)
        ]
        if left:
            return False, f"{len(left)} replica(s) still on what is to be emptied, none planned: {', '.join(left[:5])}"
        offline = [
            f"{b.id}:{d.path}"
            for b in state.model.brokers
            for d in b.dirs
            if not d.online and (b.id, d.path) in goal.remove_dirs
        ]
        if offline:  # an offline dir lists no replica: its emptiness cannot be seen
            return False, f"log dir(s) offline, their replicas unknown: {', '.join(offline)}"
        await self._clear_throttles(admin, state)
        if not goal.remove_dirs or goal.add_brokers or goal.remove_brokers:
            await self._elect_preferred(admin, state)
        replicas = {p.tp: p.replicas for p in state.model.partitions}
        lagging = [tp for tp, isr in state.isr.items() if set(isr) != set(replicas[tp])]
        if lagging:
            return False, f"moves done; waiting for {len(lagging)} partition(s) to be fully in sync: {_names(lagging)}"
        return True, f"{goal.describe()}: done"

    # --- starting moves --------------------------------------------------------------------------
    async def _start(self, admin: Admin, state: ClusterState, plan: Plan) -> tuple[tuple[int, int], list[str]]:
        """Start what the free slots allow; ((moves started, their bytes), failures)."""
        slots = max(0, self.settings.max_concurrent_moves - len(state.ongoing) - len(state.dir_moves))
        reorders = [r for r in plan.reassignments if not r.adding]  # free: no data is copied
        copies = [r for r in plan.reassignments if r.adding][:slots]
        dir_moves = list(plan.dir_moves[: max(0, slots - len(copies))])
        failed: list[str] = []
        if copies:
            await self._prefer_dirs(state, copies)
            await self._throttle_reassignments(admin, state, copies)
        batch = copies + reorders
        if batch:
            results = await admin.alter_partition_reassignments({r.tp: list(r.replicas) for r in batch})
            failed += [f"{t}-{p}: {err}" for (t, p), err in sorted(results.items()) if err is not None]
        if dir_moves:
            failed += await self._move_dirs(state, dir_moves)
        for line in failed:
            log.warning("data mover: %s", line)
        started_bytes = sum(r.bytes for r in copies) + sum(m.size for m in dir_moves)
        return (len(copies) + len(dir_moves), started_bytes), failed

    async def _prefer_dirs(self, state: ClusterState, copies: list[Reassignment]) -> None:
        """Each added replica's planned dir, sent to its broker before the reassignment (the
        broker remembers it and creates the replica there: REPLICA_NOT_AVAILABLE is the answer)."""
        by_broker: dict[int, dict[TopicPartition, str]] = {}
        for r in copies:
            for b in r.adding:
                path = r.dir_for(b)
                if path is not None:
                    by_broker.setdefault(b, {})[r.tp] = path
        for b, moves in sorted(by_broker.items()):
            node = await self.admin.node(b, state.addresses[b])
            results = await node.alter_replica_log_dirs(moves)
            for tp, err in results.items():
                if err is not None and err.code != ErrorCode.replica_not_available:
                    log.info("data mover: broker %d places %s-%d itself: %s", b, tp[0], tp[1], err)

    async def _throttle_reassignments(self, admin: Admin, state: ClusterState, copies: list[Reassignment]) -> None:
        """Throttled replica lists for every move under way and starting (SET per topic), and
        the rate on every broker they involve."""
        rate = self.settings.throttle_bytes_per_second
        if rate <= 0:
            return
        moves = [(r.topic, r.partition, list(r.before), list(r.replicas)) for r in copies]
        for (t, p), r in sorted(state.ongoing.items()):
            original = [b for b in r.replicas if b not in r.adding]
            target = [b for b in r.replicas if b not in r.removing]
            moves.append((t, p, original, target))
        topic_ops, brokers = replica_throttles(moves)
        await alter_brokers(
            self.admin.node, {b: rate_ops(rate) for b in sorted(brokers) if b in state.addresses}, state.addresses
        )
        results = await admin.incremental_alter_configs_many({(TOPIC, t): ops for t, ops in topic_ops.items()})
        for err in results.values():
            if err is not None:
                raise err

    async def _move_dirs(self, state: ClusterState, moves: list[DirMove]) -> list[str]:
        by_broker: dict[int, dict[TopicPartition, str]] = {}
        for m in moves:
            by_broker.setdefault(m.broker, {})[m.tp] = m.target
        rate = self.settings.throttle_bytes_per_second
        if rate > 0:
            ops: Ops = [(ALTER_LOG_DIRS_RATE, SET, str(rate))]
            await alter_brokers(self.admin.node, {b: ops for b in sorted(by_broker)}, state.addresses)
        failed = []
        for b, targets in sorted(by_broker.items()):
            node = await self.admin.node(b, state.addresses[b])
            results = await node.alter_replica_log_dirs(targets)
            failed += [f"{t}-{p} on broker {b}: {err}" for (t, p), err in sorted(results.items()) if err is not None]
        return failed

    # --- finishing -------------------------------------------------------------------------------
    async def _clear_throttles(self, admin: Admin, state: ClusterState) -> None:
        """Kafka's --verify: the brokers' throttle rates and the topics' throttled replica lists
        come off once no reassignment runs (only those set, so a finished cluster sees no writes)."""
        for b in sorted(state.addresses):
            node = await self.admin.node(b, state.addresses[b])
            found = (await node.describe_config_entries([(BROKER, str(b))], list(BROKER_THROTTLE_KEYS))).get(
                (BROKER, str(b))
            )
            if isinstance(found, AdminError):
                raise found
            ops: Ops = [(e.name, DELETE, None) for e in found or [] if e.source == DYNAMIC_BROKER_CONFIG]
            if ops:
                result = await node.incremental_alter_configs_many({(BROKER, str(b)): ops})
                if result.get((BROKER, str(b))) is not None:
                    raise result[(BROKER, str(b))]  # type: ignore[misc]
                log.info("data mover: throttles cleared on broker %d", b)
        topics = sorted({p.topic for p in state.model.partitions})
        described = await admin.describe_config_entries([(TOPIC, t) for t in topics], list(REPLICA_KEYS))
        clear: dict[tuple[int, str], Ops] = {}
        for key, entries in described.items():
            if isinstance(entries, AdminError):
                continue  # deleted meanwhile
            ops = [(e.name, DELETE, None) for e in entries if e.source == DYNAMIC_TOPIC_CONFIG]
            if ops:
                clear[key] = ops
        for err in (await admin.incremental_alter_configs_many(clear)).values():
            if err is not None and err.code != ErrorCode.unknown_topic_or_partition:
                raise err

    async def _elect_preferred(self, admin: Admin, state: ClusterState) -> None:
        """Leadership to each partition's first replica where it is in sync and does not lead."""
        wanted: dict[str, list[int]] = {}
        for p in state.model.partitions:
            if p.replicas and state.leaders.get(p.tp) != p.replicas[0] and p.replicas[0] in state.isr.get(p.tp, ()):
                wanted.setdefault(p.topic, []).append(p.partition)
        if not wanted:
            return
        results = await admin.elect_leaders(wanted, election_type=0)
        for (topic, part), code in sorted(results.items()):
            if code not in (ErrorCode.none, ErrorCode.election_not_needed):
                log.info("data mover: preferred leader of %s-%d not elected: %s", topic, part, code.name)

    # --- reporting -------------------------------------------------------------------------------
    def _progress(self, state: ClusterState, plan: Plan, started: tuple[int, int], failed: list[str]) -> str:
        moving = len(state.ongoing) + len(state.dir_moves)
        left = state.reassignment_bytes_left() + sum(m.bytes_left for m in state.dir_moves)
        copies = [r for r in plan.reassignments if r.adding]
        waiting = len(copies) + len(plan.dir_moves) - started[0]
        parts = [f"{moving} move(s) under way ({_mib(left)} left)"]
        if started[0]:
            parts.append(f"{started[0]} started ({_mib(started[1])})")
        parts.append(f"{waiting} to start ({_mib(plan.bytes_to_move - started[1])})")
        if failed:
            parts.append(f"refused by Kafka: {'; '.join(failed[:3])}")
        return ", ".join(parts)


class MoverFactory:
    """The operator's data mover for a KafkaCluster body: over the cluster's pooled admin
    connection (where the operator's admin connections go: the REPLICATION listener of a secured
    cluster, with the operator's credentials), with the settings of its spec.rebalance."""

    def __init__(self) -> None:
        self.pool = ClusterPool()

    async def __call__(self, body: Mapping[str, Any], security: ClientSecurity | None = None) -> Mover | None:
        bootstrap = admin_bootstrap(body)
        if not bootstrap:
            return None
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        admin = await self.pool.admin(key, bootstrap, security)
        try:
            rebalance = parse_rebalance(body.get("spec") or {})
        except SpecError:
            rebalance = RebalanceSpec()
        return Mover(admin, MoverSettings(rebalance.throttle_bytes_per_second, rebalance.max_concurrent_moves))
