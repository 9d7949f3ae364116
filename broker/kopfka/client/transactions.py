"""Transaction admin (what kafka-transactions and the admin client do): describe and list
transactions, describe a partition's producers, abort a hanging transaction, find hanging ones.

DescribeTransactions is read by hand: Kafka answers a transaction without a start time with
-1 in a non-nullable timestamp field, which kio's reader refuses.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kopfka.client.admin import AdminError
from kopfka.client.cluster import TRANSACTION, ClusterClient
from kopfka.coordinator.record_io import Reader
from kopfka.protocol.errors import ErrorCode

DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000  # kafka-transactions find-hanging's default


@dataclass
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    error: ErrorCode
    state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class ProducerState:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int


@dataclass
class HangingTransaction:
    topic: str
    partition: int
    producer: ProducerState


def parse_describe_transactions(frame: bytes, coordinator_id: int = -1) -> list[TransactionDescription]:
    """DescribeTransactions v0 response frame (correlation id, header tags, body)."""
    r = Reader(frame, flexible=True)
    r.pos = 4
    r.skip_tags()
    r.i32()  # throttle time
    out = []
    for _ in range(max(r.array_len(), 0)):
        error = ErrorCode(r.i16())
        tid = r.string() or ""
        state = r.string() or ""
        timeout, start, pid, epoch = r.i32(), r.i64(), r.i64(), r.i16()
        parts: list[tuple[str, int]] = []
        for _ in range(max(r.array_len(), 0)):
            topic = r.string() or ""
            parts.extend((topic, r.i32()) for _ in range(max(r.array_len(), 0)))
            r.skip_tags()
        r.skip_tags()
        out.append(TransactionDescription(coordinator_id, tid, error, state, timeout, start, pid, epoch, parts))
    return out


class TransactionsClient(ClusterClient):
    async def describe(self, transactional_id: str) -> TransactionDescription:
        node, host, port = await self.find_coordinator(transactional_id, TRANSACTION)
        frame = await (await self.conn(f"{host}:{port}")).request_frame(
            65, 0, {"transactional_ids": [transactional_id]}
        )
        (d,) = parse_describe_transactions(frame, node)
        if d.error != ErrorCode.none:
            raise AdminError(d.error, f"transactional id {transactional_id}")
        return d

    async def list_transactions(
        self, states: list[str] | None = None, producer_ids: list[int] | None = None, duration_ms: int = -1
    ) -> list[tuple[str, int, int, str]]:
        """(transactional id, coordinator, producer id, state) from every broker's coordinator."""
        out: list[tuple[str, int, int, str]] = []
        for node, address in sorted((await self.brokers()).items()):
            resp = await (await self.conn(address)).request(
                66,
                1,
                {
                    "state_filters": states or [],
                    "producer_id_filters": producer_ids or [],
                    "duration_filter": duration_ms,
                },
            )
            code = ErrorCode(int(resp.error_code))
            if code != ErrorCode.none:
                raise AdminError(code, f"ListTransactions on broker {node}")
            out.extend(
                (s.transactional_id, node, int(s.producer_id), s.transaction_state) for s in resp.transaction_states
            )
        return sorted(out)

    async def describe_producers(self, topic: str, partition: int) -> list[ProducerState]:
        leader = (await self.leaders([topic])).get((topic, partition))
        if leader is None or leader < 0:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition}")
        return (await self._producers_at(leader, topic, [partition]))[partition]

    async def _producers_at(self, leader: int, topic: str, partitions: list[int]) -> dict[int, list[ProducerState]]:
        address = (await self.brokers())[leader]
        resp = await (await self.conn(address)).request(
            61, 0, {"topics": [{"name": topic, "partition_indexes": partitions}]}
        )
        out = {}
        for p in resp.topics[0].partitions:
            code = ErrorCode(int(p.error_code))
            if code != ErrorCode.none:
                raise AdminError(code, f"{topic}-{p.partition_index}: {p.error_message or code.name}")
            out[int(p.partition_index)] = [
                ProducerState(
                    int(s.producer_id),
                    int(s.producer_epoch),
                    int(s.coordinator_epoch),
                    int(s.last_sequence),
                    int(s.last_timestamp),
                    int(s.current_txn_start_offset),
                )
                for s in p.active_producers
            ]
        return out

    async def abort(
        self,
        topic: str,
        partition: int,
        *,
        start_offset: int | None = None,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        coordinator_epoch: int | None = None,
    ) -> ProducerState | None:
        """Write an ABORT marker for a (hanging) transaction in one partition, as the admin
        client's abortTransaction: found by its start offset, or named by producer id/epoch."""
        leader = (await self.leaders([topic])).get((topic, partition))
        if leader is None or leader < 0:
            raise AdminError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition}")
        found = None
        if start_offset is not None:
            producers = (await self._producers_at(leader, topic, [partition]))[partition]
            found = next((p for p in producers if p.current_txn_start_offset == start_offset), None)
            if found is None:
                raise AdminError(
                    ErrorCode.invalid_request,
                    f"no open transaction starts at offset {start_offset} in {topic}-{partition}",
                )
            producer_id, producer_epoch, coordinator_epoch = (
                found.producer_id,
                found.producer_epoch,
                found.coordinator_epoch,
            )
        if producer_id is None or producer_epoch is None or coordinator_epoch is None:
            raise ValueError("abort needs --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch")
        address = (await self.brokers())[leader]
        resp = await (await self.conn(address)).request(
            27,
            1,
            {
                "markers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "transaction_result": False,
                        "coordinator_epoch": coordinator_epoch,
                        "topics": [{"name": topic, "partition_indexes": [partition]}],
                    }
                ]
            },
        )
        code = ErrorCode(int(resp.markers[0].topics[0].partitions[0].error_code))
        if code != ErrorCode.none:
            raise AdminError(code, f"aborting producer {producer_id} in {topic}-{partition}")
        return found

    async def find_hanging(
        self,
        *,
        broker_id: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
    ) -> list[HangingTransaction]:
        """Open transactions older than the longest transaction timeout whose coordinator does not
        have them open on that partition (kafka-transactions find-hanging)."""
        leaders = await self.leaders([topic] if topic else [])
        wanted: dict[int, dict[str, list[int]]] = {}
        for (t, p), leader in leaders.items():
            if (
                (broker_id is not None and leader != broker_id)
                or (partition is not None and p != partition)
                or leader < 0
            ):
                continue
            wanted.setdefault(leader, {}).setdefault(t, []).append(p)
        now = int(time.time() * 1000)
        candidates: list[HangingTransaction] = []
        for leader, topics in wanted.items():
            for t, parts in topics.items():
                for p, producers in (await self._producers_at(leader, t, sorted(parts))).items():
                    candidates.extend(
                        HangingTransaction(t, p, s)
                        for s in producers
                        if s.current_txn_start_offset >= 0 and now - s.last_timestamp > max_transaction_timeout_ms
                    )
        if not candidates:
            return []
        listed = await self.list_transactions(producer_ids=sorted({c.producer.producer_id for c in candidates}))
        by_pid = {pid: tid for tid, _node, pid, _state in listed}
        hanging = []
        for c in candidates:
            tid = by_pid.get(c.producer.producer_id)
            if tid is None:
                hanging.append(c)
                continue
            try:
                d = await self.describe(tid)
            except AdminError:
                hanging.append(c)
                continue
            open_here = (
                d.state in ("Ongoing", "PrepareCommit", "PrepareAbort")
                and d.producer_id == c.producer.producer_id
                and (c.topic, c.partition) in d.partitions
            )
            if not open_here:
                hanging.append(c)
        return hanging
