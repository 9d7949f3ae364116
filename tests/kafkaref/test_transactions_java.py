"""Kafka 4.3's own Java clients and kafka-transactions against kopfka. The Java producer sees
`transaction.version` 2 finalized, so it speaks KIP-890's second part: no AddPartitionsToTxn or
AddOffsetsToTxn (the partition leader and the group coordinator add the partitions), Produce
v12+, EndTxn v5 with an epoch bump per transaction, TxnOffsetCommit v5."""

from __future__ import annotations

import json
import re
import subprocess

from kafka_ref import run_tool
from kopfka_process import KopfkaProcess


def tool(k: KopfkaProcess, name: str, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return run_tool(name, "--bootstrap-server", k.bootstrap, *args, **kw)  # type: ignore[arg-type]


def table(out: str) -> list[list[str]]:
    return [re.split(r"\s+", line.strip()) for line in out.strip().splitlines()[1:]]


def test_java_copier_with_random_aborts_is_exactly_once(kopfka_session: KopfkaProcess) -> None:
    """TransactionalMessageCopier (Kafka's system-test EOS tool): consume, produce and send the
    offsets in transactions, a third of them aborted at random; the output read with
    read_committed is the input, once, and the group's offsets are at the input's end."""
    k = kopfka_session
    n = 400
    tool(k, "kafka-topics", "--create", "--topic", "copy-in", "--partitions", "1")
    tool(k, "kafka-topics", "--create", "--topic", "copy-out", "--partitions", "1")
    tool(k, "kafka-console-producer", "--topic", "copy-in", input="".join(f"v{i}\n" for i in range(n)))
    out = run_tool(
        "org.apache.kafka.tools.TransactionalMessageCopier",
        "--broker-list",
        k.bootstrap,
        "--input-topic",
        "copy-in",
        "--input-partition",
        "0",
        "--output-topic",
        "copy-out",
        "--max-messages",
        str(n),
        "--transactional-id",
        "java-copier",
        "--consumer-group",
        "copier",
        "--transaction-size",
        "25",
        "--enable-random-aborts",
        "--use-group-metadata",
        "--group-mode",
        timeout=240,
    ).stdout
    last = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    assert last["remaining"] == 0 and last["totalProcessed"] == n, last
    got = tool(
        k,
        "kafka-console-consumer",
        "--topic",
        "copy-out",
        "--from-beginning",
        "--max-messages",
        str(n),
        "--isolation-level",
        "read_committed",
        "--timeout-ms",
        "20000",
    ).stdout.split()
    assert sorted(got) == sorted(f"v{i}" for i in range(n)), "each input record exactly once"
    groups = tool(k, "kafka-consumer-groups", "--describe", "--group", "copier").stdout
    assert re.search(r"copier\s+copy-in\s+0\s+400\s+400\s+0", groups), groups
    (row,) = table(tool(k, "kafka-transactions", "describe", "--transactional-id", "java-copier").stdout)
    # transaction version 2: one epoch bump per committed or aborted transaction (>= 16 of 25)
    assert row[1] == "java-copier" and row[4] == "CompleteCommit" and int(row[3]) >= n // 25, row


def test_kafka_transactions_tool(kopfka_session: KopfkaProcess) -> None:
    k = kopfka_session
    tool(k, "kafka-topics", "--create", "--topic", "tools-txn", "--partitions", "1")
    tool(
        k,
        "kafka-producer-perf-test",
        "--topic",
        "tools-txn",
        "--num-records",
        "300",
        "--record-size",
        "50",
        "--throughput",
        "-1",
        "--transactional-id",
        "perf-txn",
        "--transaction-duration-ms",
        "50",
        "--command-property",
        f"bootstrap.servers={k.bootstrap}",
        timeout=120,
    )
    listed = tool(k, "kafka-transactions", "list").stdout
    assert listed.split()[:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (perf,) = [r for r in table(listed) if r[0] == "perf-txn"]
    assert perf[1] == "1" and perf[3] == "CompleteCommit"
    (d,) = table(tool(k, "kafka-transactions", "describe", "--transactional-id", "perf-txn").stdout)
    assert d[:3] == ["1", "perf-txn", perf[2]] and d[4:6] == ["CompleteCommit", "60000"]
    assert int(d[6]) > 0 and int(d[7]) >= 0  # the last transaction's start, as Kafka keeps it
    producers = table(
        tool(k, "kafka-transactions", "describe-producers", "--topic", "tools-txn", "--partition", "0").stdout
    )
    assert [p[0] for p in producers] == [perf[2]] and producers[0][5] == "None"  # no transaction open
    hanging = tool(k, "kafka-transactions", "find-hanging", "--broker-id", "1").stdout
    assert table(hanging) == []
    committed = tool(
        k,
        "kafka-console-consumer",
        "--topic",
        "tools-txn",
        "--from-beginning",
        "--max-messages",
        "300",
        "--isolation-level",
        "read_committed",
        "--timeout-ms",
        "20000",
    ).stdout.splitlines()
    assert len(committed) == 300
