"""LogCleaner (seed 001): log.cleaner.threads cleaner tasks compacting the filthiest log.

Each task (Kafka's CleanerThread) loops: grab the filthiest compacted log, clean it, run
retention on compacted logs, and sleep log.cleaner.backoff.ms when there was nothing to do.
The scan and recopy passes are blocking I/O and run on the cleaner's own worker thread;
selection, the segment swap and the state transitions run on the event loop, so a swap never
interleaves with an append, a fetch, retention or a deletion of the same log.

The log.cleaner.* keys are dynamic (Kafka's LogCleaner.reconfigure): a change stops the
cleaner tasks cleanly — a clean in progress unwinds at its next check, leaves no `.cleaned`
file behind and is retried — and starts new ones with the new threads, buffers and backoff;
the I/O throttle is shared across restarts and takes its new rate at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopfka.log.cleaned_txn_metadata import CleanedTransactionMetadata
from kopfka.log.cleaner import Cleaner, CleanResult, LogCleaningAbortedError, Throttler, group_segments_by_size
from kopfka.log.log_cleaner_manager import LogCleanerManager, LogToClean, TopicPartition
from kopfka.storage.unified_log import UnifiedLog
from kopfka.timeouts import wait_quietly

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class CleanerConfig:
    """The cleaner's settings from the broker's current config (server.properties and dynamic)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.num_threads = int(values.get("log.cleaner.threads", 1))
        self.dedupe_buffer_size = int(values.get("log.cleaner.dedupe.buffer.size", 134_217_728))
        self.load_factor = float(values.get("log.cleaner.io.buffer.load.factor", 0.9))
        self.io_buffer_size = int(values.get("log.cleaner.io.buffer.size", 524_288))
        self.max_io_bytes_per_second = float(values.get("log.cleaner.io.max.bytes.per.second", 1.7976931348623157e308))
        self.backoff_ms = int(values.get("log.cleaner.backoff.ms", 15000))


class LogCleaner:
    def __init__(
        self,
        config: CleanerConfig,
        log_dirs: list[Path],
        logs: Callable[[], Mapping[TopicPartition, UnifiedLog]],
        on_io_error: Callable[[Path, BaseException], None] | None = None,
        time_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.config = config
        self.logs = logs
        self.manager = LogCleanerManager(log_dirs)
        self.throttler = Throttler(config.max_io_bytes_per_second)
        self.on_io_error = on_io_error
        self.time_ms = time_ms
        self._tasks: list[asyncio.Task[None]] = []
        self._executors: list[ThreadPoolExecutor] = []
        self.cleaners: list[Cleaner] = []
        self.last_stats: dict[TopicPartition, dict[str, float]] = {}
        # the figures of each cleaner task's last completed clean (Kafka's lastStats), read by
        # the metrics collector at scrape time; None until that task has cleaned something
        self.last_clean: list[LastClean | None] = []
        # the running generation of cleaner tasks is told to stop through these: the flag is read
        # by the worker threads between chunks, the event wakes a task sleeping out its backoff
        self._stopping = threading.Event()
        self._wake: asyncio.Event | None = None
        self._reconfiguring: asyncio.Lock | None = None
        self.generation = 0  # how many times the cleaner tasks were (re)started

    def startup(self, start_tasks: bool = True) -> None:
        """Build the cleaners; with start_tasks, start their loops (tests drive them by hand)."""
        n = max(1, self.config.num_threads)
        per_thread = self.config.dedupe_buffer_size // max(n, 1)
        io_per_thread = self.config.io_buffer_size // max(n, 1) // 2
        stopping = self._stopping = threading.Event()
        self._wake = asyncio.Event() if start_tasks else None
        self.generation += 1
        for i in range(n):
            cleaner = Cleaner(
                i,
                per_thread,
                io_per_thread,
                self.config.load_factor,
                self.throttler,
                lambda tp, stopping=stopping: self._check_done(tp, stopping),  # type: ignore[misc]
                self.time_ms,
            )
            self.cleaners.append(cleaner)
            self.last_clean.append(None)
            ex = ThreadPoolExecutor(1, thread_name_prefix=f"kafka-log-cleaner-thread-{i}")
            self._executors.append(ex)
            if start_tasks:
                self._tasks.append(
                    asyncio.get_running_loop().create_task(self._run(i), name=f"kafka-log-cleaner-thread-{i}")
                )
        log.info(
            "Started %d log cleaner task(s) (dedupe buffer %d bytes, I/O buffer %d bytes per task, "
            "load factor %s, backoff %d ms, I/O at most %s bytes/s)",
            n,
            per_thread,
            io_per_thread,
            self.config.load_factor,
            self.config.backoff_ms,
            "unbounded" if self.config.max_io_bytes_per_second >= 1e300 else f"{self.config.max_io_bytes_per_second:g}",
        )

    def _check_done(self, tp: str, stopping: threading.Event) -> None:
        """Between chunks of a clean (worker thread): unwind when aborted or when this generation
        of cleaner tasks is stopping (Kafka's checkDone: isRunning, then checkCleaningAborted)."""
        if stopping.is_set():
            raise LogCleaningAbortedError(f"cleaning of {tp} stopped: the cleaner is restarting")
        self.manager.check_cleaning_aborted(_tp(tp))

    # -- dynamic reconfiguration (log.cleaner.* keys) -------------------------------------

    @staticmethod
    def validate_reconfiguration(current_threads: int, new: CleanerConfig) -> str | None:
        """Kafka's LogCleaner.validateReconfiguration: the problem, or None."""
        n = new.num_threads
        if n < 1:
            return "Log cleaner threads should be at least 1"
        if n < current_threads // 2:
            return f"Log cleaner threads cannot be reduced to less than half the current value {current_threads}"
        if n > current_threads * 2:
            return f"Log cleaner threads cannot be increased to more than double the current value {current_threads}"
        return None

    def reconfigure(self, config: CleanerConfig) -> asyncio.Task[None]:
        """Kafka's LogCleaner.reconfigure: the throttle takes the new rate at once, then the
        cleaner tasks are stopped cleanly and started again with the new config. Returns the
        restart (consecutive reconfigurations run one after the other)."""
        old, self.config = self.config, config
        if config.max_io_bytes_per_second != old.max_io_bytes_per_second:
            log.info("Updating logCleanerIoMaxBytesPerSecond: %s", config.max_io_bytes_per_second)
            self.throttler.update_rate(config.max_io_bytes_per_second)
        return asyncio.get_running_loop().create_task(self._restart(), name="log-cleaner-reconfigure")

    async def _restart(self) -> None:
        if self._reconfiguring is None:
            self._reconfiguring = asyncio.Lock()
        async with self._reconfiguring:
            if self.manager.shutting_down:
                return
            log.info("Restarting the log cleaner with %d task(s)", max(1, self.config.num_threads))
            await self._stop_cleaners()
            if not self.manager.shutting_down:
                self.startup()

    # -- metrics (kafka.log:type=LogCleaner), computed when scraped ------------------------

    def _done(self) -> list[LastClean]:
        return [c for c in self.last_clean if c is not None]

    @property
    def max_buffer_utilization_percent(self) -> float:
        """How full the fullest offset map was at the end of its last clean."""
        return max((100.0 * c.buffer_utilization for c in self._done()), default=0.0)

    @property
    def cleaner_recopy_percent(self) -> float:
        """Bytes written per byte read by the recopy pass, averaged over the cleaner tasks."""
        done = self._done()
        if not done:
            return 0.0
        return 100.0 * sum(c.bytes_written / max(c.bytes_read, 1) for c in done) / len(done)

    @property
    def max_clean_time_secs(self) -> float:
        return max((c.seconds for c in self._done()), default=0.0)

    @property
    def max_compaction_delay_secs(self) -> float:
        """How far beyond max.compaction.lag.ms the most overdue log was at the last selection."""
        return self.manager.max_compaction_delay_ms / 1000.0

    @property
    def dead_thread_count(self) -> int:
        """Cleaner tasks that ended while the cleaner was still meant to run."""
        if self.manager.shutting_down:
            return 0
        return sum(1 for t in self._tasks if t.done())

    async def shutdown(self) -> None:
        self.manager.shutting_down = True
        if self._reconfiguring is None:
            self._reconfiguring = asyncio.Lock()
        async with self._reconfiguring:  # after a restart in progress, which then starts nothing
            await self._stop_cleaners()

    async def _stop_cleaners(self, timeout: float = 30.0) -> None:
        """Stop this generation's tasks: each ends after the step it is in (a clean unwinds at
        its next check, through the cleaning state machine, so the partition is cleanable
        again), then their worker threads end. A task still running after `timeout` is cancelled."""
        tasks, executors = self._tasks, self._executors
        self._tasks, self._executors = [], []
        self._stopping.set()
        if self._wake is not None:
            self._wake.set()
        self.throttler.interrupt()
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=timeout)
            for t in pending:
                log.warning("log cleaner task %s did not stop within %.0f s: cancelling it", t.get_name(), timeout)
                t.cancel()
            for t in tasks:
                try:
                    await t
                except (asyncio.CancelledError, Exception):
                    pass
        for ex in executors:
            await asyncio.to_thread(ex.shutdown, True)
        self.cleaners = []
        self.last_clean = []

    # -- the loop ------------------------------------------------------------------------

    async def _run(self, i: int) -> None:
        stopping, wake = self._stopping, self._wake
        assert wake is not None
        while not stopping.is_set():
            try:
                cleaned = await self.try_clean_filthiest_log(i)
                if stopping.is_set():
                    return
                await self._delete_old_segments_of_compacted_logs()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner %d: unexpected error", i)
                cleaned = False
            if not cleaned and not stopping.is_set():
                await wait_quietly(wake.wait(), self.config.backoff_ms / 1000)

    async def _delete_old_segments_of_compacted_logs(self) -> None:
        deletable = self.manager.deletable_logs(self.logs())
        try:
            for _tp, ulog in deletable.items():
                try:
                    ulog.delete_old_segments()
                except OSError as e:
                    self._io_error(ulog, e)
        finally:
            self.manager.done_deleting(deletable)

    async def try_clean_filthiest_log(self, i: int = 0) -> bool:
        """Clean the filthiest log if one is eligible; True if something was cleaned."""
        ltc = self.manager.grab_filthiest_compacted_log(self.logs(), self.time_ms())
        if ltc is None:
            return False
        tp = ltc.tp
        try:
            await self._clean(i, ltc)
        except LogCleaningAbortedError as exc:
            log.info("Cleaning of %s-%d aborted (%s)", *tp, exc)
        except OSError as e:
            if self.manager.still_in_progress(tp):
                self._io_error(ltc.log, e)
        except Exception:
            if self.manager.still_in_progress(tp):
                log.exception("Unexpected exception cleaning %s-%d: marking it uncleanable", *tp)
                self.manager.mark_uncleanable(ltc.log.dir.parent, tp)
        finally:
            self.manager.done_cleaning(tp)
        return True

    def _io_error(self, ulog: UnifiedLog, e: BaseException) -> None:
        log.error("I/O error on %s: %s", ulog.topic_partition, e)
        if self.on_io_error is not None:
            self.on_io_error(ulog.dir.parent, e)

    async def _in_thread(self, i: int, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            executor = self._executors[i]
        except IndexError:  # _stop_cleaners took this generation's threads: a restart, not a fault
            raise LogCleaningAbortedError("the cleaner is restarting") from None
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    async def _clean(self, i: int, ltc: LogToClean) -> None:
        """Doclean: map the dirty section, then recopy and swap group by group."""
        cleaner = self.cleaners[i]
        ulog, tp = ltc.log, ltc.tp
        cleaner.stats = type(cleaner.stats)()
        start, upper = ltc.first_dirty_offset, ltc.first_uncleanable_offset
        dirty = ulog.local_log.segments.values(start, upper) if upper > start else []
        aborted = ulog.collect_aborted_transactions(0, upper) if upper > 0 else []
        offset_map, end = await self._in_thread(
            i, cleaner.build_offset_map, ulog.topic_partition, dirty, start, upper, aborted
        )
        delete_retention = int(ulog.config["delete.retention.ms"])
        active = {
            pid: (e.last_data_offset, e.producer_epoch) for pid, e in ulog.producer_state.active_producers().items()
        }
        txn_meta = CleanedTransactionMetadata()
        to_clean = (
            [s for s in ulog.local_log.segments.values(0, end) if s is not ulog.active_segment] if end > 0 else []
        )
        groups = group_segments_by_size(to_clean, ulog.config.segment_bytes, ulog.config.segment_index_bytes, end)
        min_horizon = -1
        for group in groups:
            nxt = ulog.local_log.segments.higher_segment(group[-1].base_offset)
            upper_bound = nxt.base_offset if nxt is not None else ulog.log_end_offset
            txn_meta.add_aborted_transactions(ulog.collect_aborted_transactions(group[0].base_offset, upper_bound))
            result: CleanResult = await self._in_thread(
                i, cleaner.clean_segments, ulog, group, offset_map, end, delete_retention, txn_meta, active
            )
            cleaned = result.segment
            assert cleaned is not None
            # back on the loop: swap only if still ours and the group is still in the log
            segs = ulog.local_log.segments
            if self._stopping.is_set():
                cleaned.close()
                cleaned.delete_if_exists()
                raise LogCleaningAbortedError(f"cleaning of {ulog.topic_partition} stopped: the cleaner is restarting")
            if not self.manager.still_in_progress(tp) or any(segs.get(s.base_offset) is not s for s in group):
                cleaned.close()
                cleaned.delete_if_exists()
                raise LogCleaningAbortedError(f"{tp}: log changed while cleaning")
            ulog.replace_segments([cleaned], group)
            if result.min_delete_horizon >= 0 and (min_horizon < 0 or result.min_delete_horizon < min_horizon):
                min_horizon = result.min_delete_horizon
            await asyncio.sleep(0)
        self.manager.note_delete_horizon(tp, min_horizon)
        await asyncio.to_thread(self.manager.update_checkpoints, ulog.dir.parent, {tp: end})
        s = cleaner.stats
        self.last_clean[i] = LastClean(s.elapsed(), s.bytes_read, s.bytes_written, offset_map.utilization)
        mb = (s.map_bytes_read + s.bytes_read) / 1048576
        self.last_stats[tp] = {
            "bytes_read": s.bytes_read,
            "bytes_written": s.bytes_written,
            "seconds": s.elapsed(),
            "end_offset": end,
        }
        log.info(
            "Cleaner %d: cleaned log %s (dirty section = [%d, %d)): %.1f MB read, %.1f MB written "
            "in %.2f s (%.1f MB/s), %d of %d messages retained, map %.0f%% full",
            i,
            ulog.topic_partition,
            start,
            end,
            mb,
            s.bytes_written / 1048576,
            s.elapsed(),
            mb / s.elapsed(),
            s.messages_written,
            s.messages_read,
            100 * offset_map.utilization,
        )


@dataclass(frozen=True)
class LastClean:
    """What one cleaner task's last completed clean took (the cleaner metrics derive from it)."""

    seconds: float
    bytes_read: int  # by the recopy pass
    bytes_written: int
    buffer_utilization: float  # offset-map entries / slots, 0..1


def _tp(name: str) -> TopicPartition:
    topic, _, p = name.rpartition("-")
    return topic, int(p)
