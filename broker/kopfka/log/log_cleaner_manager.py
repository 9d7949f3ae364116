"""LogCleanerManager (seed 001): which compacted log to clean next, and the per-partition
cleaning state machine that keeps retention, truncation, moves and deletion from racing a
clean.

States: none -> InProgress (grabbed by a cleaner) -> none (done) | Aborted (someone needs the
partition: the cleaner unwinds at its next check) -> Paused(n), n the pauses taken and not yet
resumed (none left: back to none). Pauses nest: Paused(n) needs n resumes. The swap of cleaned
segments only happens while the partition is still InProgress, on the event loop, so once
`abort_and_pause_cleaning` returns nothing the cleaner produced can reach the log.

The per-dir `cleaner-offset-checkpoint` records each compacted partition's first dirty
offset (the cleaner point).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kopfka.log.cleaner import LogCleaningAbortedError
from kopfka.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kopfka.storage.log_segment import LogSegment
from kopfka.storage.unified_log import UnifiedLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
LONG_MAX = (1 << 63) - 1


class LogCleaningState:
    """Base of the three states (absence from the map means: not being cleaned)."""


class _InProgress(LogCleaningState):
    def __repr__(self) -> str:
        return "LogCleaningInProgress"


class _Aborted(LogCleaningState):
    def __repr__(self) -> str:
        return "LogCleaningAborted"


IN_PROGRESS = _InProgress()
ABORTED = _Aborted()


@dataclass(frozen=True)
class Paused(LogCleaningState):
    """Kafka's LogCleaningPaused: cleaning paused `count` times, each needing its own resume."""

    count: int


@dataclass
class LogToClean:
    """A candidate log with its clean / cleanable split (the selection key is the ratio)."""

    tp: TopicPartition
    log: UnifiedLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    needs_compaction_now: bool = False
    forced_by_horizon: bool = False

    def __post_init__(self) -> None:
        segs = self.log.local_log.segments
        self.clean_bytes = (
            sum(s.size for s in segs.values(-1, self.first_dirty_offset)) if self.first_dirty_offset > 0 else 0
        )
        self.cleanable_bytes = (
            sum(
                s.size
                for s in segs.values(
                    self.first_dirty_offset, max(self.first_dirty_offset, self.first_uncleanable_offset)
                )
            )
            if self.first_uncleanable_offset > self.first_dirty_offset
            else 0
        )
        total = self.clean_bytes + self.cleanable_bytes
        self.cleanable_ratio = self.cleanable_bytes / total if total else 0.0


def first_batch_timestamp(segment: LogSegment) -> int:
    for header in segment.log.batch_headers(0):
        return header.max_timestamp
    return -1


def cleanable_offsets(ulog: UnifiedLog, checkpoint: int | None, now: int) -> tuple[int, int, bool]:
    """(first dirty, first uncleanable, checkpoint needs rewriting).

    The first uncleanable offset is the least of the last stable offset, the active
    segment's base and (with min.compaction.lag.ms) the first segment too young to clean.
    """
    start = ulog.log_start_offset
    force = False
    if checkpoint is None:
        first_dirty = start
    elif checkpoint < start or checkpoint > ulog.log_end_offset:
        log.warning(
            "%s: resetting first dirty offset %d to log start offset %d (checkpoint out of range)",
            ulog.topic_partition,
            checkpoint,
            start,
        )
        first_dirty, force = start, True
    else:
        first_dirty = checkpoint
    bounds = [ulog.last_stable_offset, ulog.active_segment.base_offset]
    lag = int(ulog.config["min.compaction.lag.ms"])
    if lag > 0:
        for seg in ulog.local_log.segments.values(first_dirty, ulog.active_segment.base_offset):
            if seg.largest_timestamp() > now - lag:
                bounds.append(seg.base_offset)
                break
    first_uncleanable = max(first_dirty, min(bounds))
    return first_dirty, first_uncleanable, force


def max_compaction_delay(ulog: UnifiedLog, first_dirty: int, now: int) -> int:
    """How long the oldest dirty record has waited beyond max.compaction.lag.ms (0 if not)."""
    max_lag = int(ulog.config["max.compaction.lag.ms"])
    if max_lag >= LONG_MAX or max_lag <= 0:
        return 0
    active = ulog.active_segment
    dirty = [s for s in ulog.local_log.segments.values(first_dirty, active.base_offset) if s is not active]
    stamps = [t for t in (first_batch_timestamp(s) for s in dirty) if t >= 0]
    if not stamps:
        return 0
    until = now - max_lag
    earliest = min(stamps)
    return until - earliest if earliest < until else 0


class LogCleanerManager:
    def __init__(self, log_dirs: Iterable[Path]) -> None:
        self._lock = threading.RLock()
        self.in_progress: dict[TopicPartition, LogCleaningState] = {}
        # pauses taken while a clean was Aborted (and not yet unwound): what Paused(n) it becomes
        self._aborted_pauses: dict[TopicPartition, int] = {}
        self.uncleanable_partitions: dict[Path, set[TopicPartition]] = {}
        self.checkpoints: dict[Path, OffsetCheckpointFile] = {
            d: OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT_FILE) for d in log_dirs
        }
        self._offsets: dict[Path, dict[TopicPartition, int]] = {
            d: f.read_or_empty() for d, f in self.checkpoints.items()
        }
        self.delete_horizons: dict[TopicPartition, int] = {}
        self.shutting_down = False
        # figures of the last selection pass, for the LogCleanerManager metrics (plain
        # attributes written once per pass, so a scrape costs nothing on the cleaning path)
        self.dirtiest_cleanable_ratio = 0.0
        self.max_compaction_delay_ms = 0
        self.time_of_last_run = time.monotonic()

    # -- checkpoints ---------------------------------------------------------------------

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        with self._lock:
            out: dict[TopicPartition, int] = {}
            for offsets in self._offsets.values():
                out.update(offsets)
            return out

    def update_checkpoints(
        self, directory: Path, update: Mapping[TopicPartition, int] | None = None, remove: TopicPartition | None = None
    ) -> None:
        """Change the dir's cleaner points and rewrite its checkpoint file atomically."""
        with self._lock:
            f = self.checkpoints.get(directory)
            if f is None:
                return
            offsets = self._offsets[directory]
            if update:
                offsets.update(update)
            if remove is not None:
                offsets.pop(remove, None)
            snapshot = dict(offsets)
        f.write(snapshot)

    def maybe_truncate_checkpoint(self, directory: Path, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            current = self._offsets.get(directory, {}).get(tp)
        if current is not None and current > offset:
            self.update_checkpoints(directory, {tp: offset})

    # -- selection -----------------------------------------------------------------------

    def grab_filthiest_compacted_log(self, logs: Mapping[TopicPartition, UnifiedLog], now: int) -> LogToClean | None:
        with self._lock:
            self.time_of_last_run = time.monotonic()
            checkpoints = self.all_cleaner_checkpoints()
            candidates: list[LogToClean] = []
            horizon_due: list[LogToClean] = []
            dirtiest, max_delay = 0.0, 0
            for tp, ulog in logs.items():
                if not ulog.config.compact or tp in self.in_progress or self.is_uncleanable(ulog.dir.parent, tp):
                    continue
                first_dirty, first_uncleanable, force = cleanable_offsets(ulog, checkpoints.get(tp), now)
                if force:
                    self.update_checkpoints(ulog.dir.parent, {tp: first_dirty})
                delay = max_compaction_delay(ulog, first_dirty, now)
                ltc = LogToClean(tp, ulog, first_dirty, first_uncleanable, needs_compaction_now=delay > 0)
                dirtiest, max_delay = max(dirtiest, ltc.cleanable_ratio), max(max_delay, delay)
                ratio = float(ulog.config["min.cleanable.dirty.ratio"])
                if (ltc.needs_compaction_now and ltc.cleanable_bytes > 0) or (
                    ltc.cleanable_bytes > 0 and ltc.cleanable_ratio >= ratio
                ):
                    candidates.append(ltc)
                elif 0 <= self.delete_horizons.get(tp, -1) <= now:
                    ltc.forced_by_horizon = True
                    horizon_due.append(ltc)
            self.dirtiest_cleanable_ratio, self.max_compaction_delay_ms = dirtiest, max_delay
            pool = candidates or horizon_due
            if not pool:
                return None
            best = max(pool, key=lambda c: (c.needs_compaction_now, c.cleanable_ratio))
            self.in_progress[best.tp] = IN_PROGRESS
            return best

    def deletable_logs(self, logs: Mapping[TopicPartition, UnifiedLog]) -> dict[TopicPartition, UnifiedLog]:
        """Compacted logs to run retention on from the cleaner task, marked InProgress."""
        with self._lock:
            out = {
                tp: ul
                for tp, ul in logs.items()
                if ul.config.compact and tp not in self.in_progress and not self.is_uncleanable(ul.dir.parent, tp)
            }
            for tp in out:
                self.in_progress[tp] = IN_PROGRESS
            return out

    def done_deleting(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                state = self.in_progress.get(tp)
                if state is IN_PROGRESS:
                    del self.in_progress[tp]
                elif state is ABORTED:
                    self._unwound(tp)

    def pause_cleaning_for_non_compacted_partitions(
        self, logs: Mapping[TopicPartition, UnifiedLog]
    ) -> dict[TopicPartition, UnifiedLog]:
        with self._lock:
            out = {tp: ul for tp, ul in logs.items() if not ul.config.compact and tp not in self.in_progress}
            for tp in out:
                self.in_progress[tp] = Paused(1)
            return out

    # -- state machine -------------------------------------------------------------------

    def state(self, tp: TopicPartition) -> LogCleaningState | None:
        with self._lock:
            return self.in_progress.get(tp)

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        """Called by the cleaner between units of work: unwind if someone aborted us."""
        with self._lock:
            if self.in_progress.get(tp) is ABORTED or self.shutting_down:
                raise LogCleaningAbortedError(f"cleaning of {tp[0]}-{tp[1]} aborted")

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        """After this returns no cleaned output reaches the log until `resume_cleaning`."""
        with self._lock:
            state = self.in_progress.get(tp)
            if state is None:
                self.in_progress[tp] = Paused(1)
            elif state is IN_PROGRESS:
                self.in_progress[tp] = ABORTED
                self._aborted_pauses[tp] = 1
            elif isinstance(state, Paused):
                self.in_progress[tp] = Paused(state.count + 1)
            elif state is ABORTED:
                self._aborted_pauses[tp] = self._aborted_pauses.get(tp, 1) + 1

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Abort for good (the partition is going away)."""
        with self._lock:
            self.abort_and_pause_cleaning(tp)
            self.delete_horizons.pop(tp, None)
            for parts in self.uncleanable_partitions.values():
                parts.discard(tp)

    def forget(self, tp: TopicPartition) -> None:
        with self._lock:
            if isinstance(self.in_progress.get(tp), Paused):
                del self.in_progress[tp]

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                state = self.in_progress.get(tp)
                if isinstance(state, Paused):
                    if state.count <= 1:
                        del self.in_progress[tp]
                    else:
                        self.in_progress[tp] = Paused(state.count - 1)
                elif state is ABORTED:  # the cleaner has not unwound yet: it must still, but then not stay paused
                    self._aborted_pauses[tp] = self._aborted_pauses.get(tp, 1) - 1
                elif state is None:
                    log.debug("resume of %s which is not paused", tp)

    def done_cleaning(self, tp: TopicPartition) -> None:
        """InProgress -> none; Aborted -> Paused(n) for the n pauses not yet resumed (or none)."""
        with self._lock:
            state = self.in_progress.get(tp)
            if state is IN_PROGRESS:
                del self.in_progress[tp]
            elif state is ABORTED:
                self._unwound(tp)

    def _unwound(self, tp: TopicPartition) -> None:
        pauses = self._aborted_pauses.pop(tp, 1)
        if pauses > 0:
            self.in_progress[tp] = Paused(pauses)
        else:
            del self.in_progress[tp]

    def still_in_progress(self, tp: TopicPartition) -> bool:
        with self._lock:
            return self.in_progress.get(tp) is IN_PROGRESS and not self.shutting_down

    # -- uncleanable partitions and failures --------------------------------------------

    def is_uncleanable(self, directory: Path, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self.uncleanable_partitions.get(directory, set())

    def mark_uncleanable(self, directory: Path, tp: TopicPartition) -> None:
        with self._lock:
            self.uncleanable_partitions.setdefault(directory, set()).add(tp)

    # -- metrics (kafka.log:type=LogCleanerManager), computed when scraped --------------------

    @property
    def max_dirty_percent(self) -> float:
        """Cleanable ratio of the dirtiest compacted log at the last selection, in percent."""
        return 100.0 * self.dirtiest_cleanable_ratio

    def time_since_last_run_ms(self) -> float:
        return (time.monotonic() - self.time_of_last_run) * 1000.0

    def uncleanable_partitions_count(self, directory: Path) -> int:
        with self._lock:
            return len(self.uncleanable_partitions.get(directory, ()))

    def uncleanable_bytes(self, directory: Path, logs: Mapping[TopicPartition, UnifiedLog], now: int) -> int:
        """Cleanable bytes stuck in the dir's uncleanable partitions (they grow until restart)."""
        with self._lock:
            tps = list(self.uncleanable_partitions.get(directory, ()))
            checkpoints = self._offsets.get(directory, {}).copy()
        total = 0
        for tp in tps:
            ulog = logs.get(tp)
            if ulog is None:
                continue
            first_dirty, first_uncleanable, _ = cleanable_offsets(ulog, checkpoints.get(tp), now)
            total += LogToClean(tp, ulog, first_dirty, first_uncleanable).cleanable_bytes
        return total

    def note_delete_horizon(self, tp: TopicPartition, horizon: int) -> None:
        with self._lock:
            if horizon < 0:
                self.delete_horizons.pop(tp, None)
            else:
                self.delete_horizons[tp] = horizon

    def handle_log_dir_failure(self, directory: Path) -> None:
        with self._lock:
            self.checkpoints.pop(directory, None)
            self._offsets.pop(directory, None)
            self.uncleanable_partitions.pop(directory, None)
