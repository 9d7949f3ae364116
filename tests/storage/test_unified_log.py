"""UnifiedLog basics: load, append_as_leader, read, offsets by timestamp, roll, close/reload."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.storage.unified_log import UnifiedLog

from .helpers import BASE_TS, Clock, batch, log_dir, read_values, records_of, small_config


def test_empty_log_layout(tmp_path: Path) -> None:
    tid = uuid.uuid4()
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), topic_id=tid, time=Clock())
    assert (log.topic, log.partition) == ("orders", 0)
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 0
    names = sorted(os.listdir(log.dir))
    assert "00000000000000000000.log" in names
    assert "partition.metadata" in names
    log.close()


def test_append_and_read(tmp_path: Path) -> None:
    clock = Clock()
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=clock)
    info = log.append_as_leader(batch([b"a", b"b", b"c"]), leader_epoch=3)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    assert info.log_append_time_ms == -1 and not info.duplicate
    info = log.append_as_leader(batch([b"d"]), leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    # HW not advanced: nothing visible at high_watermark isolation
    assert log.read(0, 1000).records is None
    log.update_high_watermark(log.log_end_offset)
    assert records_of(log.read(0, 10_000)) == [0, 1, 2, 3]
    assert records_of(log.read(3, 10_000)) == [3]
    # reading inside the first batch returns that whole batch
    assert records_of(log.read(1, 10_000)) == [0, 1, 2, 3]
    assert read_values(log, 0) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert log.latest_epoch == 3
    log.close()


def test_read_bounds(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    log.append_as_leader(batch([b"x" * 100]), leader_epoch=0)
    log.update_high_watermark(1)
    with pytest.raises(KafkaError) as e:
        log.read(5, 100)
    assert e.value.code == ErrorCode.offset_out_of_range
    assert log.read(1, 100).records is None  # at LEO: empty
    # min_one_message returns a whole batch even beyond max_length
    info = log.read(0, 10, min_one_message=True)
    assert info.records is not None and info.records.size > 10
    assert not info.first_entry_incomplete
    info = log.read(0, 10, min_one_message=False)
    assert info.records is not None and info.records.size == 10
    assert info.first_entry_incomplete
    log.close()


def test_roll_by_size_and_read_across_segments(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    for i in range(40):
        log.append_as_leader(batch([bytes([i]) * 200]), leader_epoch=0)
    assert log.num_segments > 1
    log.update_high_watermark(log.log_end_offset)
    got = read_values(log, 0)
    assert [o for o, _ in got] == list(range(40))
    assert all(v == bytes([o]) * 200 for o, v in got)
    for seg in log.log_segments():
        assert seg.size <= 4096
    # every offset maps to its batch
    for o in range(40):
        assert records_of(log.read(o, 1))[0] == o
    snaps = sorted(p.name for p in log.dir.glob("*.snapshot"))
    # a (possibly empty) producer snapshot is taken at every roll, named by the new base offset
    assert snaps == [f"{s.base_offset:020d}.snapshot" for s in log.log_segments()[1:]]
    log.close()


def test_roll_by_time(tmp_path: Path) -> None:
    clock = Clock()
    cfg = small_config(**{"segment.bytes": 1 << 20, "segment.ms": 1000})
    log = UnifiedLog.load(log_dir(tmp_path), cfg, time=clock)
    log.append_as_leader(batch([b"a"], ts=clock.now), leader_epoch=0)
    clock.now += 500
    log.append_as_leader(batch([b"b"], ts=clock.now), leader_epoch=0)
    assert log.num_segments == 1
    clock.now += 1000
    log.append_as_leader(batch([b"c"], ts=clock.now), leader_epoch=0)
    assert log.num_segments == 2
    assert log.active_segment.base_offset == 2
    log.close()


def test_record_list_too_large(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(batch([b"x" * 5000]), leader_epoch=0)
    assert e.value.code == ErrorCode.record_list_too_large
    assert log.log_end_offset == 0
    log.close()


def test_corrupt_input_rejected(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    data = bytearray(batch([b"hello"]))
    data[-1] ^= 0xFF
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(bytes(data), leader_epoch=0)
    assert e.value.code == ErrorCode.corrupt_message
    assert log.log_end_offset == 0
    log.close()


def test_fetch_offset_by_timestamp(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock(BASE_TS + 10_000))
    for i in range(30):
        log.append_as_leader(
            batch([b"v" * 150, b"w"], timestamps=[BASE_TS + 10 * i, BASE_TS + 10 * i + 5]),
            leader_epoch=1,
        )
    assert log.num_segments > 1
    r = log.fetch_offset_by_timestamp(BASE_TS + 10 * 7)
    assert r is not None and (r.offset, r.timestamp) == (14, BASE_TS + 70)
    r = log.fetch_offset_by_timestamp(BASE_TS + 10 * 7 + 1)
    assert r is not None and (r.offset, r.timestamp) == (15, BASE_TS + 75)
    assert log.fetch_offset_by_timestamp(BASE_TS + 10_000) is None
    r = log.fetch_offset_by_timestamp(0)
    assert r is not None and r.offset == 0
    earliest = log.fetch_offset_by_timestamp(-2)
    assert earliest is not None and earliest.offset == 0 and earliest.leader_epoch == 1
    latest = log.fetch_offset_by_timestamp(-1)
    assert latest is not None and latest.offset == 60
    mx = log.fetch_offset_by_timestamp(-3)
    assert mx is not None and (mx.offset, mx.timestamp) == (59, BASE_TS + 295)
    log.close()


def test_clean_reload_keeps_everything(tmp_path: Path) -> None:
    clock = Clock()
    d = log_dir(tmp_path)
    log = UnifiedLog.load(d, small_config(), time=clock)
    for i in range(25):
        log.append_as_leader(batch([bytes([i]) * 300], ts=BASE_TS + i), leader_epoch=2)
    leo, nseg = log.log_end_offset, log.num_segments
    log.flush()
    log.close()
    log = UnifiedLog.load(d, small_config(), time=clock, had_clean_shutdown=True, recovery_point=leo)
    assert (log.log_end_offset, log.num_segments) == (leo, nseg)
    assert log.recovery_point == leo
    assert [o for o, _ in read_values(log, 0)] == list(range(25))
    r = log.fetch_offset_by_timestamp(BASE_TS + 20)
    assert r is not None and r.offset == 20
    log.append_as_leader(batch([b"more"]), leader_epoch=2)
    assert log.log_end_offset == leo + 1
    log.close()


def test_tail_reads_find_the_last_batches_without_a_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read at the tail (followers, consumers) finds its batch among the last appended ones:
    the same answer as the index lookup and header scan, for every offset, also after a
    truncation, without reading batch headers from the file."""
    from kopfka.storage.file_records import FileRecords

    log = UnifiedLog.load(log_dir(tmp_path), small_config(segment_bytes=1 << 20))
    for i in range(60):
        log.append_as_leader(batch([b"v" * (i % 7 * 20)] * (1 + i % 3)), leader_epoch=0)
    seg = log.active_segment

    def scanned(offset: int) -> object:
        return seg.log.search_for_offset_from_position(offset, seg._offset_index.lookup(offset).position)

    def check() -> None:
        for offset in range(log.log_end_offset + 3):
            assert seg.translate_offset(offset) == scanned(offset), offset

    check()
    scans = []
    real = FileRecords.batch_headers
    monkeypatch.setattr(FileRecords, "batch_headers", lambda self, *a: scans.append(a) or real(self, *a))
    leo = log.log_end_offset
    for offset in range(leo - 20, leo):
        assert seg.read(offset, 1 << 20) is not None
    assert scans == []
    log.truncate_to(leo - 10)
    check()
    log.append_as_leader(batch([b"w"] * 4), leader_epoch=0)
    check()
