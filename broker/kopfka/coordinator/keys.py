"""Which partition of an internal topic coordinates a key (a group id, a transactional id, a
share-group key): Kafka's `Utils.abs(key.hashCode) % numPartitions`.

Kept apart from the coordinators, so a broker's request handlers and its transaction
verification name a coordinator without importing the coordinators themselves (they are built
on first need, kopfka.server.coordinator_slots)."""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % numPartitions (abs(MIN_VALUE) is 0 there)."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
