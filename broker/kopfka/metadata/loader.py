"""MetadataLoader (seed 000): committed batches → deltas → images → ordered publishers.

Runs on the event loop, strictly in offset order. Records between a BeginTransactionRecord and
its EndTransactionRecord are folded into one delta and published together; an
AbortTransactionRecord discards them (KIP-866). Publishers are called in install order with
(delta, new image) and must not block.

A publisher that raises is a fault, handled as Kafka's "metadata publishing" fault handler does:
logged at ERROR, counted (metadata-apply-error-count), and the other publishers still get the
image. While the broker starts (the first publish of the whole image), it is fatal.
"""

from __future__ import annotations

import logging
from typing import Protocol

from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataDelta, MetadataImage, Provenance
from kopfka.raft.raft_client import CommittedBatch, LeaderAndEpoch

log = logging.getLogger(__name__)


class InitialMetadataLoadError(Exception):
    """A publisher failed on the broker's first, whole-image publish: the broker must not start."""


class MetadataPublisher(Protocol):
    name: str

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None: ...


def whole_image_delta(image: MetadataImage) -> MetadataDelta:
    """The delta from an empty image to `image`: what a publisher that joins late is told first."""
    delta = MetadataDelta(MetadataImage())
    delta.replay_all(image.to_records())
    return delta


class MetadataLoader:
    def __init__(self, name: str = "loader") -> None:
        self.name = name
        self.image = MetadataImage()
        self.publishers: list[MetadataPublisher] = []
        self.leader = LeaderAndEpoch(-1, -1)
        self._txn_records: list[mr.MetadataRecord] | None = None
        self._txn_start_image: MetadataImage | None = None
        self.apply_error_count = 0  # Kafka's broker-metadata-metrics metadata-apply-error-count

    def publishing_fault(self, message: str, exc: BaseException) -> None:
        """Kafka's non-fatal metadata publishing fault handler: an ERROR line and a count."""
        self.apply_error_count += 1
        log.error("Encountered metadata publishing fault: %s", message, exc_info=exc)

    def _publish(self, delta: MetadataDelta, what: str) -> None:
        for p in self.publishers:
            try:
                p.on_metadata_update(delta, self.image)
            except Exception as exc:
                self.publishing_fault(f"Unhandled error publishing the new metadata image {what} with {p.name}", exc)

    @property
    def last_applied_offset(self) -> int:
        return self.image.provenance.last_offset

    def install_publishers(self, publishers: list[MetadataPublisher]) -> None:
        """Add publishers; each is first brought up to date with the whole current image."""
        for p in publishers:
            if not self.image.is_empty():
                try:
                    p.on_metadata_update(whole_image_delta(self.image), self.image)
                except Exception as exc:  # Kafka's initial broker metadata load fault: fatal
                    self.apply_error_count += 1
                    log.error("Encountered initial broker metadata loading fault in %s", p.name, exc_info=exc)
                    raise InitialMetadataLoadError(
                        f"publisher {p.name} failed loading the metadata image at offset "
                        f"{self.image.provenance.last_offset}: {exc!r}"
                    ) from exc
            self.publishers.append(p)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leader = leader

    def handle_commit(self, batch: CommittedBatch) -> None:
        if batch.is_snapshot:
            self._load_snapshot(batch)
            return
        delta = MetadataDelta(self.image)
        pending: list[mr.MetadataRecord] = []
        for rec in batch.records:
            if isinstance(rec, mr.BeginTransactionRecord):
                self._txn_records = []
            elif isinstance(rec, mr.EndTransactionRecord):
                pending.extend(self._txn_records or [])
                self._txn_records = None
            elif isinstance(rec, mr.AbortTransactionRecord):
                log.info("metadata transaction aborted: %s", rec.reason)
                self._txn_records = None
            elif self._txn_records is not None:
                self._txn_records.append(rec)
            else:
                pending.append(rec)
        if not pending and self._txn_records is not None:
            # mid-transaction: advance the offset only once the transaction ends
            return
        try:
            delta.replay_all(pending)
        except mr.MetadataRecordError:
            log.exception("fatal: cannot replay committed metadata at offset %d", batch.base_offset)
            raise
        self.image = delta.apply(Provenance(batch.last_offset, batch.epoch, batch.append_time_ms))
        self._publish(delta, f"ending at offset {batch.last_offset}")

    def _load_snapshot(self, batch: CommittedBatch) -> None:
        """A snapshot is a whole image: rebuild from it, then tell publishers what changed."""
        self._txn_records = None
        fresh = MetadataDelta(MetadataImage())
        fresh.replay_all(batch.records)
        fresh.finish_snapshot()
        new_image = fresh.apply(Provenance(batch.last_offset, batch.epoch, batch.append_time_ms))
        old = self.image
        self.image = new_image
        if not self.publishers:
            return
        delta = MetadataDelta(old)
        for tid in old.topics_by_id:
            if tid not in new_image.topics_by_id:
                delta.replay(mr.RemoveTopicRecord(tid))
        for bid, b in old.brokers.items():
            if bid not in new_image.brokers:
                delta.replay(mr.UnregisterBrokerRecord(bid, b.epoch))
        delta.replay_all(new_image.to_records())
        delta.finish_snapshot()
        self._publish(delta, f"from the snapshot ending at offset {batch.last_offset}")
