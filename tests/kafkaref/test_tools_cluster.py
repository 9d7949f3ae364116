"""Kafka's cluster tools against a kopfka KRaft cluster (1 controller, 2 brokers with 2 log dirs
each, dynamic quorum): kafka-metadata-quorum (describe, add-controller, remove-controller),
kafka-reassign-partitions (generate/execute/verify with both throttles, across brokers and across
log dirs) and kafka-leader-election. One cluster serves the module."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_ref import run_tool

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kraft"))

from cluster import Cluster, Node, wait_until


@pytest.fixture(scope="module")
def cluster(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("kopfka-cluster")
    c = Cluster(root, controllers=1, brokers=2, props={"group.initial.rebalance.delay.ms": "0"})
    for b in c.brokers:
        b.props = {**b.props, "log.dirs": f"{b.dir / 'logs-a'},{b.dir / 'logs-b'}"}
    c.format_all()
    c.start()
    try:
        yield c
    finally:
        c.stop()


def tool(c: Cluster, name: str, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return run_tool(name, "--bootstrap-server", c.bootstrap(), *args, **kw)  # type: ignore[arg-type]


def quorum(c: Cluster, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return run_tool("kafka-metadata-quorum", "--bootstrap-controller", c.controllers[0].address, *args, **kw)  # type: ignore[arg-type]


def perf_produce(c: Cluster, topic: str, records: int, size: int = 1000) -> None:
    run_tool(
        "kafka-producer-perf-test",
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(size),
        "--throughput",
        "-1",
        "--bootstrap-server",
        c.bootstrap(),
    )


def fields(out: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in out.splitlines() if ":" in ln)}


def describe(c: Cluster, topic: str) -> dict[int, dict[str, str]]:
    out = tool(c, "kafka-topics", "--describe", "--topic", topic).stdout
    rows = {}
    for ln in out.splitlines():
        m = dict(re.findall(r"(\w+): (\S*)", ln))
        if "Partition" in m:
            rows[int(m["Partition"])] = m
    return rows


def test_metadata_quorum_describe(cluster: Cluster) -> None:
    st = fields(quorum(cluster, "describe", "--status").stdout)
    assert st["ClusterId"] == cluster.cluster_id
    assert st["LeaderId"] == "1000" and int(st["HighWatermark"]) > 0
    (voter,) = json.loads(st["CurrentVoters"])
    assert voter == {
        "id": 1000,
        "directoryId": cluster.controllers[0].directory_id,
        "endpoints": [f"CONTROLLER://{cluster.controllers[0].address}"],
    }
    assert sorted(o["id"] for o in json.loads(st["CurrentObservers"])) == [0, 1]
    out = quorum(cluster, "describe", "--replication").stdout.splitlines()
    assert out[0].split() == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    rows = {r[0]: r for r in (ln.split() for ln in out[1:])}
    assert rows["1000"][-1] == "Leader" and rows["0"][-1] == "Observer" and rows["1"][-1] == "Observer"
    assert rows["1000"][1] == cluster.controllers[0].directory_id


def test_metadata_quorum_add_and_remove_controller(cluster: Cluster) -> None:
    new = Node(cluster.root, 1001, "controller", "127.0.0.12", props=cluster.props)
    # Kafka's default; kopfka's is true (docs/kafka-differences.md)
    new.write_config({**cluster.quorum_props(), "controller.quorum.auto.join.enable": "false"})
    res = new.format(cluster.cluster_id, "--no-initial-controllers")
    assert res.returncode == 0, res.stderr
    meta = (new.dir / "metadata" / "meta.properties").read_text()
    directory_id = re.search(r"^directory.id=(\S+)$", meta, re.M).group(1)  # type: ignore[union-attr]
    new.start()
    try:
        wait_until(lambda: "1001" in quorum(cluster, "describe", "--replication").stdout, 30, "1001 to fetch")
        out = quorum(cluster, "--command-config", str(new.config), "add-controller").stdout
        assert f"Added controller 1001 with directory id {directory_id}" in out, out

        def voter_ids() -> list[int]:
            return sorted(
                v["id"] for v in json.loads(fields(quorum(cluster, "describe", "--status").stdout)["CurrentVoters"])
            )

        wait_until(lambda: voter_ids() == [1000, 1001], 30, "1001 to be a voter")
        out = quorum(
            cluster, "remove-controller", "--controller-id", "1001", "--controller-directory-id", directory_id
        ).stdout
        assert re.search(rf"Removed\s+KRaft controller 1001 with directory id {directory_id}", out), out
        wait_until(lambda: voter_ids() == [1000], 30, "1001 to leave the voters")
    finally:
        new.kill()


def test_reassign_across_brokers_with_throttle_then_preferred_election(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    tool(c, "kafka-topics", "--create", "--topic", "re-move", "--replica-assignment", "0:1")
    perf_produce(c, "re-move", 3000)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "re-move"}], "version": 1}))
    out = tool(
        c, "kafka-reassign-partitions", "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "0,1"
    ).stdout
    current = json.loads(out.split("Current partition replica assignment")[1].split("Proposed")[0])
    assert [(p["partition"], p["replicas"]) for p in current["partitions"]] == [(0, [0, 1])]

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": "re-move", "partition": 0, "replicas": [1, 0], "log_dirs": ["any", "any"]}],
            }
        )
    )
    out = tool(
        c, "kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan), "--throttle", "50000000"
    ).stdout
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out, out
    assert "Successfully started partition reassignment for re-move-0" in out, out

    def verified() -> str | None:
        out = tool(c, "kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(plan)).stdout
        return out if "Reassignment of partition re-move-0 is completed." in out else None

    out = wait_until(verified, 60, "reassignment to complete", interval=1)
    assert "Clearing broker-level throttles on brokers 0,1" in out and "Clearing topic-level throttles" in out
    for b in ("0", "1"):
        cfg = tool(c, "kafka-configs", "--entity-type", "brokers", "--entity-name", b, "--describe").stdout
        assert "throttled.rate" not in cfg, cfg
    assert (
        "throttled.replicas"
        not in tool(c, "kafka-configs", "--entity-type", "topics", "--entity-name", "re-move", "--describe").stdout
    )
    row = describe(c, "re-move")[0]
    assert row["Replicas"] == "1,0" and row["Leader"] == "0"  # replica order changed, leader did not

    out = tool(c, "kafka-leader-election", "--election-type", "preferred", "--topic", "re-move", "--partition", "0")
    assert out.stdout.strip() == "Successfully completed leader election (PREFERRED) for partitions re-move-0"
    wait_until(lambda: describe(c, "re-move")[0]["Leader"] == "1", 20, "broker 1 to lead re-move-0")


def test_reassign_between_log_dirs_with_alter_log_dirs_throttle(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    b0 = c.brokers[0]
    tool(c, "kafka-topics", "--create", "--topic", "re-dir", "--replica-assignment", "0")
    perf_produce(c, "re-dir", 1500)
    src = next(d for d in ("logs-a", "logs-b") if (b0.dir / d / "re-dir-0").is_dir())
    dest = "logs-b" if src == "logs-a" else "logs-a"
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": "re-dir", "partition": 0, "replicas": [0], "log_dirs": [str(b0.dir / dest)]}],
            }
        )
    )
    t0 = time.monotonic()
    out = tool(
        c,
        "kafka-reassign-partitions",
        "--execute",
        "--reassignment-json-file",
        str(plan),
        "--replica-alter-log-dirs-throttle",
        "500000",
    ).stdout
    assert "The replica-alter-dir throttle limit was set to 500000 B/s" in out, out

    def verified() -> str | None:
        out = tool(c, "kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(plan)).stdout
        return out if "is completed" in out and "still in progress" not in out else None

    out = wait_until(verified, 90, "log dir move to complete", interval=1)
    took = time.monotonic() - t0
    assert "Reassignment of replica re-dir-0-0 completed" in out or "is completed" in out, out
    assert (b0.dir / dest / "re-dir-0").is_dir() and not (b0.dir / src / "re-dir-0").exists()
    # ~1.5 MB at 500 kB/s: the move was paced (a lower bound only: load can only slow it further)
    assert took >= 2.0, took
    cfg = tool(c, "kafka-configs", "--entity-type", "brokers", "--entity-name", "0", "--describe").stdout
    assert "replica.alter.log.dirs.io.max.bytes.per.second" not in cfg, cfg
    got = tool(c, "kafka-get-offsets", "--topic", "re-dir").stdout.split()
    assert got == ["re-dir:0:1500"]
