"""LogManager (seed 001): every partition log across the dirs of log.dirs.

Validates and locks each dir, loads the logs found there (recovering unflushed segments
after an unclean shutdown), places new partitions in the live dir holding the fewest, keeps
the recovery-point and log-start-offset checkpoints, and on shutdown flushes everything and
writes the clean-shutdown marker. Retention, compaction and disk failure build on this.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from kopfka import uuids
from kopfka.config.log_config import LogConfig
from kopfka.storage import log_file_utils
from kopfka.storage.checkpoint import CleanShutdownFileHandler, OffsetCheckpointFile
from kopfka.storage.unified_log import UnifiedLog

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
LOCK_FILE = ".lock"
SKIPPED_DIRS = {"__cluster_metadata-0", "remote-log-index-cache"}

TopicPartition = tuple[str, int]


class LogDirLockedError(Exception):
    pass


class LogManager:
    def __init__(self, log_dirs: list[Path], config_for: Callable[[str], LogConfig], *, broker_epoch: int = -1,
                 scheduler: Callable[[str, int, Callable[[], None]], None] | None = None) -> None:
        self.scheduler = scheduler
        self.log_dirs = [d.resolve() for d in log_dirs]
        self.config_for = config_for
        self.current_logs: dict[TopicPartition, UnifiedLog] = {}
        self.live_log_dirs: list[Path] = []
        self._locks: dict[Path, int] = {}
        self.broker_epoch = broker_epoch
        self._had_clean_shutdown: dict[Path, bool] = {}

    # --- startup -----------------------------------------------------------------------
    def lock_dirs(self) -> None:
        seen: set[Path] = set()
        for d in self.log_dirs:
            if d in seen:
                raise ValueError(f"Duplicate log directory found: {d}")
            seen.add(d)
            d.mkdir(parents=True, exist_ok=True)
            fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise LogDirLockedError(
                    f"Failed to acquire lock on file .lock in {d}. A Kafka instance in another process "
                    "or thread is using this directory."
                ) from None
            self._locks[d] = fd
            self.live_log_dirs.append(d)

    def load_logs(self) -> None:
        for d in self.live_log_dirs:
            marker = CleanShutdownFileHandler(d)
            clean = marker.exists()
            # delete the marker now: a crash during loading must count as unclean next time
            if clean:
                marker.delete()
            self._had_clean_shutdown[d] = clean
            recovery = OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT_FILE).read_or_empty()
            starts = OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT_FILE).read_or_empty()
            hws = OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT_FILE).read_or_empty()
            entries = sorted(p for p in d.iterdir() if p.is_dir() and p.name not in SKIPPED_DIRS)
            log.info("Loading %d logs in %s (%s shutdown)", len(entries), d, "clean" if clean else "unclean")
            for remaining, path in enumerate(reversed(entries)):
                name = path.name
                if log_file_utils.is_delete_dir(name):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                if log_file_utils.is_stray_dir(name) or log_file_utils.is_future_dir(name):
                    continue
                try:
                    topic, partition = log_file_utils.parse_topic_partition_name(name)
                except ValueError:
                    log.warning("Ignoring unexpected directory %s", path)
                    continue
                tp = (topic, partition)
                if tp in self.current_logs:
                    raise RuntimeError(f"Duplicate log directories for {topic}-{partition}: {path} and {self.current_logs[tp].dir}")
                ulog = UnifiedLog.load(path, self.config_for(topic), log_start_offset=starts.get(tp, 0),
                                       recovery_point=recovery.get(tp, 0), had_clean_shutdown=clean,
                                       scheduler=self.scheduler)
                if tp in hws:
                    ulog.update_high_watermark(min(hws[tp], ulog.log_end_offset))
                self.current_logs[tp] = ulog
                if remaining % 100 == 0 and remaining:
                    log.info("%s: %d logs remaining to load", d, remaining)

    # --- registry ----------------------------------------------------------------------
    def get_log(self, tp: TopicPartition) -> UnifiedLog | None:
        return self.current_logs.get(tp)

    def all_logs(self) -> Iterator[tuple[TopicPartition, UnifiedLog]]:
        return iter(list(self.current_logs.items()))

    def _next_dir(self) -> Path:
        counts = {d: 0 for d in self.live_log_dirs}
        for ulog in self.current_logs.values():
            parent = ulog.dir.parent
            if parent in counts:
                counts[parent] += 1
        return min(self.live_log_dirs, key=lambda d: (counts[d], self.live_log_dirs.index(d)))

    def get_or_create_log(self, tp: TopicPartition, topic_id: str | None) -> UnifiedLog:
        existing = self.current_logs.get(tp)
        if existing is not None:
            return existing
        if not self.live_log_dirs:
            raise OSError("no live log directory")
        d = self._next_dir() / log_file_utils.log_dir_name(*tp)
        d.mkdir(parents=True, exist_ok=True)
        ulog = UnifiedLog.load(d, self.config_for(tp[0]), topic_id=uuids.from_str(topic_id) if topic_id else None,
                               had_clean_shutdown=True, scheduler=self.scheduler)
        self.current_logs[tp] = ulog
        log.info("Created log for partition %s-%d in %s", tp[0], tp[1], d)
        return ulog

    def delete_log(self, tp: TopicPartition) -> None:
        """Rename to `<topic>-<p>.<uuid>-delete`, then remove (async deletion is issue 4)."""
        ulog = self.current_logs.pop(tp, None)
        if ulog is None:
            return
        target = ulog.dir.parent / log_file_utils.log_delete_dir_name(*tp)
        ulog.close()
        os.replace(ulog.dir, target)
        shutil.rmtree(target, ignore_errors=True)
        log.info("Deleted log for partition %s-%d", *tp)

    # --- checkpoints and shutdown ----------------------------------------------------------
    def checkpoint(self) -> None:
        for d in self.live_log_dirs:
            logs = {tp: ul for tp, ul in self.current_logs.items() if ul.dir.parent == d}
            OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT_FILE).write({tp: ul.recovery_point for tp, ul in logs.items()})
            OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT_FILE).write(
                {tp: ul.log_start_offset for tp, ul in logs.items() if ul.log_start_offset > 0})
            OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT_FILE).write({tp: ul.high_watermark for tp, ul in logs.items()})

    def flush_all(self) -> None:
        for ul in self.current_logs.values():
            ul.flush()

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, then mark each dir cleanly shut down."""
        for ul in self.current_logs.values():
            ul.flush()
        self.checkpoint()
        for ul in self.current_logs.values():
            ul.close()
        for d in self.live_log_dirs:
            CleanShutdownFileHandler(d).write(self.broker_epoch)
        for fd in self._locks.values():
            os.close(fd)
        self._locks.clear()
