"""Kafka's own command-line tools against a single kopfka, used as a Kafka user would, with their
output checked. One kopfka serves the whole module; each test uses its own topic and group names.
Tools whose broker side belongs to work still in progress are xfail with the feature named."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from kafka_ref import run_tool
from kopfka_process import KopfkaProcess


def tool(k: KopfkaProcess, name: str, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return run_tool(name, "--bootstrap-server", k.bootstrap, *args, **kw)  # type: ignore[arg-type]


ROUND_ROBIN = ("--command-property", "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner")


def produce(k: KopfkaProcess, topic: str, lines: list[str], *props: str) -> None:
    tool(k, "kafka-console-producer", "--topic", topic, *props, input="".join(f"{ln}\n" for ln in lines))


def offsets(k: KopfkaProcess, topic: str, *args: str) -> dict[int, int]:
    """kafka-get-offsets output `topic:partition:offset` as {partition: offset}."""
    out = tool(k, "kafka-get-offsets", "--topic", topic, *args).stdout
    return {int(p): int(o) for t, p, o in (ln.rsplit(":", 2) for ln in out.split()) if t == topic}


def test_console_producer_and_consumer_roundtrip_keys(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-console", "--partitions", "1")
    produce(
        k,
        "tools-console",
        [f"k{i}:v{i}" for i in range(5)],
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "key.separator=:",
    )
    out = tool(
        k,
        "kafka-console-consumer",
        "--topic",
        "tools-console",
        "--from-beginning",
        "--max-messages",
        "5",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "print.offset=true",
        "--formatter-property",
        "print.partition=true",
    )
    got = out.stdout.split("\n")[:5]
    assert got == [f"Partition:0\tOffset:{i}\tk{i}\tv{i}" for i in range(5)], out.stdout
    assert "Processed a total of 5 messages" in out.stderr


def test_kafka_configs_topics_brokers_clients_users(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-configs", "--config", "retention.ms=100000")
    topic = ("--entity-type", "topics", "--entity-name", "tools-configs")
    out = tool(k, "kafka-configs", *topic, "--alter", "--add-config", "cleanup.policy=compact,segment.bytes=1048576")
    assert "Completed updating config for topic tools-configs." in out.stdout
    out = tool(k, "kafka-configs", *topic, "--describe").stdout
    assert "Dynamic configs for topic tools-configs are:" in out
    for line in ("cleanup.policy=compact", "segment.bytes=1048576", "retention.ms=100000"):
        assert re.search(rf"^  {re.escape(line)} sensitive=false synonyms={{DYNAMIC_TOPIC_CONFIG:", out, re.M), out
    tool(k, "kafka-configs", *topic, "--alter", "--delete-config", "retention.ms")
    assert "retention.ms" not in tool(k, "kafka-configs", *topic, "--describe").stdout
    out = tool(k, "kafka-configs", *topic, "--describe", "--all").stdout
    # as Kafka: a default whose primary broker synonym (log.retention.ms) is unset lists no synonym
    assert "  retention.ms=604800000 sensitive=false synonyms={}" in out
    bad = tool(k, "kafka-configs", *topic, "--alter", "--add-config", "no.such.config=1", check=False)
    assert bad.returncode != 0 and "no.such.config" in bad.stdout + bad.stderr

    broker = ("--entity-type", "brokers", "--entity-name", "1")
    tool(k, "kafka-configs", *broker, "--alter", "--add-config", "log.cleaner.threads=2")
    out = tool(k, "kafka-configs", *broker, "--describe").stdout
    assert "log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2" in out
    tool(k, "kafka-configs", *broker, "--alter", "--delete-config", "log.cleaner.threads")
    default = ("--entity-type", "brokers", "--entity-default")
    out = tool(k, "kafka-configs", *default, "--alter", "--add-config", "log.retention.ms=3600000")
    assert "Completed updating default config for brokers in the cluster." in out.stdout
    out = tool(k, "kafka-configs", *default, "--describe").stdout
    assert "log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" in out
    tool(k, "kafka-configs", *default, "--alter", "--delete-config", "log.retention.ms")

    client = ("--entity-type", "clients", "--entity-name", "tools-client")
    tool(k, "kafka-configs", *client, "--alter", "--add-config", "producer_byte_rate=1048576,request_percentage=50")
    out = tool(k, "kafka-configs", *client, "--describe").stdout
    assert "Quota configs for client-id 'tools-client' are " in out
    assert "producer_byte_rate=1048576.0" in out and "request_percentage=50.0" in out
    tool(k, "kafka-configs", *client, "--alter", "--delete-config", "producer_byte_rate,request_percentage")
    user = ("--entity-type", "users", "--entity-name", "tools-user")
    assert (
        "Completed updating config for user tools-user."
        in tool(k, "kafka-configs", *user, "--alter", "--add-config", "consumer_byte_rate=2048").stdout
    )
    tool(k, "kafka-configs", *user, "--alter", "--delete-config", "consumer_byte_rate")


def test_kafka_configs_describe_users(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    user = ("--entity-type", "users", "--entity-name", "tools-user2")
    tool(k, "kafka-configs", *user, "--alter", "--add-config", "consumer_byte_rate=4096")
    out = tool(k, "kafka-configs", *user, "--describe").stdout
    assert "Quota configs for user-principal 'tools-user2' are consumer_byte_rate=4096.0" in out


def test_consumer_groups_describe_reset_delete(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-groups", "--partitions", "2")
    produce(
        k,
        "tools-groups",
        [f"m{i}" for i in range(6)],
        *ROUND_ROBIN,
    )
    tool(
        k,
        "kafka-console-consumer",
        "--topic",
        "tools-groups",
        "--group",
        "tools-g",
        "--from-beginning",
        "--max-messages",
        "6",
    )
    assert "tools-g" in tool(k, "kafka-consumer-groups", "--list").stdout.split()
    g = ("--group", "tools-g")

    def described() -> dict[int, tuple[int, int, int]]:
        out = tool(k, "kafka-consumer-groups", "--describe", *g).stdout
        rows = [ln.split() for ln in out.splitlines() if ln.startswith("tools-g ")]
        return {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows}  # current, log-end, lag

    ends = offsets(k, "tools-groups")
    assert sum(ends.values()) == 6
    assert described() == {p: (e, e, 0) for p, e in ends.items()}
    state = tool(k, "kafka-consumer-groups", "--describe", *g, "--state").stdout
    assert re.search(r"tools-g\s+127\.0\.0\.1:\d+\s+\(1\)\s+\S+\s+Empty\s+0", state), state

    plan = tool(
        k, "kafka-consumer-groups", "--reset-offsets", *g, "--topic", "tools-groups", "--to-earliest", "--dry-run"
    ).stdout
    assert re.search(r"tools-g\s+tools-groups\s+0\s+0", plan), plan
    assert described() == {p: (e, e, 0) for p, e in ends.items()}  # a dry run changes nothing
    tool(
        k, "kafka-consumer-groups", "--reset-offsets", *g, "--topic", "tools-groups:0", "--to-offset", "1", "--execute"
    )
    tool(
        k, "kafka-consumer-groups", "--reset-offsets", *g, "--topic", "tools-groups:1", "--shift-by", "-1", "--execute"
    )
    assert described() == {0: (1, ends[0], ends[0] - 1), 1: (ends[1] - 1, ends[1], 1)}

    out = tool(k, "kafka-consumer-groups", "--delete-offsets", *g, "--topic", "tools-groups").stdout
    assert re.search(r"tools-groups\s+0\s+Successful", out) and re.search(r"tools-groups\s+1\s+Successful", out)
    out = tool(k, "kafka-consumer-groups", "--delete", *g).stdout
    assert "Deletion of requested consumer groups ('tools-g') was successful." in out
    assert "tools-g" not in tool(k, "kafka-consumer-groups", "--list").stdout.split()
    missing = tool(k, "kafka-consumer-groups", "--describe", "--group", "tools-none", check=False)
    assert "GroupIdNotFoundException: Group tools-none not found." in missing.stdout  # as Kafka 4.3 says


def test_consumer_groups_describe_a_kip848_group(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-848", "--partitions", "3")
    produce(k, "tools-848", [f"x{i}" for i in range(9)])
    out = tool(
        k,
        "kafka-console-consumer",
        "--topic",
        "tools-848",
        "--group",
        "tools-g848",
        "--from-beginning",
        "--max-messages",
        "9",
        "--command-property",
        "group.protocol=consumer",
    )
    assert sorted(out.stdout.split()) == sorted(f"x{i}" for i in range(9))
    out = tool(k, "kafka-groups", "--list").stdout
    assert re.search(r"^tools-g848\s+Consumer\s+consumer\s*$", out, re.M), out


def test_delete_records_and_get_offsets(kopfka_session: KopfkaProcess, tmp_path: Path) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-del", "--partitions", "1")
    produce(k, "tools-del", [f"r{i}" for i in range(10)])
    assert offsets(k, "tools-del") == {0: 10}
    assert offsets(k, "tools-del", "--time", "-2") == {0: 0}
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "tools-del", "partition": 0, "offset": 4}], "version": 1}))
    out = tool(k, "kafka-delete-records", "--offset-json-file", str(spec)).stdout
    assert "partition: tools-del-0\tlow_watermark: 4" in out
    assert offsets(k, "tools-del", "--time", "-2") == {0: 4}
    assert offsets(k, "tools-del", "--time", "-1") == {0: 10}
    out = tool(k, "kafka-console-consumer", "--topic", "tools-del", "--from-beginning", "--max-messages", "6")
    assert out.stdout.split() == [f"r{i}" for i in range(4, 10)]
    spec.write_text(json.dumps({"partitions": [{"topic": "tools-del", "partition": 0, "offset": 99}], "version": 1}))
    out = tool(k, "kafka-delete-records", "--offset-json-file", str(spec), check=False)
    assert "OffsetOutOfRangeException" in out.stdout + out.stderr


def test_log_dirs_describe(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-logdirs", "--partitions", "2")
    produce(
        k,
        "tools-logdirs",
        ["a" * 100] * 3,
        *ROUND_ROBIN,
    )
    out = tool(k, "kafka-log-dirs", "--describe", "--topic-list", "tools-logdirs").stdout
    assert "Received log directory information from brokers 1" in out
    doc = json.loads(out.strip().splitlines()[-1])
    (broker,) = doc["brokers"]
    (log_dir,) = broker["logDirs"]
    assert broker["broker"] == 1 and log_dir["error"] is None
    assert Path(log_dir["logDir"]).resolve() == k.data_dir.resolve()
    parts = {p["partition"]: p for p in log_dir["partitions"]}
    assert set(parts) == {"tools-logdirs-0", "tools-logdirs-1"}
    assert all(p["size"] > 0 and p["offsetLag"] == 0 and p["isFuture"] is False for p in parts.values())


def test_leader_election_on_a_single_broker(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-elect", "--partitions", "2")
    out = tool(k, "kafka-leader-election", "--election-type", "preferred", "--topic", "tools-elect", "--partition", "0")
    assert out.stdout.strip() == "Valid replica already elected for partitions tools-elect-0"
    out = tool(k, "kafka-leader-election", "--election-type", "unclean", "--topic", "tools-elect", "--partition", "1")
    assert out.stdout.strip() == "Valid replica already elected for partitions tools-elect-1"


def test_perf_tests(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-perf", "--partitions", "2")
    out = run_tool(
        "kafka-producer-perf-test",
        "--topic",
        "tools-perf",
        "--num-records",
        "20000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--bootstrap-server",
        k.bootstrap,
        "--command-property",
        "acks=all",
    ).stdout
    assert re.search(r"^20000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\)", out, re.M), out
    assert sum(offsets(k, "tools-perf").values()) == 20000
    out = tool(
        k, "kafka-consumer-perf-test", "--topic", "tools-perf", "--num-records", "20000", "--timeout", "30000"
    ).stdout
    lines = out.strip().splitlines()
    header = next(i for i, ln in enumerate(lines) if "data.consumed.in.nMsg" in ln)
    stats = dict(zip(lines[header].split(", "), lines[header + 1].split(", "), strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == 20000, out
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(20000 * 100 / 2**20, rel=1e-3), out


def test_verifiable_producer_and_consumers(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-verify", "--partitions", "2")
    out = tool(k, "kafka-verifiable-producer", "--topic", "tools-verify", "--max-messages", "200", "--acks", "-1")
    events = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    acked = {(e["partition"], e["offset"]): e["value"] for e in events if e["name"] == "producer_send_success"}
    assert not [e for e in events if e["name"] == "producer_send_error"]
    assert len(acked) == 200 and events[-1]["name"] == "tool_data" and events[-1]["acked"] == 200
    for protocol in ("classic", "consumer"):
        out = tool(
            k,
            "kafka-verifiable-consumer",
            "--topic",
            "tools-verify",
            "--group-id",
            f"tools-v-{protocol}",
            "--group-protocol",
            protocol,
            "--max-messages",
            "200",
            "--verbose",
            "--reset-policy",
            "earliest",
            timeout=120,
        )
        events = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
        seen = {(e["partition"], e["offset"]): e["value"] for e in events if e["name"] == "record_data"}
        assert seen == acked, protocol
        commits = [e for e in events if e["name"] == "offsets_committed"]
        assert commits and all(c["success"] for c in commits), protocol


def test_acls_without_an_authorizer(kopfka_session: KopfkaProcess) -> None:
    """As Kafka: no authorizer.class.name, no ACLs (SECURITY_DISABLED). With the StandardAuthorizer,
    kafka-acls is exercised in test_security_tools."""
    k = kopfka_session
    out = tool(
        k,
        "kafka-acls",
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "tools-acl",
        check=False,
    )
    assert out.returncode != 0 and "SecurityDisabledException" in out.stdout + out.stderr
