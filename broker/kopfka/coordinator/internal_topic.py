"""What the group and transaction coordinators share about their internal topics
(`__consumer_offsets`, `__transaction_state`): creating the topic on first use, naming the
coordinator of a key for FindCoordinator, and replaying a partition on becoming its leader."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from kopfka.controller.quorum_controller import CreateTopicSpec
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.records import BatchHeader, iter_batches

log = logging.getLogger(__name__)


def coordinator_endpoint(image: Any, topic: Any, partition: int, listener: str) -> dict[str, Any]:
    """node_id/host/port of the leader of `partition` of the internal `topic` on `listener`."""
    reg = topic.partitions.get(partition)
    broker = image.brokers.get(reg.leader) if reg is not None else None
    ep = broker.endpoint(listener) if broker is not None and not broker.fenced else None
    if ep is None or broker is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "the coordinator is not available")
    return {"node_id": broker.broker_id, "host": ep.host, "port": ep.port}


def follow_leadership(
    topic: Any,
    changed: Iterable[int],
    node_id: int,
    shards: dict[int, Any],
    start_load: Callable[[int, int], None],
    role: str,
) -> None:
    """For each changed partition of an internal topic: (re)load the shard of a partition this
    broker now leads, or leads in a new leader epoch; close the shard of one it no longer leads.
    Shards have `leader_epoch` and `close()`."""
    for pid in sorted(changed):
        reg = topic.partitions.get(pid)
        current = shards.get(pid)
        if reg is not None and reg.leader == node_id:
            if current is None or current.leader_epoch != reg.leader_epoch:
                if current is not None:
                    current.close()
                start_load(pid, reg.leader_epoch)
        elif current is not None:
            log.info("Resigning as %s for %s-%d", role, topic.name, pid)
            current.close()
            del shards[pid]


async def ensure_topic(controller: Any, lock: asyncio.Lock, exists: Any, spec: CreateTopicSpec) -> None:
    """Create the internal topic unless `exists()`; failures are logged (the caller answers
    COORDINATOR_NOT_AVAILABLE and the client retries)."""
    async with lock:
        if exists():
            return
        try:
            results = await controller.create_topics([spec])
        except KafkaError as exc:
            log.warning("Could not create %s: %s", spec.name, exc)
            return
        for r in results:
            if r.error not in (ErrorCode.none, ErrorCode.topic_already_exists):
                log.warning("Could not create %s: %s %s", spec.name, r.error.name, r.message)


async def replay_partition(
    replica_manager: Any, tp: tuple[str, int], buffer_size: int = 1 << 20
) -> AsyncIterator[tuple[bytes, BatchHeader]]:
    """(bytes, header) of every batch of the partition up to its log end, yielding to the event
    loop between reads so loading a large partition never stalls the broker."""
    part = replica_manager.partitions.get(tp)
    if part is None:
        raise KafkaError(ErrorCode.not_coordinator, f"{tp} is not hosted here")
    ulog = part.log
    offset, end = ulog.log_start_offset, ulog.log_end_offset
    while offset < end:
        data = ulog.read(offset, buffer_size, isolation="log_end", min_one_message=True).records.read()
        if not data:
            break
        for header in iter_batches(data, allow_partial_tail=True):
            offset = header.next_offset
            yield data, header
        await asyncio.sleep(0)
