"""In-process tests of compaction: the offset map, two-pass cleaning, delete horizons,
multi-pass cleaning with a small dedupe buffer, the cleaning state machine, segment grouping,
and recovery after a crash at every step of the `.cleaned` -> `.swap` -> live swap."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from kopfka.log import cleaner as cleaner_mod
from kopfka.log.cleaner import SkimpyOffsetMap, group_segments_by_size
from kopfka.log.log_cleaner import CleanerConfig, LogCleaner
from kopfka.log.log_cleaner_manager import ABORTED, IN_PROGRESS, LogCleanerManager, Paused
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import iter_batches
from kopfka.storage import local_log as local_log_mod
from kopfka.storage.unified_log import UnifiedLog

from tests.storage.helpers import BASE_TS, Clock, small_config

TP = ("t", 0)


class Crash(BaseException):
    """Stands in for os._exit at a crash point: unwinds without any cleanup."""


def compact_config(**kw: object) -> object:
    return small_config(**{"cleanup.policy": ["compact"], "min.cleanable.dirty.ratio": 0.0, **kw})


def open_log(d: Path, clock: Clock, clean: bool = True, **kw: object) -> UnifiedLog:
    return UnifiedLog.load(d / "t-0", compact_config(**kw), time=clock, had_clean_shutdown=clean)  # type: ignore[arg-type]


def append(ulog: UnifiedLog, records: list[tuple[bytes | None, bytes | None]], ts: int) -> None:
    recs = [Record(i, ts, k, v) for i, (k, v) in enumerate(records)]
    ulog.append_as_leader(encode_batch(recs), leader_epoch=0)
    ulog.update_high_watermark(ulog.log_end_offset)


def all_records(ulog: UnifiedLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for seg in ulog.log_segments():
        data = seg.log.pread(0, seg.size)
        for h in iter_batches(data):
            out.extend((r.offset, r.key, r.value) for r in decode_records(data, h))
    return out


def fill(ulog: UnifiedLog, keys: int, versions: int, seed: int, ts: int) -> dict[bytes, bytes | None]:
    rnd = random.Random(seed)
    latest: dict[bytes, bytes | None] = {}
    for v in range(versions):
        for chunk in range(0, keys, 10):
            recs: list[tuple[bytes | None, bytes | None]] = []
            for k in range(chunk, min(chunk + 10, keys)):
                key = b"k%d" % k
                value = None if (v == versions - 1 and k % 5 == 0) else b"v%d-%d-" % (v, k) + rnd.randbytes(20)
                recs.append((key, value))
                latest[key] = value
            append(ulog, recs, ts)
    # unique keys so the dirty data leaves the active segment
    for i in range(40):
        append(ulog, [(b"tail%d" % i, b"x" * 100)], ts)
        latest[b"tail%d" % i] = b"x" * 100
    return latest


def make_cleaner(ulog: UnifiedLog, clock: Clock, dedupe: int = 1 << 20) -> LogCleaner:
    lc = LogCleaner(
        CleanerConfig({"log.cleaner.dedupe.buffer.size": dedupe, "log.cleaner.threads": 1}),
        [ulog.dir.parent],
        lambda: {TP: ulog},
        time_ms=clock,
    )
    lc.startup(start_tasks=False)
    return lc


def clean_once(lc: LogCleaner) -> bool:
    return asyncio.run(lc.try_clean_filthiest_log(0))


def run_cleaner(ulog: UnifiedLog, clock: Clock, dedupe: int = 1 << 20) -> LogCleaner:
    lc = make_cleaner(ulog, clock, dedupe)
    try:
        clean_once(lc)
    finally:
        asyncio.run(lc.shutdown())
    return lc


def latest_map(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    return {k: v for _, k, v in records}


def test_offset_map_put_get_and_bound() -> None:
    m = SkimpyOffsetMap(24 * 100)
    assert m.slots == 100
    for i in range(100):
        m.put(b"key%d" % i, i)
    m.put(b"key7", 1000)  # overwrite needs no new slot
    assert m.size == 100 and m.get(b"key7") == 1000 and m.get(b"key99") == 99 and m.latest_offset == 1000
    assert m.get(b"absent") == -1
    with pytest.raises(OverflowError):
        m.put(b"one-too-many", 5)
    m.clear()
    assert m.size == 0 and m.get(b"key1") == -1


def test_compaction_keeps_latest_value_per_key_and_stamps_delete_horizon(tmp_path: Path) -> None:
    clock = Clock()
    ulog = open_log(tmp_path, clock, **{"delete.retention.ms": 10_000})
    latest = fill(ulog, keys=50, versions=5, seed=1, ts=BASE_TS)
    before = all_records(ulog)
    assert len(before) > len(latest)
    lc = run_cleaner(ulog, clock)
    after = all_records(ulog)
    active_base = ulog.active_segment.base_offset
    cleaned = [r for r in after if r[0] < active_base]
    keys = [k for _, k, _ in cleaned]
    assert len(keys) == len(set(keys)), "a key survives twice in the cleaned section"
    assert latest_map(after) == latest
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    # tombstones are retained, in batches stamped with the delete horizon
    stamped = []
    for seg in ulog.log_segments():
        data = seg.log.pread(0, seg.size)
        for h in iter_batches(data):
            if any(r.value is None for r in decode_records(data, h)):
                stamped.append(h)
    assert stamped and all(h.has_delete_horizon and h.base_timestamp == BASE_TS + 10_000 for h in stamped)
    # record timestamps survive the re-basing of the batch on the horizon
    for seg in ulog.log_segments():
        data = seg.log.pread(0, seg.size)
        assert all(r.timestamp == BASE_TS for h in iter_batches(data) for r in decode_records(data, h))
    assert lc.manager.all_cleaner_checkpoints()[TP] == active_base
    # nothing dirty: a clean happens only once the horizon has passed, and drops the tombstones
    lc = make_cleaner(ulog, clock)
    lc.manager.note_delete_horizon(TP, BASE_TS + 10_000)
    clock.now = BASE_TS + 9_999
    assert not clean_once(lc)
    assert None in latest_map(all_records(ulog)).values()
    clock.now = BASE_TS + 10_001
    assert clean_once(lc)
    live = {k: v for k, v in latest.items() if v is not None}
    assert latest_map(all_records(ulog)) == live
    assert lc.manager.delete_horizons.get(TP) is None
    asyncio.run(lc.shutdown())
    ulog.close()
    reopened = open_log(tmp_path, clock)
    assert latest_map(all_records(reopened)) == live


def test_small_dedupe_buffer_cleans_in_several_passes(tmp_path: Path) -> None:
    clock = Clock()
    ulog = open_log(tmp_path, clock)
    latest = fill(ulog, keys=200, versions=3, seed=2, ts=BASE_TS)
    ends = []
    for _ in range(12):
        lc = run_cleaner(ulog, clock, dedupe=24 * 64)  # 57 keys per pass
        ends.append(lc.manager.all_cleaner_checkpoints().get(TP, 0))
        if ends[-1] == ulog.active_segment.base_offset:
            break
    assert len(ends) > 2 and ends == sorted(ends), ends
    assert ends[-1] == ulog.active_segment.base_offset
    assert latest_map(all_records(ulog)) == latest
    cleaned = [k for o, k, _ in all_records(ulog) if o < ends[-1]]
    assert len(cleaned) == len(set(cleaned))


def test_group_segments_by_size(tmp_path: Path) -> None:
    clock = Clock()
    ulog = open_log(tmp_path, clock)
    for i in range(60):
        append(ulog, [(b"k%d" % i, b"v" * 200)], BASE_TS)
    segs = [s for s in ulog.log_segments() if s is not ulog.active_segment]
    groups = group_segments_by_size(segs, 4096, 4096, ulog.active_segment.base_offset)
    assert [s for g in groups for s in g] == segs
    assert all(sum(s.size for s in g) <= 4096 for g in groups)
    big = group_segments_by_size(segs, 1 << 30, 1 << 30, ulog.active_segment.base_offset)
    assert len(big) == 1


def test_cleaning_state_machine(tmp_path: Path) -> None:
    clock = Clock()
    ulog = open_log(tmp_path, clock)
    fill(ulog, keys=20, versions=3, seed=3, ts=BASE_TS)
    m = LogCleanerManager([tmp_path])
    ltc = m.grab_filthiest_compacted_log({TP: ulog}, clock.now)
    assert ltc is not None and m.state(TP) is IN_PROGRESS and ltc.cleanable_ratio == 1.0
    assert m.grab_filthiest_compacted_log({TP: ulog}, clock.now) is None  # not twice
    m.abort_and_pause_cleaning(TP)
    assert m.state(TP) is ABORTED
    with pytest.raises(cleaner_mod.LogCleaningAbortedError):
        m.check_cleaning_aborted(TP)
    m.done_cleaning(TP)
    assert m.state(TP) == Paused(1)
    m.abort_and_pause_cleaning(TP)
    assert m.state(TP) == Paused(2)
    assert m.grab_filthiest_compacted_log({TP: ulog}, clock.now) is None  # paused
    m.resume_cleaning([TP])
    m.resume_cleaning([TP])
    assert m.state(TP) is None
    assert m.grab_filthiest_compacted_log({TP: ulog}, clock.now) is not None
    m.done_cleaning(TP)
    m.mark_uncleanable(tmp_path, TP)
    assert m.grab_filthiest_compacted_log({TP: ulog}, clock.now) is None


def test_min_compaction_lag_and_ratio_bound_the_cleanable_section(tmp_path: Path) -> None:
    clock = Clock(BASE_TS + 1000)
    ulog = open_log(tmp_path, clock, **{"min.compaction.lag.ms": 5000})
    fill(ulog, keys=20, versions=3, seed=4, ts=BASE_TS)
    m = LogCleanerManager([tmp_path])
    assert m.grab_filthiest_compacted_log({TP: ulog}, clock.now) is None  # everything too young
    clock.now = BASE_TS + 6000
    ltc = m.grab_filthiest_compacted_log({TP: ulog}, clock.now)
    assert ltc is not None and ltc.first_uncleanable_offset == ulog.active_segment.base_offset


SWAP_POINTS = [
    "cleaner-after-cleaned-written",
    "cleaner-after-swap-rename",
    "cleaner-after-first-old-deleted",
    "cleaner-after-old-deleted",
    "cleaner-after-swap-live",
]


@pytest.mark.parametrize("point", SWAP_POINTS)
def test_crash_at_each_swap_step_recovers(tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    ulog = open_log(tmp_path, clock, **{"segment.bytes": 16384})
    latest = fill(ulog, keys=60, versions=6, seed=5, ts=BASE_TS)
    ulog.flush()
    before = all_records(ulog)

    def crash(name: str) -> None:
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(local_log_mod, "crash_point", crash)
    monkeypatch.setattr(cleaner_mod, "crash_point", crash)
    with pytest.raises(Crash):
        run_cleaner(ulog, clock)
    files = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    if point == "cleaner-after-cleaned-written":
        assert any(f.endswith(".cleaned") for f in files), files
    elif point in ("cleaner-after-swap-rename", "cleaner-after-first-old-deleted", "cleaner-after-old-deleted"):
        assert any(f.endswith(".swap") for f in files), files
    # the process dies here: nothing is closed or flushed; reload as after an unclean shutdown
    ulog.close_handlers()
    reopened = open_log(tmp_path, clock, clean=False, **{"segment.bytes": 16384})
    names = [p.name for p in (tmp_path / "t-0").iterdir()]
    assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted"))], names
    recovered = all_records(reopened)
    assert latest_map(recovered) == latest
    offsets = [o for o, _, _ in recovered]
    assert offsets == sorted(set(offsets))
    assert set(recovered) <= set(before)  # nothing invented
    assert reopened.log_end_offset == ulog.log_end_offset
    # and a later clean finishes the job
    monkeypatch.setattr(local_log_mod, "crash_point", lambda name: None)
    monkeypatch.setattr(cleaner_mod, "crash_point", lambda name: None)
    run_cleaner(reopened, clock)
    assert latest_map(all_records(reopened)) == latest


def test_follower_truncation_aborts_a_clean_in_progress(tmp_path: Path) -> None:
    """A replica truncated while its log is being cleaned (an unclean election, a diverging
    leader): Kafka's LogManager.truncateTo aborts and pauses the clean first, so the cleaned
    copy of the old records is never swapped back in, and pulls the cleaner checkpoint back."""
    import threading

    from kopfka.log.log_manager import LogManager

    clock = Clock()
    ulog = open_log(tmp_path, clock)
    fill(ulog, keys=30, versions=4, seed=11, ts=BASE_TS)
    lc = make_cleaner(ulog, clock)
    lm = LogManager([tmp_path], lambda _t: compact_config())  # type: ignore[arg-type,return-value]
    lm.current_logs[TP] = ulog
    lm.cleaner = lc
    recopied, go_on = threading.Event(), threading.Event()
    groups: list[list[object]] = []
    real = lc.cleaners[0].clean_segments

    def gated(log: UnifiedLog, group: list[object], *args: object) -> object:
        result = real(log, group, *args)  # type: ignore[arg-type]
        groups.append(group)
        recopied.set()
        go_on.wait(10)  # the cleaned copy is ready; the swap waits for the truncation below
        return result

    lc.cleaners[0].clean_segments = gated  # type: ignore[method-assign]

    async def race() -> int:
        task = asyncio.create_task(lc.try_clean_filthiest_log(0))
        while not recopied.is_set():
            await asyncio.sleep(0.005)
        last = groups[0][-1]  # truncate inside the group's last segment, at its second batch: the group stays
        data = last.log.pread(0, last.size)  # type: ignore[attr-defined]
        target = [h.base_offset for h in iter_batches(data)][1]
        lm.truncate_to(TP, target)
        go_on.set()
        await task
        return target

    try:
        target = asyncio.run(race())
    finally:
        asyncio.run(lc.shutdown())
    assert ulog.log_end_offset == target
    assert max(off for off, _, _ in all_records(ulog)) < target, "truncated records came back with the clean"
    assert lc.manager.state(TP) is None  # the pause was resumed once the clean unwound
    assert lc.manager.all_cleaner_checkpoints().get(TP, 0) <= ulog.active_segment.base_offset
