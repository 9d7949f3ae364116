"""A failed disk in status: which broker, which dir and volume, which partitions; the Warning
condition and Events follow it. (Read from a real cluster with a failed dir in
tests/kraft/test_log_dir_reporting.py.)"""

from __future__ import annotations

from typing import Any

from kopfka.client.admin import PartitionInfo, TopicInfo
from kopfka.protocol.errors import ErrorCode
from kopfka_operator.log_dir_health import (
    LISTED_PARTITIONS,
    OfflineDirs,
    changes,
    log_dirs_status,
    offline_partitions,
    volume_of,
)
from kopfka_operator.spec import parse_spec
from kopfka_operator.status import Observed, build_status


def topic(name: str, offline: dict[int, list[int]]) -> TopicInfo:
    parts = [PartitionInfo(p, 0, 0, [0, 1, 2], [0, 1], off, ErrorCode.none) for p, off in offline.items()]
    return TopicInfo(name, None, False, parts)  # type: ignore[arg-type]


def test_offline_replicas_of_live_brokers_only_sorted_by_partition_number() -> None:
    topics = [
        topic("orders", {10: [1], 2: [1, 2], 3: []}),
        topic("audit", {0: [2], 1: [1]}),
    ]
    # broker 2 is not live: its replicas are offline because its pod is gone, not its disk
    assert offline_partitions([0, 1], topics) == {1: ["audit-1", "orders-2", "orders-10"]}
    assert offline_partitions([0, 1, 2], topics)[2] == ["audit-0", "orders-2"]
    assert offline_partitions([0, 1], [topic("quiet", {0: [], 1: []})]) == {}


def test_dir_to_spec_volume() -> None:
    assert volume_of("/var/lib/kopfka/data-1") == "data-1"
    assert volume_of("/var/lib/kopfka/data-0/logs") == "data-0"
    assert volume_of("/tmp/elsewhere") is None


def test_status_names_the_volume_and_caps_the_partition_list() -> None:
    many = tuple(f"t-{i}" for i in range(LISTED_PARTITIONS + 50))
    entry = log_dirs_status([OfflineDirs(3, ("/var/lib/kopfka/data-1",), many)])["offline"][0]
    assert entry["broker"] == 3
    assert entry["volumes"] == ["data-1"]
    assert entry["partitionCount"] == LISTED_PARTITIONS + 50
    assert entry["partitions"] == list(many[:LISTED_PARTITIONS])
    # a broker that could not be asked for its dirs still shows its offline partitions
    unknown = log_dirs_status([OfflineDirs(4, (), ("t-0",))])["offline"][0]
    assert unknown["dirs"] == [] and unknown["volumes"] == [] and unknown["partitions"] == ["t-0"]


def test_events_when_a_dir_fails_and_when_it_is_back() -> None:
    failed = log_dirs_status([OfflineDirs(1, ("/var/lib/kopfka/data-1",), ("t-0", "t-1"))])["offline"]
    assert changes([], failed) == [
        ("Warning", "LogDirOffline", "broker 1: /var/lib/kopfka/data-1 offline, 2 partitions offline")
    ]
    assert changes(failed, failed) == []
    assert changes(failed, []) == [("Normal", "LogDirOnline", "broker 1: /var/lib/kopfka/data-1 no longer offline")]


def test_a_reported_broker_that_is_down_keeps_its_entry_until_it_is_back() -> None:
    """Seen on the test bed: the pod of the broker with the failed disk was deleted, and while
    it restarted the report cleared ("no longer offline") though nobody knew yet."""
    before = log_dirs_status([OfflineDirs(0, ("/var/lib/kopfka/data-2",), ("t-0",))])["offline"]
    restarting = log_dirs_status([], live=[1, 2], before=before)["offline"]
    assert restarting == before and changes(before, restarting) == []
    other = log_dirs_status([OfflineDirs(2, ("/var/lib/kopfka/data-0",), ("u-1",))], live=[1, 2], before=before)
    assert [e["broker"] for e in other["offline"]] == [0, 2]
    back = log_dirs_status([], live=[0, 1, 2], before=before)["offline"]
    assert back == [] and changes(before, back)[0][1] == "LogDirOnline"


def _status(previous: dict[str, Any]) -> dict[str, Any]:
    storage = {"volumes": [{"id": 0, "size": "1Gi"}, {"id": 1, "size": "1Gi"}]}
    spec = parse_spec(
        {"brokers": {"replicas": 3, "storage": storage}, "controllers": {"replicas": 3, "storage": storage}}, "img"
    )
    return build_status("c", "ns", 1, previous, spec, Observed({}, []))


def test_warning_condition_names_the_failed_disk_and_status_keeps_it() -> None:
    offline = log_dirs_status([OfflineDirs(1, ("/var/lib/kopfka/data-1",), ("t-0",))])
    status = _status({"logDirs": offline})
    warning = next(c for c in status["conditions"] if c["type"] == "Warning")
    assert warning["status"] == "True" and warning["reason"] == "LogDirOffline"
    assert "broker 1 has /var/lib/kopfka/data-1 offline (1 partitions offline there)" in warning["message"]
    assert status["logDirs"] == offline
    healthy = _status({"logDirs": {"offline": []}})
    assert next(c for c in healthy["conditions"] if c["type"] == "Warning")["status"] == "False"
