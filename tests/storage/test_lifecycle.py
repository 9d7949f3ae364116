"""Flush/recovery point, async segment deletion, FileSlice lifetime, dir rename and delete."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from kopfka.storage import log_file_utils as lfu
from kopfka.storage.unified_log import UnifiedLog

from .helpers import Clock, batch, log_dir, read_values, small_config


class RecordingScheduler:
    def __init__(self) -> None:
        self.tasks: list[tuple[str, int, Callable[[], None]]] = []

    def __call__(self, name: str, delay_ms: int, task: Callable[[], None]) -> None:
        self.tasks.append((name, delay_ms, task))

    def run_all(self) -> None:
        tasks, self.tasks = self.tasks, []
        for _, _, task in tasks:
            task()


def test_flush_messages_advances_recovery_point(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(**{"flush.messages": 3}), time=Clock())
    log.append_as_leader(batch([b"a", b"b"]), leader_epoch=0)
    assert log.recovery_point == 0
    log.append_as_leader(batch([b"c"]), leader_epoch=0)
    assert log.recovery_point == 3
    log.append_as_leader(batch([b"d"]), leader_epoch=0)
    assert log.recovery_point == 3
    log.flush()
    assert log.recovery_point == 4
    log.close()


def test_roll_flush_is_handed_to_scheduler(tmp_path: Path) -> None:
    sched = RecordingScheduler()
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock(), scheduler=sched)
    log.append_as_leader(batch([b"a" * 100]), leader_epoch=0)
    new = log.roll()
    assert new.base_offset == 1 and log.recovery_point == 0
    assert [name for name, _, _ in sched.tasks] == ["flush-log"]
    sched.run_all()
    assert log.recovery_point == 1
    log.close()


def test_deleted_segments_renamed_then_unlinked_and_slices_survive(tmp_path: Path) -> None:
    sched = RecordingScheduler()
    log = UnifiedLog.load(
        log_dir(tmp_path),
        small_config(**{"file.delete.delay.ms": 60_000}),
        time=Clock(),
        scheduler=sched,
    )
    for i in range(30):
        log.append_as_leader(batch([bytes([i]) * 300]), leader_epoch=0)
    sched.run_all()
    log.update_high_watermark(log.log_end_offset)
    first = log.log_segments()[0]
    fslice = log.read(0, 10_000).records
    assert fslice is not None
    expected = fslice.read()
    second_base = log.log_segments()[1].base_offset
    log.maybe_increment_log_start_offset(second_base, "retention")
    log.delete_segments([first])
    names = os.listdir(log.dir)
    assert "00000000000000000000.log.deleted" in names and "00000000000000000000.log" not in names
    assert fslice.read() == expected  # fd still valid after the rename
    assert [(n, d) for n, d, _ in sched.tasks] == [("delete-file", 60_000)]
    sched.run_all()
    assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]
    assert fslice.read() == expected  # ...and after the unlink
    buf = os.pread(fslice.fileno(), fslice.size, fslice.position)
    assert buf == expected
    log.close()
    assert fslice.read() == expected  # ...and after the log is closed
    assert (
        read_values(UnifiedLog.load(log.dir, small_config(), time=Clock()), second_base)[0][0]
        == second_base
    )


def test_rename_dir_and_delete(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    for i in range(20):
        log.append_as_leader(batch([bytes([i]) * 300]), leader_epoch=0)
    new_name = lfu.log_delete_dir_name("orders", 0)
    log.rename_dir(new_name)
    assert log.dir.name == new_name and not (tmp_path / "orders-0").exists()
    log.append_as_leader(batch([b"after rename"]), leader_epoch=0)
    log.roll()
    assert (log.dir / lfu.log_file(log.dir, 21).name).exists()
    assert read_values(log, 20) == [(20, b"after rename")]
    log.delete()
    assert not log.dir.exists()


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = UnifiedLog.load(log_dir(tmp_path), small_config(), time=Clock())
    for i in range(20):
        log.append_as_leader(batch([bytes([i]) * 300]), leader_epoch=1)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1000, 1000, 1000)
    assert [s.base_offset for s in log.log_segments()] == [1000]
    assert sorted(p.name for p in log.dir.glob("*.log")) == ["00000000000000001000.log"]
    assert log.append_as_leader(batch([b"x"]), leader_epoch=2).first_offset == 1000
    log.close()
