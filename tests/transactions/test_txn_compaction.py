"""Compaction of a topic with transactions (seed 001's rules): records of an aborted transaction
are dropped whatever their keys, the latest committed value of every key stays, and a marker is
removed only once its transaction has no record left and its delete horizon passed (an ABORT
marker after two cleans; COMMIT markers of transactions with surviving records stay)."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer
from kopfka.protocol.record_codec import CONTROL_ABORT, CONTROL_COMMIT, control_record_type
from kopfka.protocol.records import iter_batches

from tests.log.helpers import broker, create_topic, wait_for
from transactions.helpers import read_values

TOPIC = "txn-compacted"
DELETE_RETENTION_MS = 1500


def _markers(data_dir: Path) -> list[int]:
    """Control types of the markers in the partition's segment files, in offset order."""
    out = []
    for seg in sorted((data_dir / f"{TOPIC}-0").glob("*.log")):
        data = seg.read_bytes()
        out.extend(
            control_record_type(data, h)
            for h in iter_batches(data, allow_partial_tail=True)
            if h.is_control and h.records_count > 0
        )
    return out


def _filler(bootstrap: str, n: int) -> None:
    """Plain records that roll the segment (segment.ms) and make the log dirty again."""
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(TOPIC, key=f"filler-{time.monotonic_ns()}-{i}".encode(), value=b"f")
    assert p.flush(30) == 0


def test_compaction_drops_aborted_data_then_empty_markers(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    proc = broker(data_dir).start()
    try:
        create_topic(
            proc.bootstrap,
            TOPIC,
            **{
                "cleanup.policy": "compact",
                "min.cleanable.dirty.ratio": "0.01",
                "segment.ms": "300",
                "delete.retention.ms": str(DELETE_RETENTION_MS),
            },
        )
        p = Producer({"bootstrap.servers": proc.bootstrap, "transactional.id": "compact-tx"})
        p.init_transactions(30)
        for prefix, keys, commit in (("c1", range(10), True), ("ab", range(10), False), ("c2", range(5), True)):
            p.begin_transaction()
            for k in keys:
                p.produce(TOPIC, key=f"k{k}".encode(), value=f"{prefix}-{k}".encode())
            p.flush(30)
            (p.commit_transaction if commit else p.abort_transaction)(30)
        wait_for(
            lambda: _markers(data_dir) == [CONTROL_COMMIT, CONTROL_ABORT, CONTROL_COMMIT],
            timeout=10,
            what="the three markers",
        )  # EndTxn answers before the markers are written
        latest = {f"c2-{k}" for k in range(5)} | {f"c1-{k}" for k in range(5, 10)}

        def cleaned() -> bool:
            time.sleep(0.35)
            _filler(proc.bootstrap, 1)
            values = set(read_values("confluent", proc.bootstrap, TOPIC, 1, committed=False))
            return {v for v in values if v != "f"} == latest

        # first cleans: the aborted records go (read_uncommitted no longer sees them); the markers stay
        wait_for(cleaned, timeout=60, what="the aborted records and superseded values to be cleaned")
        assert CONTROL_ABORT in _markers(data_dir)

        def abort_marker_gone() -> bool:
            time.sleep(0.35)
            _filler(proc.bootstrap, 1)
            return _markers(data_dir) == [CONTROL_COMMIT, CONTROL_COMMIT]

        # later cleans: the empty abort's marker gets a delete horizon, and goes after it
        wait_for(abort_marker_gone, timeout=60, what="the ABORT marker to be removed")
        committed = {v for v in read_values("confluent", proc.bootstrap, TOPIC, 1, committed=True) if v != "f"}
        assert committed == latest
    finally:
        proc.kill()
