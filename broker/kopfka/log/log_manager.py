"""LogManager (seed 001): every partition log across the dirs of log.dirs (JBOD).

Validates and locks each dir, loads the logs found there in parallel (one pool of
num.recovery.threads.per.data.dir workers per dir, recovering unflushed segments after an
unclean shutdown), places new partitions in the live, uncordoned dir holding the fewest, and
runs the background tasks: retention, the flush.ms flusher, recovery-point and log-start
checkpoints, asynchronous deletion of `-delete` partition dirs, the log cleaner, the
log-dir failure handler and intra-broker moves (`-future` logs).

Threading: LogManager's state and every UnifiedLog are mutated on the event loop only;
blocking work (loading, fsync, checkpoint writes, rmtree, the cleaner's passes) runs on
worker threads. `load_logs` and `shutdown` are called from a worker thread by KafkaServer
and hop onto the loop where they must.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kopfka import uuids
from kopfka.config.log_config import LogConfig
from kopfka.log import meta_properties
from kopfka.log.log_cleaner import CleanerConfig, LogCleaner
from kopfka.log.log_dir_failure_channel import LogDirFailureChannel
from kopfka.metadata.image import MetadataImage
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.records import LOG_OVERHEAD, read_header
from kopfka.storage import log_file_utils
from kopfka.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    CleanShutdownFileHandler,
    OffsetCheckpointFile,
)
from kopfka.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from kopfka.storage.unified_log import ISOLATION_LOG_END, UnifiedLog
from kopfka.timeouts import wait_quietly

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
SKIPPED_DIRS = {"__cluster_metadata-0", "remote-log-index-cache"}
LONG_MAX = (1 << 63) - 1
# a period this long means "never" (Kafka's Long.MAX_VALUE defaults)
NEVER_MS = 1 << 50
MOVE_CHUNK_BYTES = 1024 * 1024

TopicPartition = tuple[str, int]

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
    "LogDirLockedError",
    "LogManager",
    "disk_usage",
]


class LogDirLockedError(Exception):
    pass


def disk_usage(log_dir: Path) -> tuple[int, int]:
    """(total, usable) bytes of the filesystem holding a log dir, as KIP-827 reports them
    (usable: what an unprivileged writer may still use); (-1, -1) when it cannot be read."""
    try:
        du = shutil.disk_usage(log_dir)
        return du.total, du.free
    except OSError:
        return -1, -1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _segments_to_recover(path: Path, recovery_point: int) -> int:
    """Segments of the log in `path` that may hold offsets at or above the recovery point."""
    bases = []
    for f in path.glob("*.log"):
        try:
            bases.append(int(f.stem))
        except ValueError:
            continue
    bases.sort()
    return sum(1 for i in range(len(bases)) if i + 1 == len(bases) or bases[i + 1] > recovery_point)


def stray_reason(image: MetadataImage, broker_id: int, ulog: UnifiedLog) -> str | None:
    """Why this broker must not serve the log (Kafka's LogManager.isStrayKraftReplica), or None."""
    if ulog.topic_id is None:
        return "it has no topic id"
    topic_id = uuids.to_str(ulog.topic_id)
    topic = image.topics_by_id.get(topic_id)
    partition = topic.partitions.get(ulog.partition) if topic is not None else None
    if partition is None:
        return f"topic id {topic_id} does not exist in the metadata image"
    if broker_id not in partition.replicas:
        return f"the replica assignment {list(partition.replicas)} does not contain broker {broker_id}"
    return None


def cordoned_entries(raw: Any) -> list[str]:
    """cordoned.log.dirs as a list of entries (`*` or dir paths), from a list or its text form."""
    items = raw.split(",") if isinstance(raw, str) else raw or []
    return [str(x).strip() for x in items if str(x).strip()]


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        config_for: Callable[[str], LogConfig],
        *,
        broker_epoch: int = -1,
        scheduler: Callable[[str, int, Callable[[], None]], None] | None = None,
        server_config: Mapping[str, Any] | None = None,
        failure_channel: LogDirFailureChannel | None = None,
        halt: Callable[[], None] | None = None,
        node_id: int | None = None,
        cluster_id: str | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.log_dirs = [d.resolve() for d in log_dirs]
        self.config_for = config_for
        self.values: Mapping[str, Any] = server_config if server_config is not None else {}
        self.current_logs: dict[TopicPartition, UnifiedLog] = {}
        self.future_logs: dict[TopicPartition, UnifiedLog] = {}
        # preferredLogDirs: where a replica not hosted yet is to be created (AlterReplicaLogDirs
        # sent before the reassignment that brings it here); used once, then forgotten
        self.preferred_log_dirs: dict[TopicPartition, Path] = {}
        self.offline_logs: dict[TopicPartition, UnifiedLog] = {}
        self.live_log_dirs: list[Path] = []
        self.directory_ids: dict[Path, str] = {}
        # directory ids of dirs that failed while running, and who to tell (the lifecycle manager
        # reports them to the controller in heartbeats, KIP-858)
        self.offline_directory_ids: dict[Path, str] = {}
        self.dir_failure_listeners: list[Callable[[Path, str | None], None]] = []
        self._locks: dict[Path, int] = {}
        self.broker_epoch = broker_epoch
        self._had_clean_shutdown: dict[Path, bool] = {}
        self._clean_shutdown_epochs: dict[Path, int] = {}
        self._loaded_dirs: set[Path] = set()
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.halt = halt or (lambda: os.kill(os.getpid(), signal.SIGTERM))
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.cordoned = self._cordoned_dirs()
        # once a dir was cordoned, heartbeats keep reporting the set, an empty one included
        self.cordoning_used = bool(self.cordoned)
        self.logs_to_be_deleted: list[tuple[UnifiedLog, float]] = []
        # `-delete` dirs found at startup: removed by kafka-delete-logs
        self.logs_to_be_deleted_paths: list[Path] = []
        self.cleaner: LogCleaner | None = None
        self.log_replaced_listeners: list[Callable[[TopicPartition, UnifiedLog], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._movers: dict[TopicPartition, asyncio.Task[None]] = {}
        # replica.alter.log.dirs.io.max.bytes.per.second: the byte rate of all moves together,
        # paced by one shared clock (when the bytes copied so far may have been copied by)
        self.move_rate: float = math.inf
        self._move_clock = 0.0
        self._delete_wake: asyncio.Event | None = None
        self._lock = threading.RLock()  # logCreationOrDeletionLock
        self._shut_down = False
        # recovery progress (Kafka's remainingLogsToRecover per dir and remainingSegmentsToRecover
        # per dir and recovery thread): written by the loader threads, read by the metrics
        # collector, which may scrape while the broker is still loading
        self.remaining_logs_to_recover: dict[str, int] = {}
        self.remaining_segments_to_recover: dict[tuple[str, int], int] = {}

    @property
    def offline_log_directory_count(self) -> int:
        """Dirs of log.dirs that are not serving (failed at startup or while running)."""
        return len(self.log_dirs) - len(self.live_log_dirs)

    @property
    def producer_id_expiration_ms(self) -> int:
        return int(self._cfg("producer.id.expiration.ms", DEFAULT_PRODUCER_ID_EXPIRATION_MS))

    def remove_expired_producers(self) -> None:
        """Kafka's PeriodicProducerExpirationCheck (scheduled per log there; one sweep here)."""
        now = int(time.time() * 1000)
        for _tp, ulog in self.all_logs():
            if not ulog.offline:
                ulog.remove_expired_producers(now)

    def _cfg(self, key: str, default: Any) -> Any:
        v = self.values.get(key)
        return default if v is None else v

    def cordoned_directory_ids(self) -> tuple[str, ...]:
        """Directory ids of the live dirs listed in cordoned.log.dirs (reported once caught up)."""
        return tuple(sorted(i for d, i in self.directory_ids.items() if d in self.cordoned))

    def update_cordoned_dirs(self) -> None:
        """cordoned.log.dirs changed (a dynamic config, KIP-1066): new partitions and
        AlterReplicaLogDirs avoid the new set from now on; replicas already there stay."""
        with self._lock:
            self.cordoned = self._cordoned_dirs()
        self.cordoning_used = self.cordoning_used or bool(self.cordoned)
        log.info("Cordoned log dirs: %s", ", ".join(str(d) for d in sorted(self.cordoned)) or "none")

    def _cordoned_dirs(self) -> set[Path]:
        entries = cordoned_entries(self._cfg("cordoned.log.dirs", []))
        if "*" in entries:
            return set(self.log_dirs)
        return {Path(x).resolve() for x in entries}

    # --- startup -----------------------------------------------------------------------
    def lock_dirs(self) -> None:
        """createAndValidateLogDirs + lockLogDirs: a dir that cannot be created or locked is
        offline (reported to the failure channel); if none is usable the broker stops."""
        seen: set[Path] = set()
        for d in self.log_dirs:
            if d in seen:
                raise ValueError(f"Duplicate log directory found: {d}")
            seen.add(d)
            try:
                d.mkdir(parents=True, exist_ok=True)
                if not d.is_dir() or not os.access(d, os.R_OK | os.W_OK):
                    raise OSError(f"{d} is not a readable directory")
                fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                self.failure_channel.maybe_add_offline_log_dir(
                    d, f"Failed to create or validate data directory {d}", exc
                )
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self._release_locks()
                raise LogDirLockedError(
                    f"Failed to acquire lock on file .lock in {d}. A Kafka instance in another process "
                    "or thread is using this directory."
                ) from None
            self._locks[d] = fd
            self.live_log_dirs.append(d)
        if not self.live_log_dirs:
            raise OSError(f"None of the specified log dirs from {', '.join(map(str, self.log_dirs))} are readable")
        try:
            self._load_directory_ids()
        except meta_properties.MetaPropertiesError:
            self._release_locks()
            raise

    def _release_locks(self) -> None:
        for fd in self._locks.values():
            os.close(fd)
        self._locks.clear()

    def _load_directory_ids(self) -> None:
        """directory.id of each dir; with node/cluster ids given, a mismatch refuses start."""
        for d in self.live_log_dirs:
            try:
                meta = meta_properties.read(d)
            except meta_properties.MetaPropertiesError:
                raise
            if meta is None:
                continue
            if self.node_id is not None and meta.node_id != self.node_id:
                raise meta_properties.MetaPropertiesError(
                    f"Stored node id {meta.node_id} in {d} doesn't match node.id {self.node_id}"
                )
            if self.cluster_id is not None and meta.cluster_id != self.cluster_id:
                raise meta_properties.MetaPropertiesError(
                    f"Invalid cluster.id in {d}: expected {self.cluster_id}, found {meta.cluster_id}"
                )
            self.directory_ids[d] = meta.directory_id

    def load_logs(self) -> None:
        """Load every dir in parallel, each with num.recovery.threads.per.data.dir workers."""
        threads = max(1, int(self._cfg("num.recovery.threads.per.data.dir", 2)))
        start = time.monotonic()
        with ThreadPoolExecutor(max(1, len(self.live_log_dirs)), thread_name_prefix="log-dir-loader") as pool:
            futures = {d: pool.submit(self._load_dir, d, threads) for d in list(self.live_log_dirs)}
        errors = []
        for d, fut in futures.items():
            exc = fut.exception()
            if exc is None:
                continue
            if isinstance(exc, OSError):
                self.failure_channel.maybe_add_offline_log_dir(d, f"Error while loading log dir {d}", exc)
                self._drop_dir_during_load(d)
            else:
                errors.append(exc)
        if errors:
            raise errors[0]
        if not self.live_log_dirs:
            raise OSError("All log dirs failed while loading")
        log.info("Loaded %d logs in %d ms", len(self.current_logs), (time.monotonic() - start) * 1000)

    def _drop_dir_during_load(self, d: Path) -> None:
        with self._lock:
            if d in self.live_log_dirs:
                self.live_log_dirs.remove(d)
            for tp, ul in list(self.current_logs.items()):
                if ul.dir.parent == d:
                    self.offline_logs[tp] = self.current_logs.pop(tp)
                    ul.offline = True

    @property
    def previous_broker_epoch(self) -> int:
        """The broker epoch the clean shutdown markers recorded, when every configured log dir is
        online and had one with the same epoch; else -1, an unclean shutdown (Kafka's
        readBrokerEpochFromCleanShutdownFiles). Sent with the broker registration (KIP-966)."""
        if len(self.live_log_dirs) < len(self.log_dirs):
            return -1
        epochs = {self._clean_shutdown_epochs.get(d, -1) for d in self.live_log_dirs}
        return epochs.pop() if len(epochs) == 1 else -1

    def _load_dir(self, d: Path, threads: int) -> None:
        marker = CleanShutdownFileHandler(d)
        clean = marker.exists()
        self._clean_shutdown_epochs[d] = marker.read() if clean else -1
        # delete the marker now: a crash during loading must count as unclean next time
        if clean:
            marker.delete()
        self._had_clean_shutdown[d] = clean
        recovery = OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT_FILE).read_or_empty()
        starts = OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT_FILE).read_or_empty()
        hws = OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT_FILE).read_or_empty()
        entries = sorted(p for p in d.iterdir() if p.is_dir() and p.name not in SKIPPED_DIRS)
        jobs: list[Path] = []
        for path in entries:
            name = path.name
            if log_file_utils.is_delete_dir(name):
                # a partition deleted before the restart: finish it in the background
                self.logs_to_be_deleted_paths.append(path)
                continue
            if log_file_utils.is_stray_dir(name):
                log.warning("Found stray log dir %s", path)
                continue
            try:
                log_file_utils.parse_topic_partition_name(name)
            except ValueError:
                log.warning("Ignoring unexpected directory %s", path)
                continue
            jobs.append(path)
        remaining = len(jobs)
        segments_total = sum(1 for j in jobs for _ in j.glob("*.log"))
        log.info(
            "Loading %d logs (%d segments) in %s after %s shutdown with %d recovery threads",
            remaining,
            segments_total,
            d,
            "a clean" if clean else "an unclean",
            threads,
        )
        progress_lock = threading.Lock()
        state = {"logs": remaining, "segments": segments_total, "last": time.monotonic()}
        key = str(d)
        self.remaining_logs_to_recover[key] = remaining
        for n in range(threads):
            self.remaining_segments_to_recover[(key, n)] = 0
        thread_nums: dict[int, int] = {}

        def load_one(path: Path) -> None:
            topic, partition = log_file_utils.parse_topic_partition_name(path.name)
            tp = (topic, partition)
            nsegs = sum(1 for _ in path.glob("*.log"))
            with progress_lock:
                num = thread_nums.setdefault(threading.get_ident(), len(thread_nums))
            # the segments this thread is about to re-validate (none after a clean shutdown)
            to_recover = 0 if clean else _segments_to_recover(path, recovery.get(tp, 0))
            self.remaining_segments_to_recover[(key, num)] = to_recover
            try:
                ulog = self._open_loaded_log(path, tp, starts, recovery, hws, clean)
            finally:
                self.remaining_segments_to_recover[(key, num)] = 0
            with self._lock:
                target = self.future_logs if log_file_utils.is_future_dir(path.name) else self.current_logs
                if tp in target:
                    raise RuntimeError(
                        f"Duplicate log directories for {topic}-{partition}: {path} and {target[tp].dir}"
                    )
                target[tp] = ulog
            with progress_lock:
                state["logs"] -= 1
                state["segments"] -= nsegs
                self.remaining_logs_to_recover[key] = int(state["logs"])
                now = time.monotonic()
                if now - state["last"] >= 1.0 or state["logs"] == 0:
                    state["last"] = now
                    log.info("%s: %d logs and %d segments remaining to recover", d, state["logs"], state["segments"])

        with ThreadPoolExecutor(threads, thread_name_prefix=f"log-recovery-{d}") as pool:
            for fut in [pool.submit(load_one, p) for p in jobs]:
                fut.result()
        self._loaded_dirs.add(d)

    def _open_loaded_log(
        self,
        path: Path,
        tp: TopicPartition,
        starts: Mapping[TopicPartition, int],
        recovery: Mapping[TopicPartition, int],
        hws: Mapping[TopicPartition, int],
        clean: bool,
    ) -> UnifiedLog:
        ulog = UnifiedLog.load(
            path,
            self.config_for(tp[0]),
            log_start_offset=starts.get(tp, 0),
            recovery_point=recovery.get(tp, 0),
            had_clean_shutdown=clean,
            scheduler=self.scheduler,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
        )
        if tp in hws:
            ulog.update_high_watermark(min(hws[tp], ulog.log_end_offset))
        else:
            ulog.update_high_watermark(ulog.log_end_offset)
        return ulog

    def startup(self) -> None:
        """Start the background tasks (call on the event loop, after load_logs)."""
        loop = self._loop = asyncio.get_running_loop()
        self.failure_channel.bind(loop)
        self._delete_wake = asyncio.Event()
        initial = int(self._cfg("log.initial.task.delay.ms", 30000))
        retention = int(self._cfg("log.retention.check.interval.ms", 300_000))
        flush_check = int(self._cfg("log.flush.scheduler.interval.ms", LONG_MAX))
        rp_interval = int(self._cfg("log.flush.offset.checkpoint.interval.ms", 60000))
        lso_interval = int(self._cfg("log.flush.start.offset.checkpoint.interval.ms", 60000))
        self._every("kafka-log-retention", initial, retention, self.cleanup_logs)
        pid_check = int(self._cfg("producer.id.expiration.check.interval.ms", 600_000))
        self._every("PeriodicProducerExpirationCheck", pid_check, pid_check, self.remove_expired_producers)
        if flush_check < NEVER_MS:
            self._every("kafka-log-flusher", initial, flush_check, self.flush_dirty_logs)
        self._every("kafka-recovery-point-checkpoint", initial, rp_interval, self.checkpoint_log_recovery_offsets)
        self._every("kafka-log-start-offset-checkpoint", initial, lso_interval, self.checkpoint_log_start_offsets)
        self._tasks.append(loop.create_task(self._delete_logs_loop(initial), name="kafka-delete-logs"))
        self._tasks.append(loop.create_task(self._failure_handler(), name="LogDirFailureHandler"))
        if bool(self._cfg("log.cleaner.enable", True)) and int(self._cfg("log.cleaner.threads", 1)) > 0:
            self.cleaner = LogCleaner(
                CleanerConfig(self.values),
                list(self.live_log_dirs),
                lambda: dict(self.current_logs),
                on_io_error=lambda d, e: self.failure_channel.maybe_add_offline_log_dir(
                    d, "I/O error in the log cleaner", e
                ),
            )
            self.cleaner.startup()
        for tp in list(self.future_logs):
            self._start_mover(tp)

    def _every(self, name: str, initial_ms: int, period_ms: int, fn: Callable[[], Any]) -> None:
        async def run() -> None:
            await asyncio.sleep(initial_ms / 1000)
            while True:
                try:
                    result = fn()
                    if asyncio.iscoroutine(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("Scheduled task %s failed", name)
                await asyncio.sleep(max(period_ms, 1) / 1000)

        assert self._loop is not None
        self._tasks.append(self._loop.create_task(run(), name=name))

    # --- dynamic broker configs (applied by kopfka.server.dynamic_config) -----------------
    def reconfigure_log_configs(self) -> None:
        """Kafka's DynamicLogConfig: the broker-level defaults changed, so every log's config is
        recomputed (a topic override still wins); current and future (moving) logs alike."""
        configs: dict[str, LogConfig] = {}
        for (topic, _p), ulog in [*self.current_logs.items(), *self.future_logs.items()]:
            cfg = configs.get(topic)
            if cfg is None:
                cfg = configs[topic] = self.config_for(topic)
            ulog.update_config(cfg)

    def set_producer_id_expiration_ms(self, ms: int) -> None:
        """producer.id.expiration.ms for every log's producer state (new logs read the config)."""
        for _tp, ulog in [*self.current_logs.items(), *self.future_logs.items()]:
            ulog.producer_state.producer_id_expiration_ms = ms

    # --- registry ----------------------------------------------------------------------
    def get_log(self, tp: TopicPartition, is_future: bool = False) -> UnifiedLog | None:
        return (self.future_logs if is_future else self.current_logs).get(tp)

    def all_logs(self) -> Iterator[tuple[TopicPartition, UnifiedLog]]:
        return iter(list(self.current_logs.items()) + list(self.future_logs.items()))

    def _partition_counts(self) -> dict[Path, int]:
        counts = {d: 0 for d in self.live_log_dirs}
        for ulog in list(self.current_logs.values()) + list(self.future_logs.values()):
            parent = ulog.dir.parent
            if parent in counts:
                counts[parent] += 1
        return counts

    def _next_dir(self) -> Path:
        """The live, uncordoned dir holding the fewest partitions (ties: config order)."""
        candidates = [d for d in self.live_log_dirs if d not in self.cordoned]
        if not candidates:
            raise KafkaError(
                ErrorCode.kafka_storage_error, "no live, uncordoned log directory to place a new partition in"
            )
        counts = self._partition_counts()
        return min(candidates, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def get_or_create_log(self, tp: TopicPartition, topic_id: str | None) -> UnifiedLog:
        existing = self.current_logs.get(tp)
        if existing is not None:
            if topic_id and existing.topic_id is not None and uuids.to_str(existing.topic_id) != topic_id:
                # a log of a deleted topic of the same name must never serve the new one (Kafka's
                # InconsistentTopicIdException)
                raise KafkaError(
                    ErrorCode.inconsistent_topic_id,
                    f"Tried to assign topic ID {topic_id} to log for topic partition {tp[0]}-{tp[1]}, but log "
                    f"already contained topic ID {uuids.to_str(existing.topic_id)}",
                )
            return existing
        if tp in self.offline_logs:
            raise KafkaError(ErrorCode.kafka_storage_error, f"the log dir of {tp[0]}-{tp[1]} is offline")
        with self._lock:
            preferred = self.preferred_log_dirs.pop(tp, None)
            usable = preferred is not None and preferred in self.live_log_dirs and preferred not in self.cordoned
            parent = preferred if usable and preferred is not None else self._next_dir()
            d = parent / log_file_utils.log_dir_name(*tp)
            try:
                d.mkdir(parents=True, exist_ok=True)
                ulog = UnifiedLog.load(
                    d,
                    self.config_for(tp[0]),
                    topic_id=uuids.from_str(topic_id) if topic_id else None,
                    had_clean_shutdown=True,
                    scheduler=self.scheduler,
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                )
            except OSError as exc:
                self.failure_channel.maybe_add_offline_log_dir(
                    parent, f"Error while creating log for {tp[0]}-{tp[1]} in dir {parent}", exc
                )
                raise KafkaError(
                    ErrorCode.kafka_storage_error, f"cannot create the log of {tp[0]}-{tp[1]}: {exc}"
                ) from exc
            self.current_logs[tp] = ulog
        log.info("Created log for partition %s-%d in %s", tp[0], tp[1], d)
        return ulog

    def is_offline(self, tp: TopicPartition) -> bool:
        return tp in self.offline_logs

    def delete_log(self, tp: TopicPartition) -> None:
        """asyncDelete: rename to `<topic>-<p>.<uuid>-delete`; files go after file.delete.delay.ms."""
        with self._lock:
            if self.cleaner is not None:
                self.cleaner.manager.abort_cleaning(tp)
            mover = self._movers.pop(tp, None)
            if mover is not None:
                mover.cancel()
            self.offline_logs.pop(tp, None)
            for registry in (self.current_logs, self.future_logs):
                ulog = registry.pop(tp, None)
                if ulog is None:
                    continue
                parent = ulog.dir.parent
                try:
                    ulog.rename_dir(log_file_utils.log_delete_dir_name(*tp))
                except OSError as exc:
                    self.failure_channel.maybe_add_offline_log_dir(parent, f"Error while deleting {tp[0]}-{tp[1]}", exc)
                    continue
                if self.cleaner is not None:
                    try:
                        self.cleaner.manager.update_checkpoints(parent, remove=tp)
                    except OSError as exc:
                        self.failure_channel.maybe_add_offline_log_dir(
                            parent, "Error writing the cleaner checkpoint", exc
                        )
                    self.cleaner.manager.forget(tp)
                self.logs_to_be_deleted.append((ulog, time.monotonic()))
                log.info(
                    "Log for partition %s-%d is renamed to %s and is scheduled for deletion", tp[0], tp[1], ulog.dir
                )
            if self._delete_wake is not None:
                self._delete_wake.set()
            if self._loop is None:
                self._delete_due(force=True)

    async def _delete_logs_loop(self, initial_ms: int) -> None:
        await asyncio.sleep(initial_ms / 1000)
        for path in self.logs_to_be_deleted_paths:
            await asyncio.to_thread(shutil.rmtree, path, True)
            log.info("Deleted leftover partition dir %s", path)
        self.logs_to_be_deleted_paths.clear()
        assert self._delete_wake is not None
        while True:
            next_delay = await asyncio.to_thread(self._delete_due)
            self._delete_wake.clear()
            await wait_quietly(self._delete_wake.wait(), next_delay)

    def _delete_due(self, force: bool = False) -> float:
        """Delete the queued logs whose file.delete.delay.ms has passed; returns the seconds
        until the next is due (kafka-delete-logs reschedules itself for then)."""
        now = time.monotonic()
        with self._lock:
            due = [
                (ul, t)
                for ul, t in self.logs_to_be_deleted
                if force or now - t >= ul.config.file_delete_delay_ms / 1000
            ]
            for item in due:
                self.logs_to_be_deleted.remove(item)
            waits = [ul.config.file_delete_delay_ms / 1000 - (now - t) for ul, t in self.logs_to_be_deleted]
        for ulog, _ in due:
            try:
                ulog.close_handlers()
                ulog.delete()
                log.info("Deleted log dir %s", ulog.dir)
            except OSError as exc:
                log.error("Error deleting %s: %s", ulog.dir, exc)
        return max(0.05, min(waits)) if waits else 3600.0

    # --- retention and flush -------------------------------------------------------------
    def cleanup_logs(self) -> int:
        """kafka-log-retention: delete old segments of non-compacted logs (cleaner paused)."""
        start = time.monotonic()
        logs = dict(self.current_logs)
        if self.cleaner is not None:
            deletable = self.cleaner.manager.pause_cleaning_for_non_compacted_partitions(logs)
        else:
            deletable = {tp: ul for tp, ul in logs.items() if not ul.config.compact}
        total = 0
        try:
            for tp, ulog in deletable.items():
                total += self._retain(ulog)
                future = self.future_logs.get(tp)
                if future is not None:
                    self._retain(future)
        finally:
            if self.cleaner is not None:
                self.cleaner.manager.resume_cleaning(deletable)
        if total:
            log.debug("Log cleanup completed. %d files deleted in %.3f s", total, time.monotonic() - start)
        return total

    def _retain(self, ulog: UnifiedLog) -> int:
        if ulog.offline:
            return 0
        try:
            return ulog.delete_old_segments()
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(
                ulog.dir.parent, f"Error while deleting segments for {ulog.topic_partition}", exc
            )
            return 0

    async def flush_dirty_logs(self) -> None:
        """kafka-log-flusher: fsync logs whose last flush is older than their flush.ms."""
        now = _now_ms()
        for _tp, ulog in self.all_logs():
            flush_ms = ulog.config.flush_ms
            if flush_ms >= NEVER_MS or now - ulog.last_flush_time < flush_ms or ulog.offline:
                continue
            try:
                await asyncio.to_thread(ulog.flush)
            except OSError as exc:
                self.failure_channel.maybe_add_offline_log_dir(
                    ulog.dir.parent, f"Error flushing {ulog.topic_partition}", exc
                )

    # --- checkpoints ----------------------------------------------------------------------
    def _logs_by_dir(self, d: Path) -> dict[TopicPartition, UnifiedLog]:
        return {tp: ul for tp, ul in list(self.current_logs.items()) if ul.dir.parent == d}

    def _write_checkpoint(self, d: Path, name: str, offsets: dict[TopicPartition, int]) -> None:
        try:
            OffsetCheckpointFile(d / name).write(offsets)
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(d, f"Error while writing {name} in dir {d}", exc)

    async def checkpoint_log_recovery_offsets(self) -> None:
        """Recovery points (and the high watermarks) of each live dir."""
        for d in list(self.live_log_dirs):
            logs = self._logs_by_dir(d)
            rp = {tp: ul.recovery_point for tp, ul in logs.items()}
            hw = {tp: ul.high_watermark for tp, ul in logs.items()}
            await asyncio.to_thread(self._write_checkpoint, d, RECOVERY_POINT_CHECKPOINT_FILE, rp)
            await asyncio.to_thread(self._write_checkpoint, d, REPLICATION_OFFSET_CHECKPOINT_FILE, hw)

    async def checkpoint_log_start_offsets(self) -> None:
        for d in list(self.live_log_dirs):
            starts = {tp: ul.log_start_offset for tp, ul in self._logs_by_dir(d).items() if ul.log_start_offset > 0}
            await asyncio.to_thread(self._write_checkpoint, d, LOG_START_OFFSET_CHECKPOINT_FILE, starts)

    def checkpoint(self) -> None:
        """All checkpoints of every live dir, synchronously (shutdown)."""
        for d in list(self.live_log_dirs):
            logs = self._logs_by_dir(d)
            self._write_checkpoint(
                d, RECOVERY_POINT_CHECKPOINT_FILE, {tp: ul.recovery_point for tp, ul in logs.items()}
            )
            self._write_checkpoint(
                d,
                LOG_START_OFFSET_CHECKPOINT_FILE,
                {tp: ul.log_start_offset for tp, ul in logs.items() if ul.log_start_offset > 0},
            )
            self._write_checkpoint(
                d, REPLICATION_OFFSET_CHECKPOINT_FILE, {tp: ul.high_watermark for tp, ul in logs.items()}
            )

    def flush_all(self) -> None:
        for ul in self.current_logs.values():
            ul.flush()

    # --- disk failure ----------------------------------------------------------------------
    def report_io_error(self, tp: TopicPartition, exc: BaseException) -> None:
        """An I/O error on a partition's log (from the produce/fetch path)."""
        ulog = self.current_logs.get(tp) or self.offline_logs.get(tp)
        if ulog is not None:
            self.failure_channel.maybe_add_offline_log_dir(ulog.dir.parent, f"I/O error on {tp[0]}-{tp[1]}", exc)

    async def _failure_handler(self) -> None:
        while True:
            d = await self.failure_channel.take_next_offline_log_dir()
            try:
                self.handle_log_dir_failure(d)
            except Exception:
                log.exception("Error handling the failure of log dir %s", d)

    def handle_log_dir_failure(self, d: Path) -> None:
        """Take a dir offline: its logs are closed and answer KAFKA_STORAGE_ERROR; the
        broker keeps serving the other dirs, and stops cleanly if it was the last."""
        with self._lock:
            if d in self.live_log_dirs:
                self.live_log_dirs.remove(d)
            failed_id = self.directory_ids.pop(d, None)
            if failed_id:
                self.offline_directory_ids[d] = failed_id
            if not self.live_log_dirs:
                log.critical(
                    "Shutdown broker because all log dirs in %s have failed", ", ".join(map(str, self.log_dirs))
                )
                self.halt()
                return
            if self.cleaner is not None:
                self.cleaner.manager.handle_log_dir_failure(d)
            offline = []
            for registry in (self.current_logs, self.future_logs):
                for tp, ulog in list(registry.items()):
                    if ulog.dir.parent != d:
                        continue
                    del registry[tp]
                    ulog.offline = True
                    if registry is self.current_logs:
                        self.offline_logs[tp] = ulog
                        offline.append(tp)
                    if self.cleaner is not None:
                        self.cleaner.manager.abort_and_pause_cleaning(tp)
                    mover = self._movers.pop(tp, None)
                    if mover is not None:
                        mover.cancel()
                    try:
                        ulog.close_handlers()
                    except Exception:  # the disk is gone: nothing more to save
                        pass
            fd = self._locks.pop(d, None)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        log.warning(
            "Log dir %s is offline; partitions %s are offline",
            d,
            ", ".join(f"{t}-{p}" for t, p in sorted(offline)) or "(none)",
        )
        for listener in list(self.dir_failure_listeners):
            try:
                listener(d, failed_id)
            except Exception:
                log.exception("log dir failure listener failed for %s", d)

    # --- intra-broker moves (AlterReplicaLogDirs) --------------------------------------------
    def maybe_update_preferred_log_dir(self, tp: TopicPartition, dest: str) -> ErrorCode:
        """A replica this broker does not host yet: remember the dir it is to be created in
        (Kafka's maybeUpdatePreferredLogDir). The answer is still REPLICA_NOT_AVAILABLE, as
        Kafka's: the move itself happens when the replica arrives."""
        target = Path(dest).resolve()
        if target not in self.log_dirs:
            return ErrorCode.log_dir_not_found
        if target not in self.live_log_dirs:
            return ErrorCode.kafka_storage_error
        if target in self.cordoned:  # KIP-1066: no replica moves into a cordoned dir
            return ErrorCode.invalid_replica_assignment
        self.preferred_log_dirs[tp] = target
        return ErrorCode.replica_not_available

    def alter_replica_log_dir(self, tp: TopicPartition, dest: str) -> ErrorCode:
        """Start moving the partition's replica to `dest` through a `-future` log."""
        target = Path(dest).resolve()
        if target not in self.log_dirs:
            return ErrorCode.log_dir_not_found
        if target not in self.live_log_dirs:
            return ErrorCode.kafka_storage_error
        if target in self.cordoned:  # KIP-1066: no replica moves into a cordoned dir
            return ErrorCode.invalid_replica_assignment
        current = self.current_logs.get(tp)
        if current is None:
            return ErrorCode.kafka_storage_error if tp in self.offline_logs else ErrorCode.replica_not_available
        if current.dir.parent == target:
            self._abandon_future(tp)
            return ErrorCode.none
        existing = self.future_logs.get(tp)
        if existing is not None:
            if existing.dir.parent == target:
                return ErrorCode.none
            self._abandon_future(tp)
        d = target / log_file_utils.log_future_dir_name(*tp)
        try:
            future = UnifiedLog.load(
                d,
                current.config,
                topic_id=current.topic_id,
                had_clean_shutdown=True,
                scheduler=self.scheduler,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
            )
            future.truncate_fully_and_start_at(current.log_start_offset)
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(target, f"Error creating future log of {tp[0]}-{tp[1]}", exc)
            return ErrorCode.kafka_storage_error
        self.future_logs[tp] = future
        log.info("Moving %s-%d from %s to %s", tp[0], tp[1], current.dir.parent, target)
        self._start_mover(tp)
        return ErrorCode.none

    def _abandon_future(self, tp: TopicPartition) -> None:
        mover = self._movers.pop(tp, None)
        if mover is not None:
            mover.cancel()
        future = self.future_logs.pop(tp, None)
        if future is not None:
            future.rename_dir(log_file_utils.log_delete_dir_name(*tp))
            self.logs_to_be_deleted.append((future, time.monotonic()))

    def _start_mover(self, tp: TopicPartition) -> None:
        if self._loop is None:
            return
        self._movers[tp] = self._loop.create_task(self._move(tp), name=f"move-{tp[0]}-{tp[1]}")

    async def _move(self, tp: TopicPartition) -> None:
        """Copy batches from the current log into the future log; when it has caught up,
        swap it in within the same loop step (no append can slip in between)."""
        try:
            while True:
                current, future = self.current_logs.get(tp), self.future_logs.get(tp)
                if current is None or future is None:
                    return
                if future.log_end_offset < current.log_start_offset:
                    future.truncate_fully_and_start_at(current.log_start_offset)
                if future.log_end_offset >= current.log_end_offset:
                    self.replace_current_with_future_log(tp)
                    return
                chunk = MOVE_CHUNK_BYTES if self.move_rate == math.inf else int(min(MOVE_CHUNK_BYTES, self.move_rate))
                info = current.read(future.log_end_offset, chunk, ISOLATION_LOG_END, True)
                data = info.records.read() if info.records is not None else b""
                pos = 0
                while pos + LOG_OVERHEAD + 49 <= len(data):
                    h = read_header(data, pos)
                    if pos + h.size > len(data):
                        break
                    pos += h.size
                if pos:
                    future.append_as_follower(data[:pos])
                    await asyncio.sleep(self._move_delay(pos))
                else:
                    await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            raise
        except OSError as exc:
            future = self.future_logs.get(tp)
            if future is not None:
                self.failure_channel.maybe_add_offline_log_dir(future.dir.parent, f"Error moving {tp[0]}-{tp[1]}", exc)
        except Exception:
            log.exception("Moving %s-%d failed", *tp)
        finally:
            if self._movers.get(tp) is asyncio.current_task():
                del self._movers[tp]

    def _move_delay(self, copied: int) -> float:
        """How long a mover waits after copying `copied` bytes to keep all moves at move_rate."""
        if self.move_rate == math.inf:
            return 0.0
        now = time.monotonic()
        self._move_clock = max(now, self._move_clock) + copied / max(self.move_rate, 1.0)
        return self._move_clock - now

    # --- stray replicas -----------------------------------------------------------------------
    def rename_stray_logs(self, image: MetadataImage, broker_id: int) -> list[TopicPartition]:
        """On the broker's first metadata publish, as Kafka's initializeManagers with
        isStrayKraftReplica: a loaded log whose topic id the image does not know (a topic deleted,
        maybe recreated under the same name, while this broker was away), whose replica set lacks
        this broker, or that has no topic id, is renamed `<topic>-<p>.<uuid>-stray` and never served."""
        strays = []
        for tp, ulog in list(self.current_logs.items()):
            reason = stray_reason(image, broker_id, ulog)
            if reason is None:
                continue
            with self._lock:
                if self.current_logs.get(tp) is not ulog:
                    continue
                if self.cleaner is not None:
                    self.cleaner.manager.abort_cleaning(tp)
                    self.cleaner.manager.update_checkpoints(ulog.dir.parent, remove=tp)
                ulog.rename_dir(log_file_utils.log_stray_dir_name(*tp))
                del self.current_logs[tp]
                ulog.close()
            log.warning("Found stray log %s-%d (%s): renamed to %s", tp[0], tp[1], reason, ulog.dir)
            strays.append(tp)
        return strays

    # --- truncation (replica fetchers) ---------------------------------------------------------
    def truncate_to(self, tp: TopicPartition, offset: int) -> bool:
        """Truncate a replica's log, as Kafka's LogManager.truncateTo: a truncation below the active
        segment first aborts and pauses a clean in progress (its output would swap the truncated
        records back in) and pulls the cleaner checkpoint back to the active segment."""
        ulog = self.current_logs.get(tp)
        if ulog is None:
            return False
        stop_cleaner = self.cleaner is not None and offset < ulog.active_segment.base_offset
        return self._truncate_with_cleaner_paused(tp, ulog, stop_cleaner, lambda: ulog.truncate_to(offset))

    def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> None:
        """Empty a replica's log to restart at `offset` (Kafka's LogManager.truncateFullyAndStartAt)."""
        ulog = self.current_logs.get(tp)
        if ulog is None:
            return

        def truncate() -> bool:
            ulog.truncate_fully_and_start_at(offset)
            return True

        self._truncate_with_cleaner_paused(tp, ulog, self.cleaner is not None, truncate)

    def _truncate_with_cleaner_paused(
        self, tp: TopicPartition, ulog: UnifiedLog, stop_cleaner: bool, truncate: Callable[[], bool]
    ) -> bool:
        if not stop_cleaner or self.cleaner is None:
            return truncate()
        manager = self.cleaner.manager
        manager.abort_and_pause_cleaning(tp)
        try:
            truncated = truncate()
            manager.maybe_truncate_checkpoint(ulog.dir.parent, tp, ulog.active_segment.base_offset)
            return truncated
        finally:
            manager.resume_cleaning([tp])

    def replace_current_with_future_log(self, tp: TopicPartition) -> None:
        with self._lock:
            current, future = self.current_logs[tp], self.future_logs[tp]
            if self.cleaner is not None:
                self.cleaner.manager.abort_and_pause_cleaning(tp)
            try:
                old_parent = current.dir.parent
                current.rename_dir(log_file_utils.log_delete_dir_name(*tp))
                future.rename_dir(log_file_utils.log_dir_name(*tp))
                future.update_high_watermark(current.high_watermark)
                if current.log_start_offset > future.log_start_offset:
                    future.maybe_increment_log_start_offset(current.log_start_offset, "log move")
                self.current_logs[tp] = future
                del self.future_logs[tp]
                if self.cleaner is not None:
                    self.cleaner.manager.update_checkpoints(old_parent, remove=tp)
            finally:
                if self.cleaner is not None:
                    self.cleaner.manager.resume_cleaning([tp])
            self.logs_to_be_deleted.append((current, time.monotonic()))
            if self._delete_wake is not None:
                self._delete_wake.set()
        log.info("The current replica of %s-%d is replaced by the future one in %s", tp[0], tp[1], future.dir.parent)
        for listener in self.log_replaced_listeners:
            listener(tp, future)

    # --- shutdown -----------------------------------------------------------------------------
    async def _stop_background(self) -> None:
        for t in list(self._movers.values()) + self._tasks:
            t.cancel()
        for t in list(self._movers.values()) + self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        self._movers.clear()
        if self.cleaner is not None:
            await self.cleaner.shutdown()

    def shutdown(self) -> None:
        """Stop the background tasks, flush and close every log (in parallel per dir),
        checkpoint, then mark each fully loaded dir cleanly shut down."""
        if self._shut_down:
            return
        self._shut_down = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                in_loop = asyncio.get_running_loop() is loop
            except RuntimeError:
                in_loop = False
            if not in_loop:
                asyncio.run_coroutine_threadsafe(self._stop_background(), loop).result(60)
        threads = max(1, int(self._cfg("num.recovery.threads.per.data.dir", 2)))
        failed_dirs: set[Path] = set()

        def close_log(ul: UnifiedLog) -> None:
            try:
                ul.flush()
                ul.close()
            except OSError as exc:
                failed_dirs.add(ul.dir.parent)
                log.error("Error closing %s: %s", ul.topic_partition, exc)

        for d in list(self.live_log_dirs):
            logs = [
                ul for ul in list(self.current_logs.values()) + list(self.future_logs.values()) if ul.dir.parent == d
            ]
            with ThreadPoolExecutor(threads, thread_name_prefix=f"log-closing-{d}") as pool:
                list(pool.map(close_log, logs))
        self.checkpoint()
        for d in list(self.live_log_dirs):
            if d in failed_dirs or d not in self._loaded_dirs:
                continue
            try:
                CleanShutdownFileHandler(d).write(self.broker_epoch)
            except OSError as exc:
                log.error("Error writing the clean shutdown marker in %s: %s", d, exc)
        self._release_locks()
