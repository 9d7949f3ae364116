"""Replication test harness: KRaft clusters (1 controller + N brokers, separate processes) with
short replication timeouts, Kafka's verifiable producer/consumer, and the loss/duplicate audit."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent.parent / "kraft"))

from cluster import Cluster, Node, request, run, wait_until
from kopfka import uuids

sys.path.insert(0, str(Path(__file__).parent.parent))
from verifiable import Audit, VerifiableProducer, audit, consume_all

__all__ = ["Audit", "VerifiableProducer", "audit", "consume_all"]

REPLICATION = {
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "5",
}


def new_cluster(
    root: Path, brokers: int = 3, props: dict[str, str] | None = None, *, own_sessions: bool = False, dirs: int = 1
) -> Cluster:
    """Formatted, not started; `dirs` > 1: each broker has that many log dirs (JBOD)."""
    c = Cluster(root, 1, brokers, dynamic=True, props={**REPLICATION, **(props or {})}, own_sessions=own_sessions)
    for b in c.brokers:
        _jbod(b, dirs)
    c.format_all()
    return c


def _jbod(node: Node, dirs: int) -> None:
    if dirs > 1:
        node.props = {**node.props, "log.dirs": ",".join(str(d) for d in log_dirs(node, dirs))}


def log_dirs(node: Node, dirs: int) -> list[Path]:
    """The log dirs a broker made with `dirs` > 1 has."""
    return [node.dir / f"logs{i}" for i in range(dirs)]


def add_broker(c: Cluster, dirs: int = 1) -> Node:
    """The next broker id joins the running cluster (formatted with its cluster id, started)."""
    node_id = max(b.node_id for b in c.brokers) + 1
    node = Node(c.root, node_id, "broker", f"127.0.0.{21 + node_id}", props=c.props)
    _jbod(node, dirs)
    node.write_config(c.quorum_props())
    res = node.format(c.cluster_id)
    assert res.returncode == 0, res.stderr
    c.brokers.append(node)
    node.start().wait_ready()
    return node


def broker(c: Cluster, node_id: int) -> Node:
    return next(b for b in c.brokers if b.node_id == node_id)


async def _create(
    addr: str, name: str, partitions: int, rf: int, configs: dict[str, str], assignments: dict[int, list[int]] | None
) -> Any:
    body = {
        "timeout": 15000,
        "validate_only": False,
        "topics": [
            {
                "name": name,
                "num_partitions": -1 if assignments else partitions,
                "replication_factor": -1 if assignments else rf,
                "assignments": [{"partition_index": p, "broker_ids": b} for p, b in (assignments or {}).items()],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
    }
    resp = await request(addr, 19, 7, body, timeout=30)
    return resp.topics[0]


def create_topic(
    c: Cluster,
    name: str,
    partitions: int = 3,
    rf: int = 3,
    configs: dict[str, str] | None = None,
    assignments: dict[int, list[int]] | None = None,
) -> None:
    t = run(
        _create(c.bootstrap().split(",")[0], name, partitions, rf, configs or {"min.insync.replicas": "2"}, assignments)
    )
    assert int(t.error_code) == 0, t


@dataclass
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


def describe(c: Cluster, topic: str) -> dict[int, PartitionInfo]:
    """Partition state from the first live broker's Metadata answer."""
    last: Exception | None = None
    for b in c.brokers:
        if not b.alive:
            continue
        try:
            body = {
                "topics": [{"name": topic, "topic_id": uuids.ZERO_UUID}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            }
            resp = run(request(b.address, 3, 12, body, timeout=5))
            t = resp.topics[0]
            return {
                int(p.partition_index): PartitionInfo(
                    int(p.leader_id),
                    int(p.leader_epoch),
                    [int(x) for x in p.replica_nodes],
                    [int(x) for x in p.isr_nodes],
                )
                for p in t.partitions
            }
        except Exception as exc:
            last = exc
    raise RuntimeError(f"no broker answered Metadata: {last}")


def wait_full_isr(c: Cluster, topic: str, timeout: float = 60) -> dict[int, PartitionInfo]:
    def ok() -> dict[int, PartitionInfo] | None:
        d = describe(c, topic)
        good = d and all(sorted(p.isr) == sorted(p.replicas) and p.leader >= 0 for p in d.values())
        return d if good else None

    return wait_until(ok, timeout, f"every ISR of {topic} to be full", interval=0.3)  # type: ignore[no-any-return]


def run_scenario(
    c: Cluster,
    topic: str,
    tmp: Path,
    scenario: str,
    disrupt: Callable[[VerifiableProducer], None],
    *,
    throughput: int = 300,
) -> Audit:
    """Produce continuously, run the disruption, let the producer finish, then read everything back."""
    prod = VerifiableProducer(c.bootstrap(), topic, throughput=throughput).start(tmp / f"{scenario}-producer.log")
    try:
        prod.wait_acked(200, timeout=60)
        disrupt(prod)
        wait_full_isr(c, topic, timeout=90)
        before = prod.acked_count
        prod.wait_acked(before + 200, timeout=60)
    finally:
        prod.stop()
    total = prod.acked_count
    consumed = consume_all(c.bootstrap(), topic, total, tmp / f"{scenario}-consumer.log")
    result = audit(prod.acked, consumed)
    print(result.line(scenario), flush=True)
    if prod.errors:
        print(f"[{scenario}] producer errors: {len(prod.errors)}, e.g. {prod.errors[:3]}", flush=True)
    if result.lost:
        print(f"[{scenario}] lost sample (partition, offset, value): {result.lost_sample}", flush=True)
    return result
