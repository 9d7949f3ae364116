"""The LogCleaner takes new log.cleaner.* settings while it runs (Kafka's LogCleaner.reconfigure):
the tasks stop cleanly — a clean in progress is aborted, leaves nothing behind and is retried by
the new tasks — and start again with the new threads, buffers, backoff and I/O rate. In-process,
on real log files; the broker-level path (kafka-configs against a running kopfka) is in
tests/integration/test_dynamic_broker_config.py."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from kopfka.log.log_cleaner import CleanerConfig, LogCleaner
from kopfka.log.log_cleaner_manager import IN_PROGRESS

from tests.log.test_cleaner import TP, all_records, append, fill, latest_map, open_log
from tests.storage.helpers import BASE_TS, Clock

UNLIMITED = 1.7976931348623157e308


def cleaner_config(**kw: object) -> CleanerConfig:
    values = {
        "log.cleaner.threads": 1,
        "log.cleaner.dedupe.buffer.size": 1 << 20,
        "log.cleaner.io.buffer.size": 64 * 1024,
        "log.cleaner.io.max.bytes.per.second": UNLIMITED,
        "log.cleaner.backoff.ms": 50,
    }
    values.update({k.replace("_", "."): v for k, v in kw.items()})
    return CleanerConfig(values)


async def wait_until(cond: object, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not cond():  # type: ignore[operator]
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - start


def test_reconfigure_mid_clean_aborts_and_retries_with_the_new_settings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    ulog = open_log(tmp_path, clock)
    # big enough that the clean outlasts the throttle's first 100 ms window (it lets that through)
    latest = fill(ulog, keys=2000, versions=5, seed=7, ts=BASE_TS)
    dirty = sum(s.size for s in ulog.log_segments())
    slow = 20_000.0  # bytes/s: the map pass alone would take dirty/slow seconds
    assert dirty / slow > 15

    async def scenario() -> None:
        lc = LogCleaner(
            cleaner_config(log_cleaner_io_max_bytes_per_second=slow), [tmp_path], lambda: {TP: ulog}, time_ms=clock
        )
        lc.startup()
        try:
            await wait_until(lambda: lc.manager.state(TP) is IN_PROGRESS, 5, "the first clean to start")
            await wait_until(lambda: lc.throttler.sleeps > 0, 5, "the throttle to hold the clean back")
            assert lc.generation == 1 and len(lc.cleaners) == 1
            new = cleaner_config(
                log_cleaner_threads=2,
                log_cleaner_dedupe_buffer_size=2 << 20,
                log_cleaner_io_buffer_size=256 * 1024,
                log_cleaner_io_buffer_load_factor=0.75,
            )
            restarted = time.monotonic()
            await lc.reconfigure(new)
            assert time.monotonic() - restarted < 5, "stopping the throttled clean took too long"
            # the new generation: two tasks, each with half the buffers, the new rate and load factor
            assert lc.generation == 2 and len(lc.cleaners) == 2 and len(lc._tasks) == 2
            assert [c.map_memory for c in lc.cleaners] == [1 << 20, 1 << 20]
            assert [c.io_buffer_size for c in lc.cleaners] == [64 * 1024, 64 * 1024]
            assert [c.load_factor for c in lc.cleaners] == [0.75, 0.75]
            assert lc.throttler.rate == UNLIMITED
            # the aborted clean is retried and completes at the new (unbounded) rate
            took = await wait_until(
                lambda: lc.manager.all_cleaner_checkpoints().get(TP) == ulog.active_segment.base_offset,
                10,
                "the retried clean to finish",
            )
            assert took < dirty / slow / 2
            assert lc.dead_thread_count == 0
        finally:
            await lc.shutdown()

    with caplog.at_level(logging.INFO, logger="kopfka.log"):
        asyncio.run(scenario())
    assert "stopped: the cleaner is restarting" in caplog.text
    assert "Started 2 log cleaner task(s)" in caplog.text
    assert not list((tmp_path / "t-0").glob("*.cleaned")), "the aborted clean left a .cleaned file"
    records = all_records(ulog)
    assert latest_map(records) == latest
    cleaned_keys = [k for o, k, _ in records if o < ulog.active_segment.base_offset]
    assert len(cleaned_keys) == len(set(cleaned_keys))


def test_a_shorter_backoff_wakes_an_idle_cleaner(tmp_path: Path) -> None:
    """log.cleaner.backoff.ms: an idle task sleeping out a long backoff is restarted with the
    new one and finds the dirty log at once (before, it slept the old backoff out)."""
    clock = Clock()
    ulog = open_log(tmp_path, clock)

    async def scenario() -> None:
        lc = LogCleaner(cleaner_config(log_cleaner_backoff_ms=600_000), [tmp_path], lambda: {TP: ulog}, time_ms=clock)
        lc.startup()
        try:
            await asyncio.sleep(0.2)  # the task found nothing and sleeps its 10 minutes
            fill(ulog, keys=50, versions=3, seed=3, ts=BASE_TS)
            await asyncio.sleep(0.3)
            assert TP not in lc.manager.all_cleaner_checkpoints(), "cleaned while sleeping its backoff"
            await lc.reconfigure(cleaner_config(log_cleaner_backoff_ms=100))
            await wait_until(lambda: TP in lc.manager.all_cleaner_checkpoints(), 5, "a clean after the restart")
            assert lc.config.backoff_ms == 100
        finally:
            await lc.shutdown()

    asyncio.run(scenario())


def test_a_lower_io_rate_applies_to_the_cleaner(tmp_path: Path) -> None:
    """log.cleaner.io.max.bytes.per.second: the shared throttle holds the clean back at the new
    rate (it sleeps, and the clean is still running well past its unthrottled time)."""
    clock = Clock()
    ulog = open_log(tmp_path, clock)
    for i in range(3000):  # ~0.7 MB of distinct keys: ~0.3 s to clean unthrottled, ~20 s at 100 kB/s
        append(ulog, [(b"key%d" % i, b"v" * 200)], BASE_TS)

    async def scenario() -> None:
        lc = LogCleaner(cleaner_config(), [tmp_path], lambda: {TP: ulog}, time_ms=clock)
        lc.startup(start_tasks=False)
        try:
            await lc.reconfigure(cleaner_config(log_cleaner_io_max_bytes_per_second=100_000.0))
            assert lc.throttler.rate == 100_000.0
            await wait_until(lambda: lc.manager.state(TP) is IN_PROGRESS, 5, "the clean to start")
            await asyncio.sleep(2)
            assert lc.throttler.sleeps > 0, "the cleaner was not held back"
            assert TP not in lc.manager.all_cleaner_checkpoints(), "finished at an unbounded rate"
            await lc.reconfigure(cleaner_config())  # lifted: the clean is retried and finishes
            await wait_until(lambda: TP in lc.manager.all_cleaner_checkpoints(), 10, "the clean after the lift")
        finally:
            await lc.shutdown()

    asyncio.run(scenario())


def test_thread_count_changes_are_bounded_as_in_kafka() -> None:
    check = LogCleaner.validate_reconfiguration
    assert check(1, cleaner_config(log_cleaner_threads=2)) is None
    assert check(1, cleaner_config(log_cleaner_threads=3)) == (
        "Log cleaner threads cannot be increased to more than double the current value 1"
    )
    assert check(4, cleaner_config(log_cleaner_threads=1)) == (
        "Log cleaner threads cannot be reduced to less than half the current value 4"
    )
    assert check(2, cleaner_config(log_cleaner_threads=0)) == "Log cleaner threads should be at least 1"
