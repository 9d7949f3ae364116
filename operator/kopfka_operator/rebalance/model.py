"""The cluster as the rebalancer sees it, what it is asked to do, and the plan it answers with.

Plain frozen dataclasses, no I/O: `cluster.py` builds a `ClusterModel` from a running cluster,
`planner.py` turns a model and a `Goal` into a `Plan`, `executor.py` runs the plan. A plan
round-trips through JSON (`Plan.to_dict` / `Plan.from_dict`) so that the operator can keep it in a
KafkaCluster's status and resume it after a restart.

Log dirs are named by their path (what AlterReplicaLogDirs and DescribeLogDirs speak); the
directory id (KIP-858) is carried when known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class LogDir:
    path: str
    online: bool = True
    cordoned: bool = False  # cordoned.log.dirs (KIP-1066): keeps what it holds, gets nothing new
    total_bytes: int | None = None  # None: unknown
    usable_bytes: int | None = None  # free space
    directory_id: str | None = None


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None
    dirs: tuple[LogDir, ...] = ()  # (): unknown (no dir-level planning on this broker)
    alive: bool = True  # False: named by replicas but not registered/alive; never a destination

    def dir(self, path: str | None) -> LogDir | None:
        return next((d for d in self.dirs if d.path == path), None)


@dataclass(frozen=True)
class Partition:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int = -1
    dirs: tuple[str | None, ...] = ()  # the log dir of each replica, in replica order (None: unknown)
    size: int = 0  # bytes (the leader's log)
    reassigning: bool = False  # a reassignment is under way: the planner leaves the partition alone

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    def dir_of(self, broker: int) -> str | None:
        if broker in self.replicas and len(self.dirs) == len(self.replicas):
            return self.dirs[self.replicas.index(broker)]
        return None


@dataclass(frozen=True)
class ClusterModel:
    brokers: tuple[Broker, ...]
    partitions: tuple[Partition, ...]

    def broker(self, broker_id: int) -> Broker | None:
        return next((b for b in self.brokers if b.id == broker_id), None)


@dataclass(frozen=True)
class Goal:
    """What the plan is for. With no brokers or dirs named it is a plain rebalance (brokers, log
    dirs and preferred leaders evened out); otherwise it does only what the named change needs:
    spread replicas onto added brokers, move every replica off removed brokers, or move every
    replica off removed dirs to the same broker's other dirs."""

    add_brokers: frozenset[int] = frozenset()
    remove_brokers: frozenset[int] = frozenset()
    remove_dirs: frozenset[tuple[int, str]] = frozenset()  # (broker id, dir path)

    @classmethod
    def rebalance(cls) -> Goal:
        return cls()

    @classmethod
    def adding(cls, brokers: Iterable[int]) -> Goal:
        return cls(add_brokers=frozenset(brokers))

    @classmethod
    def removing(cls, brokers: Iterable[int]) -> Goal:
        return cls(remove_brokers=frozenset(brokers))

    @classmethod
    def removing_dirs(cls, dirs: Mapping[int, Iterable[str]]) -> Goal:
        return cls(remove_dirs=frozenset((b, p) for b, paths in dirs.items() for p in paths))

    @property
    def is_rebalance(self) -> bool:
        return not (self.add_brokers or self.remove_brokers or self.remove_dirs)

    def describe(self) -> str:
        parts = []
        if self.add_brokers:
            parts.append(f"spread onto brokers {_ids(self.add_brokers)}")
        if self.remove_brokers:
            parts.append(f"move everything off brokers {_ids(self.remove_brokers)}")
        if self.remove_dirs:
            parts.append("empty log dirs " + ", ".join(f"{b}:{p}" for b, p in sorted(self.remove_dirs)))
        return "; ".join(parts) or "rebalance"

    def to_dict(self) -> dict[str, Any]:
        return {
            "addBrokers": sorted(self.add_brokers),
            "removeBrokers": sorted(self.remove_brokers),
            "removeDirs": [[b, p] for b, p in sorted(self.remove_dirs)],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Goal:
        return cls(
            frozenset(int(b) for b in d.get("addBrokers") or ()),
            frozenset(int(b) for b in d.get("removeBrokers") or ()),
            frozenset((int(b), str(p)) for b, p in d.get("removeDirs") or ()),
        )


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, sorted(ids)))


@dataclass(frozen=True)
class Reassignment:
    """A new replica list for one partition (AlterPartitionReassignments). Its order is the
    preferred leadership; `dirs` is the log dir wanted for each target replica (None: wherever
    the broker places it; only the added replicas name one)."""

    topic: str
    partition: int
    before: tuple[int, ...]
    replicas: tuple[int, ...]
    dirs: tuple[str | None, ...] = ()
    size: int = 0

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.before)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.before if b not in self.replicas)

    @property
    def bytes(self) -> int:
        """Bytes copied: the partition once per added replica (0 for a reorder)."""
        return self.size * len(self.adding)

    def dir_for(self, broker: int) -> str | None:
        if broker in self.replicas and len(self.dirs) == len(self.replicas):
            return self.dirs[self.replicas.index(broker)]
        return None


@dataclass(frozen=True)
class DirMove:
    """A replica moved between two log dirs of one broker (AlterReplicaLogDirs)."""

    topic: str
    partition: int
    broker: int
    source: str | None
    target: str
    size: int = 0

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Load:
    replicas: int = 0
    leaders: int = 0  # preferred leaders (first replica)
    bytes: int = 0


@dataclass(frozen=True)
class Balance:
    """Replicas, preferred leaders and bytes per broker and per (broker, log dir)."""

    brokers: Mapping[int, Load] = field(default_factory=dict)
    dirs: Mapping[tuple[int, str], Load] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokers": {str(b): _load(v) for b, v in sorted(self.brokers.items())},
            "dirs": {f"{b}:{p}": _load(v) for (b, p), v in sorted(self.dirs.items())},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Balance:
        brokers = {int(b): Load(**v) for b, v in (d.get("brokers") or {}).items()}
        dirs = {}
        for key, v in (d.get("dirs") or {}).items():
            b, _, path = key.partition(":")
            dirs[(int(b), path)] = Load(**v)
        return cls(brokers, dirs)


def _load(v: Load) -> dict[str, int]:
    return {"replicas": v.replicas, "leaders": v.leaders, "bytes": v.bytes}


@dataclass(frozen=True)
class Plan:
    goal: Goal
    reassignments: tuple[Reassignment, ...] = ()
    dir_moves: tuple[DirMove, ...] = ()
    before: Balance = field(default_factory=Balance)
    after: Balance = field(default_factory=Balance)
    notes: tuple[str, ...] = ()  # what the planner could not do as asked, e.g. a relaxed rack rule

    @property
    def empty(self) -> bool:
        return not self.reassignments and not self.dir_moves

    @property
    def bytes_to_move(self) -> int:
        return sum(r.bytes for r in self.reassignments) + sum(m.size for m in self.dir_moves)

    def summary(self) -> str:
        moving = sum(1 for r in self.reassignments if r.adding)
        return (
            f"{self.goal.describe()}: {moving} partition(s) change brokers, "
            f"{len(self.reassignments) - moving} only reorder, {len(self.dir_moves)} dir move(s), "
            f"{self.bytes_to_move} bytes to copy"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "goal": self.goal.to_dict(),
            "reassignments": [
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "before": list(r.before),
                    "replicas": list(r.replicas),
                    "dirs": list(r.dirs),
                    "size": r.size,
                }
                for r in self.reassignments
            ],
            "dirMoves": [
                {
                    "topic": m.topic,
                    "partition": m.partition,
                    "broker": m.broker,
                    "source": m.source,
                    "target": m.target,
                    "size": m.size,
                }
                for m in self.dir_moves
            ],
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        return cls(
            Goal.from_dict(d.get("goal") or {}),
            tuple(
                Reassignment(
                    r["topic"],
                    int(r["partition"]),
                    tuple(int(b) for b in r["before"]),
                    tuple(int(b) for b in r["replicas"]),
                    tuple(r.get("dirs") or ()),
                    int(r.get("size") or 0),
                )
                for r in d.get("reassignments") or ()
            ),
            tuple(
                DirMove(m["topic"], int(m["partition"]), int(m["broker"]), m.get("source"), m["target"], int(m["size"]))
                for m in d.get("dirMoves") or ()
            ),
            Balance.from_dict(d.get("before") or {}),
            Balance.from_dict(d.get("after") or {}),
            tuple(d.get("notes") or ()),
        )


class PlanRefused(ValueError):
    """The goal cannot be met safely (e.g. fewer brokers than a topic's replication factor);
    `topics` names the topics in the way."""

    def __init__(self, reason: str, topics: Iterable[str] = ()) -> None:
        self.reason = reason
        self.topics = tuple(sorted(set(topics)))
        super().__init__(reason)
