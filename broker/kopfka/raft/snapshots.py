"""Metadata snapshots: `<end offset>-<epoch>.checkpoint` files in the `__cluster_metadata-0` dir.

A snapshot is the whole image written as records (`MetadataImage.to_records()`, features
first) in ordinary v2 record batches, the same framing as the log and bootstrap.checkpoint.
Its id is (end offset, epoch): it holds everything *before* end offset, so loading it and then
replaying the log from end offset gives the same image as replaying the whole log. Names are
zero-padded like Kafka's (20 digits offset, 10 digits epoch) so they sort by offset.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from kopfka.metadata import records as mr
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import iter_batches
from kopfka.storage.checkpoint import atomic_write

SNAPSHOT_SUFFIX = ".checkpoint"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
RECORDS_PER_BATCH = 1000


@dataclass(frozen=True, order=True)
class SnapshotId:
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


def encode_snapshot(records: list[mr.MetadataRecord]) -> bytes:
    now = int(time.time() * 1000)
    chunks = []
    for start in range(0, max(len(records), 1), RECORDS_PER_BATCH):
        part = records[start : start + RECORDS_PER_BATCH] or [mr.NoOpRecord()]
        chunks.append(encode_batch([Record(i, now, None, mr.encode(r)) for i, r in enumerate(part)], base_offset=start))
    return b"".join(chunks)


def decode_snapshot(data: bytes) -> list[mr.MetadataRecord]:
    out: list[mr.MetadataRecord] = []
    for header in iter_batches(data):
        if header.is_control:  # Kafka's snapshot header and footer; kopfka writes none
            continue
        out.extend(mr.decode(r.value or b"") for r in decode_records(data, header))
    return out


def write_snapshot(log_dir: Path, snap: SnapshotId, records: list[mr.MetadataRecord]) -> Path:
    path = log_dir / snap.file_name
    atomic_write(path, encode_snapshot(records))
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
    except mr.KafkaBinaryRecordError as exc:
        raise exc.in_file(path) from None


def delete_snapshots_before(log_dir: Path, keep: SnapshotId) -> None:
    """Older snapshots are redundant once a newer one is durable."""
    for s in list_snapshots(log_dir):
        if s < keep:
            (log_dir / s.file_name).unlink(missing_ok=True)
