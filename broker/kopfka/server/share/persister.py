"""ShareStatePersister: how partition leaders and the group coordinator reach the share coordinator.

Kafka's DefaultStatePersister: each share-partition's state lives with the share coordinator of
its key ("group:topicId:partition"), the leader of one `__share_group_state` partition. A
request goes to that broker — in-process when it is this one, else as
Initialize/Read/Write/Delete ShareGroupState or ReadShareGroupStateSummary over the
inter-broker listener — and is retried while the coordinator moves, loads or does not exist
yet (the topic is created on first use), until the request timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kopfka.coordinator.share.coordinator import PartitionResult, ShareCoordinator, ShareGroupOffset
from kopfka.coordinator.share.records import StateBatch
from kopfka.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

INITIALIZE, READ, WRITE, DELETE, READ_SUMMARY = 83, 84, 85, 86, 87
RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,
        ErrorCode.broker_not_available,
    }
)
BACKOFF_S = 0.05


class ShareStatePersister:
    def __init__(self, services: Any) -> None:
        self.services = services

    @property
    def coordinator(self) -> ShareCoordinator:
        coord: ShareCoordinator = self.services.share_coordinator
        return coord

    def _timeout_s(self) -> float:
        return int(self.services.config["request.timeout.ms"]) / 1000

    async def _call(
        self,
        key: tuple[str, uuid.UUID, int],
        local: Callable[[], Awaitable[PartitionResult]],
        api: int,
        version: int,
        partition: dict[str, Any],
        parse: Callable[[Any], PartitionResult],
    ) -> PartitionResult:
        group, topic_id, _ = key
        deadline = time.monotonic() + self._timeout_s()
        result = PartitionResult(ErrorCode.coordinator_not_available, "The share coordinator is not available.")
        while time.monotonic() < deadline:
            coord = self.coordinator
            if coord is None:
                return result
            node = coord.coordinator_node(*key)
            if node < 0:
                if "__share_group_state" not in coord.image.topics_by_name:
                    await coord.ensure_topic()
            elif node == self.services.node_id:
                result = await local()
            else:
                body = {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [partition]}]}
                try:
                    resp = await self.services.inter_broker.request(node, api, version, body, timeout=self._timeout_s())
                    result = parse(resp.results[0].partitions[0])
                except KafkaError as exc:
                    result = PartitionResult(exc.code, exc.message)
            if result.error not in RETRIABLE:
                return result
            await asyncio.sleep(BACKOFF_S)
        return result

    async def initialize(
        self, group: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int
    ) -> PartitionResult:
        return await self._call(
            (group, topic_id, partition),
            lambda: self.coordinator.initialize_state(group, topic_id, partition, state_epoch, start_offset),
            INITIALIZE,
            0,
            {"partition": partition, "state_epoch": state_epoch, "start_offset": start_offset},
            _error_only,
        )

    async def read(self, group: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PartitionResult:
        return await self._call(
            (group, topic_id, partition),
            lambda: self.coordinator.read_state(group, topic_id, partition, leader_epoch),
            READ,
            0,
            {"partition": partition, "leader_epoch": leader_epoch},
            _read_result,
        )

    async def write(
        self,
        group: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: list[StateBatch],
    ) -> PartitionResult:
        return await self._call(
            (group, topic_id, partition),
            lambda: self.coordinator.write_state(
                group,
                topic_id,
                partition,
                state_epoch=state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start_offset,
                delivery_complete_count=delivery_complete_count,
                batches=batches,
            ),
            WRITE,
            1,
            {
                "partition": partition,
                "state_epoch": state_epoch,
                "leader_epoch": leader_epoch,
                "start_offset": start_offset,
                "delivery_complete_count": delivery_complete_count,
                "state_batches": [
                    {
                        "first_offset": b.first_offset,
                        "last_offset": b.last_offset,
                        "delivery_state": b.delivery_state,
                        "delivery_count": b.delivery_count,
                    }
                    for b in batches
                ],
            },
            _error_only,
        )

    async def delete(self, group: str, topic_id: uuid.UUID, partition: int) -> PartitionResult:
        return await self._call(
            (group, topic_id, partition),
            lambda: self.coordinator.delete_state(group, topic_id, partition),
            DELETE,
            0,
            {"partition": partition},
            _error_only,
        )

    async def read_summary(self, group: str, topic_id: uuid.UUID, partition: int) -> PartitionResult:
        async def local() -> PartitionResult:
            return self.coordinator.read_summary(group, topic_id, partition)

        return await self._call(
            (group, topic_id, partition),
            local,
            READ_SUMMARY,
            1,
            {"partition": partition, "leader_epoch": -1},
            _summary_result,
        )


def _error_only(p: Any) -> PartitionResult:
    return PartitionResult(ErrorCode(int(p.error_code)), p.error_message)


def _read_result(p: Any) -> PartitionResult:
    res = _error_only(p)
    if res.error == ErrorCode.none:
        batches = [
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
        ]
        res.state = ShareGroupOffset(0, p.state_epoch, -1, p.start_offset, -1, batches)
    return res


def _summary_result(p: Any) -> PartitionResult:
    res = _error_only(p)
    if res.error == ErrorCode.none:
        res.state = ShareGroupOffset(
            0, p.state_epoch, p.leader_epoch, p.start_offset, getattr(p, "delivery_complete_count", -1)
        )
    return res
