"""Share groups on the wire: exact acquired ranges and delivery counts, state surviving a broker
SIGKILL, share sessions and the errors Kafka answers, the share.version gate, read_committed,
and share groups beside classic and consumer groups."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka_process import KopfkaProcess

from .conftest import SHARE_OVERRIDES
from .helpers import RawShareMember, acquired, create_topic, partition_errors, produce, topic_id

ACCEPT, RELEASE, REJECT = 1, 2, 3


def earliest(bootstrap: str, group: str, **more: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"share.auto.offset.reset": "earliest", **more}
    res = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)


async def fetch_all(m: RawShareMember, parts: list, want: int, **kw: object) -> dict[int, list[tuple[int, int, int]]]:
    """Fetch until `want` records were acquired (in total over the partitions)."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    deadline = time.monotonic() + 20
    while sum(b - a + 1 for rs in out.values() for a, b, _ in rs) < want and time.monotonic() < deadline:
        resp = await m.fetch(parts, **kw)  # type: ignore[arg-type]
        assert resp.error_code == 0, resp
        for p, rs in acquired(resp).items():
            out.setdefault(p, []).extend(rs)
    return out


async def start_offsets(bootstrap: str, group: str) -> dict[int, tuple[int, int]]:
    conn = await KafkaConnection.open(bootstrap)
    try:
        resp = await conn.request(90, 1, {"groups": [{"group_id": group, "topics": None}]})
        g = resp.groups[0]
        assert g.error_code == 0, g
        return {p.partition_index: (p.start_offset, p.lag) for t in g.topics for p in t.partitions}
    finally:
        await conn.close()


def test_delivery_state_survives_sigkill(tmp_path: Path) -> None:
    """Acknowledged records are never delivered again; released ones come back with their count
    raised; records acquired but not acknowledged when the broker died are delivered again."""
    broker = KopfkaProcess(tmp_path / "data", overrides=SHARE_OVERRIDES).start()
    try:
        b = broker.bootstrap
        create_topic(b, "durable", 1)
        tid = topic_id(b, "durable")
        earliest(b, "gd")
        produce(b, "durable", [f"v{i}".encode() for i in range(30)], partition=0)

        async def before() -> None:
            a = await RawShareMember.open(b, "gd")
            await a.join(["durable"], 1)
            got = await fetch_all(a, [(tid, 0)], 30)
            assert got == {0: [(0, 29, 1)]}
            resp = await a.acknowledge({(tid, 0): [(0, 9, [ACCEPT]), (10, 14, [RELEASE])]})
            assert resp.error_code == 0 and partition_errors(resp) == {0: 0}
            assert await start_offsets(b, "gd") == {0: (10, 20)}  # lag: 30 - start 10 - 0 done beyond it
            broker.kill()  # SIGKILL with 15-29 still acquired (a's connection still open)
            await a.close()

        asyncio.run(before())
        broker.start()

        async def after() -> None:
            m = await RawShareMember.open(b, "gd")
            await m.join(["durable"], 1)
            got = await fetch_all(m, [(tid, 0)], 20)
            # 10-14 released once: second delivery; 15-29 were only acquired: delivered again as new
            assert got == {0: [(10, 14, 2), (15, 29, 1)]}
            resp = await m.fetch([(tid, 0)], {(tid, 0): [(10, 29, [ACCEPT])]}, max_wait=200)
            assert partition_errors(resp, "acknowledge_error_code") == {0: 0} and acquired(resp) == {}
            assert await start_offsets(b, "gd") == {0: (30, 0)}
            await m.close()

        asyncio.run(after())
    finally:
        broker.kill()


def test_sessions_and_request_errors(share_broker: KopfkaProcess) -> None:
    b = share_broker.bootstrap
    create_topic(b, "errs", 1)
    tid = topic_id(b, "errs")
    earliest(b, "ge")
    produce(b, "errs", [b"x", b"y"], partition=0)

    async def scenario() -> None:
        m = await RawShareMember.open(b, "ge")
        await m.join(["errs"], 1)
        parts = [(tid, 0)]
        assert (await m.fetch(parts, epoch=3)).error_code == ErrorCode.share_session_not_found
        resp = await m.fetch(parts, {(tid, 0): [(0, 0, [ACCEPT])]}, epoch=0)
        assert resp.error_code == ErrorCode.invalid_request  # acknowledgements in the opening fetch
        assert acquired(await m.fetch(parts)) == {0: [(0, 1, 1)]}  # epoch 0: the session opens
        assert (await m.fetch(parts, epoch=7)).error_code == ErrorCode.invalid_share_session_epoch
        assert (
            await m.acknowledge({(tid, 0): [(0, 0, [ACCEPT])]}, epoch=0)
        ).error_code == ErrorCode.invalid_share_session_epoch
        bad = [
            [(1, 0, [ACCEPT])],  # runs backwards
            [(0, 1, [ACCEPT, ACCEPT, ACCEPT])],  # three types for two offsets
            [(0, 0, [9])],  # no such type
            [(0, 0, [4])],  # RENEW outside a renew request
            [(0, 1, [ACCEPT]), (0, 0, [ACCEPT])],  # overlaps the previous batch
        ]
        for batches in bad:
            resp = await m.acknowledge({(tid, 0): batches})
            assert partition_errors(resp) == {0: ErrorCode.invalid_request}, batches
        other = RawShareMember(m.conn, "ge")  # another member: not the owner of the records
        assert (await other.fetch(parts)).error_code == 0
        resp = await other.acknowledge({(tid, 0): [(0, 1, [ACCEPT])]})
        assert partition_errors(resp) == {0: ErrorCode.invalid_record_state}
        resp = await m.acknowledge({(tid, 0): [(0, 0, [ACCEPT]), (1, 1, [REJECT])]})
        assert partition_errors(resp) == {0: 0}
        assert await start_offsets(b, "ge") == {0: (2, 0)}
        # member ids are 1-36 characters; the group id must be present
        long_id = RawShareMember(m.conn, "ge", "x" * 37)
        assert (await long_id.fetch(parts)).error_code == ErrorCode.invalid_request
        assert (await long_id.heartbeat(["errs"])).error_code == ErrorCode.invalid_request
        resp = await m.heartbeat(None, epoch=m.member_epoch + 5)
        assert resp.error_code == ErrorCode.fenced_member_epoch
        assert (await RawShareMember(m.conn, "ge").heartbeat(None, epoch=3)).error_code == ErrorCode.unknown_member_id
        # epoch -1 closes the session: further requests need a new one
        assert (await m.fetch(parts, epoch=-1)).error_code == 0
        assert (await m.fetch(parts, epoch=2)).error_code == ErrorCode.share_session_not_found
        await m.close()

    asyncio.run(scenario())


def test_closing_the_connection_releases_the_records(share_broker: KopfkaProcess) -> None:
    b = share_broker.bootstrap
    create_topic(b, "conn", 1)
    tid = topic_id(b, "conn")
    earliest(b, "gc")
    produce(b, "conn", [b"a", b"b", b"c"], partition=0)

    async def scenario() -> None:
        a = await RawShareMember.open(b, "gc")
        await a.join(["conn"], 1)
        assert acquired(await a.fetch([(tid, 0)])) == {0: [(0, 2, 1)]}
        other = await RawShareMember.open(b, "gc")
        await other.join(["conn"], 1)
        assert acquired(await other.fetch([(tid, 0)], max_wait=200)) == {}  # a holds them
        await a.close()  # no acknowledgement, no session close: the broker releases on disconnect
        got = await fetch_all(other, [(tid, 0)], 3)
        assert got == {0: [(0, 2, 2)]}
        await other.close()

    asyncio.run(scenario())


def test_read_committed_skips_aborted_transactions(share_broker: KopfkaProcess) -> None:
    b = share_broker.bootstrap
    create_topic(b, "txns", 1)
    tid = topic_id(b, "txns")
    earliest(b, "gtx", **{"share.isolation.level": "read_committed"})
    p = Producer({"bootstrap.servers": b, "transactional.id": "share-txn"})
    p.init_transactions(30)
    for committed in (True, False, True):
        p.begin_transaction()
        for i in range(3):
            p.produce("txns", value=f"{committed}{i}".encode(), partition=0)
        p.flush(30)  # in the log before the abort (an abort purges what is not sent yet)
        p.commit_transaction(30) if committed else p.abort_transaction(30)

    async def scenario() -> None:
        m = await RawShareMember.open(b, "gtx")
        await m.join(["txns"], 1)
        got = await fetch_all(m, [(tid, 0)], 6)
        # 0-2 committed, 3 its marker, 4-6 aborted, 7 the abort marker, 8-10 committed, 11 the marker
        assert got == {0: [(0, 2, 1), (8, 10, 1)]}
        resp = await m.fetch([(tid, 0)], {(tid, 0): [(0, 2, [ACCEPT]), (8, 10, [ACCEPT])]}, max_wait=200)
        assert partition_errors(resp, "acknowledge_error_code") == {0: 0}
        assert await start_offsets(b, "gtx") == {0: (12, 0)}  # markers and aborted records archived
        await m.close()

    asyncio.run(scenario())


def test_share_groups_beside_other_groups(share_broker: KopfkaProcess) -> None:
    b = share_broker.bootstrap
    create_topic(b, "mixed", 1)
    c = Consumer({"bootstrap.servers": b, "group.id": "classic-g", "enable.auto.commit": False})
    from confluent_kafka import TopicPartition

    c.commit(offsets=[TopicPartition("mixed", 0, 1)], asynchronous=False)
    c.close()

    async def scenario() -> None:
        conn = await KafkaConnection.open(b)
        try:
            m = RawShareMember(conn, "classic-g")
            resp = await m.heartbeat(["mixed"])
            assert resp.error_code == ErrorCode.group_id_not_found and "not a share group" in resp.error_message
            s = RawShareMember(conn, "share-g")
            await s.join(["mixed"], 1)
            listed = await conn.request(16, 5, {"states_filter": [], "types_filter": ["share"]})
            mine = [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed.groups]
            assert ("share-g", "share", "Stable", "share") in mine and all(t == "share" for _, t, _, _ in mine)
            classic = await conn.request(16, 5, {"states_filter": [], "types_filter": ["classic"]})
            assert "share-g" not in [g.group_id for g in classic.groups]
            described = await conn.request(15, 6, {"groups": ["share-g"], "include_authorized_operations": False})
            assert described.groups[0].error_code == ErrorCode.group_id_not_found
            desc = await conn.request(
                77, 1, {"group_ids": ["share-g", "classic-g", "nope"], "include_authorized_operations": False}
            )
            assert [g.error_code for g in desc.groups] == [
                0,
                ErrorCode.group_id_not_found,
                ErrorCode.group_id_not_found,
            ]
            assert desc.groups[0].group_state == "Stable" and desc.groups[0].assignor_name == "simple"
            assert desc.groups[0].members[0].member_id == s.member_id
            commit = await conn.request(
                8,
                9,
                {
                    "group_id": "share-g",
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [
                        {
                            "name": "mixed",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "committed_offset": 1,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "",
                                }
                            ],
                        }
                    ],
                },
            )
            assert commit.topics[0].partitions[0].error_code == ErrorCode.group_id_not_found
            deleted = await conn.request(42, 2, {"groups_names": ["share-g"]})
            assert deleted.results[0].error_code == ErrorCode.non_empty_group
            assert (await s.heartbeat(None, epoch=-1)).error_code == 0  # leave
            deleted = await conn.request(42, 2, {"groups_names": ["share-g"]})
            assert deleted.results[0].error_code == 0
            listed = await conn.request(16, 5, {"states_filter": [], "types_filter": ["share"]})
            assert "share-g" not in [g.group_id for g in listed.groups]
        finally:
            await conn.close()

    asyncio.run(scenario())


@pytest.mark.timeout(180)
def test_share_version_gates_the_share_apis(tmp_path: Path) -> None:
    """Formatted at 4.1 (no share.version) the share-group APIs answer UNSUPPORTED_VERSION, as
    Kafka's do; finalizing share.version 1 turns them on."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
    from test_features import format_at

    data, props = format_at(tmp_path, "4.1")
    with props.open("a") as f:  # one broker: the share-group state topic at replication factor 1
        f.write("share.coordinator.state.topic.replication.factor=1\nshare.coordinator.state.topic.min.isr=1\n")
    k = KopfkaProcess(data, config_file=props).start()
    try:
        create_topic(k.bootstrap, "gated", 1)
        tid = topic_id(k.bootstrap, "gated")

        async def codes() -> tuple[int, int]:
            m = await RawShareMember.open(k.bootstrap, "gg")
            try:
                return (await m.heartbeat(["gated"])).error_code, (await m.fetch([(tid, 0)], max_wait=0)).error_code
            finally:
                await m.close()

        assert asyncio.run(codes()) == (ErrorCode.unsupported_version, ErrorCode.unsupported_version)

        async def upgrade() -> int:
            conn = await KafkaConnection.open(k.bootstrap)
            try:
                resp = await conn.request(
                    57,
                    1,
                    {
                        "timeout": 30000,
                        "validate_only": False,
                        "feature_updates": [{"feature": "share.version", "max_version_level": 1, "upgrade_type": 1}],
                    },
                )
                return int(resp.error_code)
            finally:
                await conn.close()

        assert asyncio.run(upgrade()) == 0
        deadline = time.monotonic() + 30
        while (got := asyncio.run(codes()))[0] == ErrorCode.unsupported_version and time.monotonic() < deadline:
            time.sleep(0.2)
        assert got[1] == 0, got

        async def join() -> dict[uuid.UUID, list[int]]:
            m = await RawShareMember.open(k.bootstrap, "gg")
            try:
                await m.join(["gated"], 1)
                return m.assignment
            finally:
                await m.close()

        assert asyncio.run(join()) == {tid: [0]}
    finally:
        k.kill()
