"""Transactional offset commits (KIP-98, KIP-447): pending until the transaction ends.

TxnOffsetCommit writes the offsets as a transactional batch of the producer into the group's
`__consumer_offsets` partition, but they only become the group's committed offsets when the
COMMIT marker of that producer is written there; an ABORT marker drops them. Until then an
OffsetFetch with require_stable (read_committed consumers) answers UNSTABLE_OFFSET_COMMIT for
those partitions, so a consumer never resumes from an offset a transaction may still move.
On commit the offset is kept only if its record is newer than the committed one: with mixed
transactional and plain commits, the log order decides, as in Kafka.
"""

from __future__ import annotations

from kopfka.coordinator.group.offsets import CommittedOffset, OffsetCache

TopicPartition = tuple[str, int]


class PendingTxnOffsets:
    """producer id -> (group, topic-partition) -> offset, for one coordinator partition."""

    def __init__(self) -> None:
        self.by_producer: dict[int, dict[tuple[str, TopicPartition], CommittedOffset]] = {}

    def add(self, producer_id: int, group: str, tp: TopicPartition, offset: CommittedOffset) -> None:
        self.by_producer.setdefault(producer_id, {})[(group, tp)] = offset

    def has_pending(self, group: str, tp: TopicPartition) -> bool:
        return any((group, tp) in offs for offs in self.by_producer.values())

    def has_group(self, group: str) -> bool:
        return any(g == group for offs in self.by_producer.values() for g, _ in offs)

    def complete(self, producer_id: int, commit: bool, cache: OffsetCache) -> list[str]:
        """The marker of `producer_id` arrived: materialize (commit) or drop (abort); returns the
        groups whose offsets changed."""
        pending = self.by_producer.pop(producer_id, None)
        if not pending or not commit:
            return []
        groups = []
        for (group, tp), off in pending.items():
            existing = cache.get(group).get(tp)
            if existing is None or off.record_offset > existing.record_offset:
                cache.put(group, tp, off)
                groups.append(group)
        return groups
