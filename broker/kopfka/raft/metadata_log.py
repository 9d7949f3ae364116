"""The metadata log's place on disk (`__cluster_metadata-0` in metadata.log.dir, with its
`quorum-state`) and the reading of committed batches from it, shared by the raft client and the
snapshot machinery."""

from __future__ import annotations

from pathlib import Path

from kopfka.metadata import records as mr
from kopfka.metadata.record_batches import decode_batch
from kopfka.protocol.records import iter_batches
from kopfka.raft.raft_client import CommittedBatch
from kopfka.storage.unified_log import UnifiedLog

METADATA_TOPIC = "__cluster_metadata"
QUORUM_STATE = "quorum-state"


def metadata_log_dir(metadata_dir: Path) -> Path:
    return metadata_dir / f"{METADATA_TOPIC}-0"


def check_metadata_files(log_dir: Path) -> None:
    """Raise MetadataRecordError naming the file and offset if a metadata segment or snapshot holds
    records this binary cannot read, before the raft client reads them (there the error would only
    be retried). The complete batches of each file's first 64 KiB tell; a torn or corrupt batch is
    log recovery's business."""
    for path in sorted([*log_dir.glob("*.log"), *log_dir.glob("*.checkpoint")]):
        with path.open("rb") as f:
            head = f.read(1 << 16)
        try:
            headers = list(iter_batches(head, allow_partial_tail=True))
        except Exception:
            continue
        for header in headers:
            try:
                decode_batch(head, header)
            except mr.MetadataRecordError as exc:
                raise mr.MetadataRecordError(f"{path} (offset {header.base_offset}): {exc}") from None


def read_committed_batches(log_: UnifiedLog, start: int, end: int) -> list[CommittedBatch]:
    """Decode metadata batches in [start, end) from the log."""
    out: list[CommittedBatch] = []
    offset = start
    while offset < end:
        info = log_.read(offset, 1 << 20, isolation="log_end", min_one_message=True)
        if info.records is None:
            break
        data = info.records.read()
        progressed = False
        for header in iter_batches(data, allow_partial_tail=True):
            if header.last_offset < offset:
                continue
            if header.base_offset >= end:
                return out
            try:
                recs = tuple(decode_batch(data, header))
            except mr.MetadataRecordError as exc:
                raise mr.MetadataRecordError(f"{log_.dir} (offset {header.base_offset}): {exc}") from None
            out.append(
                CommittedBatch(
                    header.base_offset, header.last_offset, header.partition_leader_epoch, header.max_timestamp, recs
                )
            )
            offset = header.next_offset
            progressed = True
        if not progressed:
            break
    return out
