"""metadata.version: one supported range (7-30, Kafka 4.3's) in ApiVersions, broker registration
and format, capabilities gated by the finalized level as Kafka's MetadataVersion gates them, and
UpdateFeatures with Kafka's FeatureControlManager rules (QuorumController in-process)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from kopfka import uuids
from kopfka.controller.quorum_controller import QuorumController
from kopfka.metadata import bootstrap
from kopfka.metadata import records as mr
from kopfka.metadata.features import SUPPORTED_FEATURES, metadata_level_for
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.raft.kafka_raft import KafkaRaftClient
from single_voter import single_voter_controller, stop

CLUSTER = "feature-levels"
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


@pytest.fixture
async def controllers(tmp_path: Path) -> AsyncIterator[Callable[[str], QuorumController]]:
    made: list[tuple[QuorumController, KafkaRaftClient]] = []

    async def at(release: str) -> QuorumController:
        c, raft = await single_voter_controller(
            tmp_path / f"meta-{len(made)}",
            bootstrap.bootstrap_records(release),
            cluster_id=CLUSTER,
            static_config={"broker.session.timeout.ms": 600_000},
        )
        made.append((c, raft))
        return c

    yield at  # type: ignore[misc]
    for c, raft in made:
        await stop(c, raft)


def test_one_supported_range_everywhere() -> None:
    from kopfka.server.controller_server import _api_versions

    assert SUPPORTED_FEATURES["metadata.version"] == (7, 30)  # Kafka 4.3: 3.3-IV3 .. 4.3-IV0
    advertised = {f["name"]: (f["min_version"], f["max_version"]) for f in _api_versions()["supported_features"]}
    assert advertised == SUPPORTED_FEATURES
    # format writes the latest production level; every release maps to its last level
    assert bootstrap.bootstrap_records()[0] == mr.FeatureLevelRecord("metadata.version", 30)
    assert [metadata_level_for(r) for r in ("3.3", "3.5", "3.7", "4.0", "4.1", "4.2", "4.3")] == [
        7, 11, 19, 25, 27, 29, 30,
    ]  # fmt: skip


async def test_registration_checks_and_records_supported_features(controllers: Callable) -> None:
    c: QuorumController = await controllers("4.3")
    dirs = (uuids.to_str(uuids.random_uuid()),)
    with pytest.raises(KafkaError) as exc:
        await c.register_broker(
            1, "00000000-0000-0000-0000-000000000001", (), None, dirs, CLUSTER, (("metadata.version", 7, 27),)
        )
    assert exc.value.code == ErrorCode.unsupported_version
    assert "does not support finalized version 30 of metadata.version" in str(exc.value)
    # a 4.3 cluster finalizes eligible.leader.replicas.version 1, group.version 1, transaction.version 2
    # and share.version 1 too: brokers must support them
    supported = (
        ("metadata.version", 7, 30),
        ("eligible.leader.replicas.version", 0, 1),
        ("group.version", 0, 1),
        ("share.version", 0, 1),
        ("transaction.version", 0, 2),
    )
    with pytest.raises(KafkaError, match=r"finalized version 1 of eligible\.leader\.replicas\.version"):
        await c.register_broker(2, "00000000-0000-0000-0000-000000000002", (), None, dirs, CLUSTER, supported[:1])
    with pytest.raises(KafkaError, match=r"finalized version 1 of group\.version"):
        await c.register_broker(2, "00000000-0000-0000-0000-000000000002", (), None, dirs, CLUSTER, supported[:2])
    with pytest.raises(KafkaError, match=r"finalized version 1 of share\.version"):
        await c.register_broker(2, "00000000-0000-0000-0000-000000000002", (), None, dirs, CLUSTER, supported[:3])
    with pytest.raises(KafkaError, match=r"finalized version 2 of transaction\.version"):
        await c.register_broker(2, "00000000-0000-0000-0000-000000000002", (), None, dirs, CLUSTER, supported[:4])
    await c.register_broker(2, "00000000-0000-0000-0000-000000000002", (), None, dirs, CLUSTER, supported)
    assert c.image.brokers[2].supported_features == supported
    assert c.image.brokers[2].log_dirs == dirs


async def test_capabilities_follow_the_finalized_level(controllers: Callable) -> None:
    old: QuorumController = await controllers("3.6")  # level 14: no directory assignment, no cordoning
    new: QuorumController = await controllers("4.3")
    dirs = (uuids.to_str(uuids.random_uuid()),)
    for c in (old, new):
        epoch = await c.register_broker(1, "00000000-0000-0000-0000-000000000001", (), None, dirs, CLUSTER)
        await c.broker_heartbeat(1, epoch, 1 << 40, False, False, cordoned_log_dirs=dirs)
    assert old.image.brokers[1].log_dirs == () and old.image.brokers[1].cordoned_log_dirs is None
    assert new.image.brokers[1].log_dirs == dirs and new.image.brokers[1].cordoned_log_dirs == dirs
    with pytest.raises(KafkaError) as exc:
        await old.assign_replicas_to_dirs(1, old.image.brokers[1].epoch, [])
    assert exc.value.code == ErrorCode.unsupported_version
    assert await new.assign_replicas_to_dirs(1, new.image.brokers[1].epoch, []) == {}


async def test_metadata_transactions_only_from_3_6_iv1(controllers: Callable) -> None:
    """Over 1000 records go in a metadata transaction only where the level has them (13+)."""
    seen: dict[str, list[type]] = {}
    for release, c in (("3.5", await controllers("3.5")), ("4.3", await controllers("4.3"))):
        appended: list[type] = []
        raft_append = c.raft.append

        async def spy(records: list[mr.MetadataRecord], raft_append=raft_append, appended=appended) -> int:  # type: ignore[no-untyped-def]
            appended.extend(type(r) for r in records)
            return await raft_append(records)

        c.raft.append = spy  # type: ignore[method-assign]
        await c._write([mr.ConfigRecord(4, "", f"k{i}", "v") for i in range(1001)])
        seen[release] = appended
    assert mr.BeginTransactionRecord not in seen["3.5"]
    assert seen["4.3"][0] is mr.BeginTransactionRecord and seen["4.3"][-1] is mr.EndTransactionRecord


async def test_update_features_rules(controllers: Callable) -> None:
    c: QuorumController = await controllers("4.1")  # level 27
    await c.register_broker(
        1, "00000000-0000-0000-0000-000000000001", (), None, (), CLUSTER
    )  # supports 7-30, as this binary

    async def update(level: int, kind: int = UPGRADE, validate: bool = False) -> tuple[ErrorCode, str | None]:
        return await c.update_features([("metadata.version", level, kind)], validate_only=validate)

    assert await update(29, validate=True) == (ErrorCode.none, None)
    assert c.image.features["metadata.version"] == 27  # validate_only writes nothing
    code, msg = await update(31)
    assert code == ErrorCode.invalid_update_version and msg is not None and "only supports versions 7-30" in msg
    code, msg = await update(29, SAFE_DOWNGRADE)
    assert code == ErrorCode.invalid_update_version and "Can't downgrade to a newer version" in str(msg)
    assert await update(30) == (ErrorCode.none, None)
    assert c.image.features["metadata.version"] == 30
    code, msg = await update(29)
    assert code == ErrorCode.invalid_update_version and "upgrade type to either safe or unsafe" in str(msg)
    # 30 changed the records (cordoned dirs): no way back, safe or unsafe
    code, msg = await update(29, SAFE_DOWNGRADE)
    assert code == ErrorCode.invalid_update_version and "might delete metadata information" in str(msg)
    code, msg = await update(29, UNSAFE_DOWNGRADE)
    assert code == ErrorCode.invalid_update_version and "Unsafe metadata downgrade is not supported" in str(msg)
    # unknown features, bad upgrade types, and a broker that does not support the level
    code, msg = await c.update_features([("no.such.version", 1, UPGRADE)])
    assert code == ErrorCode.invalid_update_version and "does not support this feature" in str(msg)
    code, _ = await c.update_features([("metadata.version", 30, 7)])
    assert code == ErrorCode.invalid_update_version


async def test_update_features_checks_every_broker(controllers: Callable) -> None:
    c: QuorumController = await controllers("4.1")
    await c.register_broker(
        3,
        "00000000-0000-0000-0000-000000000003",
        (),
        None,
        (),
        CLUSTER,
        (
            ("metadata.version", 7, 27),
            ("eligible.leader.replicas.version", 0, 1),
            ("group.version", 0, 1),
            ("transaction.version", 0, 2),
        ),
    )
    code, msg = await c.update_features([("metadata.version", 30, UPGRADE)])
    assert code == ErrorCode.invalid_update_version and "Broker 3 only supports versions 7-27" in str(msg)
    # a safe downgrade that crosses no record change is allowed (28 and 29 changed nothing)
    assert await c.update_features([("metadata.version", 26, SAFE_DOWNGRADE)]) == (ErrorCode.none, None)
    assert c.image.features["metadata.version"] == 26


async def test_group_version_formatted_from_4_0_and_needs_metadata_version_22(controllers: Callable) -> None:
    assert mr.FeatureLevelRecord("group.version", 1) not in bootstrap.bootstrap_records("3.9")
    assert mr.FeatureLevelRecord("group.version", 1) in bootstrap.bootstrap_records("4.0")
    c: QuorumController = await controllers("3.9")  # level 21, group.version 0
    assert "group.version" not in c.image.features
    code, msg = await c.update_features([("group.version", 1, UPGRADE)])
    assert code == ErrorCode.invalid_update_version and "requires metadata.version 22" in str(msg)
    # both in one request: the proposed metadata.version counts
    assert await c.update_features([("metadata.version", 25, UPGRADE), ("group.version", 1, UPGRADE)]) == (
        ErrorCode.none,
        None,
    )
    assert c.image.features["group.version"] == 1 and c.image.features["metadata.version"] == 25
