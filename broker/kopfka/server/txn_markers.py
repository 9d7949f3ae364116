"""Writing transaction markers on the partition leader (WriteTxnMarkers).

A marker is a one-record control batch (COMMIT or ABORT, with the coordinator epoch) in the
producer's id and epoch; appending it ends the producer's transaction in the partition, moves
the last stable offset and, for an abort, adds the range to the transaction index. Markers are
written with acks=all: the coordinator only forgets a partition once its marker is committed.
Markers in `__consumer_offsets` also make the group coordinator materialize (commit) or drop
(abort) the producer's pending transactional offsets.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from kopfka.protocol.errors import ErrorCode
from kopfka.protocol.record_codec import build_end_txn_marker_batch
from kopfka.server.delayed_produce import await_replication

OFFSETS_TOPIC = "__consumer_offsets"
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class TxnMarker:
    """One WriteTxnMarkers marker: the producer, coordinator epoch, COMMIT or ABORT and the partitions it goes to."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]
    transaction_version: int = 0


async def write_txn_markers(services: Any, markers: list[TxnMarker]) -> list[dict[TopicPartition, ErrorCode]]:
    """Append every marker to the partitions this broker leads; per marker, per partition error."""
    rm = services.replica_manager
    image = services.metadata.image
    timeout_ms = int(services.config["request.timeout.ms"])
    now = time.time_ns() // 1_000_000
    out: list[dict[TopicPartition, ErrorCode]] = []
    waits = []
    for m in markers:
        errors: dict[TopicPartition, ErrorCode] = {}
        entries = []
        for tp in m.partitions:
            topic = image.topics_by_name.get(tp[0])
            if topic is None or tp[1] not in topic.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
                continue
            entries.append(
                (
                    tp,
                    build_end_txn_marker_batch(
                        commit=m.commit,
                        producer_id=m.producer_id,
                        producer_epoch=m.producer_epoch,
                        coordinator_epoch=m.coordinator_epoch,
                        timestamp=now,
                    ),
                )
            )
        results = rm.append_records(entries, -1, internal=True) if entries else {}
        waits.append(_complete(services, m, results, timeout_ms, errors))
        out.append(errors)
    await asyncio.gather(*waits)
    return out


async def _complete(
    services: Any,
    m: TxnMarker,
    results: dict[TopicPartition, Any],
    timeout_ms: int,
    errors: dict[TopicPartition, ErrorCode],
) -> None:
    await await_replication(services.replica_manager, results, timeout_ms)
    offsets_partitions = []
    for tp, r in results.items():
        errors[tp] = r.error
        if r.error == ErrorCode.none and tp[0] == OFFSETS_TOPIC:
            offsets_partitions.append(tp[1])
    gc = services.group_coordinator
    if offsets_partitions and gc is not None:
        gc.on_transaction_completed(m.producer_id, offsets_partitions, m.commit)
