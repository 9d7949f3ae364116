"""The metadata log's place on disk (`__cluster_metadata-0` in metadata.log.dir, with its
`quorum-state`) and the reading of committed batches from it, shared by the raft client and the
snapshot machinery."""

from __future__ import annotations

from pathlib import Path

from kopfka.metadata import records as mr
from kopfka.protocol.record_codec import decode_records
from kopfka.protocol.records import iter_batches
from kopfka.raft.raft_client import CommittedBatch
from kopfka.storage.unified_log import UnifiedLog

METADATA_TOPIC = "__cluster_metadata"
QUORUM_STATE = "quorum-state"


def metadata_log_dir(metadata_dir: Path) -> Path:
    return metadata_dir / f"{METADATA_TOPIC}-0"


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
                if header.is_control:  # Kafka's KRaft control records (LeaderChange, voters): kopfka writes none
                    raise mr.KafkaBinaryRecordError("a KRaft control batch")
                recs = tuple(mr.decode(r.value or b"") for r in decode_records(data, header))
            except mr.KafkaBinaryRecordError as exc:  # e.g. a log dir written by Kafka
                raise exc.in_file(f"{log_.dir} (offset {header.base_offset})") from None
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
