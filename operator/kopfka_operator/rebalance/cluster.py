"""The running cluster as the rebalancer sees it, read over the Kafka protocol in one go.

Metadata gives the brokers (with racks) and every partition's replicas, leader and ISR;
ListPartitionReassignments the moves under way; DescribeLogDirs, asked of every broker (it
describes only its own dirs), the dirs with their space and cordoning, the dir and size of each
replica, and the `-future` logs of intra-broker moves under way.

A partition being reassigned enters the model at its target replicas and marked `reassigning`
(the planner leaves it alone, and counts it where it is going); a replica being moved between
dirs, at its target dir. So a plan made halfway through equals the rest of the plan made at the
start, and the mover needs no memory of its own.

That holds only for a picture taken in one go. Metadata comes from a broker's image while
ListPartitionReassignments is the controller's word, so a reassignment that ends between the two
reads shows in Metadata at all its old and new replicas with nothing under way: a plan on that
sees a partition one replica too many and moves a replica again. The reassignments are therefore
read before and after Metadata; any that started or ended meanwhile, or that Metadata does not
show yet, are `settling`, and the mover plans on the next read instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kopfka.client.admin import Admin, LogDirInfo, Reassignment
from kopfka.protocol.errors import ErrorCode

from ..throttles import NodeAdmin
from .model import Broker, ClusterModel, LogDir, Partition, TopicPartition


@dataclass(frozen=True)
class DirMoveInFlight:
    """A `-future` log: the replica of tp on broker is being copied into dir `target`."""

    tp: TopicPartition
    broker: int
    target: str
    bytes_left: int


@dataclass(frozen=True)
class ClusterState:
    model: ClusterModel
    addresses: Mapping[int, str]  # broker id -> host:port
    ongoing: Mapping[TopicPartition, Reassignment]  # every reassignment under way
    dir_moves: tuple[DirMoveInFlight, ...]  # every intra-broker move under way
    isr: Mapping[TopicPartition, tuple[int, ...]]
    leaders: Mapping[TopicPartition, int]
    replica_bytes: Mapping[tuple[TopicPartition, int], int] = field(default_factory=dict)  # current logs
    settling: tuple[TopicPartition, ...] = ()  # reassignments that changed while the cluster was read

    def reassignment_bytes_left(self) -> int:
        """What the replicas being added still have to copy (by log size against the leader's)."""
        sizes = {p.tp: p.size for p in self.model.partitions}
        return sum(
            max(0, sizes.get(tp, 0) - self.replica_bytes.get((tp, b), 0))
            for tp, r in self.ongoing.items()
            for b in r.adding
        )


async def read_cluster(admin: Admin, nodes: NodeAdmin) -> ClusterState:
    before = await admin.list_partition_reassignments()
    brokers, topics, _ = await admin.metadata(None)
    ongoing = await admin.list_partition_reassignments()
    shown = {(t.name, p.partition): set(p.replicas) for t in topics for p in t.partitions}
    settling = tuple(
        sorted(
            set(before.keys() ^ ongoing.keys())
            | {tp for tp, r in ongoing.items() if shown.get(tp) != set(r.replicas)}  # Metadata lags behind
        )
    )
    addresses = {b: f"{host}:{port}" for b, (host, port, _rack) in brokers.items()}
    described: dict[int, list[LogDirInfo]] = {}
    for b in sorted(brokers):
        try:
            described[b] = await (await nodes(b, addresses[b])).describe_log_dirs()
        except (OSError, TimeoutError, EOFError) as exc:
            # no plan on a partial picture; the pooled connections are dropped and reopened
            raise ConnectionError(f"broker {b} ({addresses[b]}) did not answer DescribeLogDirs: {exc!r}") from exc

    current_dir: dict[tuple[TopicPartition, int], str] = {}
    size_on: dict[tuple[TopicPartition, int], int] = {}
    future: dict[tuple[TopicPartition, int], tuple[str, int]] = {}
    model_brokers = []
    for b in sorted(brokers):
        dirs = []
        for d in described[b]:
            online = d.error == ErrorCode.none
            dirs.append(
                LogDir(
                    d.path,
                    online=online,
                    cordoned=d.cordoned,
                    total_bytes=d.total_bytes if d.total_bytes >= 0 else None,
                    usable_bytes=d.usable_bytes if d.usable_bytes >= 0 else None,
                )
            )
            for tp, rep in d.replicas.items():
                if rep.is_future:
                    future[(tp, b)] = (d.path, rep.size)
                else:
                    current_dir[(tp, b)] = d.path
                    size_on[(tp, b)] = rep.size
        model_brokers.append(Broker(b, brokers[b][2], tuple(sorted(dirs, key=lambda d: d.path))))

    named = {b for t in topics for p in t.partitions for b in p.replicas}
    model_brokers += [Broker(b, None, (), alive=False) for b in sorted(named - set(brokers))]
    partitions = []
    isr: dict[TopicPartition, tuple[int, ...]] = {}
    leaders: dict[TopicPartition, int] = {}
    for t in topics:
        for p in t.partitions:
            tp = (t.name, p.partition)
            move = ongoing.get(tp)
            replicas = tuple(p.replicas) if move is None else tuple(r for r in move.replicas if r not in move.removing)
            sizes = [size_on[(tp, b)] for b in p.replicas if (tp, b) in size_on]
            size = size_on.get((tp, p.leader), max(sizes, default=0))
            where = tuple(future[(tp, b)][0] if (tp, b) in future else current_dir.get((tp, b)) for b in replicas)
            partitions.append(
                Partition(
                    t.name,
                    p.partition,
                    replicas,
                    p.leader,
                    where,
                    size,
                    reassigning=move is not None or any((tp, b) in future for b in replicas),
                )
            )
            isr[tp] = tuple(p.isr)
            leaders[tp] = p.leader
    dir_moves = tuple(
        DirMoveInFlight(tp, b, path, max(0, size_on.get((tp, b), 0) - size))
        for (tp, b), (path, size) in sorted(future.items())
    )
    return ClusterState(
        ClusterModel(tuple(model_brokers), tuple(partitions)),
        addresses,
        ongoing,
        dir_moves,
        isr,
        leaders,
        size_on,
        settling,
    )
