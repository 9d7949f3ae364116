"""LogLoader recovery: torn tails, lost/corrupt indexes, leftovers, snapshots, start-offset wipe."""

from __future__ import annotations

import os
from pathlib import Path

from kopfka.storage import log_file_utils as lfu
from kopfka.storage.unified_log import UnifiedLog

from .helpers import BASE_TS, Clock, batch, log_dir, read_values, small_config


def _fill(d: Path, n: int, clock: Clock, size: int = 300, **kw: object) -> UnifiedLog:
    log = UnifiedLog.load(d, small_config(), time=clock)
    for i in range(n):
        log.append_as_leader(batch([bytes([i % 256]) * size], ts=BASE_TS + i), leader_epoch=1)
    return log


def _crash(log: UnifiedLog) -> None:
    """Simulate a crash: drop handles without trimming indexes or writing snapshots."""
    log.close_handlers()


def _reload(d: Path, clock: Clock, clean: bool = False, **kw: int) -> UnifiedLog:
    return UnifiedLog.load(d, small_config(), time=clock, had_clean_shutdown=clean, **kw)


def test_torn_tail_truncated_mid_batch(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 20, clock)
    active = log.active_segment
    last_base, size = active.base_offset, active.size
    _crash(log)
    os.truncate(lfu.log_file(d, last_base), size - 17)  # cut into the last batch
    log = _reload(d, clock)
    assert log.log_end_offset == 19
    assert [o for o, _ in read_values(log, 0)] == list(range(19))
    info = log.append_as_leader(batch([b"after"]), leader_epoch=1)
    assert info.first_offset == 19
    assert read_values(log, 19) == [(19, b"after")]
    log.close()


def test_garbage_appended_to_active_log(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 20, clock)
    last_base, size = log.active_segment.base_offset, log.active_segment.size
    _crash(log)
    with open(lfu.log_file(d, last_base), "ab") as f:
        f.write(os.urandom(100))
    log = _reload(d, clock)
    assert log.log_end_offset == 20
    assert log.active_segment.size == size
    assert log.append_as_leader(batch([b"x"]), leader_epoch=1).first_offset == 20
    log.close()


def test_corrupt_byte_in_middle_segment_truncates_and_drops_later_segments(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 40, clock)
    segs = log.log_segments()
    assert len(segs) >= 3
    middle = segs[1]
    middle_base = middle.base_offset
    _crash(log)
    with open(lfu.log_file(d, middle_base), "r+b") as f:
        f.seek(61 + 5)  # inside the first batch's records: CRC mismatch
        b = f.read(1)
        f.seek(61 + 5)
        f.write(bytes([b[0] ^ 0xFF]))
    log = _reload(d, clock)
    assert log.log_end_offset == middle_base
    assert log.num_segments == 2
    assert not list(d.glob("*.deleted"))
    assert [o for o, _ in read_values(log, 0)] == list(range(middle_base))
    log.close()


def test_recovery_point_limits_recovery(tmp_path: Path) -> None:
    """Segments below the recovery point are trusted (not re-validated) on unclean restart."""
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 40, clock)
    segs = log.log_segments()
    first_end = segs[1].base_offset
    _crash(log)
    # corrupt a record byte (not the header) in the first segment; recovery point beyond it
    with open(lfu.log_file(d, 0), "r+b") as f:
        f.seek(70)
        f.write(b"\xee")
    log = _reload(d, clock, recovery_point=first_end)
    assert log.log_end_offset == 40
    log.close()


def test_deleted_indexes_are_rebuilt(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 40, clock, size=100)
    leo = log.log_end_offset
    seg0 = log.log_segments()[0]
    entries = [seg0.offset_index().entry(i) for i in range(seg0.offset_index().entries)]
    tentries = [seg0.time_index().entry(i) for i in range(seg0.time_index().entries)]
    assert entries
    log.close()
    lfu.offset_index_file(d, 0).unlink()
    lfu.time_index_file(d, 0).unlink()
    log = _reload(d, clock, clean=True, recovery_point=leo)
    seg0 = log.log_segments()[0]
    assert [seg0.offset_index().entry(i) for i in range(seg0.offset_index().entries)] == entries
    assert [seg0.time_index().entry(i) for i in range(seg0.time_index().entries)] == tentries
    assert log.fetch_offset_by_timestamp(BASE_TS + 7) is not None
    assert log.fetch_offset_by_timestamp(BASE_TS + 7).offset == 7  # type: ignore[union-attr]
    assert [o for o, _ in read_values(log, 0)] == list(range(40))
    log.close()


def test_corrupt_indexes_are_rebuilt(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 40, clock, size=100)
    leo = log.log_end_offset
    log.close()
    # odd length offset index and a time index with decreasing timestamps
    with open(lfu.offset_index_file(d, 0), "ab") as f:
        f.write(b"\x01\x02\x03")
    tpath = lfu.time_index_file(d, 0)
    data = bytearray(tpath.read_bytes())
    data[-12:-4] = (0).to_bytes(8, "big")
    tpath.write_bytes(bytes(data))
    log = _reload(d, clock, clean=True, recovery_point=leo)
    seg0 = log.log_segments()[0]
    assert seg0.offset_index().size_in_bytes() % 8 == 0
    for o in range(40):
        info = log.read(o, 1, isolation="log_end")
        assert info.records is not None
    assert log.fetch_offset_by_timestamp(BASE_TS + 3).offset == 3  # type: ignore[union-attr]
    log.close()


def test_orphan_index_and_leftover_files(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 10, clock)
    leo = log.log_end_offset
    log.close()
    (d / (lfu.filename_prefix_from_offset(999) + ".index")).write_bytes(b"\0" * 8)
    (d / (lfu.filename_prefix_from_offset(3) + ".log.deleted")).write_bytes(b"junk")
    (d / (lfu.filename_prefix_from_offset(5) + ".log.cleaned")).write_bytes(b"junk")
    log = _reload(d, clock, clean=True, recovery_point=leo)
    names = os.listdir(d)
    assert not [n for n in names if n.endswith((".deleted", ".cleaned"))]
    assert lfu.filename_prefix_from_offset(999) + ".index" not in names
    assert log.log_end_offset == leo
    log.close()


def test_swap_file_replaces_superseded_segments(tmp_path: Path) -> None:
    """A .swap left by an interrupted compaction is renamed live; segments it covers are deleted."""
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 40, clock)
    segs = log.log_segments()
    assert len(segs) >= 3
    s0, s1 = segs[0].base_offset, segs[1].base_offset
    leo = log.log_end_offset
    log.close()
    # pretend segments 0 and 1 were cleaned into one swap segment starting at s0
    combined = lfu.log_file(d, s0).read_bytes() + lfu.log_file(d, s1).read_bytes()
    lfu.log_file(d, s0, lfu.SWAP_FILE_SUFFIX).write_bytes(combined)
    log = _reload(d, clock, clean=False, recovery_point=0)
    names = os.listdir(d)
    assert not [n for n in names if n.endswith(".swap")]
    assert lfu.log_file(d, s1).name not in names
    assert log.log_segments()[0].base_offset == s0
    assert log.log_segments()[1].base_offset > s1
    assert log.log_end_offset == leo
    assert [o for o, _ in read_values(log, 0)] == list(range(40))
    log.close()


def test_swap_after_min_cleaned_is_dropped(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 40, clock)
    s1 = log.log_segments()[1].base_offset
    leo = log.log_end_offset
    log.close()
    lfu.log_file(d, s1, lfu.SWAP_FILE_SUFFIX).write_bytes(b"incomplete split")
    lfu.log_file(d, s1 - 1, lfu.CLEANED_FILE_SUFFIX).write_bytes(b"partial")
    log = _reload(d, clock, clean=True, recovery_point=leo)
    assert not [n for n in os.listdir(d) if n.endswith((".swap", ".cleaned"))]
    assert log.log_end_offset == leo
    log.close()


def test_log_start_checkpoint_beyond_end_wipes_log(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 10, clock)
    log.close()
    log = _reload(d, clock, clean=True, log_start_offset=500, recovery_point=10)
    assert log.log_start_offset == log.log_end_offset == 500
    assert [s.base_offset for s in log.log_segments()] == [500]
    assert log.leader_epoch_cache.is_empty()
    assert not list(d.glob("00000000000000000000.*"))
    assert log.append_as_leader(batch([b"x"]), leader_epoch=2).first_offset == 500
    log.close()


def test_unclean_restart_keeps_every_appended_batch(tmp_path: Path) -> None:
    clock, d = Clock(), log_dir(tmp_path)
    log = _fill(d, 30, clock)
    _crash(log)
    log = _reload(d, clock)
    assert log.log_end_offset == 30
    assert [o for o, _ in read_values(log, 0)] == list(range(30))
    assert log.recovery_point <= 30
    log.close()


def test_clean_shutdown_active_segment_grows_again(tmp_path: Path) -> None:
    """After a clean restart the trimmed active indexes are re-grown so appends keep indexing."""
    clock, d = Clock(), log_dir(tmp_path)
    log = UnifiedLog.load(d, small_config(**{"segment.bytes": 1 << 20}), time=clock)
    for i in range(20):
        log.append_as_leader(batch([b"a" * 300], ts=BASE_TS + i), leader_epoch=0)
    log.close()
    log = UnifiedLog.load(
        d,
        small_config(**{"segment.bytes": 1 << 20}),
        time=clock,
        had_clean_shutdown=True,
        recovery_point=20,
    )
    before = log.active_segment.offset_index().entries
    for i in range(20):
        log.append_as_leader(batch([b"a" * 300], ts=BASE_TS + 20 + i), leader_epoch=0)
    assert log.active_segment.offset_index().entries > before
    assert log.num_segments == 1
    assert log.fetch_offset_by_timestamp(BASE_TS + 33).offset == 33  # type: ignore[union-attr]
    log.close()
