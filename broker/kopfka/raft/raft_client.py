"""The RaftClient surface the controller and the metadata loader use (seed 000).

`RaftClient.Listener` callbacks deliver *committed* batches in offset order: KafkaRaftClient
commits at the quorum high watermark (for a single voter, as soon as the batch is fsync'd).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kopfka.metadata.records import MetadataRecord


@dataclass(frozen=True)
class CommittedBatch:
    """A committed batch of metadata records (or, `is_snapshot`, a whole image) as raft listeners receive it."""

    base_offset: int
    last_offset: int
    epoch: int
    append_time_ms: int
    records: tuple[MetadataRecord, ...]
    is_snapshot: bool = False  # the records are a whole image: replace, don't apply on top


@dataclass(frozen=True)
class LeaderAndEpoch:
    """Kafka's LeaderAndEpoch: the quorum's leader as this node knows it, and its epoch."""

    leader_id: int  # -1 when unknown
    epoch: int


class RaftListener(Protocol):
    def handle_commit(self, batch: CommittedBatch) -> None: ...

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None: ...


class NotLeaderError(Exception):
    """This node is not the active controller (NOT_CONTROLLER on the wire)."""


class RaftClient(Protocol):
    node_id: int

    def register(self, listener: RaftListener) -> None: ...

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch: ...

    @property
    def high_watermark(self) -> int: ...

    async def append(self, records: list[MetadataRecord]) -> int:
        """Append atomically as one batch in the current epoch; returns its last offset once committed."""
        ...
