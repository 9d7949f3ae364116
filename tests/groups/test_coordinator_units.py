"""Unit tests of the coordinator's pieces: Kafka's partition hashing, the byte formats of
__consumer_offsets records, the server-side assignors, and the coordinator core (batched
writes, replay, load-in-progress, offset expiry) over a fake replica manager."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace
from typing import Any

import pytest
from kopfka.cli.serve import embedded_defaults
from kopfka.config.server_config import KafkaConfig
from kopfka.coordinator.group import records as rec
from kopfka.coordinator.group.assignors import MemberSpec, range_assign, uniform_assign
from kopfka.coordinator.group.coordinator import GroupCoordinator, Shard, ShardState
from kopfka.coordinator.group.group_metadata import ClassicGroup
from kopfka.coordinator.group.offsets import CommittedOffset, OffsetCache
from kopfka.coordinator.keys import OFFSETS_TOPIC, java_string_hashcode, partition_for
from kopfka.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.record_codec import decode_records
from kopfka.protocol.records import iter_batches
from kopfka.server.replica_manager import ProduceResult

# --- hashing ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("s", "h"), [("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
                                      ("polygenelubricants", -(2**31)), ("\U0001F600", 0xD83D * 31 + 0xDE00),
                                      ("consumer-group-1", java_string_hashcode("consumer-group-1"))])
def test_java_string_hashcode(s: str, h: int) -> None:
    assert java_string_hashcode(s) == h


def test_partition_for_uses_utils_abs() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # abs(MIN_VALUE) is 0 in Kafka's Utils.abs
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hashcode("my-consumer-group-0") == -1322913908
    assert partition_for("my-consumer-group-0", 50) == 1322913908 % 50


# --- record formats ---------------------------------------------------------------------------------

def test_offset_commit_key_and_value_bytes() -> None:
    key = rec.offset_key("g", "t", 3)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert rec.decode_key(key) == rec.OffsetKey("g", "t", 3)
    assert rec.decode_key(b"\x00\x00\x00\x01g\x00\x01t\x00\x00\x00\x03") == rec.OffsetKey("g", "t", 3)  # v0 key
    v = rec.OffsetValue(42, 7, "meta", 1000)
    raw = rec.encode_offset_value(v)
    assert raw == struct.pack(">hqih4sq", 3, 42, 7, 4, b"meta", 1000)
    assert rec.decode_offset_value(raw) == v
    v1 = rec.OffsetValue(5, -1, "", 10, 20)
    assert rec.encode_offset_value(v1)[:2] == b"\x00\x01"
    assert rec.decode_offset_value(rec.encode_offset_value(v1)) == v1
    assert rec.decode_offset_value(struct.pack(">hqh1sq", 0, 9, 1, b"m", 11)) == rec.OffsetValue(9, -1, "m", 11)


def test_offset_value_v4_flexible_is_read() -> None:
    raw = struct.pack(">hqi", 4, 77, 2) + bytes([3]) + b"ab" + struct.pack(">q", 123) + bytes([0])
    assert rec.decode_offset_value(raw) == rec.OffsetValue(77, 2, "ab", 123)


def test_group_metadata_round_trip() -> None:
    assert rec.group_key("grp") == b"\x00\x02\x00\x03grp"
    v = rec.GroupValue("consumer", 5, "range", "m1", 999, [
        rec.MemberValue("m1", "i1", "c1", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
        rec.MemberValue("m2", None, "c2", "/127.0.0.2", 30000, 10000, b"", b""),
    ])
    raw = rec.encode_group_value(v)
    assert raw[:2] == b"\x00\x03"
    assert rec.decode_group_value(raw) == v
    assert rec.decode_key(b"\x00\x05\x00\x01g") == rec.OtherKey(5)  # KIP-848 records are skipped
    with pytest.raises(rec.RecordFormatError):
        rec.decode_group_value(b"\x00\x03\x00")


# --- assignors --------------------------------------------------------------------------------------

def _flat(a: dict[str, dict[str, set[int]]]) -> dict[str, set[tuple[str, int]]]:
    return {m: {(t, p) for t, ps in x.items() for p in ps} for m, x in a.items()}


def test_uniform_is_balanced_and_sticky() -> None:
    counts = {"t": 6, "u": 3}
    two = uniform_assign({"a": MemberSpec({"t", "u"}), "b": MemberSpec({"t", "u"})}, counts)
    flat = _flat(two)
    assert sorted(len(v) for v in flat.values()) == [4, 5] and not (flat["a"] & flat["b"])
    three = uniform_assign({"a": MemberSpec({"t", "u"}, two["a"]), "b": MemberSpec({"t", "u"}, two["b"]),
                            "c": MemberSpec({"t", "u"})}, counts)
    f3 = _flat(three)
    assert sorted(len(v) for v in f3.values()) == [3, 3, 3]
    moved = (flat["a"] - f3["a"]) | (flat["b"] - f3["b"])
    assert moved == f3["c"], "only the newcomer's partitions may move"


def test_uniform_heterogeneous_subscriptions() -> None:
    out = _flat(uniform_assign({"a": MemberSpec({"t"}), "b": MemberSpec({"t", "u"})}, {"t": 4, "u": 4}))
    assert all(t == "t" for t, _ in out["a"])
    assert out["a"] | out["b"] == {(t, p) for t in "tu" for p in range(4)}
    assert abs(len(out["a"]) - len(out["b"])) <= 2


def test_range_is_copartitioned() -> None:
    out = range_assign({m: MemberSpec({"t", "u"}) for m in ("b", "a", "c")}, {"t": 7, "u": 7})
    assert out["a"] == {"t": {0, 1, 2}, "u": {0, 1, 2}}
    assert out["b"] == {"t": {3, 4}, "u": {3, 4}}
    assert out["c"] == {"t": {5, 6}, "u": {5, 6}}


# --- offset expiry rules ----------------------------------------------------------------------------

def test_offset_cache_expiry_rules() -> None:
    c = OffsetCache()
    c.put("g", ("t", 0), CommittedOffset(1, -1, "", commit_timestamp=1000))
    c.put("g", ("u", 0), CommittedOffset(1, -1, "", commit_timestamp=5000))
    c.put("g", ("v", 0), CommittedOffset(1, -1, "", commit_timestamp=1000, expire_timestamp=2000))
    # empty group: retention counts from when it became empty, or the commit if later
    assert sorted(c.expired("g", 4000, 1000, empty_since_ms=3500, subscribed=lambda t: False)) == [("v", 0)]
    both = [("t", 0), ("v", 0)]
    assert sorted(c.expired("g", 4500, 1000, empty_since_ms=3500, subscribed=lambda t: False)) == both
    # members: only unsubscribed topics expire, by commit time
    assert sorted(c.expired("g", 9000, 1000, empty_since_ms=None, subscribed=lambda t: t == "u")) == both


# --- coordinator core over a fake replica manager ---------------------------------------------------

class _FakeLog:
    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.high_watermark = 0

    @property
    def log_end_offset(self) -> int:
        return self.high_watermark


class _FakePartition:
    leader_epoch = 0

    def __init__(self) -> None:
        self.log = _FakeLog()


class _FakeReplicaManager:
    def __init__(self, n: int) -> None:
        self.partitions = {(OFFSETS_TOPIC, p): _FakePartition() for p in range(n)}
        self.appends = 0

    def append_records(self, entries: Any, acks: int, *, internal: bool) -> dict[Any, ProduceResult]:
        out = {}
        for tp, data in entries:
            self.appends += 1
            log = self.partitions[tp].log
            base = log.high_watermark
            log.batches.append(data)
            log.high_watermark += sum(h.records_count for h in iter_batches(data))
            out[tp] = ProduceResult(ErrorCode.none, base)
        return out


def _coordinator(overrides: dict[str, str] | None = None) -> tuple[GroupCoordinator, _FakeReplicaManager]:
    cfg = KafkaConfig.from_properties({**embedded_defaults(), "offsets.topic.num.partitions": "4", **(overrides or {})})
    rm = _FakeReplicaManager(4)
    coord = GroupCoordinator(SimpleNamespace(node_id=1, config=cfg, replica_manager=rm, controller=None))
    parts = {p: PartitionRegistration((1,), (1,), 1, 0, 0) for p in range(4)}
    topics = {"t": TopicImage("t", "AAAAAAAAAAAAAAAAAAAAAQ", {0: parts[0], 1: parts[1]}),
              OFFSETS_TOPIC: TopicImage(OFFSETS_TOPIC, "AAAAAAAAAAAAAAAAAAAAAg", parts)}
    coord.image = MetadataImage(topics_by_name=topics, topics_by_id={t.topic_id: t for t in topics.values()})
    for p in range(4):
        coord.shards[p] = Shard(p, 0, ShardState.ACTIVE)
    return coord, rm


def _replay_into(coord: GroupCoordinator, rm: _FakeReplicaManager) -> None:
    for p in range(4):
        shard = coord.shards[p]
        for data in rm.partitions[(OFFSETS_TOPIC, p)].log.batches:
            for h in iter_batches(data):
                for r in decode_records(data, h):
                    coord._replay(shard, r.key, r.value)


def test_concurrent_commits_share_one_batch_and_replay() -> None:
    async def scenario() -> None:
        coord, rm = _coordinator()
        groups = [g for g in (f"g{i}" for i in range(100)) if partition_for(g, 4) == 1][:5]
        results = await asyncio.gather(*[
            coord.commit_offsets(g, "", -1, None, [("t", 0, 10 + i, -1, "m"), ("t", 1, 20, -1, None),
                                                   ("t", 9, 1, -1, None)], api_version=8)
            for i, g in enumerate(groups)])
        for r in results:
            assert r == {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.none,
                         ("t", 9): ErrorCode.unknown_topic_or_partition}
        assert rm.appends == 1, "commits issued in one loop turn must be written as one batch"
        fresh, _ = _coordinator()
        _replay_into(fresh, rm)
        for i, g in enumerate(groups):
            got = await fresh.fetch_offsets(g, [("t", [0, 1, 2])])
            assert got[("t", 0)] is not None and got[("t", 0)].offset == 10 + i and got[("t", 0)].metadata == "m"
            assert got[("t", 1)] is not None and got[("t", 1)].offset == 20
            assert got[("t", 2)] is None
            assert isinstance(fresh.shards[1].groups[g], ClassicGroup)
        fresh.shards[1].state = ShardState.LOADING
        with pytest.raises(KafkaError) as exc:
            await fresh.fetch_offsets(groups[0], None)
        assert exc.value.code == ErrorCode.coordinator_load_in_progress
        del fresh.shards[1]
        with pytest.raises(KafkaError) as exc:
            await fresh.fetch_offsets(groups[0], None)
        assert exc.value.code == ErrorCode.not_coordinator

    asyncio.run(scenario())


def test_expiry_writes_tombstones_and_drops_empty_groups() -> None:
    async def scenario() -> None:
        coord, rm = _coordinator({"offsets.retention.minutes": "1"})
        await coord.commit_offsets("old", "", -1, None, [("t", 0, 5, -1, None)], api_version=8)
        await coord.commit_offsets("new", "", -1, None, [("t", 0, 6, -1, None)], api_version=8)
        shard_old = coord.shard_for("old")
        shard_old.groups["old"].state_timestamp = 0
        shard_old.offsets.get("old")[("t", 0)].commit_timestamp = 0
        now = coord.shard_for("new").offsets.get("new")[("t", 0)].commit_timestamp + 1000
        coord.shard_for("new").groups["new"].state_timestamp = now - 1000
        assert await coord.expire_offsets(now) == 1
        assert "old" not in shard_old.groups and not shard_old.offsets.has_offsets("old")
        assert coord.shard_for("new").offsets.has_offsets("new")
        fresh, _ = _coordinator()
        _replay_into(fresh, rm)
        assert "old" not in fresh.shard_for("old").groups  # the tombstones replay too
        assert (await fresh.fetch_offsets("new", None))[("t", 0)].offset == 6  # type: ignore[union-attr]

    asyncio.run(scenario())
