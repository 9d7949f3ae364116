"""The reference set-up itself: scripts/get-kafka installs one Kafka version, the runner formats
and starts a KRaft Kafka on loopback, and Kafka's tools work against it and against kopfka."""

from __future__ import annotations

from pathlib import Path

from kafka_ref import KAFKA_VERSION, KafkaCluster, run_tool
from kopfka_process import KopfkaProcess


def test_one_kafka_version_for_every_kafka_artifact(kafka_libs: Path) -> None:
    jars = [p.name for p in (kafka_libs / "libs").glob("*.jar")]
    kafka_jars = [j for j in jars if j.startswith(("kafka", "connect-"))]
    assert {"kafka_2.13", "kafka-tools", "kafka-server", "kafka-storage", "kafka-clients"} <= {
        j.rsplit("-", 1)[0] for j in kafka_jars
    }
    assert all(j.endswith(f"-{KAFKA_VERSION}.jar") for j in kafka_jars), kafka_jars
    assert run_tool("kafka-topics", "--version").stdout.strip() == KAFKA_VERSION


def test_reference_kafka_serves_its_own_tools(kafka: KafkaCluster) -> None:
    kafka.tool("kafka-topics", "--create", "--topic", "setup-ref", "--partitions", "2")
    out = kafka.tool("kafka-topics", "--describe", "--topic", "setup-ref").stdout
    assert "PartitionCount: 2" in out and "Leader: 1" in out
    assert (kafka.nodes[0].log_dir / "meta.properties").is_file()


def test_kafka_topics_against_kopfka(kopfka_session: KopfkaProcess) -> None:
    b = ("--bootstrap-server", kopfka_session.bootstrap)
    assert (
        "Created topic setup-kopfka."
        in run_tool("kafka-topics", *b, "--create", "--topic", "setup-kopfka", "--partitions", "3").stdout
    )
    assert "setup-kopfka" in run_tool("kafka-topics", *b, "--list").stdout.split()
    run_tool("kafka-topics", *b, "--alter", "--topic", "setup-kopfka", "--partitions", "4")
    out = run_tool("kafka-topics", *b, "--describe", "--topic", "setup-kopfka").stdout
    assert "PartitionCount: 4" in out
    assert [ln.split("Partition: ")[1].split()[0] for ln in out.splitlines() if "Partition: " in ln] == list("0123")
    run_tool("kafka-topics", *b, "--delete", "--topic", "setup-kopfka")
    assert "setup-kopfka" not in run_tool("kafka-topics", *b, "--list").stdout.split()
