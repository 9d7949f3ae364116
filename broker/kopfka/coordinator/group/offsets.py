"""The in-memory committed-offset cache of one coordinator partition, and offset expiry.

The cache is the read path for OffsetFetch (seed 004: "serve offset fetches quickly"); it is
updated only after the commit's records are in the log, and rebuilt by replaying the log.
Expiry follows KIP-211: offsets of an empty group expire `offsets.retention.minutes` after the
group became empty (or after the commit, when that is later); offsets of a group with members
expire only for topics no member subscribes to; an explicit per-commit retention (OffsetCommit
v2-v4) sets its own expire timestamp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kopfka.coordinator.group.records import OffsetValue

TopicPartition = tuple[str, int]


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    record_offset: int = -1  # where its record sits in __consumer_offsets (orders txn vs plain commits)

    def to_value(self) -> OffsetValue:
        return OffsetValue(self.offset, self.leader_epoch, self.metadata, self.commit_timestamp, self.expire_timestamp)

    @classmethod
    def from_value(cls, v: OffsetValue, record_offset: int = -1) -> CommittedOffset:
        return cls(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp, record_offset)


class OffsetCache:
    """group -> (topic, partition) -> CommittedOffset."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[TopicPartition, CommittedOffset]] = {}

    def get(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        return self.groups.get(group, {})

    def put(self, group: str, tp: TopicPartition, value: CommittedOffset) -> None:
        self.groups.setdefault(group, {})[tp] = value

    def delete(self, group: str, tp: TopicPartition) -> None:
        offs = self.groups.get(group)
        if offs is not None:
            offs.pop(tp, None)
            if not offs:
                del self.groups[group]

    def delete_group(self, group: str) -> list[TopicPartition]:
        return list(self.groups.pop(group, {}))

    def has_offsets(self, group: str) -> bool:
        return bool(self.groups.get(group))

    def expired(
        self,
        group: str,
        now_ms: int,
        retention_ms: int,
        *,
        empty_since_ms: int | None,
        subscribed: Callable[[str], bool],
    ) -> list[TopicPartition]:
        """The partitions whose offsets have expired for `group` at `now_ms`.

        `empty_since_ms` is when the group became empty (None if it has members); `subscribed`
        says whether a member still consumes a topic (only consulted for non-empty groups).
        """
        out = []
        for tp, off in self.get(group).items():
            if off.expire_timestamp >= 0:
                if now_ms >= off.expire_timestamp:
                    out.append(tp)
                continue
            if empty_since_ms is not None:
                base = max(empty_since_ms, off.commit_timestamp)
            elif not subscribed(tp[0]):
                base = off.commit_timestamp
            else:
                continue
            if now_ms >= base + retention_ms:
                out.append(tp)
        return out

    def all_groups(self) -> Iterable[str]:
        return list(self.groups)
