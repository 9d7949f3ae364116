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


def refuse_kafka_format(log_dir: Path) -> None:
    """Raise KafkaBinaryRecordError naming the file if the metadata log's segments or snapshots
    were written by Apache Kafka, before the raft client reads them (there the error would only
    be retried). The first data batch of each file tells; anything else unreadable is left to
    log recovery."""
    for path in sorted([*log_dir.glob("*.log"), *log_dir.glob("*.checkpoint")]):
        with path.open("rb") as f:
            head = f.read(1 << 16)
        try:
            for header in iter_batches(head, allow_partial_tail=True):
                if header.is_control and path.suffix == ".checkpoint":
                    continue  # Kafka's snapshot header
                if header.is_control:  # Kafka's KRaft control records (LeaderChange, voters): kopfka writes none
                    raise mr.KafkaBinaryRecordError("a KRaft control batch")
                for r in decode_records(head, header):
                    mr.decode(r.value or b"")
                break
        except mr.KafkaBinaryRecordError as exc:
            raise exc.in_file(path) from None
        except Exception:  # a torn or corrupt file is log recovery's business
            continue


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
