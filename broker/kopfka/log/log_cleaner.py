"""LogCleaner (seed 001): log.cleaner.threads cleaner tasks compacting the filthiest log.

Each task (Kafka's CleanerThread) loops: grab the filthiest compacted log, clean it, run
retention on compacted logs, and sleep log.cleaner.backoff.ms when there was nothing to do.
The scan and recopy passes are blocking I/O and run on the cleaner's own worker thread;
selection, the segment swap and the state transitions run on the event loop, so a swap never
interleaves with an append, a fetch, retention or a deletion of the same log.
"""

from __future__ import annotations

import asyncio
import logging
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

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class CleanerConfig:
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

    def startup(self, start_tasks: bool = True) -> None:
        """Build the cleaners; with start_tasks, start their loops (tests drive them by hand)."""
        n = max(1, self.config.num_threads)
        per_thread = self.config.dedupe_buffer_size // max(n, 1)
        io_per_thread = self.config.io_buffer_size // max(n, 1) // 2
        for i in range(n):
            cleaner = Cleaner(
                i,
                per_thread,
                io_per_thread,
                self.config.load_factor,
                self.throttler,
                lambda tp: self.manager.check_cleaning_aborted(_tp(tp)),
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
        log.info("Started %d log cleaner task(s)", n)

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
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        for ex in self._executors:
            await asyncio.to_thread(ex.shutdown, True)

    # -- the loop ------------------------------------------------------------------------

    async def _run(self, i: int) -> None:
        while True:
            try:
                cleaned = await self.try_clean_filthiest_log(i)
                await self._delete_old_segments_of_compacted_logs()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner %d: unexpected error", i)
                cleaned = False
            if not cleaned:
                await asyncio.sleep(self.config.backoff_ms / 1000)

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
        except LogCleaningAbortedError:
            log.info("Cleaning of %s-%d aborted", *tp)
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
        return await asyncio.get_running_loop().run_in_executor(self._executors[i], fn, *args)

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
