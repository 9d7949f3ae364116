"""Metadata snapshots: `<end offset>-<epoch>.checkpoint` files in the `__cluster_metadata-0` dir.

A snapshot is the whole image written as records (`MetadataImage.to_records()`: the voter set
and kraft.version, then features first) in Kafka's layout: a SnapshotHeader control batch, the
records in batches of at most 1000, a SnapshotFooter control batch (`record_batches`).
Its id is (end offset, epoch): it holds everything *before* end offset, so loading it and then
replaying the log from end offset gives the same image as replaying the whole log. Names are
zero-padded like Kafka's (20 digits offset, 10 digits epoch) so they sort by offset.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kopfka.metadata import record_batches
from kopfka.metadata import records as mr
from kopfka.protocol.errors import CorruptRecordError
from kopfka.storage.checkpoint import atomic_write

SNAPSHOT_SUFFIX = ".checkpoint"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
RECORDS_PER_BATCH = 1000


@dataclass(frozen=True, order=True)
class SnapshotId:
    """A snapshot's id: it holds every record before `end_offset`; ordered by offset, then epoch."""

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SNAPSHOT_SUFFIX}"


def list_snapshots(log_dir: Path) -> list[SnapshotId]:
    out = []
    if log_dir.exists():
        for p in log_dir.iterdir():
            m = _NAME.match(p.name)
            if m:
                out.append(SnapshotId(int(m.group(1)), int(m.group(2))))
    return sorted(out)


def latest_snapshot(log_dir: Path) -> SnapshotId | None:
    snaps = list_snapshots(log_dir)
    return snaps[-1] if snaps else None


def encode_snapshot(
    records: list[mr.MetadataRecord], features: Mapping[str, int] | None = None, last_log_time_ms: int = -1
) -> bytes:
    """`features`: the image's, for the record versions (None: kopfka's latest); `last_log_time_ms`:
    the time of the last record it holds (the header's lastContainedLogTimestamp)."""
    now = int(time.time() * 1000)
    return record_batches.encode_snapshot(
        records,
        timestamp=now,
        last_contained_log_timestamp=last_log_time_ms if last_log_time_ms >= 0 else now,
        features=features,
        records_per_batch=RECORDS_PER_BATCH,
    )


def decode_snapshot(data: bytes) -> list[mr.MetadataRecord]:
    try:
        return record_batches.decode_all(data)
    except CorruptRecordError as exc:
        raise mr.MetadataRecordError(f"corrupt snapshot: {exc}") from exc


def write_snapshot(
    log_dir: Path,
    snap: SnapshotId,
    records: list[mr.MetadataRecord],
    features: Mapping[str, int] | None = None,
    last_log_time_ms: int = -1,
) -> Path:
    path = log_dir / snap.file_name
    atomic_write(path, encode_snapshot(records, features, last_log_time_ms))
    return path


def write_snapshot_bytes(log_dir: Path, snap: SnapshotId, data: bytes) -> Path:
    decode_snapshot(data)  # refuse to install a snapshot that does not parse
    path = log_dir / snap.file_name
    atomic_write(path, data)
    return path


def read_snapshot(log_dir: Path, snap: SnapshotId) -> list[mr.MetadataRecord]:
    path = log_dir / snap.file_name
    try:
        return decode_snapshot(path.read_bytes())
    except mr.MetadataRecordError as exc:
        raise mr.MetadataRecordError(f"{path}: {exc}") from None


def delete_snapshots_before(log_dir: Path, keep: SnapshotId) -> None:
    """Older snapshots are redundant once a newer one is durable."""
    for s in list_snapshots(log_dir):
        if s < keep:
            (log_dir / s.file_name).unlink(missing_ok=True)
