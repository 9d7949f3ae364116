"""The rebalance planner: `plan = plan_rebalance(model, goal)`, pure and deterministic.

Given a `ClusterModel` (brokers with racks and log dirs, partitions with replicas, the dir of each
replica and a size) and a `Goal`, it answers with a `Plan`: new replica lists for
AlterPartitionReassignments (whose order spreads preferred leadership evenly) and intra-broker
log-dir moves for AlterReplicaLogDirs. `PlanRefused` says why a goal cannot be met safely.

What it optimizes, in order:
1. hard constraints: a partition keeps its replication factor; never two replicas on one broker;
   replicas of a partition on distinct racks when the racks allow it (otherwise as few per rack
   as the racks allow); nothing placed on a removed broker or dir, nor on a cordoned or offline
   dir; a dir never filled past its free space (less a reserve);
2. even replicas per broker (within floor/ceil of the mean), then even bytes per broker (within
   `bytes_tolerance` of the mean), the same per log dir within each broker, and even preferred
   leaders per broker;
3. fewest bytes moved: a balance move is made only where a broker (or dir) is outside its band,
   the cheapest replica that fixes it is chosen, replicas already planned to move are re-targeted
   before others are touched, and leadership is evened by reordering replica lists (free of
   data) — partitions already being moved first.

What the goal allows:
- plain rebalance: all of the above, between any brokers and dirs;
- add brokers: replicas move only onto the added brokers;
- remove brokers: every replica leaves them; nothing else moves between the remaining brokers
  (the evacuated replicas are spread evenly); refused, naming the topics, when a topic's
  replication factor exceeds the brokers left;
- remove dirs: every replica on them moves to the same broker's other dirs; refused when the
  other dirs lack the room.

Determinism: inputs are sorted first and every choice breaks ties on (topic, partition) and ids,
so the same model and goal always give the same plan, whatever order the model lists them in.
Racks: rack-awareness applies when every eligible broker has a rack (as Kafka, which refuses a
mix); bytes are balanced as absolute numbers (brokers and dirs are assumed alike in size).
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from .model import (
    Balance,
    Broker,
    ClusterModel,
    DirMove,
    Goal,
    Load,
    Partition,
    Plan,
    PlanRefused,
    Reassignment,
    TopicPartition,
)

K = TypeVar("K", int, str)  # a bin: a broker id or a log dir path
NAMED = 10  # how many partitions or topics a refusal names before "and N more"


@dataclass(frozen=True)
class PlanOptions:
    bytes_tolerance: float = 0.10  # a broker (dir) within ±10% of the mean bytes is balanced
    min_free_fraction: float = 0.01  # a dir keeps this fraction of its total size free
    rack_aware: bool = True
    max_actions: int = 200_000  # a bound on balance moves, far above any real plan


def plan_rebalance(model: ClusterModel, goal: Goal, options: PlanOptions | None = None) -> Plan:
    """The plan that meets `goal` on `model` (see the module docstring); raises PlanRefused."""
    w = _Work(model, goal, options or PlanOptions())
    w.validate()
    w.evacuate_brokers()
    w.fix_racks()
    if goal.is_rebalance or goal.add_brokers or goal.remove_brokers:
        w.even_brokers()
        w.even_leaders()
    w.evacuate_dirs()
    if goal.is_rebalance:
        w.even_dirs()
    return w.plan()


def _named(items: Iterable[str]) -> str:
    items = list(items)
    more = f" and {len(items) - NAMED} more" if len(items) > NAMED else ""
    return ", ".join(items[:NAMED]) + more


def _tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


class _Bins(ABC, Generic[K]):
    """Containers (brokers, or the dirs of one broker) holding replicas, for the balancers."""

    def __init__(self, w: _Work) -> None:
        self.w = w

    def size(self, tp: TopicPartition) -> int:
        return self.w.size[tp]

    @abstractmethod
    def count(self, k: K) -> int: ...
    @abstractmethod
    def bytes(self, k: K) -> int: ...
    @abstractmethod
    def items(self, k: K) -> list[TopicPartition]: ...
    @abstractmethod
    def can_move(self, tp: TopicPartition, src: K, dst: K) -> bool: ...
    @abstractmethod
    def move(self, tp: TopicPartition, src: K, dst: K) -> None: ...
    @abstractmethod
    def cost(self, tp: TopicPartition, src: K) -> int:
        """Bytes a move adds to the plan: 0 for a replica the plan already moves."""

    def tie(self, tp: TopicPartition, src: K) -> int:
        """Between equal candidates, the lower moves first."""
        return 0


def _even_counts(bins: _Bins[K], members: list[K], sources: list[K], dests: list[K], opts: PlanOptions) -> int:
    """Move replicas from the fullest to the emptiest until every member is within floor/ceil of
    the mean count; each move picks the replica that leaves bytes best balanced, then the cheapest."""
    if not members or not dests:
        return 0
    total = sum(bins.count(k) for k in members)
    lo, hi = total // len(members), -(-total // len(members))
    mean_bytes = sum(bins.bytes(k) for k in members) / len(members)
    tol = opts.bytes_tolerance * mean_bytes
    actions = 0
    while actions < opts.max_actions:
        srcs = sorted(sources, key=lambda k: (-bins.count(k), -bins.bytes(k), k))
        dsts = sorted(dests, key=lambda k: (bins.count(k), bins.bytes(k), k))
        done = False
        for s in srcs:
            for d in dsts:
                cs, cd = bins.count(s), bins.count(d)
                if cs <= cd + 1:
                    break
                if cs <= hi and cd >= lo:
                    continue
                best: tuple[tuple[float, int, int, TopicPartition], TopicPartition] | None = None
                bs, bd = bins.bytes(s), bins.bytes(d)
                for tp in bins.items(s):
                    if not bins.can_move(tp, s, d):
                        continue
                    z = bins.size(tp)
                    dev = max(abs(bs - z - mean_bytes), abs(bd + z - mean_bytes))
                    key = (0.0 if dev <= tol else dev, bins.cost(tp, s), bins.tie(tp, s), tp)
                    if best is None or key < best[0]:
                        best = (key, tp)
                if best is not None:
                    bins.move(best[1], s, d)
                    actions += 1
                    done = True
                    break
            if done:
                break
        if not done:
            return actions
    return actions


def _even_bytes(bins: _Bins[K], members: list[K], sources: list[K], dests: list[K], opts: PlanOptions) -> int:
    """While a member is outside ±tolerance of the mean bytes, move one replica (or swap two)
    between the fullest and the emptiest, keeping every count within floor/ceil of its mean. Each
    action shrinks the pair's difference by at least the tolerance, so this ends."""
    if not members or not dests:
        return 0
    total = sum(bins.count(k) for k in members)
    lo, hi = total // len(members), -(-total // len(members))
    mean = sum(bins.bytes(k) for k in members) / len(members)
    tol = opts.bytes_tolerance * mean
    if tol <= 0:
        return 0
    actions = 0
    while actions < opts.max_actions:
        if all(abs(bins.bytes(k) - mean) <= tol for k in members):
            return actions
        srcs = sorted(sources, key=lambda k: (-bins.bytes(k), k))
        dsts = sorted(dests, key=lambda k: (bins.bytes(k), k))
        acted = False
        for s in srcs:
            for d in dsts:
                diff = bins.bytes(s) - bins.bytes(d)
                if diff <= tol:
                    break
                if bins.bytes(s) - mean <= tol and mean - bins.bytes(d) <= tol:
                    continue
                if _best_bytes_action(bins, s, d, diff, tol, lo, hi):
                    actions += 1
                    acted = True
                    break
            if acted:
                break
        if not acted:
            return actions
    return actions


def _best_bytes_action(bins: _Bins[K], s: K, d: K, diff: float, tol: float, lo: int, hi: int) -> bool:
    """The move or swap between s and d that brings their bytes closest together, if it closes
    the gap by at least `tol`; applied. Moves beat swaps at equal result (one copy, not two)."""
    out = [tp for tp in bins.items(s) if bins.can_move(tp, s, d)]
    best: tuple[tuple[float, int, int, TopicPartition, TopicPartition], tuple[TopicPartition, ...]] | None = None
    if bins.count(s) - 1 >= lo and bins.count(d) + 1 <= hi:
        for tp in out:
            z = bins.size(tp)
            after = abs(diff - 2 * z)
            if after <= diff - tol:
                key = (after, 0, bins.cost(tp, s), tp, tp)
                if best is None or key < best[0]:
                    best = (key, (tp,))
    back = sorted((bins.size(tp), tp) for tp in bins.items(d) if bins.can_move(tp, d, s))
    sizes = [z for z, _ in back]
    for tp in out:
        za = bins.size(tp)
        want = za - diff / 2  # the size of the replica to send back for an exact split
        i = bisect.bisect_left(sizes, want)
        for j in (i - 1, i):
            if 0 <= j < len(back):
                zb, other = back[j]
                after = abs(diff - 2 * (za - zb))
                if after <= diff - tol:
                    key2 = (after, 1, bins.cost(tp, s) + bins.cost(other, d), tp, other)
                    if best is None or key2 < best[0]:
                        best = (key2, (tp, other))
    if best is None:
        return False
    bins.move(best[1][0], s, d)
    if len(best[1]) == 2:
        bins.move(best[1][1], d, s)
    return True


class _BrokerBins(_Bins[int]):
    def __init__(self, w: _Work, only_new: bool, dests: frozenset[int] | None) -> None:
        super().__init__(w)
        self.only_new = only_new  # remove-brokers: re-target evacuated replicas only (no new copies)
        self.dests = dests  # add-brokers: new copies go to these only

    def count(self, k: int) -> int:
        return self.w.count[k]

    def bytes(self, k: int) -> int:
        return self.w.bytes[k]

    def items(self, k: int) -> list[TopicPartition]:
        return sorted(self.w.hosted[k])

    def can_move(self, tp: TopicPartition, src: int, dst: int) -> bool:
        w = self.w
        if self.only_new and w.is_original(tp, src):
            return False
        if self.dests is not None and dst not in self.dests and not w.is_original(tp, dst):
            return False
        return w.movable(tp) and w.can_place(tp, src, dst)

    def move(self, tp: TopicPartition, src: int, dst: int) -> None:
        self.w.place(tp, src, dst)

    def cost(self, tp: TopicPartition, src: int) -> int:
        return self.w.size[tp] if self.w.is_original(tp, src) else 0

    def tie(self, tp: TopicPartition, src: int) -> int:
        return 1 if self.w.target[tp][0] == src else 0  # keep preferred leaders where they are


class _DirBins(_Bins[str]):
    def __init__(self, w: _Work, broker: int) -> None:
        super().__init__(w)
        self.b = broker

    def count(self, k: str) -> int:
        return self.w.dcount[(self.b, k)]

    def bytes(self, k: str) -> int:
        return self.w.dbytes[(self.b, k)]

    def items(self, k: str) -> list[TopicPartition]:
        return sorted(self.w.dhosted[(self.b, k)])

    def can_move(self, tp: TopicPartition, src: str, dst: str) -> bool:
        return self.w.movable(tp) and self.w.dir_fits(self.b, dst, self.w.size[tp])

    def move(self, tp: TopicPartition, src: str, dst: str) -> None:
        self.w.set_dir(tp, self.b, dst)

    def cost(self, tp: TopicPartition, src: str) -> int:
        return self.w.size[tp] if self.w.original_dir(tp, self.b) == src else 0


class _Work:
    """The mutable working state of one planning run."""

    def __init__(self, model: ClusterModel, goal: Goal, opts: PlanOptions) -> None:
        self.goal, self.opts = goal, opts
        self.brokers: dict[int, Broker] = {b.id: b for b in sorted(model.brokers, key=lambda b: b.id)}
        self.parts: dict[TopicPartition, Partition] = {p.tp: p for p in sorted(model.partitions, key=lambda p: p.tp)}
        self.target: dict[TopicPartition, list[int]] = {tp: list(p.replicas) for tp, p in self.parts.items()}
        self.size: dict[TopicPartition, int] = {tp: max(0, p.size) for tp, p in self.parts.items()}
        self.dir: dict[tuple[TopicPartition, int], str | None] = {}
        self.count: dict[int, int] = defaultdict(int)
        self.bytes: dict[int, int] = defaultdict(int)
        self.hosted: dict[int, set[TopicPartition]] = defaultdict(set)
        self.dcount: dict[tuple[int, str | None], int] = defaultdict(int)
        self.dbytes: dict[tuple[int, str | None], int] = defaultdict(int)
        self.dhosted: dict[tuple[int, str | None], set[TopicPartition]] = defaultdict(set)
        self.incoming: dict[tuple[int, str | None], int] = defaultdict(int)  # bytes planned to arrive
        self.notes: list[str] = []
        for tp, p in self.parts.items():
            for b in p.replicas:
                self._add(tp, b, p.dir_of(b) if self._known_dir(b, p.dir_of(b)) else None, arriving=False)
        self.eligible = [b for b in self.brokers if self._broker_ok(b)]
        racks = [self.brokers[b].rack for b in self.eligible]
        self.rack_aware = opts.rack_aware and bool(racks) and all(r is not None for r in racks)
        self.rack_sizes = sorted(Counter(racks).values()) if self.rack_aware else []
        self._caps: dict[int, int] = {}

    # --- state -------------------------------------------------------------------------------
    def _known_dir(self, b: int, path: str | None) -> bool:
        broker = self.brokers.get(b)
        return broker is not None and broker.dir(path) is not None

    def _add(self, tp: TopicPartition, b: int, path: str | None, *, arriving: bool) -> None:
        z = self.size[tp]
        self.count[b] += 1
        self.bytes[b] += z
        self.hosted[b].add(tp)
        self.dir[(tp, b)] = path
        if path is not None:
            self.dcount[(b, path)] += 1
            self.dbytes[(b, path)] += z
            self.dhosted[(b, path)].add(tp)
            if arriving:
                self.incoming[(b, path)] += z

    def _remove(self, tp: TopicPartition, b: int) -> None:
        z = self.size[tp]
        path = self.dir.pop((tp, b))
        self.count[b] -= 1
        self.bytes[b] -= z
        self.hosted[b].discard(tp)
        if path is not None:
            self.dcount[(b, path)] -= 1
            self.dbytes[(b, path)] -= z
            self.dhosted[(b, path)].discard(tp)
            if self.original_dir(tp, b) != path:
                self.incoming[(b, path)] -= z

    def is_original(self, tp: TopicPartition, b: int) -> bool:
        return b in self.parts[tp].replicas

    def original_dir(self, tp: TopicPartition, b: int) -> str | None:
        return self.parts[tp].dir_of(b) if self.is_original(tp, b) else None

    def movable(self, tp: TopicPartition) -> bool:
        return not self.parts[tp].reassigning

    def place(self, tp: TopicPartition, src: int, dst: int) -> None:
        """Replace src by dst in tp's replica list (same position: a preferred leader's
        replacement becomes the preferred leader)."""
        path = self.pick_dir(dst, self.size[tp])
        self._remove(tp, src)
        replicas = self.target[tp]
        replicas[replicas.index(src)] = dst
        self._add(tp, dst, path, arriving=not self.is_original(tp, dst))

    def set_dir(self, tp: TopicPartition, b: int, path: str) -> None:
        self._remove(tp, b)
        self._add(tp, b, path, arriving=self.original_dir(tp, b) != path)

    # --- eligibility ---------------------------------------------------------------------------
    def dir_ok(self, b: int, path: str) -> bool:
        d = self.brokers[b].dir(path)
        return d is not None and d.online and not d.cordoned and (b, path) not in self.goal.remove_dirs

    def _broker_ok(self, b: int) -> bool:
        broker = self.brokers[b]
        if b in self.goal.remove_brokers or not broker.alive:
            return False
        return not broker.dirs or any(self.dir_ok(b, d.path) for d in broker.dirs)

    def dir_fits(self, b: int, path: str, size: int) -> bool:
        if not self.dir_ok(b, path):
            return False
        d = self.brokers[b].dir(path)
        assert d is not None
        if d.total_bytes is None or d.usable_bytes is None:
            return True
        free = d.usable_bytes - self.incoming[(b, path)]
        return free - size >= self.opts.min_free_fraction * d.total_bytes

    def pick_dir(self, b: int, size: int, exclude: str | None = None) -> str | None:
        """The dir a replica arriving on b goes to: the eligible one with the fewest replicas,
        then bytes, that has room (None: b's dirs are unknown)."""
        broker = self.brokers[b]
        if not broker.dirs:
            return None
        fits = [d.path for d in broker.dirs if d.path != exclude and self.dir_fits(b, d.path, size)]
        if not fits:
            raise _NoRoom(b)
        return min(fits, key=lambda p: (self.dcount[(b, p)], self.dbytes[(b, p)], p))

    def has_room(self, b: int, size: int, exclude: str | None = None) -> bool:
        try:
            self.pick_dir(b, size, exclude)
        except _NoRoom:
            return False
        return True

    def rack_cap(self, rf: int) -> int:
        """At most this many replicas of a partition per rack: 1 when there are racks enough,
        else as few as the racks' broker counts allow."""
        if not self.rack_aware:
            return rf
        if rf not in self._caps:
            cap = max(1, -(-rf // len(self.rack_sizes)))
            while cap < rf and sum(min(cap, n) for n in self.rack_sizes) < rf:
                cap += 1  # (more replicas than eligible brokers: no cap helps, stop at rf)
            self._caps[rf] = cap
            if cap > 1:
                self.notes.append(
                    f"replication factor {rf} over {len(self.rack_sizes)} rack(s): up to {cap} replicas per rack"
                )
        return self._caps[rf]

    def rack_of(self, b: int) -> str | None:
        broker = self.brokers.get(b)
        return broker.rack if broker is not None else None

    def rack_ok(self, tp: TopicPartition, src: int, dst: int) -> bool:
        if not self.rack_aware:
            return True
        rack = self.rack_of(dst)
        others = [b for b in self.target[tp] if b != src]
        return sum(1 for b in others if self.rack_of(b) == rack) < self.rack_cap(len(self.target[tp]))

    def can_place(self, tp: TopicPartition, src: int, dst: int) -> bool:
        return (
            dst in self.brokers
            and dst not in self.target[tp]
            and dst in self.eligible
            and self.rack_ok(tp, src, dst)
            and self.has_room(dst, self.size[tp])
        )

    def _destination(self, tp: TopicPartition, src: int, candidates: Iterable[int]) -> int | None:
        ok = [b for b in candidates if self.can_place(tp, src, b)]
        return min(ok, key=lambda b: (self.count[b], self.bytes[b], b)) if ok else None

    # --- phases ----------------------------------------------------------------------------------
    def validate(self) -> None:
        g = self.goal
        unknown = sorted((g.add_brokers | g.remove_brokers | {b for b, _ in g.remove_dirs}) - set(self.brokers))
        if unknown:
            raise PlanRefused(f"broker(s) {','.join(map(str, unknown))} are not in the cluster")
        both = sorted(g.add_brokers & g.remove_brokers)
        if both:
            raise PlanRefused(f"broker(s) {','.join(map(str, both))} cannot be both added and removed")
        for b, path in sorted(g.remove_dirs):
            d = self.brokers[b].dir(path)
            if d is None:
                raise PlanRefused(f"broker {b} has no log dir {path}")
            if not d.online and any(self.dir[(tp, b)] == path for tp in self.hosted[b]):
                raise PlanRefused(
                    f"log dir {path} of broker {b} is offline: its replicas cannot be copied from it "
                    "(reassign them to other brokers instead)"
                )
        busy = [
            tp
            for tp, p in self.parts.items()
            if p.reassigning
            and (set(p.replicas) & g.remove_brokers or any((b, self.dir[(tp, b)]) in g.remove_dirs for b in p.replicas))
        ]
        if busy:
            raise PlanRefused(
                f"a reassignment is in progress for {_named(_tp_name(tp) for tp in busy)}: wait until it ends",
                (tp[0] for tp in busy),
            )
        if not g.remove_brokers:
            return
        short: dict[str, int] = {}
        for tp, replicas in self.target.items():
            if set(replicas) & g.remove_brokers:
                staying = {b for b in replicas if b not in g.remove_brokers} | set(self.eligible)
                if len(replicas) > len(staying):
                    short[tp[0]] = max(short.get(tp[0], 0), len(replicas))
        if short:
            raise PlanRefused(
                f"removing broker(s) {','.join(map(str, sorted(g.remove_brokers)))} would leave "
                f"{len(self.eligible)} broker(s) to hold replicas, fewer than the replication factor of "
                f"{_named(f'{t} (RF {rf})' for t, rf in sorted(short.items()))}",
                short,
            )

    def _by_size(self) -> list[TopicPartition]:
        """Biggest first: the hardest to place get the most choice."""
        return sorted(self.target, key=lambda tp: (-self.size[tp], tp))

    def evacuate_brokers(self) -> None:
        removed = self.goal.remove_brokers
        stuck: list[TopicPartition] = []
        for tp in self._by_size():
            for src in [b for b in self.target[tp] if b in removed]:
                dst = self._destination(tp, src, self.eligible)
                if dst is None:
                    stuck.append(tp)
                    break
                self.place(tp, src, dst)
        if stuck:
            raise PlanRefused(
                f"no broker can take the replicas of {_named(_tp_name(tp) for tp in stuck)} "
                "(racks, or no log dir with room)",
                (tp[0] for tp in stuck),
            )

    def fix_racks(self) -> None:
        """Replicas sharing a rack beyond the cap move to another rack. What the goal allows: a
        rebalance moves any replica anywhere, adding brokers moves replicas onto them only,
        removing brokers re-targets only the replicas it is moving anyway, removing dirs moves
        nothing between brokers."""
        g = self.goal
        if not self.rack_aware or (g.remove_dirs and not (g.add_brokers or g.remove_brokers)):
            return
        dests = [b for b in self.eligible if b in g.add_brokers] if g.add_brokers else self.eligible
        only_new = bool(g.remove_brokers) and not g.add_brokers
        unfixed: list[TopicPartition] = []
        for tp in self._by_size():
            if not self.movable(tp):
                continue
            cap = self.rack_cap(len(self.target[tp]))
            while True:
                racks = Counter(self.rack_of(b) for b in self.target[tp])
                over = sorted(r for r, n in racks.items() if r is not None and n > cap)
                if not over:
                    break
                # the replica to move: one placed by this plan, then a follower, fullest broker first
                candidates = sorted(
                    (
                        b
                        for b in self.target[tp]
                        if self.rack_of(b) == over[0] and not (only_new and self.is_original(tp, b))
                    ),
                    key=lambda b: (self.is_original(tp, b), self.target[tp][0] == b, -self.count[b], b),
                )
                for src in candidates:
                    dst = self._destination(tp, src, dests)
                    if dst is not None:
                        self.place(tp, src, dst)
                        break
                else:
                    unfixed.append(tp)
                    break
        if unfixed:
            self.notes.append(
                f"replicas of {_named(_tp_name(tp) for tp in unfixed)} stay on a shared rack: no broker could take them"
            )

    def even_brokers(self) -> None:
        g = self.goal
        members = list(self.eligible)
        dests = [b for b in members if b in g.add_brokers] if g.add_brokers else members
        only_new = bool(g.remove_brokers) and not g.add_brokers
        bins = _BrokerBins(self, only_new, frozenset(g.add_brokers) if g.add_brokers else None)
        _even_counts(bins, members, members, dests, self.opts)
        _even_bytes(bins, members, members, dests, self.opts)

    def even_leaders(self) -> None:
        """Preferred leaders within floor/ceil of the mean per broker, by reordering replica
        lists along augmenting paths (b leads p, c is p's replica: c leads p instead)."""
        brokers = [b for b in self.brokers if b not in self.goal.remove_brokers]
        if not brokers:
            return
        leaders: dict[int, int] = {b: 0 for b in brokers}
        led: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp, replicas in self.target.items():
            if replicas and replicas[0] in leaders:
                leaders[replicas[0]] += 1
                led[replicas[0]].append(tp)
        total = sum(leaders.values())
        lo, hi = total // len(brokers), -(-total // len(brokers))

        def order(tp: TopicPartition) -> tuple[int, TopicPartition]:
            # reorder partitions already changing first: no extra reassignment
            return (0 if set(self.target[tp]) != set(self.parts[tp].replicas) else 1, tp)

        for _ in range(self.opts.max_actions):
            path = None
            for start in sorted(brokers, key=lambda b: (-leaders[b], b)):
                if leaders[start] <= lo:
                    break
                path = self._leader_path(start, leaders, led, lo, hi, order)
                if path:
                    break
            if not path:
                return
            for tp, b, c in path:
                replicas = self.target[tp]
                i, j = replicas.index(b), replicas.index(c)
                replicas[i], replicas[j] = c, b
                led[b].remove(tp)
                led[c].append(tp)
            leaders[path[0][1]] -= 1
            leaders[path[-1][2]] += 1

    def _leader_path(
        self,
        start: int,
        leaders: dict[int, int],
        led: dict[int, list[TopicPartition]],
        lo: int,
        hi: int,
        order: Callable[[TopicPartition], tuple[int, TopicPartition]],
    ) -> list[tuple[TopicPartition, int, int]] | None:
        """Breadth-first: the shortest chain of leadership hand-overs from `start` to a broker
        with at least two fewer leaders, if that takes start above hi down or the end below lo up."""
        parent: dict[int, tuple[TopicPartition, int] | None] = {start: None}
        queue = [start]
        for b in queue:
            for tp in sorted(led[b], key=order):
                if not self.movable(tp):
                    continue
                for c in self.target[tp][1:]:
                    if c in parent or c not in leaders:
                        continue
                    parent[c] = (tp, b)
                    if leaders[c] <= leaders[start] - 2 and (leaders[start] > hi or leaders[c] < lo):
                        path: list[tuple[TopicPartition, int, int]] = []
                        node = c
                        while parent[node] is not None:
                            ptp, pb = parent[node]  # type: ignore[misc]
                            path.append((ptp, pb, node))
                            node = pb
                        return list(reversed(path))
                    queue.append(c)
        return None

    def evacuate_dirs(self) -> None:
        for b, path in sorted(self.goal.remove_dirs):
            for tp in sorted(self.dhosted[(b, path)], key=lambda tp: (-self.size[tp], tp)):
                try:
                    target = self.pick_dir(b, self.size[tp], exclude=path)
                except _NoRoom:
                    need = sum(self.size[t] for t in self.dhosted[(b, path)])
                    raise PlanRefused(
                        f"broker {b}: the other log dirs lack the room for the {need} bytes left on {path}"
                        if any(self.dir_ok(b, d.path) for d in self.brokers[b].dirs)
                        else f"broker {b} has no other online, uncordoned log dir to take what {path} holds",
                        {t[0] for t in self.dhosted[(b, path)]},
                    ) from None
                assert target is not None
                self.set_dir(tp, b, target)

    def even_dirs(self) -> None:
        for b in self.eligible:
            members = [d.path for d in self.brokers[b].dirs if self.dir_ok(b, d.path)]
            if len(members) < 2:
                continue
            bins = _DirBins(self, b)
            _even_counts(bins, members, members, members, self.opts)
            _even_bytes(bins, members, members, members, self.opts)

    # --- result --------------------------------------------------------------------------------------
    def _balance(
        self, target: dict[TopicPartition, list[int]], dirs: dict[tuple[TopicPartition, int], str | None]
    ) -> Balance:
        brokers: dict[int, list[int]] = {b: [0, 0, 0] for b in self.brokers}
        per_dir: dict[tuple[int, str], list[int]] = {
            (b.id, d.path): [0, 0, 0] for b in self.brokers.values() for d in b.dirs
        }
        for tp, replicas in target.items():
            z = self.size[tp]
            for i, b in enumerate(replicas):
                load = brokers.setdefault(b, [0, 0, 0])
                load[0] += 1
                load[1] += 1 if i == 0 else 0
                load[2] += z
                path = dirs.get((tp, b))
                if path is not None:
                    dl = per_dir.setdefault((b, path), [0, 0, 0])
                    dl[0] += 1
                    dl[1] += 1 if i == 0 else 0
                    dl[2] += z
        return Balance(
            {b: Load(*v) for b, v in sorted(brokers.items())}, {k: Load(*v) for k, v in sorted(per_dir.items())}
        )

    def plan(self) -> Plan:
        reassignments = []
        dir_moves = []
        for tp, p in self.parts.items():
            target = self.target[tp]
            if target != list(p.replicas):
                dirs = tuple(self.dir[(tp, b)] if not self.is_original(tp, b) else None for b in target)
                reassignments.append(
                    Reassignment(tp[0], tp[1], p.replicas, tuple(target), dirs if any(dirs) else (), self.size[tp])
                )
            for b in p.replicas:
                if b in target:
                    before, after = p.dir_of(b), self.dir[(tp, b)]
                    if after is not None and before != after:
                        dir_moves.append(DirMove(tp[0], tp[1], b, before, after, self.size[tp]))
        original_dirs = {(tp, b): p.dir_of(b) for tp, p in self.parts.items() for b in p.replicas}
        return Plan(
            self.goal,
            tuple(reassignments),
            tuple(dir_moves),
            self._balance({tp: list(p.replicas) for tp, p in self.parts.items()}, original_dirs),
            self._balance(self.target, self.dir),
            tuple(dict.fromkeys(self.notes)),
        )


class _NoRoom(Exception):
    def __init__(self, broker: int) -> None:
        self.broker = broker
