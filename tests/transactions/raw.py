"""Raw transactional producer steps over kio (kopfka's own client) for the protocol tests."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kopfka.client.connection import KafkaConnection
from kopfka.client.transactions import TransactionDescription, parse_describe_transactions
from kopfka.protocol.record_codec import Record, encode_batch

from transactions.helpers import wait_for_coordinator


def run(bootstrap: str, scenario: Any) -> Any:
    async def main() -> Any:
        conn = await KafkaConnection.open(bootstrap)
        try:
            await wait_for_coordinator(conn, "warmup")
            return await scenario(Txn(conn))
        finally:
            await conn.close()

    return asyncio.run(main())


class Txn:
    """Raw transactional producer steps over one connection."""

    def __init__(self, conn: KafkaConnection) -> None:
        self.conn = conn

    async def init(self, tid: str, timeout_ms: int = 60000, version: int = 4, **kw: Any) -> Any:
        return await self.conn.request(22, version, {"transactional_id": tid, "transaction_timeout": timeout_ms, **kw})

    async def add(self, tid: str, pid: int, epoch: int, parts: list[tuple[str, int]], version: int = 3) -> dict:
        topics: dict[str, list[int]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append(p)
        r = await self.conn.request(
            24,
            version,
            {
                "v3_and_below_transactional_id": tid,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        return {
            (t.name, p.partition_index): int(p.partition_error_code)
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    async def produce(
        self, tid: str, pid: int, epoch: int, seq: int, tp: tuple[str, int], value: bytes, version: int = 10
    ) -> tuple[int, int]:
        batch = encode_batch(
            [Record(0, int(time.time() * 1000), None, value)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=True,
        )
        r = await self.conn.request(
            0,
            version,
            {
                "transactional_id": tid,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": tp[0], "partition_data": [{"index": tp[1], "records": batch}]}],
            },
        )
        p = r.responses[0].partition_responses[0]
        return int(p.error_code), int(p.base_offset)

    async def end(self, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> Any:
        return await self.conn.request(
            26, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
        )

    async def describe(self, *tids: str) -> list[TransactionDescription]:
        # read by hand: kio refuses the -1 start time Kafka sends for a transaction not started
        return parse_describe_transactions(await self.conn.request_frame(65, 0, {"transactional_ids": list(tids)}))

    async def wait_state(self, tid: str, state: str) -> None:
        for _ in range(200):
            if (await self.describe(tid))[0].state == state:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{tid} never reached {state}")

    async def offsets(self, tp: tuple[str, int]) -> tuple[int, int]:
        """(last stable offset, high watermark) by ListOffsets latest in each isolation level."""
        out = []
        for iso in (1, 0):
            r = await self.conn.request(
                2,
                7,
                {
                    "replica_id": -1,
                    "isolation_level": iso,
                    "topics": [{"name": tp[0], "partitions": [{"partition_index": tp[1], "timestamp": -1}]}],
                },
            )
            out.append(int(r.topics[0].partitions[0].offset))
        return out[0], out[1]
