"""Kafka 4.3's own Java clients and kafka-transactions against kopfka. The Java producer sees
`transaction.version` 2 finalized, so it speaks KIP-890's second part: no AddPartitionsToTxn or
AddOffsetsToTxn (the partition leader and the group coordinator add the partitions), Produce
v12+, EndTxn v5 with an epoch bump per transaction, TxnOffsetCommit v5."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka_ref import run_tool
from kopfka_process import KopfkaProcess
from transactions.helpers import create_topic, lso_and_high_watermark, write_unknown_transaction


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


OPEN_TXN_PRODUCER = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "killed", "transaction.timeout.ms": 900000})
p.init_transactions(30)
p.begin_transaction()
for i in range(5):
    p.produce("abort-txn", f"committed-{i}".encode(), partition=0)
p.commit_transaction(30)
p.begin_transaction()
for i in range(7):
    p.produce("abort-txn", f"open-{i}".encode(), partition=0)
assert p.flush(30) == 0
print("open", flush=True)
time.sleep(600)
"""


def _committed_consumer(bootstrap: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "abort-reader", "isolation.level": "read_committed"})
    c.assign([TopicPartition("abort-txn", 0, 0)])
    return c


def _produce_plain(bootstrap: str, topic: str, partition: int, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v.encode(), partition=partition)
    assert p.flush(30) == 0


def _drain(c: Consumer, seconds: float) -> list[str]:
    out: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            assert m.error() is None, m.error()
            out.append(m.value().decode())
    return out


def test_kafka_transactions_abort(tmp_path: Path, kafka_libs: Path) -> None:
    """kafka-transactions abort (Admin.abortTransaction: describe-producers, then WriteTxnMarkers
    to the partition leader) on two open transactions: one of a producer SIGKILLed mid-transaction
    with a 15-minute transaction timeout (its coordinator still owns it, so find-hanging rightly
    leaves it out), and one the coordinator never heard of (a transactional batch written without
    AddPartitionsToTxn, KIP-890 verification off as before Kafka 3.6), which find-hanging lists.
    Both pin the last stable offset; aborting releases it and read_committed readers never see the
    aborted records."""
    k = KopfkaProcess(tmp_path / "data", overrides={"transaction.partition.verification.enable": "false"}).start()
    try:
        create_topic(k.bootstrap, "abort-txn", partitions=2)
        producer = subprocess.Popen(
            [sys.executable, "-c", OPEN_TXN_PRODUCER, k.bootstrap], stdout=subprocess.PIPE, text=True
        )
        try:
            assert producer.stdout is not None and producer.stdout.readline().strip() == "open"
        finally:
            producer.kill()  # SIGKILL: no EndTxn, the transaction stays open on partition 0
            producer.wait(10)
        ghost_pid, ghost_epoch = asyncio.run(write_unknown_transaction(k.bootstrap, "ghost", "abort-txn", 1, inits=2))
        # partition 0: 5 committed records, their marker at 5, the open transaction at 6..12
        assert asyncio.run(lso_and_high_watermark(k.bootstrap, "abort-txn", 0)) == (6, 13)
        assert asyncio.run(lso_and_high_watermark(k.bootstrap, "abort-txn", 1)) == (0, 1)
        reader = _committed_consumer(k.bootstrap)
        try:
            assert _drain(reader, 3) == [f"committed-{i}" for i in range(5)]
            (pos,) = reader.position([TopicPartition("abort-txn", 0)])
            assert pos.offset == 6, "the read_committed reader waits at the last stable offset"

            (p0,) = table(
                tool(k, "kafka-transactions", "describe-producers", "--topic", "abort-txn", "--partition", "0").stdout
            )
            assert p0[5] == "6", p0  # CurrentTransactionStartOffset
            hanging = table(
                tool(
                    k, "kafka-transactions", "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"
                ).stdout
            )
            # Topic Partition ProducerId ProducerEpoch CoordinatorEpoch StartOffset LastTimestamp Duration(min)
            assert [h[:6] for h in hanging] == [["abort-txn", "1", str(ghost_pid), str(ghost_epoch), "-1", "0"]]
            (owner,) = table(tool(k, "kafka-transactions", "describe", "--transactional-id", "killed").stdout)
            assert owner[2] == p0[0] and owner[4:6] == ["Ongoing", "900000"] and owner[-1] == "abort-txn-0", owner

            stale = tool(
                k,
                "kafka-transactions",
                "abort",
                "--topic",
                "abort-txn",
                "--partition",
                "1",
                "--producer-id",
                str(ghost_pid),
                "--producer-epoch",
                str(ghost_epoch - 1),
                "--coordinator-epoch",
                "0",
                check=False,
            )
            assert stale.returncode == 1 and "invalid producer epoch" in stale.stderr, stale
            wrong = tool(
                k,
                "kafka-transactions",
                "abort",
                "--topic",
                "abort-txn",
                "--partition",
                "0",
                "--start-offset",
                "7",
                check=False,
            )
            assert wrong.returncode == 1 and "Could not find any open transactions starting at offset 7" in wrong.stderr

            tool(k, "kafka-transactions", "abort", "--topic", "abort-txn", "--partition", "0", "--start-offset", "6")
            tool(k, "kafka-transactions", "abort", "--topic", "abort-txn", "--partition", "1", "--start-offset", "0")
            assert asyncio.run(lso_and_high_watermark(k.bootstrap, "abort-txn", 0)) == (14, 14)
            assert asyncio.run(lso_and_high_watermark(k.bootstrap, "abort-txn", 1)) == (2, 2)
            _produce_plain(k.bootstrap, "abort-txn", 0, [f"after-{i}" for i in range(3)])
            assert _drain(reader, 3) == [f"after-{i}" for i in range(3)], "past the aborted records, none seen"
        finally:
            reader.close()
        for partition in ("0", "1"):
            (row,) = table(
                tool(
                    k, "kafka-transactions", "describe-producers", "--topic", "abort-txn", "--partition", partition
                ).stdout
            )
            assert row[5] == "None", row  # no transaction open any more
        assert (
            table(
                tool(
                    k, "kafka-transactions", "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"
                ).stdout
            )
            == []
        )
    finally:
        k.kill()
