"""The share coordinator on a real broker: its RPCs, snapshots every N updates, leader-epoch
fencing, state surviving SIGKILL, pruning, and Kafka's own kafka-dump-log reading the
`__share_group_state` segments kopfka wrote."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from kopfka import uuids
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka_process import KopfkaProcess

from .helpers import create_topic, topic_id

OVERRIDES = {
    "share.coordinator.state.topic.num.partitions": "2",
    "share.coordinator.snapshot.update.records.per.snapshot": "2",
}
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4
FIND_COORDINATOR, INITIALIZE, READ, WRITE, DELETE, SUMMARY = 10, 83, 84, 85, 86, 87


def _batches(*bs: tuple[int, int, int, int]) -> list[dict[str, int]]:
    return [{"first_offset": a, "last_offset": b, "delivery_state": s, "delivery_count": c} for a, b, s, c in bs]


async def _find(conn: KafkaConnection, key: str) -> Any:
    for _ in range(100):
        resp = await conn.request(FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [key]})
        c = resp.coordinators[0]
        if c.error_code == ErrorCode.none:
            return c
        assert c.error_code == ErrorCode.coordinator_not_available, c
        await asyncio.sleep(0.1)
    raise AssertionError("no share coordinator")


async def _call(conn: KafkaConnection, api: int, version: int, group: str, tid: uuid.UUID, **partition: Any) -> Any:
    for _ in range(100):
        resp = await conn.request(
            api, version, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [partition]}]}
        )
        p = resp.results[0].partitions[0]
        if p.error_code not in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator):
            return p
        await asyncio.sleep(0.1)
    raise AssertionError("the share coordinator did not load")


async def _state(conn: KafkaConnection, group: str, tid: uuid.UUID, leader_epoch: int = -1) -> Any:
    return await _call(conn, READ, 0, group, tid, partition=0, leader_epoch=leader_epoch)


def _as_tuples(p: Any) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]


async def _scenario(bootstrap: str, group: str, tid: uuid.UUID) -> None:
    conn = await KafkaConnection.open(bootstrap)
    try:
        coord = await _find(conn, f"{group}:{uuids.to_str(tid)}:0")
        assert coord.port == int(bootstrap.rsplit(":", 1)[1])
        bad = await conn.request(FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": ["no-colons"]})
        assert bad.coordinators[0].error_code == ErrorCode.invalid_request
        # nothing to read or write before the group coordinator initialized the state
        p = await _state(conn, group, tid)
        assert p.error_code == ErrorCode.invalid_request and "uninitialized" in p.error_message
        p = await _call(conn, INITIALIZE, 0, group, tid, partition=0, state_epoch=1, start_offset=5)
        assert p.error_code == ErrorCode.none
        # three writes: two updates, then (2 updates per snapshot) a snapshot
        writes = [
            dict(start_offset=-1, state_batches=_batches((5, 9, ACKED, 1), (10, 14, AVAILABLE, 1))),
            dict(start_offset=-1, state_batches=_batches((10, 12, ARCHIVED, 5))),
            dict(start_offset=10, state_batches=_batches((13, 13, ACKED, 2))),
        ]
        for w in writes:
            p = await _call(
                conn, WRITE, 1, group, tid, partition=0, state_epoch=1, leader_epoch=0, delivery_complete_count=3, **w
            )
            assert p.error_code == ErrorCode.none, p
        p = await _state(conn, group, tid, leader_epoch=0)
        assert (p.error_code, p.state_epoch, p.start_offset) == (ErrorCode.none, 1, 10)
        assert _as_tuples(p) == [(10, 12, ARCHIVED, 5), (13, 13, ACKED, 2), (14, 14, AVAILABLE, 1)]
        # a new leader (epoch 3) reads; the old one (epoch 0) is fenced from then on
        assert (await _state(conn, group, tid, leader_epoch=3)).error_code == ErrorCode.none
        p = await _call(
            conn,
            WRITE,
            1,
            group,
            tid,
            partition=0,
            state_epoch=1,
            leader_epoch=0,
            start_offset=-1,
            delivery_complete_count=-1,
            state_batches=[],
        )
        assert p.error_code == ErrorCode.fenced_leader_epoch
        assert (await _state(conn, group, tid, leader_epoch=2)).error_code == ErrorCode.fenced_leader_epoch
        # an older state epoch is fenced too (the group coordinator re-initialized with a newer one)
        p = await _call(
            conn,
            WRITE,
            1,
            group,
            tid,
            partition=0,
            state_epoch=0,
            leader_epoch=3,
            start_offset=-1,
            delivery_complete_count=-1,
            state_batches=[],
        )
        assert p.error_code == ErrorCode.fenced_state_epoch
        s = await _call(conn, SUMMARY, 1, group, tid, partition=0, leader_epoch=-1)
        assert (s.error_code, s.start_offset, s.leader_epoch, s.state_epoch) == (ErrorCode.none, 10, 3, 1)
        # unknown topics and partitions are refused
        p = await _call(conn, INITIALIZE, 0, group, uuid.uuid4(), partition=0, state_epoch=0, start_offset=0)
        assert p.error_code == ErrorCode.unknown_topic_or_partition
        p = await _call(conn, INITIALIZE, 0, group, tid, partition=9, state_epoch=0, start_offset=0)
        assert p.error_code == ErrorCode.unknown_topic_or_partition
    finally:
        await conn.close()


async def _after_restart(bootstrap: str, group: str, tid: uuid.UUID) -> None:
    conn = await KafkaConnection.open(bootstrap)
    try:
        await _find(conn, f"{group}:{uuids.to_str(tid)}:0")
        p = await _state(conn, group, tid, leader_epoch=3)
        assert (p.error_code, p.state_epoch, p.start_offset) == (ErrorCode.none, 1, 10)
        assert _as_tuples(p) == [(10, 12, ARCHIVED, 5), (13, 13, ACKED, 2), (14, 14, AVAILABLE, 1)]
        assert (await _call(conn, DELETE, 0, group, tid, partition=0)).error_code == ErrorCode.none
        assert (await _state(conn, group, tid)).error_code == ErrorCode.invalid_request
        s = await _call(conn, SUMMARY, 1, group, tid, partition=0, leader_epoch=-1)
        assert (s.error_code, s.start_offset) == (ErrorCode.none, -1)  # no state: start offset -1
    finally:
        await conn.close()


def _dump(data_dir: Path) -> list[dict[str, Any]]:
    """Kafka's kafka-dump-log --share-group-state-decoder over every state segment kopfka wrote."""
    from kafka_ref import KafkaUnavailable, run_tool

    segments = sorted(data_dir.glob("**/__share_group_state-*/*.log"))
    assert segments
    try:
        out = run_tool("kafka-dump-log", "--share-group-state-decoder", "--files", ",".join(map(str, segments)))
    except KafkaUnavailable as exc:
        pytest.skip(f"Apache Kafka unavailable: {exc}")
    records = []
    for line in out.stdout.splitlines():
        if " payload: " in line:
            head, _, payload = line.partition(" payload: ")
            key = json.loads(head.split(" key: ", 1)[1])
            records.append({"key": key, "payload": json.loads(payload) if payload != "<DELETE>" else None})
    return records


def test_share_state_rpcs_persist_and_kafka_reads_them(tmp_path: Path) -> None:
    broker = KopfkaProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        create_topic(broker.bootstrap, "events", 1)
        tid = topic_id(broker.bootstrap, "events")
        asyncio.run(_scenario(broker.bootstrap, "g1", tid))
        broker.kill()  # SIGKILL: nothing but what was replicated and written survives
        broker.start()
        asyncio.run(_after_restart(broker.bootstrap, "g1", tid))
    finally:
        broker.kill()
    records = _dump(tmp_path / "data")
    kinds = [(r["key"]["type"], r["payload"] is None) for r in records]
    # initialize (snapshot), 2 updates, a snapshot, a leader-epoch update, then the tombstone
    assert [k for k, _ in kinds] == ["0", "1", "1", "0", "1", "0"], records
    snap = records[3]["payload"]["data"]
    assert snap["startOffset"] == 10 and snap["stateEpoch"] == 1 and snap["snapshotEpoch"] == 1
    assert snap["stateBatches"][0] == {"firstOffset": 10, "lastOffset": 12, "deliveryState": 4, "deliveryCount": 5}
    assert records[0]["key"]["data"] == {"groupId": "g1", "topicId": uuids.to_str(tid), "partition": 0}
    assert kinds[-1] == ("0", True)


async def _earliest(conn: KafkaConnection, topic: str, partition: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -2}]}
        ],
    }
    resp = await conn.request(2, 7, body)
    return int(resp.topics[0].partitions[0].offset)


def test_cold_snapshots_let_old_records_be_pruned(tmp_path: Path) -> None:
    """Every key gets a fresh snapshot when its last one is older than the cold interval, and the
    records before the oldest live snapshot are deleted (the log start offset moves); the state
    reads the same after a SIGKILL."""
    overrides = {
        "share.coordinator.state.topic.num.partitions": "1",
        "share.coordinator.snapshot.update.records.per.snapshot": "500",
        "share.coordinator.cold.partition.snapshot.interval.ms": "1000",
        "share.coordinator.state.topic.prune.interval.ms": "1000",
    }
    broker = KopfkaProcess(tmp_path / "data", overrides=overrides).start()
    try:
        create_topic(broker.bootstrap, "pruned", 1)
        tid = topic_id(broker.bootstrap, "pruned")

        async def scenario() -> None:
            conn = await KafkaConnection.open(broker.bootstrap)
            try:
                await _find(conn, f"g:{uuids.to_str(tid)}:0")
                assert (
                    await _call(conn, INITIALIZE, 0, "g", tid, partition=0, state_epoch=0, start_offset=0)
                ).error_code == 0
                for i in range(6):  # updates only (500 per snapshot): nothing prunable yet
                    p = await _call(
                        conn,
                        WRITE,
                        1,
                        "g",
                        tid,
                        partition=0,
                        state_epoch=0,
                        leader_epoch=0,
                        start_offset=i + 1,
                        delivery_complete_count=0,
                        state_batches=_batches((i, i, ACKED, 1)),
                    )
                    assert p.error_code == 0
                assert await _earliest(conn, "__share_group_state", 0) == 0
                deadline = asyncio.get_running_loop().time() + 20
                while await _earliest(conn, "__share_group_state", 0) < 7:
                    assert asyncio.get_running_loop().time() < deadline, "never pruned"
                    await asyncio.sleep(0.3)
            finally:
                await conn.close()

        asyncio.run(scenario())
        broker.kill()
        broker.start()

        async def after() -> None:
            conn = await KafkaConnection.open(broker.bootstrap)
            try:
                p = await _state(conn, "g", tid)
                assert (p.error_code, p.start_offset, _as_tuples(p)) == (0, 6, [])
            finally:
                await conn.close()

        asyncio.run(after())
    finally:
        broker.kill()
