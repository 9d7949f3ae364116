"""KIP-951 leader discovery: a partition error that means "not here" names the current leader.

Produce (v10+) on NOT_LEADER_OR_FOLLOWER, and Fetch (v16+), ShareFetch and ShareAcknowledge on
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, carry the partition's current leader (id and
epoch) and, at the top level, the endpoints of those leaders on the listener the request came in
on. A client (librdkafka 2.5+, the Java client 3.7+) then moves the partition to the new leader
from the error response itself, without a Metadata round trip first.

As Kafka's KafkaApis.getCurrentLeader: the local replica's view of the leader first (it moves
with the partition's own role changes), else the metadata image's; an endpoint only for a leader
that is registered, unfenced and has this listener.

The benchmark-only key `internal.leader.discovery.enable=false` (no Kafka config) leaves both
fields out, as a broker without KIP-951 would: benchmarks/leader_moves.py measures the difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kopfka.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kopfka.config.server_config import KafkaConfig
    from kopfka.server.request_context import RequestContext

NOT_HERE = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})
PRODUCE_VERSION = 10  # the first versions whose responses have the fields
FETCH_VERSION = 16
SWITCH = "internal.leader.discovery.enable"


def enabled_in(config: KafkaConfig) -> bool:
    return str(config.originals.get(SWITCH, "true")).strip().lower() != "false"


@dataclass(frozen=True)
class NodeEndpoint:
    """A leader's endpoint on the request's listener, for a KIP-951 response's node endpoints."""

    node_id: int
    host: str
    port: int
    rack: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "host": self.host, "port": self.port, "rack": self.rack}


@dataclass(frozen=True)
class CurrentLeader:
    """A partition's current leader id and epoch for a KIP-951 error, with its endpoint on this listener if any."""

    leader_id: int
    leader_epoch: int
    node: NodeEndpoint | None

    @property
    def known(self) -> bool:
        """Kafka's writer leaves the tagged field out while it holds its default (-1, -1)."""
        return self.leader_id >= 0 or self.leader_epoch >= 0

    def as_dict(self) -> dict[str, int]:
        return {"leader_id": self.leader_id, "leader_epoch": self.leader_epoch}


def current_leader(ctx: RequestContext, topic: str, partition: int) -> CurrentLeader:
    """The leader a client should use for `topic`-`partition` now (Kafka's getCurrentLeader)."""
    image = ctx.image
    part = ctx.services.replica_manager.partitions.get((topic, partition))
    if part is not None and not part.log.offline:
        leader_id, leader_epoch = part.leader_id, part.leader_epoch
    else:
        t = image.topics_by_name.get(topic)
        reg = t.partitions.get(partition) if t is not None else None
        leader_id, leader_epoch = (reg.leader, reg.leader_epoch) if reg is not None else (-1, -1)
    broker = image.brokers.get(leader_id)
    ep = broker.endpoint(ctx.listener_name) if broker is not None and not broker.fenced else None
    node = None if ep is None else NodeEndpoint(leader_id, ep.host, ep.port, broker.rack)
    return CurrentLeader(leader_id, leader_epoch, node)


class LeaderHints:
    """The current leaders of one response's misdirected partitions, and their endpoints.

    `lookup` answers None where the response carries no hint: a version without the fields, or
    the switch off."""

    def __init__(self, ctx: RequestContext, min_version: int = 0) -> None:
        self.ctx = ctx
        self.enabled = ctx.api_version >= min_version and ctx.services.leader_discovery
        self.nodes: dict[int, NodeEndpoint] = {}

    def lookup(self, topic: str, partition: int) -> CurrentLeader | None:
        if not self.enabled:
            return None
        leader = current_leader(self.ctx, topic, partition)
        if leader.node is not None:
            self.nodes[leader.node.node_id] = leader.node
        return leader

    def endpoints(self) -> list[NodeEndpoint]:
        return list(self.nodes.values())
