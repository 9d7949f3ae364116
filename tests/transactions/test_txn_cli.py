"""`kopfka transactions` (kafka-transactions) against a real broker: list, describe,
describe-producers, and a hanging transaction found and aborted. The hanging transaction is made
the way it happens in the field: a transactional batch the coordinator never heard of (here with
KIP-890 verification turned off), which pins the partition's last stable offset until aborted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka.protocol.record_codec import Record, encode_batch
from kopfka_process import KopfkaProcess

from transactions.helpers import create_topic, wait_for_coordinator


def cli(k: KopfkaProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kopfka.cli.main", "transactions", "--bootstrap-server", k.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()[1:]]


async def _hanging(bootstrap: str) -> tuple[int, int]:
    conn = await KafkaConnection.open(bootstrap)
    try:
        await wait_for_coordinator(conn, "ghost")
        r = await conn.request(22, 4, {"transactional_id": "ghost", "transaction_timeout": 60000})
        assert r.error_code == ErrorCode.none
        pid, epoch = r.producer_id, r.producer_epoch
        batch = encode_batch(
            [Record(0, int(time.time() * 1000), None, b"ghost")],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            transactional=True,
        )
        resp = await conn.request(
            0,
            10,
            {
                "transactional_id": "ghost",
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": "hang", "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
        return pid, epoch
    finally:
        await conn.close()


async def _lso_and_hw(bootstrap: str) -> tuple[int, int]:
    conn = await KafkaConnection.open(bootstrap)
    try:
        out = []
        for iso in (1, 0):
            r = await conn.request(
                2,
                7,
                {
                    "replica_id": -1,
                    "isolation_level": iso,
                    "topics": [{"name": "hang", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
                },
            )
            out.append(int(r.topics[0].partitions[0].offset))
        return out[0], out[1]
    finally:
        await conn.close()


def test_list_describe_find_hanging_and_abort(tmp_path: Path) -> None:
    k = KopfkaProcess(tmp_path / "data", overrides={"transaction.partition.verification.enable": "false"}).start()
    try:
        create_topic(k.bootstrap, "hang")
        pid, epoch = asyncio.run(_hanging(k.bootstrap))
        assert asyncio.run(_lso_and_hw(k.bootstrap)) == (0, 1), "the hanging transaction pins the LSO"

        listed = cli(k, "list")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.split()[:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        assert ["ghost", "1", str(pid), "Empty"] in rows(listed.stdout)

        described = cli(k, "describe", "--transactional-id", "ghost")
        assert described.returncode == 0, described.stderr
        assert rows(described.stdout) == [["1", "ghost", str(pid), str(epoch), "Empty", "60000", "None", "None"]]

        producers = cli(k, "describe-producers", "--topic", "hang", "--partition", "0")
        assert producers.returncode == 0, producers.stderr
        (row,) = rows(producers.stdout)
        assert (row[0], row[1], row[5]) == (str(pid), str(epoch), "0")

        hanging = cli(k, "find-hanging", "--topic", "hang", "--max-transaction-timeout", "0")
        assert hanging.returncode == 0, hanging.stderr
        (h,) = rows(hanging.stdout)
        assert h[:6] == ["hang", "0", str(pid), str(epoch), "-1", "0"]

        wrong = cli(k, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "99")
        assert wrong.returncode == 1 and "no open transaction starts at offset 99" in wrong.stderr
        aborted = cli(k, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0")
        assert aborted.returncode == 0, aborted.stderr
        assert asyncio.run(_lso_and_hw(k.bootstrap)) == (2, 2), "the abort marker released the LSO"
        assert rows(cli(k, "find-hanging", "--topic", "hang", "--max-transaction-timeout", "0").stdout) == []

        missing = cli(k, "describe", "--transactional-id", "nope")
        assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
        usage = cli(k, "find-hanging", "--partition", "0")
        assert usage.returncode == 1 and "--partition needs --topic" in usage.stderr
    finally:
        k.kill()
