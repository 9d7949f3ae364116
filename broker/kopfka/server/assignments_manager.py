"""AssignmentsManager (seed 000): tells the controller which log dir holds each local replica (JBOD).

The broker is the authority on placement: the controller's `PartitionRecord.directories` only
learns it through AssignReplicasToDirs. Intents ("partition P now lives in dir D") are kept in a
`ready` map keyed by partition, so a newer intent for the same partition replaces an older one;
one batch is in flight at a time; a failed batch (or partition) goes back into `ready` unless a
newer intent arrived meanwhile, and is retried with exponential backoff (100 ms, x2, 10 s cap).

Intents come from reconciling the local logs with the metadata image: after every published
image (new partitions were just created by the replica manager) and periodically (a partition
moved by AlterReplicaLogDirs, a retry). Before sending, each intent is re-validated against the
current image and dropped when stale (topic gone, no longer a replica, already recorded).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from kopfka.metadata.features import directory_assignment_supported
from kopfka.metadata.image import MetadataImage
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.timeouts import wait_quietly

log = logging.getLogger(__name__)

MAX_ASSIGNMENTS_PER_REQUEST = 2250
Key = tuple[str, int]  # (topic id, partition)


class AssignmentsManager:
    name = "AssignmentsManager"

    def __init__(
        self,
        node_id: int,
        log_manager: Any,
        controller: Any,
        *,
        broker_epoch: Callable[[], int],
        image: Callable[[], MetadataImage],
        backoff_base_ms: int = 100,
        backoff_max_ms: int = 10_000,
        resync_interval_s: float = 5.0,
    ) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.controller = controller
        self.broker_epoch = broker_epoch
        self.image = image
        self.backoff_base = backoff_base_ms / 1000
        self.backoff_max = backoff_max_ms / 1000
        self.resync_interval = resync_interval_s
        self.ready: dict[Key, str] = {}
        self.inflight: dict[Key, str] = {}
        self.sent = 0  # assignments acknowledged by the controller (tests, metrics)
        # acknowledged but maybe not yet in our image: not re-sent for one resync interval
        self._acked: dict[Key, tuple[str, float]] = {}
        self._failures = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # --- intents ------------------------------------------------------------------------------
    def on_assignment(self, topic_id: str, partition: int, directory_id: str) -> None:
        self.ready[(topic_id, partition)] = directory_id
        self._wake.set()

    def _recorded_dir(self, image: MetadataImage, topic_id: str, partition: int) -> str | None:
        """The dir the controller has for our replica; None when we are no replica of it."""
        t = image.topics_by_id.get(topic_id)
        p = t.partitions.get(partition) if t is not None else None
        if p is None or self.node_id not in p.replicas:
            return None
        if len(p.directories) != len(p.replicas):
            return ""
        return p.directories[p.replicas.index(self.node_id)]

    def reconcile(self, image: MetadataImage | None = None) -> int:
        """Queue an intent for each local log whose dir differs from what the controller recorded."""
        image = image or self.image()
        if not directory_assignment_supported(image.features):
            return 0  # directories are recorded from metadata.version 3.7-IV2 on, as in Kafka
        dir_ids: dict[Any, str] = dict(self.log_manager.directory_ids)
        queued = 0
        for (name, partition), ulog in list(self.log_manager.current_logs.items()):
            t = image.topics_by_name.get(name)
            dir_id = dir_ids.get(ulog.dir.parent)
            if t is None or not dir_id:
                continue
            key = (t.topic_id, partition)
            recorded = self._recorded_dir(image, t.topic_id, partition)
            if recorded is None or recorded == dir_id:
                self._acked.pop(key, None)
                continue
            acked = self._acked.get(key)
            if acked is not None and acked[0] == dir_id and time.monotonic() - acked[1] < self.resync_interval:
                continue
            if self.ready.get(key) != dir_id and self.inflight.get(key) != dir_id:
                self.on_assignment(t.topic_id, partition, dir_id)
                queued += 1
        return queued

    # --- MetadataPublisher ------------------------------------------------------------------------
    def on_metadata_update(self, delta: Any, image: MetadataImage) -> None:
        self.reconcile(image)

    # --- sending --------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"broker-{self.node_id}-directory-assignments-manager")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    def _backoff(self) -> float:
        if self._failures == 0:
            return self.resync_interval
        return float(min(self.backoff_max, self.backoff_base * 2 ** (self._failures - 1)))

    async def _run(self) -> None:
        while True:
            await wait_quietly(self._wake.wait(), self._backoff())
            self._wake.clear()
            try:
                if self._failures == 0:
                    self.reconcile()
                if self.ready:
                    await self.send_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("AssignReplicasToDirs round failed")
                self._failures += 1

    def _requeue(self, batch: dict[Key, str]) -> None:
        for key, d in batch.items():
            self.ready.setdefault(key, d)  # a newer intent for the same partition wins

    async def send_once(self) -> None:
        """Send one batch of valid intents; on failure they return to `ready` with backoff."""
        epoch = self.broker_epoch()
        if epoch < 0 or self.inflight:
            return
        image = self.image()
        batch: dict[Key, str] = {}
        for key in list(self.ready):
            d = self.ready.pop(key)
            recorded = self._recorded_dir(image, *key)
            if recorded is None or recorded == d:
                continue  # stale: deleted, reassigned away, or already recorded
            batch[key] = d
            if len(batch) >= MAX_ASSIGNMENTS_PER_REQUEST:
                break
        if not batch:
            self._failures = 0
            return
        self.inflight = batch
        try:
            results = await self.controller.assign_replicas_to_dirs(
                self.node_id, epoch, [(d, t, p) for (t, p), d in batch.items()]
            )
        except KafkaError as exc:
            log.info("AssignReplicasToDirs failed (%s); retrying %d assignment(s)", exc, len(batch))
            self._requeue(batch)
            self._failures += 1
            return
        finally:
            self.inflight = {}
        failed = {k: d for k, d in batch.items() if results.get(k, ErrorCode.none) != ErrorCode.none}
        self.sent += len(batch) - len(failed)
        now = time.monotonic()
        self._acked.update({k: (d, now) for k, d in batch.items() if k not in failed})
        if failed:
            log.info("AssignReplicasToDirs: %d of %d assignment(s) refused; retrying", len(failed), len(batch))
            self._requeue(failed)
            self._failures += 1
        else:
            log.debug("AssignReplicasToDirs: %d assignment(s) recorded", len(batch))
            self._failures = 0
        if self.ready:
            self._wake.set()
