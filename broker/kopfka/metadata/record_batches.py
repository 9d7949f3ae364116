"""Metadata records in v2 record batches, as Kafka's raft lays them out.

Metadata records go in data batches; the KRaft control records (voters, kraft.version, leader
change) go in control batches of their own, so a run of records is cut where it changes kind.
A snapshot or bootstrap.checkpoint is framed by a SnapshotHeader control batch at offset 0 and
a SnapshotFooter control batch after the last record (Kafka's RecordsSnapshotWriter).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from kio.schema.snapshot_footer_record.v0 import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0 import SnapshotHeaderRecord
from kio.static.primitive import i16, i64

from kopfka.metadata import records as mr
from kopfka.metadata import serde
from kopfka.protocol.errors import CorruptRecordError
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import BatchHeader, iter_batches

NO_LEADER_EPOCH = -1


def runs(records: Sequence[mr.MetadataRecord]) -> Iterator[tuple[bool, list[mr.MetadataRecord]]]:
    """(is_control, records) for each maximal run of one kind, in order."""
    current: list[mr.MetadataRecord] = []
    control = False
    for rec in records:
        kind = isinstance(rec, mr.ControlRecord)
        if current and kind != control:
            yield control, current
            current = []
        control = kind
        current.append(rec)
    if current:
        yield control, current


def encode_run(
    records: Sequence[mr.MetadataRecord],
    control: bool,
    *,
    base_offset: int,
    timestamp: int,
    leader_epoch: int,
    features: Mapping[str, int] | None = None,
) -> bytes:
    """One batch of records of one kind (see `runs`)."""
    out = []
    for i, rec in enumerate(records):
        if control:
            assert isinstance(rec, mr.ControlRecord)
            key, value = mr.encode_control(rec)
            out.append(Record(i, timestamp, key, value))
        else:
            out.append(Record(i, timestamp, None, mr.encode(rec, features)))
    return encode_batch(out, base_offset=base_offset, partition_leader_epoch=leader_epoch, control=control)


def decode_batch(data: bytes | memoryview, header: BatchHeader) -> list[mr.MetadataRecord]:
    """The records kopfka replays from one batch: a data batch's metadata records, or the voter
    set, kraft.version and leader change of a control batch (snapshot header and footer are
    framing, and dropped). MetadataRecordError names what is wrong."""
    try:
        recs = decode_records(data, header)
    except CorruptRecordError as exc:
        raise mr.MetadataRecordError(f"corrupt metadata batch at offset {header.base_offset}: {exc}") from exc
    if not header.is_control:
        return [mr.decode(r.value or b"") for r in recs]
    out: list[mr.MetadataRecord] = []
    for r in recs:
        rec = mr.decode_control(r.key, r.value)
        if rec is not None:
            out.append(rec)
    return out


def decode_all(data: bytes | memoryview) -> list[mr.MetadataRecord]:
    out: list[mr.MetadataRecord] = []
    for header in iter_batches(data):
        out.extend(decode_batch(data, header))
    return out


def encode_snapshot(
    records: Sequence[mr.MetadataRecord],
    *,
    timestamp: int,
    last_contained_log_timestamp: int,
    leader_epoch: int = 0,
    features: Mapping[str, int] | None = None,
    records_per_batch: int = 1000,
) -> bytes:
    """A snapshot file's bytes: header, the records in batches, footer; offsets from 0. Leading
    control records (kraft.version, voters) share the header's batch, as in Kafka's snapshots."""
    header_key, header_value = serde.write_control(
        SnapshotHeaderRecord(version=i16(0), last_contained_log_timestamp=i64(last_contained_log_timestamp))
    )
    head = [Record(0, timestamp, header_key, header_value)]
    body = list(runs(records))
    if body and body[0][0]:
        for i, rec in enumerate(body.pop(0)[1], start=1):
            assert isinstance(rec, mr.ControlRecord)
            head.append(Record(i, timestamp, *mr.encode_control(rec)))
    chunks = [encode_batch(head, partition_leader_epoch=leader_epoch, control=True)]
    offset = len(head)
    for control, run in body:
        for start in range(0, len(run), records_per_batch):
            part = run[start : start + records_per_batch]
            chunks.append(
                encode_run(
                    part, control, base_offset=offset, timestamp=timestamp, leader_epoch=leader_epoch, features=features
                )
            )
            offset += len(part)
    footer_key, footer_value = serde.write_control(SnapshotFooterRecord(version=i16(0)))
    chunks.append(
        encode_batch(
            [Record(0, timestamp, footer_key, footer_value)],
            base_offset=offset,
            partition_leader_epoch=leader_epoch,
            control=True,
        )
    )
    return b"".join(chunks)
