"""Byte-exact on-disk formats: indexes, txn index, checkpoints, epoch cache, partition.metadata."""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path

import pytest
from kopfka.storage import log_file_utils as lfu
from kopfka.storage.abstract_index import CorruptIndexError
from kopfka.storage.checkpoint import (
    CleanShutdownFileHandler,
    CorruptCheckpointError,
    OffsetCheckpointFile,
)
from kopfka.storage.leader_epoch_cache import EpochEntry, LeaderEpochFileCache
from kopfka.storage.offset_index import InvalidOffsetError, OffsetIndex, OffsetPosition
from kopfka.storage.partition_metadata import (
    PartitionMetadataFile,
    uuid_from_base64,
    uuid_to_base64,
)
from kopfka.storage.time_index import TimeIndex, TimestampOffset
from kopfka.storage.transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from kopfka.storage.unified_log import UnifiedLog

from .helpers import BASE_TS, Clock, batch, log_dir, small_config


def test_file_names() -> None:
    d = Path("/x")
    assert lfu.log_file(d, 147001).name == "00000000000000147001.log"
    assert lfu.offset_index_file(d, 0).name == "00000000000000000000.index"
    assert lfu.time_index_file(d, 5, lfu.SWAP_FILE_SUFFIX).name == "00000000000000000005.timeindex.swap"
    assert lfu.transaction_index_file(d, 5).name == "00000000000000000005.txnindex"
    assert lfu.producer_snapshot_file(d, 146500).name == "00000000000000146500.snapshot"
    assert lfu.offset_from_file_name("00000000000000147001.log.deleted") == 147001
    assert lfu.parse_topic_partition_name("orders-2") == ("orders", 2)
    assert lfu.parse_topic_partition_name("my-topic-10") == ("my-topic", 10)
    name = lfu.log_delete_dir_name("my-topic", 3)
    assert name.endswith("-delete") and lfu.is_delete_dir(name)
    assert lfu.parse_topic_partition_name(name) == ("my-topic", 3)
    assert lfu.parse_topic_partition_name(lfu.log_future_dir_name("t", 1)) == ("t", 1)
    assert lfu.parse_topic_partition_name(lfu.log_stray_dir_name("t", 1)) == ("t", 1)
    for bad in ("orders", "orders-", "-1", "orders-x"):
        with pytest.raises(ValueError):
            lfu.parse_topic_partition_name(bad)


def test_offset_index_bytes_and_lookup(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, max_index_size=100)
    assert idx.max_entries == 12  # 100 rounded down to a multiple of 8
    assert (tmp_path / "00000000000000000100.index").stat().st_size == 96
    idx.append(105, 0)
    idx.append(110, 4096)
    idx.append(200, 8200)
    with pytest.raises(InvalidOffsetError):
        idx.append(200, 9000)
    assert idx.lookup(99) == OffsetPosition(100, 0)
    assert idx.lookup(105) == OffsetPosition(105, 0)
    assert idx.lookup(150) == OffsetPosition(110, 4096)
    assert idx.lookup(10_000) == OffsetPosition(200, 8200)
    idx.truncate_to(110)
    assert idx.entries == 1 and idx.last_offset == 105
    idx.append(120, 5000)
    idx.close()
    data = (tmp_path / "00000000000000000100.index").read_bytes()
    assert data == struct.pack(">iiii", 5, 0, 20, 5000)  # trimmed on close
    reopened = OffsetIndex(tmp_path / "00000000000000000100.index", 100, max_index_size=100)
    assert reopened.entries == 2 and reopened.lookup(130) == OffsetPosition(120, 5000)
    reopened.close()


def test_offset_index_warm_section_search(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=1 << 20)
    for i in range(5000):  # more than the 1024-entry warm section
        idx.append(10 * i + 3, 100 * i)
    for target in (0, 3, 4, 12, 13, 25_000, 38_000, 49_993, 60_000):
        expected = max((10 * i + 3, 100 * i) for i in range(5000) if 10 * i + 3 <= target) if target >= 3 else (0, 0)
        assert idx.lookup(target) == OffsetPosition(*expected), target
    idx.close()


def test_offset_index_fetch_upper_bound(tmp_path: Path) -> None:
    """The first entry past position + size (the end of a read_committed fetch's aborted-txn
    range), found by binary search: the same answer as a scan, for every boundary."""
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=1 << 20)
    assert idx.fetch_upper_bound_offset(0, 100) is None  # empty
    positions = [0, 100, 250, 4096, 4097, 9000]
    for i, pos in enumerate(positions):
        idx.append(7 * i + 1, pos)
    for start in range(-1, 9100, 7):
        for size in (0, 1, 150, 5000):
            past = [(7 * i + 1, pos) for i, pos in enumerate(positions) if pos > start + size]
            expected = OffsetPosition(*past[0]) if past else None
            assert idx.fetch_upper_bound_offset(start, size) == expected, (start, size)
    idx.close()


def test_time_index_bytes_and_reserved_slot(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000010.timeindex"
    idx = TimeIndex(path, 10, max_index_size=36)  # 3 slots, last reserved
    idx.maybe_append(1000, 11)
    idx.maybe_append(1000, 12)  # not larger: ignored
    idx.maybe_append(2000, 15)
    assert idx.entries == 2 and idx.is_full()
    with pytest.raises(CorruptIndexError):
        idx.maybe_append(3000, 16)
    idx.maybe_append(3000, 16, skip_full_check=True)
    assert idx.lookup(999) == TimestampOffset(-1, 10)
    assert idx.lookup(2500) == TimestampOffset(2000, 15)
    idx.close()
    assert path.read_bytes() == struct.pack(">qiqiqi", 1000, 1, 2000, 5, 3000, 6)


def test_transaction_index_bytes(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    txn = TransactionIndex(0, path)
    assert not path.exists()  # created lazily
    txn.append(AbortedTxn(7, 10, 20, 10))
    txn.append(AbortedTxn(8, 15, 30, 31))
    data = path.read_bytes()
    assert len(data) == 68
    assert data[:34] == struct.pack(">hqqqq", 0, 7, 10, 20, 10)
    r = txn.collect_aborted_txns(0, 25)
    assert [t.producer_id for t in r.aborted_transactions] == [7, 8] and r.is_complete
    r = txn.collect_aborted_txns(21, 100)
    assert [t.producer_id for t in r.aborted_transactions] == [8] and not r.is_complete
    txn.truncate_to(25)
    assert txn.all_aborted_txns() == [AbortedTxn(7, 10, 20, 10)]


def test_transaction_index_answers_from_its_size_when_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index without aborted transactions (most logs) answers a read_committed fetch without
    reading its file; appends, truncation and resets keep the answers right."""
    txn = TransactionIndex(0, tmp_path / "00000000000000000000.txnindex")
    reads = []
    real = TransactionIndex._read_all
    monkeypatch.setattr(TransactionIndex, "_read_all", lambda self: reads.append(1) or real(self))
    for _ in range(3):
        assert txn.collect_aborted_txns(0, 100) == TxnIndexSearchResult([], False)
    assert reads == []
    txn.append(AbortedTxn(7, 10, 20, 10))
    assert [t.producer_id for t in txn.collect_aborted_txns(0, 100).aborted_transactions] == [7]
    txn.truncate_to(15)
    assert txn.collect_aborted_txns(0, 100).aborted_transactions == []
    txn.append(AbortedTxn(8, 30, 40, 30))
    assert [t.producer_id for t in txn.collect_aborted_txns(0, 100).aborted_transactions] == [8]
    txn.reset()
    reads.clear()
    assert txn.collect_aborted_txns(0, 100).aborted_transactions == [] and reads == []


def test_offset_checkpoint_format(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    assert cp.read() == {}
    cp.write({("orders", 0): 1234, ("my-topic", 11): 0})
    assert cp.path.read_text() == "0\n2\norders 0 1234\nmy-topic 11 0\n"
    assert cp.read() == {("orders", 0): 1234, ("my-topic", 11): 0}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    for bad in ("1\n0\n", "0\n2\norders 0 1\n", "0\n1\norders x 1\n", "garbage", "0\n1\na b c d\n"):
        cp.path.write_text(bad)
        with pytest.raises(CorruptCheckpointError):
            cp.read()
        assert cp.read_or_empty() == {}


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    marker = CleanShutdownFileHandler(tmp_path)
    assert not marker.exists() and marker.read() == -1
    marker.write(42)
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert json.loads((tmp_path / ".kafka_cleanshutdown").read_text()) == {
        "version": 0,
        "brokerEpoch": 42,
    }
    assert marker.read() == 42
    marker.delete()
    assert not marker.exists()
    (tmp_path / ".kafka_cleanshutdown").write_text("")  # pre-3.x empty marker
    assert marker.exists() and marker.read() == -1


def test_leader_epoch_checkpoint(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.for_dir("t-0", tmp_path)
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch, later offset: no change
    cache.assign(2, 10)
    cache.assign(5, 30)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n5 30\n"
    assert cache.end_offset_for(5, 99) == (5, 99)
    assert cache.end_offset_for(2, 99) == (2, 30)
    assert cache.end_offset_for(3, 99) == (2, 30)
    assert cache.end_offset_for(-1, 99) == (-1, -1)
    assert cache.end_offset_for(7, 99) == (-1, -1)
    cache.assign(4, 20)  # lower epoch at lower offset: later entries dropped
    assert cache.entries() == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(4, 20)]
    cache.truncate_from_end(15)
    assert cache.entries() == [EpochEntry(0, 0), EpochEntry(2, 10)]
    cache.truncate_from_start(12)
    assert cache.entries() == [EpochEntry(2, 12)]
    reloaded = LeaderEpochFileCache.for_dir("t-0", tmp_path)
    assert reloaded.entries() == [EpochEntry(2, 12)]


def test_partition_metadata(tmp_path: Path) -> None:
    tid = uuid.UUID("0f9b2e4c-6a5d-4c1e-9d7a-2b3c4d5e6f70")
    pmf = PartitionMetadataFile(tmp_path)
    pmf.write(tid)
    text = (tmp_path / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {uuid_to_base64(tid)}\n"
    assert len(uuid_to_base64(tid)) == 22 and "=" not in uuid_to_base64(tid)
    assert uuid_from_base64(uuid_to_base64(tid)) == tid
    assert pmf.read() == tid


def test_partition_metadata_is_written_by_the_scheduler_or_the_first_append(tmp_path: Path) -> None:
    """Kafka's "flush-metadata-file" task: creating a log records its topic id and leaves the
    fsynced write to the scheduler's thread, unless an append comes first."""
    tasks: list[tuple[str, object]] = []

    def scheduler(name: str, delay_ms: int, fn: object) -> None:
        tasks.append((name, fn))

    first, second = log_dir(tmp_path, "a-0"), log_dir(tmp_path, "b-0")
    tid_a, tid_b = uuid.uuid4(), uuid.uuid4()
    a = UnifiedLog.load(first, small_config(), topic_id=tid_a, time=Clock(), scheduler=scheduler)
    b = UnifiedLog.load(second, small_config(), topic_id=tid_b, time=Clock(), scheduler=scheduler)
    assert [name for name, _ in tasks] == ["flush-metadata-file", "flush-metadata-file"]
    assert not (first / "partition.metadata").exists() and not (second / "partition.metadata").exists()
    tasks[0][1]()  # type: ignore[operator]
    assert PartitionMetadataFile(first).read() == tid_a
    b.append_as_leader(batch([b"x"], ts=BASE_TS), leader_epoch=0)  # never data before the topic id
    assert PartitionMetadataFile(second).read() == tid_b
    tasks[1][1]()  # type: ignore[operator]  # nothing left to write
    assert PartitionMetadataFile(second).read() == tid_b

    tasks.clear()
    c_dir = log_dir(tmp_path, "c-0")
    c = UnifiedLog.load(c_dir, small_config(), topic_id=uuid.uuid4(), time=Clock(), scheduler=scheduler)
    c.rename_dir("c-0.0123456789abcdef0123456789abcdef-delete")
    tasks[0][1]()  # type: ignore[operator]  # renamed before it ran: written in the new dir
    assert (tmp_path / "c-0.0123456789abcdef0123456789abcdef-delete" / "partition.metadata").exists()
    tasks.clear()
    d_dir = log_dir(tmp_path, "d-0")
    d = UnifiedLog.load(d_dir, small_config(), topic_id=uuid.uuid4(), time=Clock(), scheduler=scheduler)
    d.delete()
    assert not d_dir.exists()
    tasks[0][1]()  # type: ignore[operator]  # deleted before it ran: nothing to write, no error
    for log in (a, b):
        log.close()


def test_log_writes_epochs_and_topic_id(tmp_path: Path) -> None:
    tid = uuid.uuid4()
    d = log_dir(tmp_path)
    log = UnifiedLog.load(d, small_config(), topic_id=tid, time=Clock())
    log.append_as_leader(batch([b"a"], ts=BASE_TS), leader_epoch=3)
    log.append_as_leader(batch([b"b"], ts=BASE_TS), leader_epoch=3)
    log.append_as_leader(batch([b"c"], ts=BASE_TS), leader_epoch=4)
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n4 2\n"
    assert log.end_offset_for_epoch(3) == (3, 2)
    assert log.end_offset_for_epoch(4) == (4, 3)
    log.close()
    from kopfka.storage.partition_metadata import InconsistentTopicIdError

    with pytest.raises(InconsistentTopicIdError):
        UnifiedLog.load(d, small_config(), topic_id=uuid.uuid4(), time=Clock())
    log = UnifiedLog.load(d, small_config(), time=Clock(), had_clean_shutdown=True, recovery_point=3)
    assert log.topic_id == tid and log.latest_epoch == 4
    # the batch header carries the leader epoch stamped at append
    data = log.read(0, 1000, isolation="log_end").records.read()  # type: ignore[union-attr]
    assert struct.unpack_from(">i", data, 12)[0] == 3
    log.close()
