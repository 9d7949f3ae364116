"""Kafka's replication throttles around a reassignment, as kafka-reassign-partitions --throttle
sets them: the replicas a partition has now serve the copy (the topic's
leader.replication.throttled.replicas), the replicas it gains fetch it
(follower.replication.throttled.replicas), and every broker either side involves is capped at
the rate (leader/follower.replication.throttled.rate, a broker's own config, altered on that
broker). Intra-broker moves between log dirs have their own cap,
replica.alter.log.dirs.io.max.bytes.per.second.

Shared by the Topic reconciler (replication-factor changes) and the data mover (rebalancing).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from kopfka.client.admin import Admin

TOPIC, BROKER = 2, 4  # config resource types
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
REPLICA_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
RATE_KEYS = (LEADER_RATE, FOLLOWER_RATE)

Ops = list[tuple[str, int, str | None]]
# (node id, host:port) -> a connection to that broker
NodeAdmin = Callable[[int, str], Awaitable[Admin]]


def replica_throttles(
    moves: Iterable[tuple[str, int, Sequence[int], Sequence[int]]],
) -> tuple[dict[str, Ops], set[int]]:
    """For moves (topic, partition, replicas now, replicas wanted): each topic's throttled
    replica lists (SET: the whole list for that topic) and the brokers whose rate is capped."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for topic, part, now, wanted in moves:
        brokers.update(now, wanted)
        leader.setdefault(topic, []).extend(f"{part}:{b}" for b in now)
        follower.setdefault(topic, []).extend(f"{part}:{b}" for b in wanted if b not in now)
    ops: dict[str, Ops] = {}
    for topic in sorted(leader):
        ops[topic] = [(LEADER_REPLICAS, SET, ",".join(leader[topic]))]
        if follower[topic]:
            ops[topic].append((FOLLOWER_REPLICAS, SET, ",".join(follower[topic])))
    return ops, brokers


def rate_ops(rate: int) -> Ops:
    return [(LEADER_RATE, SET, str(rate)), (FOLLOWER_RATE, SET, str(rate))]


CLEAR_RATES: Ops = [(LEADER_RATE, DELETE, None), (FOLLOWER_RATE, DELETE, None)]
CLEAR_REPLICAS: Ops = [(LEADER_REPLICAS, DELETE, None), (FOLLOWER_REPLICAS, DELETE, None)]


async def alter_brokers(nodes: NodeAdmin, ops: Mapping[int, Ops], addresses: Mapping[int, str]) -> None:
    """Each broker's own config, altered on that broker (a failure raises: the caller retries)."""
    for node, node_ops in ops.items():
        admin = await nodes(node, addresses[node])
        result = await admin.incremental_alter_configs_many({(BROKER, str(node)): node_ops})
        err = result.get((BROKER, str(node)))
        if err is not None:
            raise err


async def clear_broker_throttles(admin: Admin, nodes: NodeAdmin) -> None:
    """No reassignment runs any more: the brokers' throttle rates come off."""
    brokers, _, _ = await admin.metadata([])
    addresses = {b: f"{host}:{port}" for b, (host, port, _) in brokers.items()}
    await alter_brokers(nodes, {b: CLEAR_RATES for b in sorted(brokers)}, addresses)
