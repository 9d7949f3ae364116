"""The group APIs on the wire (kio-based client against a real broker): the error codes Kafka
returns in each situation, batched FindCoordinator, multi-group OffsetFetch, OffsetDelete, and
the raw __consumer_offsets records being Kafka's formats."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kopfka.client.connection import KafkaConnection
from kopfka.coordinator.group import records as rec
from kopfka.coordinator.group.coordinator import partition_for
from kopfka.protocol.errors import ErrorCode
from kopfka_process import KopfkaProcess

from groups.conftest import GROUP_OVERRIDES
from groups.harness import create_topic

# ConsumerProtocolSubscription v0: topics ["t"], no user data
SUB = struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(tmp_path_factory.mktemp("groups") / "data", overrides=GROUP_OVERRIDES).start()
    create_topic(proc.bootstrap, "t", 2)
    try:
        yield proc
    finally:
        proc.kill()


def run(bootstrap: str, scenario: Any) -> Any:
    async def main() -> Any:
        conn = await KafkaConnection.open(bootstrap)
        try:
            for _ in range(100):  # the first FindCoordinator creates __consumer_offsets
                r = await conn.request(10, 4, {"key_type": 0, "coordinator_keys": ["warmup"]})
                if r.coordinators[0].error_code == ErrorCode.none:
                    break
                await asyncio.sleep(0.1)
            return await scenario(conn)
        finally:
            await conn.close()

    return asyncio.run(main())


def join(
    group: str,
    member: str = "",
    instance: str | None = None,
    session: int = 6000,
    proto: str = "range",
    ptype: str = "consumer",
) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": session,
        "rebalance_timeout": 5000,
        "member_id": member,
        "group_instance_id": instance,
        "protocol_type": ptype,
        "protocols": [{"name": proto, "metadata": SUB}],
        "reason": None,
    }


async def join_member(conn: KafkaConnection, group: str, **kw: Any) -> Any:
    first = await conn.request(11, 9, join(group, **kw))
    if first.error_code == ErrorCode.member_id_required:
        return await conn.request(11, 9, join(group, member=first.member_id, **kw))
    return first


def test_find_coordinator_batched_and_single(shared: KopfkaProcess) -> None:
    async def scenario(conn: KafkaConnection) -> None:
        r = await conn.request(10, 6, {"key_type": 0, "coordinator_keys": ["a", "b"]})
        assert [(c.key, c.error_code, c.port) for c in r.coordinators] == [("a", 0, shared.port), ("b", 0, shared.port)]
        for _ in range(100):  # transactional ids: the first lookup creates __transaction_state
            txn = await conn.request(10, 6, {"key_type": 1, "coordinator_keys": ["tx"]})
            if txn.coordinators[0].error_code != ErrorCode.coordinator_not_available:
                break
            await asyncio.sleep(0.1)
        assert (txn.coordinators[0].error_code, txn.coordinators[0].port) == (ErrorCode.none, shared.port)
        single = await conn.request(10, 3, {"key": "a", "key_type": 0})
        assert (single.error_code, single.node_id, single.port) == (ErrorCode.none, 1, shared.port)

    run(shared.bootstrap, scenario)


def test_classic_protocol_errors(shared: KopfkaProcess) -> None:
    async def scenario(conn: KafkaConnection) -> None:
        g = "errors"
        first = await conn.request(11, 9, join(g))
        assert first.error_code == ErrorCode.member_id_required and first.member_id
        bad = await conn.request(11, 9, join(g, session=10))
        assert bad.error_code == ErrorCode.invalid_session_timeout
        joined = await conn.request(11, 9, join(g, member=first.member_id))
        assert joined.error_code == ErrorCode.none and joined.generation_id == 1 and joined.leader == first.member_id
        assert len(joined.members) == 1
        mid = joined.member_id
        other_proto = await conn.request(11, 9, join(g, proto="roundrobin"))
        assert other_proto.error_code == ErrorCode.inconsistent_group_protocol
        unknown = await conn.request(11, 9, join(g, member="nobody"))
        assert unknown.error_code == ErrorCode.unknown_member_id

        def sync(gen: int, member: str) -> dict[str, Any]:
            return {
                "group_id": g,
                "generation_id": gen,
                "member_id": member,
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocol_name": "range",
                "assignments": [{"member_id": mid, "assignment": b"A"}],
            }

        assert (await conn.request(14, 5, sync(7, mid))).error_code == ErrorCode.illegal_generation
        assert (await conn.request(14, 5, sync(1, "nobody"))).error_code == ErrorCode.unknown_member_id
        ok = await conn.request(14, 5, sync(1, mid))
        assert (ok.error_code, ok.assignment) == (ErrorCode.none, b"A")

        def hb(gen: int, member: str, instance: str | None = None) -> dict[str, Any]:
            return {"group_id": g, "generation_id": gen, "member_id": member, "group_instance_id": instance}

        assert (await conn.request(12, 4, hb(1, mid))).error_code == ErrorCode.none
        assert (await conn.request(12, 4, hb(0, mid))).error_code == ErrorCode.illegal_generation
        assert (await conn.request(12, 4, hb(1, "nobody"))).error_code == ErrorCode.unknown_member_id

        def commit(group: str, gen: int, member: str, topic: str = "t", part: int = 0) -> dict[str, Any]:
            return {
                "group_id": group,
                "generation_id_or_member_epoch": gen,
                "member_id": member,
                "group_instance_id": None,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": part,
                                "committed_offset": 3,
                                "committed_leader_epoch": -1,
                                "committed_metadata": None,
                            }
                        ],
                    }
                ],
            }

        def code(resp: Any) -> ErrorCode:
            return ErrorCode(resp.topics[0].partitions[0].error_code)

        assert code(await conn.request(8, 9, commit(g, 1, mid))) == ErrorCode.none
        assert code(await conn.request(8, 9, commit(g, 2, mid))) == ErrorCode.illegal_generation
        assert code(await conn.request(8, 9, commit(g, 1, "nobody"))) == ErrorCode.unknown_member_id
        assert code(await conn.request(8, 9, commit(g, 1, mid, part=99))) == ErrorCode.unknown_topic_or_partition
        assert code(await conn.request(8, 9, commit("", -1, ""))) == ErrorCode.invalid_group_id

        # a second member arrives: the first learns about the rebalance from its heartbeat
        conn2 = await KafkaConnection.open(shared.bootstrap)
        try:
            second = asyncio.ensure_future(join_member(conn2, g))
            await asyncio.sleep(0.3)
            assert (await conn.request(12, 4, hb(1, mid))).error_code == ErrorCode.rebalance_in_progress
            assert code(await conn.request(8, 9, commit(g, 1, mid))) == ErrorCode.none  # still allowed before rejoin
            rejoined = await conn.request(11, 9, join(g, member=mid))
            assert rejoined.generation_id == 2 and len(rejoined.members) == 2
            assert (await second).generation_id == 2
            assert (await conn.request(42, 2, {"groups_names": [g]})).results[0].error_code == ErrorCode.non_empty_group
            dele = await conn.request(
                47, 0, {"group_id": g, "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}
            )
            assert dele.topics[0].partitions[0].error_code == ErrorCode.group_subscribed_to_topic
        finally:
            await conn2.close()

    run(shared.bootstrap, scenario)


def test_static_member_fencing(shared: KopfkaProcess) -> None:
    async def scenario(conn: KafkaConnection) -> None:
        g = "static-fence"
        a = await join_member(conn, g, instance="i1")
        assert a.error_code == ErrorCode.none
        sync = {
            "group_id": g,
            "generation_id": a.generation_id,
            "member_id": a.member_id,
            "group_instance_id": "i1",
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": a.member_id, "assignment": b"X"}],
        }
        assert (await conn.request(14, 5, sync)).assignment == b"X"
        b = await conn.request(11, 9, join(g, instance="i1"))  # same instance, new process: no MEMBER_ID_REQUIRED
        assert b.error_code == ErrorCode.none and b.member_id != a.member_id
        assert b.generation_id == a.generation_id, "a static rejoin must not rebalance"
        hb = {"group_id": g, "generation_id": a.generation_id, "member_id": a.member_id, "group_instance_id": "i1"}
        assert (await conn.request(12, 4, hb)).error_code == ErrorCode.fenced_instance_id
        synced = await conn.request(14, 5, {**sync, "member_id": b.member_id, "assignments": []})
        assert synced.assignment == b"X", "the static member keeps its assignment"
        leave = await conn.request(
            13, 5, {"group_id": g, "members": [{"member_id": a.member_id, "group_instance_id": "i1", "reason": None}]}
        )
        assert leave.members[0].error_code == ErrorCode.fenced_instance_id

    run(shared.bootstrap, scenario)


def test_offsets_multi_group_fetch_delete_and_admin(shared: KopfkaProcess) -> None:
    async def scenario(conn: KafkaConnection) -> None:
        for grp, off in (("simple-a", 11), ("simple-b", 22)):
            r = await conn.request(
                8,
                9,
                {
                    "group_id": grp,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [
                        {
                            "name": "t",
                            "partitions": [
                                {
                                    "partition_index": 1,
                                    "committed_offset": off,
                                    "committed_leader_epoch": 4,
                                    "committed_metadata": "md",
                                }
                            ],
                        }
                    ],
                },
            )
            assert r.topics[0].partitions[0].error_code == ErrorCode.none
        f = await conn.request(
            9,
            8,
            {
                "groups": [
                    {"group_id": "simple-a", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
                    {"group_id": "simple-b", "topics": None},
                    {"group_id": "nothing", "topics": None},
                ],
                "require_stable": False,
            },
        )
        got = {
            g.group_id: {
                (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
                for t in g.topics
                for p in t.partitions
            }
            for g in f.groups
        }
        assert got == {
            "simple-a": {("t", 0): (-1, -1, ""), ("t", 1): (11, 4, "md")},
            "simple-b": {("t", 1): (22, 4, "md")},
            "nothing": {},
        }
        listed = await conn.request(16, 5, {"states_filter": ["Empty"], "types_filter": []})
        assert {"simple-a", "simple-b"} <= {g.group_id for g in listed.groups}
        described = await conn.request(15, 6, {"groups": ["simple-a", "nope"], "include_authorized_operations": False})
        assert [(d.group_state, d.error_code) for d in described.groups] == [
            ("Empty", 0),
            ("Dead", ErrorCode.group_id_not_found),  # Kafka 4.3 names an unknown group's state Dead
        ]
        d = await conn.request(
            47, 0, {"group_id": "simple-a", "topics": [{"name": "t", "partitions": [{"partition_index": 1}]}]}
        )
        assert (d.error_code, d.topics[0].partitions[0].error_code) == (0, 0)
        nf = await conn.request(47, 0, {"group_id": "nope", "topics": []})
        assert nf.error_code == ErrorCode.group_id_not_found
        deleted = await conn.request(42, 2, {"groups_names": ["simple-b", "nope"]})
        assert [r.error_code for r in deleted.results] == [ErrorCode.none, ErrorCode.group_id_not_found]
        after = await conn.request(
            9, 8, {"groups": [{"group_id": "simple-b", "topics": None}], "require_stable": False}
        )
        assert after.groups[0].topics == ()

    run(shared.bootstrap, scenario)


def test_consumer_offsets_records_are_kafka_format(shared: KopfkaProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    async def scenario(conn: KafkaConnection) -> None:
        await conn.request(
            8,
            9,
            {
                "group_id": "raw",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": "t",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 77,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            },
        )

    run(shared.bootstrap, scenario)
    c = Consumer(
        {"bootstrap.servers": shared.bootstrap, "group.id": "reader", "enable.auto.commit": False, "log_level": 3}
    )
    c.assign([TopicPartition("__consumer_offsets", partition_for("raw", 50), 0)])
    found = None
    for _ in range(50):
        m = c.poll(0.2)
        if m is not None and not m.error() and m.key() == rec.offset_key("raw", "t", 0):
            found = m
            break
    c.close()
    assert found is not None, "the commit is not in its partition of __consumer_offsets"
    value = found.value()
    assert value is not None and value[:2] == b"\x00\x03" and struct.unpack(">q", value[2:10])[0] == 77


def test_consumer_group_heartbeat_errors(shared: KopfkaProcess) -> None:
    async def scenario(conn: KafkaConnection) -> None:
        def hb(**kw: Any) -> dict[str, Any]:
            base = {
                "group_id": "kip848",
                "member_id": "m-1",
                "member_epoch": 0,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout": 5000,
                "subscribed_topic_names": ["t"],
                "subscribed_topic_regex": None,
                "server_assignor": None,
                "topic_partitions": [],
            }
            return {**base, **kw}

        r = await conn.request(68, 1, hb())
        assert (r.error_code, r.member_epoch) == (0, 1)
        assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1]
        assert (await conn.request(68, 1, hb(member_epoch=5))).error_code == ErrorCode.fenced_member_epoch
        assert (await conn.request(68, 1, hb(member_id="x", member_epoch=1))).error_code == ErrorCode.unknown_member_id
        assert (await conn.request(68, 1, hb(server_assignor="nope"))).error_code == ErrorCode.unsupported_assignor
        assert (await conn.request(68, 1, hb(member_id="", member_epoch=1))).error_code == ErrorCode.invalid_request
        commit = {
            "group_id": "kip848",
            "generation_id_or_member_epoch": 0,
            "member_id": "m-1",
            "group_instance_id": None,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                        }
                    ],
                }
            ],
        }
        stale = await conn.request(8, 9, commit)
        assert stale.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
        ok = await conn.request(8, 9, {**commit, "generation_id_or_member_epoch": 1})
        assert ok.topics[0].partitions[0].error_code == ErrorCode.none
        d = await conn.request(69, 1, {"group_ids": ["kip848", "errors-none"], "include_authorized_operations": False})
        assert d.groups[0].group_state == "Stable" and d.groups[0].members[0].member_epoch == 1
        assert d.groups[1].error_code == ErrorCode.group_id_not_found
        classic = await conn.request(11, 9, join("kip848"))
        assert classic.error_code == ErrorCode.inconsistent_group_protocol
        left = await conn.request(68, 1, hb(member_epoch=-1, subscribed_topic_names=None))
        assert (left.error_code, left.member_epoch) == (0, -1)

    run(shared.bootstrap, scenario)


def test_commit_with_an_older_member_epoch_follows_assignment_epochs(shared: KopfkaProcess) -> None:
    """KIP-1251 (Kafka 4.3): a commit racing the heartbeat that bumped the member's epoch is not a
    zombie's. An older member epoch commits the partitions the member held since that epoch;
    partitions it no longer holds, or was given later, and a newer epoch, are STALE_MEMBER_EPOCH
    for the whole request (the Java 4.3 consumer's commitSync fails on it without retrying)."""

    async def scenario(conn: KafkaConnection) -> None:
        def hb(member: str, epoch: int, owned: list[int] | None = None) -> dict[str, Any]:
            return {
                "group_id": "kip1251",
                "member_id": member,
                "member_epoch": epoch,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout": 5000,
                "subscribed_topic_names": ["t"] if epoch == 0 else None,
                "subscribed_topic_regex": None,
                "server_assignor": "uniform" if epoch == 0 else None,
                "topic_partitions": None if owned is None else [{"topic_id": topic_id, "partitions": owned}],
            }

        def commit(member: str, epoch: int, partitions: list[int]) -> dict[str, Any]:
            return {
                "group_id": "kip1251",
                "generation_id_or_member_epoch": epoch,
                "member_id": member,
                "group_instance_id": None,
                "topics": [
                    {
                        "name": "t",
                        "partitions": [
                            {
                                "partition_index": p,
                                "committed_offset": 5,
                                "committed_leader_epoch": -1,
                                "committed_metadata": None,
                            }
                            for p in partitions
                        ],
                    }
                ],
            }

        async def codes(member: str, epoch: int, partitions: list[int]) -> set[int]:
            r = await conn.request(8, 9, commit(member, epoch, partitions))
            return {p.error_code for t in r.topics for p in t.partitions}

        topic_id = None
        a = await conn.request(68, 1, {**hb("m-a", 0), "topic_partitions": []})
        assert (a.error_code, a.member_epoch) == (0, 1)
        topic_id = a.assignment.topic_partitions[0].topic_id
        assert sorted(a.assignment.topic_partitions[0].partitions) == [0, 1]
        b = await conn.request(68, 1, {**hb("m-b", 0), "topic_partitions": []})
        # m-b joins at the new group epoch 2, its partition not yet released by m-a
        assert b.error_code == 0 and b.member_epoch == 2 and not b.assignment.topic_partitions
        # m-a is told to give one partition up; it keeps the other, assigned at epoch 1
        a = await conn.request(68, 1, hb("m-a", 1, [0, 1]))
        kept = sorted(a.assignment.topic_partitions[0].partitions)
        assert len(kept) == 1
        gone = 1 - kept[0]
        a = await conn.request(68, 1, hb("m-a", a.member_epoch, kept))  # revoked: m-a reaches epoch 2
        assert a.member_epoch == 2
        b = await conn.request(68, 1, hb("m-b", b.member_epoch, []))
        assert b.member_epoch == 2 and list(b.assignment.topic_partitions[0].partitions) == [gone]

        assert await codes("m-a", 2, kept) == {ErrorCode.none}
        assert await codes("m-a", 1, kept) == {ErrorCode.none}  # held since epoch 1: a late commit, not a zombie
        assert await codes("m-a", 1, [gone]) == {ErrorCode.stale_member_epoch}  # no longer m-a's
        assert await codes("m-a", 1, [*kept, gone]) == {ErrorCode.stale_member_epoch}  # the whole request
        assert await codes("m-a", 3, kept) == {ErrorCode.stale_member_epoch}  # newer than the member's
        assert await codes("m-b", 1, [gone]) == {ErrorCode.stale_member_epoch}  # assigned to m-b at epoch 2
        assert await codes("m-b", 2, [gone]) == {ErrorCode.none}

    run(shared.bootstrap, scenario)
