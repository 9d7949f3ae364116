"""SnapshotGenerator: writes a metadata snapshot every N record bytes or M milliseconds.

It is a raft listener keeping its own image of the committed log. After
`metadata.log.max.record.bytes.between.snapshots` bytes of records, or once
`metadata.log.max.snapshot.interval.ms` has passed with new records, it writes the image as
`<end offset>-<epoch>.checkpoint` — only on a batch boundary outside a metadata transaction, so a
snapshot never holds half of an atomic change.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataDelta, MetadataImage, Provenance
from kopfka.raft import snapshots
from kopfka.raft.raft_client import CommittedBatch, LeaderAndEpoch

log = logging.getLogger(__name__)


class SnapshotGenerator:
    name = "SnapshotGenerator"

    def __init__(self, raft: Any, *, max_bytes: int, max_interval_ms: int) -> None:
        self.raft = raft
        self.max_bytes = max_bytes
        self.max_interval = max_interval_ms / 1000 if max_interval_ms > 0 else None
        self.image = MetadataImage()
        self._in_txn = False
        self._bytes = 0
        self._last_snapshot = time.monotonic()

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass

    def handle_commit(self, batch: CommittedBatch) -> None:
        delta = MetadataDelta(MetadataImage() if batch.is_snapshot else self.image)
        for rec in batch.records:
            if isinstance(rec, mr.BeginTransactionRecord):
                self._in_txn = True
            elif isinstance(rec, mr.EndTransactionRecord | mr.AbortTransactionRecord):
                self._in_txn = False
            delta.replay(rec)
        self.image = delta.apply(Provenance(batch.last_offset, batch.epoch, batch.append_time_ms))
        if batch.is_snapshot:
            self._bytes = 0
            self._last_snapshot = time.monotonic()
            return
        self._bytes += sum(mr.encoded_size(r) for r in batch.records)
        due = self._bytes >= self.max_bytes or (
            self.max_interval is not None
            and self._bytes > 0
            and time.monotonic() - self._last_snapshot >= self.max_interval
        )
        if due and not self._in_txn:
            self.write(batch.last_offset + 1, batch.epoch)

    def write(self, end_offset: int, epoch: int) -> snapshots.SnapshotId:
        snap = snapshots.SnapshotId(end_offset, epoch)
        image = self.image
        snapshots.write_snapshot(
            self.raft.dir, snap, list(image.to_records()), image.features, image.provenance.last_log_time_ms
        )
        snapshots.delete_snapshots_before(self.raft.dir, snap)
        self.raft.snapshot_id = snap
        self._bytes = 0
        self._last_snapshot = time.monotonic()
        log.info("Wrote metadata snapshot %s", snap.file_name)
        return snap
