"""Replica placement for new partitions (a simple striped, rack-aware placer).

Brokers are ordered so that consecutive positions alternate racks; partition p's replicas
start at a rotating position, so leaders and replicas spread evenly and, with racks set, the
replicas of one partition land on distinct racks whenever there are enough racks.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from kopfka.metadata.image import BrokerRegistration
from kopfka.protocol.errors import ErrorCode, KafkaError


def has_uncordoned_dirs(b: BrokerRegistration) -> bool:
    """A broker whose every log dir is cordoned takes no new replicas (not yet reported: it may)."""
    if not b.cordoned_log_dirs or not b.log_dirs:
        return True
    return any(d not in b.cordoned_log_dirs for d in b.log_dirs)


def rack_alternating_order(brokers: Sequence[BrokerRegistration]) -> list[int]:
    by_rack: dict[str, list[int]] = defaultdict(list)
    for b in sorted(brokers, key=lambda b: b.broker_id):
        by_rack[b.rack or ""].append(b.broker_id)
    racks = sorted(by_rack)
    order: list[int] = []
    i = 0
    while len(order) < len(brokers):
        for rack in racks:
            ids = by_rack[rack]
            if i < len(ids):
                order.append(ids[i])
        i += 1
    return order


def place(
    brokers: Sequence[BrokerRegistration],
    num_partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> list[list[int]]:
    usable = [b for b in brokers if not b.fenced and not b.in_controlled_shutdown and has_uncordoned_dirs(b)]
    if replication_factor > len(usable):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication_factor} time(s): The target replication "
            f"factor of {replication_factor} cannot be reached because only {len(usable)} broker(s) "
            "are registered.",
        )
    order = rack_alternating_order(usable)
    n = len(order)
    offset = (rng or random).randrange(n)
    out = []
    for p in range(start_partition, start_partition + num_partitions):
        start = (p + offset) % n
        out.append([order[(start + i) % n] for i in range(replication_factor)])
    return out
