"""Kafka's Java clients (kafka-clients 4.3) beyond the basics, against kopfka: the admin client's
describe/alter calls (the same sequence also run against the reference Kafka, results compared),
KIP-848 consumers sharing a group, and the idempotent producer across a broker crash."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_ref import TOOL_JVM, KafkaCluster
from kopfka_process import KopfkaProcess

from tests.java_clients import LOG_CONFIG, kafka_libs_classpath
from tests.log.helpers import create_topic, produce, read_all

SOURCE = Path(__file__).parent / "java" / "ClientProbe.java"


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """`java ... ClientProbe` as a command prefix, compiled once against Kafka's jars."""
    libs = kafka_libs_classpath()
    classes = tmp_path_factory.mktemp("client-probe")
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", libs, str(SOURCE)], check=True, timeout=300)
    yield ["java", *TOOL_JVM, f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-cp", f"{classes}:{libs}", "ClientProbe"]


def run_probe(probe: list[str], *args: str, timeout: float = 180) -> list[dict[str, Any]]:
    res = subprocess.run([*probe, *args], capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


# What legitimately differs between two clusters: ids and the broker-side defaults we don't share.
MASKED = {
    "describeCluster": ("clusterId", "controller"),
    "describeTopics": ("topicId",),
    "describeConsumerGroups": ("coordinator",),
}


def masked(results: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for r in results:
        value = r.get("ok", {"error": r.get("error")})
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in MASKED.get(r["call"], ())}
        out[r["call"]] = value
    return out


def test_admin_describe_and_alter_calls_match_kafka(
    probe: list[str], kopfka_session: KopfkaProcess, kafka: KafkaCluster
) -> None:
    ours = masked(run_probe(probe, "admin", kopfka_session.bootstrap, "java-admin", "java-admin-g"))
    theirs = masked(run_probe(probe, "admin", kafka.bootstrap, "java-admin", "java-admin-g"))
    # the facts, on kopfka
    assert ours["createTopics"] == "created"
    assert ours["createTopicsAgain"] == {"error": "TopicExistsException"}
    assert ours["describeTopics"] == {"partitions": 2, "leader0": 1, "internal": False}
    assert ours["incrementalAlterConfigsInvalid"] == {"error": "InvalidConfigurationException"}
    assert ours["describeConfigs"]["cleanup.policy"] == ["compact", "DYNAMIC_TOPIC_CONFIG", False, False]
    assert ours["describeConfigs"]["retention.ms"] == ["604800000", "DEFAULT_CONFIG", False, False]
    assert ours["createPartitions"] == 3
    assert ours["createPartitionsFewer"] == {"error": "InvalidPartitionsException"}
    assert ours["listOffsets"] == {"earliest": 0, "latest": 10, "maxTimestamp": [9, 1009], "forTimestamp": 4}
    assert ours["deleteRecords"] == {"error": "PolicyViolationException"}  # compact-only, as Kafka
    assert ours["alterConsumerGroupOffsets"] == [7, "meta"]
    assert ours["deleteConsumerGroupOffsets"] == 0
    assert ours["describeDeletedTopic"] == {"error": "UnknownTopicOrPartitionException"}
    # and every call answers as Kafka's does
    differences = {k: (ours.get(k), theirs.get(k)) for k in theirs if ours.get(k) != theirs.get(k)}
    assert not differences, differences


def test_kip848_consumers_share_a_group(probe: list[str], kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    create_topic(k.bootstrap, "java-848", 4)
    for p in range(4):
        produce(k.bootstrap, "java-848", [(None, b"p%d-%03d" % (p, i)) for i in range(50)], partition=p)
    (summary,) = run_probe(probe, "consume", k.bootstrap, "java-848", "java-848-g", "200", "2")
    assert summary["errors"] == [] and summary["duplicates"] == 0 and summary["consumed"] == 200
    assert summary["values"] == sorted(f"p{p}-{i:03d}" for p in range(4) for i in range(50))
    assignments = [set(a) for a in summary["assignments"].values()]
    assert len(assignments) == 2 and set.union(*assignments) == {0, 1, 2, 3}
    assert not set.intersection(*assignments), assignments  # the server-side assignor split the partitions


def test_idempotent_producer_across_a_broker_crash(probe: list[str], tmp_path: Path) -> None:
    k = KopfkaProcess(tmp_path / "data").start()
    try:
        create_topic(k.bootstrap, "java-idem", 1)
        n = 4000
        proc = subprocess.Popen(
            [*probe, "produce", k.bootstrap, "java-idem", str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while sum(1 for ln in lines if '"acked"' in ln) < 1000 and time.monotonic() < deadline:
            time.sleep(0.05)
        k.kill()  # SIGKILL mid-stream: in-flight batches fail and are retried with the same sequences
        time.sleep(1.0)
        k.start()
        proc.wait(240)
        reader.join(10)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        summary = json.loads(lines[-1])
        assert summary == {"acked_total": n, "errors": []}
        acked = [json.loads(ln) for ln in lines if '"acked"' in ln]
        assert sorted(a["offset"] for a in acked) == list(range(n))  # each acked once, at distinct offsets
        got = read_all(k.bootstrap, "java-idem")
        assert [v for _, _, v in got] == [b"v%d" % i for i in range(n)]  # no duplicate, no gap, in order
    finally:
        k.kill()
