"""Idempotent producer semantics and producer-state snapshots."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.storage import log_file_utils as lfu
from kopfka.storage.producer_state import (
    SNAPSHOT_ENTRY_SIZE,
    BatchMetadata,
    CorruptSnapshotError,
    ProducerStateEntry,
    decrement_sequence,
    read_snapshot,
    write_snapshot,
)
from kopfka.storage.unified_log import UnifiedLog

from .helpers import BASE_TS, Clock, batch, log_dir, read_values, small_config

PID = 4242


def _send(log: UnifiedLog, seq: int, n: int = 2, epoch: int = 0, pid: int = PID, ts: int = BASE_TS):
    return log.append_as_leader(
        batch(
            [(b"v%d" % (seq + i)).ljust(60, b".") for i in range(n)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            ts=ts,
        ),
        leader_epoch=0,
    )


def test_duplicates_of_last_five_batches_return_original_offsets(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    originals = [_send(log, seq) for seq in range(0, 14, 2)]  # 7 batches of 2
    leo = log.log_end_offset
    for i in range(2, 7):  # the last five
        dup = _send(log, 2 * i)
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (
            originals[i].first_offset,
            originals[i].last_offset,
        )
        assert log.log_end_offset == leo
    # older than the last five: not detectable any more -> out of order
    with pytest.raises(KafkaError) as e:
        _send(log, 2)
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == leo
    log.close()


def test_out_of_order_sequence(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    _send(log, 0)  # seqs 0,1
    with pytest.raises(KafkaError) as e:
        _send(log, 3)  # gap
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    assert _send(log, 2).first_offset == 2
    log.close()


def test_new_producer_accepts_any_first_sequence(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    assert _send(log, 17).first_offset == 0
    assert _send(log, 19).first_offset == 2
    log.close()


def test_stale_epoch_rejected_and_epoch_bump_resets_sequence(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    _send(log, 0, epoch=1)
    _send(log, 2, epoch=1)
    with pytest.raises(KafkaError) as e:
        _send(log, 4, epoch=0)
    assert e.value.code == ErrorCode.invalid_producer_epoch
    # a new epoch must start at sequence 0
    with pytest.raises(KafkaError) as e:
        _send(log, 4, epoch=2)
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    info = _send(log, 0, epoch=2)
    assert not info.duplicate and info.first_offset == 4
    # duplicates of the old epoch's batches are not recognised any more
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and entry.producer_epoch == 2 and len(entry.batch_metadata) == 1
    log.close()


def test_sequence_wraps_at_int_max(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    _send(log, 0x7FFFFFFF - 1, n=2)  # seqs MAX-1, MAX
    info = _send(log, 0, n=2)
    assert info.first_offset == 2 and not info.duplicate
    assert _send(log, 0, n=2).duplicate
    with pytest.raises(KafkaError):
        _send(log, 5)
    assert decrement_sequence(1, 3) == 0x7FFFFFFF - 1
    assert BatchMetadata(1, 10, 3, 0).first_seq == 0x7FFFFFFF - 1
    log.close()


def test_multiple_producers_are_independent(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    a0 = _send(log, 0, pid=1)
    b0 = _send(log, 0, pid=2)
    assert _send(log, 0, pid=1).first_offset == a0.first_offset
    assert _send(log, 0, pid=2).first_offset == b0.first_offset
    assert _send(log, 2, pid=2).first_offset == 4
    log.close()


def test_state_survives_clean_restart_via_snapshot(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = UnifiedLog.load(d, small_config(), time=clock)
    infos = [_send(log, s, n=1) for s in range(10)]
    log.flush()
    log.close()
    assert lfu.producer_snapshot_file(d, 10).exists()
    log = UnifiedLog.load(d, small_config(), time=clock, had_clean_shutdown=True, recovery_point=10)
    dup = _send(log, 9, n=1)
    assert dup.duplicate and dup.first_offset == infos[9].first_offset
    with pytest.raises(KafkaError):
        _send(log, 11, n=1)
    assert _send(log, 10, n=1).first_offset == 10
    log.close()


def test_state_rebuilt_from_log_after_crash(tmp_path: Path) -> None:
    """Unclean restart: state comes from the snapshot at the last roll plus a replay of the log.

    As in Kafka, a snapshot keeps only the last batch per producer, so after recovery the
    duplicate of the last batch is detected and older retries are out of order.
    """
    clock, d = Clock(), log_dir(tmp_path)
    log = UnifiedLog.load(d, small_config(), time=clock)
    infos = [_send(log, 2 * s, n=2) for s in range(30)]
    assert log.num_segments > 1
    for p in d.glob("*.snapshot"):
        p.unlink()  # force a replay of the whole log
    log.close_handlers()
    log = UnifiedLog.load(d, small_config(), time=clock)
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and entry.last_seq == 59 and entry.last_data_offset == 59
    dup = _send(log, 58)
    assert dup.duplicate and dup.first_offset == infos[29].first_offset
    with pytest.raises(KafkaError) as e:
        _send(log, 62)
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    assert _send(log, 60).first_offset == 60
    log.close()


def test_replay_restores_last_five_batches(tmp_path: Path) -> None:
    """Batches after the latest snapshot are replayed one by one, so all five are retained."""
    clock, d = Clock(), log_dir(tmp_path)
    log = UnifiedLog.load(d, small_config(**{"segment.bytes": 1 << 20}), time=clock)
    _send(log, 0)
    log.roll()  # snapshot at offset 2 holds one batch
    infos = [_send(log, 2 * s) for s in range(1, 8)]
    log.close()
    lfu.producer_snapshot_file(d, 16).unlink()  # keep only the roll-time snapshot at 2
    assert lfu.producer_snapshot_file(d, 2).exists()
    log = UnifiedLog.load(
        d,
        small_config(**{"segment.bytes": 1 << 20}),
        time=clock,
        had_clean_shutdown=True,
        recovery_point=16,
    )
    for info, seq in zip(infos[-5:], range(6, 16, 2), strict=True):
        dup = _send(log, seq)
        assert dup.duplicate and dup.first_offset == info.first_offset
    log.close()


def test_corrupt_snapshot_ignored_and_state_rebuilt(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = UnifiedLog.load(d, small_config(), time=clock)
    infos = [_send(log, 2 * s, n=2) for s in range(30)]
    log.close()
    latest = max(d.glob("*.snapshot"))
    data = bytearray(latest.read_bytes())
    data[-1] ^= 0xFF
    latest.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(latest)
    log = UnifiedLog.load(d, small_config(), time=clock, had_clean_shutdown=True, recovery_point=60)
    dup = _send(log, 58)
    assert dup.duplicate and dup.first_offset == infos[29].first_offset
    assert read_snapshot(max(d.glob("*.snapshot")))  # rewritten valid
    log.close()


def test_snapshot_binary_layout(tmp_path: Path) -> None:
    entry = ProducerStateEntry(7, producer_epoch=3, coordinator_epoch=9, last_timestamp=1234)
    entry.add_batch(3, last_seq=41, last_offset=100, offset_delta=4, timestamp=1234)
    txn = ProducerStateEntry(
        8, producer_epoch=1, coordinator_epoch=2, last_timestamp=55, current_txn_first_offset=90
    )
    path = tmp_path / "00000000000000000101.snapshot"
    write_snapshot(path, [entry, txn])
    data = path.read_bytes()
    assert SNAPSHOT_ENTRY_SIZE == 46
    assert len(data) == 2 + 4 + 4 + 2 * 46
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1
    assert crc == crc32c(data[6:])
    assert struct.unpack_from(">i", data, 6)[0] == 2
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (7, 3, 41, 100, 4, 1234, 9, -1)
    assert struct.unpack_from(">qhiqiqiq", data, 56) == (8, 1, -1, -1, 0, 55, 2, 90)
    back = read_snapshot(path)
    assert back[0].producer_id == 7 and back[0].last_seq == 41 and back[0].last_data_offset == 100
    assert back[0].first_seq == 37
    assert back[1].current_txn_first_offset == 90 and back[1].is_empty()
    # wrong version or truncated -> corrupt
    bad = bytearray(data)
    bad[1] = 2
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)
    path.write_bytes(data[:-3])
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)


def test_snapshots_taken_at_roll_and_kept_tidy(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = UnifiedLog.load(d, small_config(), time=clock)
    for s in range(40):
        _send(log, 2 * s)
    bases = [s.base_offset for s in log.log_segments()]
    snaps = sorted(lfu.offset_from_file(p) for p in d.glob("*.snapshot"))
    assert snaps == bases[1:]
    # truncation below a snapshot removes it and rebuilds state
    target = bases[1] + 1
    log.truncate_to(target)
    assert max(lfu.offset_from_file(p) for p in d.glob("*.snapshot")) <= target
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and entry.last_data_offset < target
    log.close()


def test_log_start_offset_increment(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = UnifiedLog.load(d, small_config(), time=clock)
    for s in range(10):
        _send(log, 2 * s)
    with pytest.raises(KafkaError) as e:
        log.maybe_increment_log_start_offset(5, "test")  # beyond HW (0)
    assert e.value.code == ErrorCode.offset_out_of_range
    log.update_high_watermark(log.log_end_offset)
    assert log.maybe_increment_log_start_offset(5, "delete records")
    assert log.log_start_offset == 5
    with pytest.raises(KafkaError):
        log.read(4, 100)
    assert read_values(log, 5)[0][0] == 5
    assert log.leader_epoch_cache.earliest_entry is not None
    assert log.leader_epoch_cache.earliest_entry.start_offset == 5
    log.close()
