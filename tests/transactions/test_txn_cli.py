"""`kopfka transactions` (kafka-transactions) against a real broker: list, describe,
describe-producers, and a hanging transaction found and aborted. The hanging transaction is made
the way it happens in the field: a transactional batch the coordinator never heard of (here with
KIP-890 verification turned off), which pins the partition's last stable offset until aborted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from kopfka_process import KopfkaProcess

from transactions.helpers import create_topic, lso_and_high_watermark, write_unknown_transaction


def cli(k: KopfkaProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kopfka.cli.main", "transactions", "--bootstrap-server", k.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()[1:]]


def test_list_describe_find_hanging_and_abort(tmp_path: Path) -> None:
    k = KopfkaProcess(tmp_path / "data", overrides={"transaction.partition.verification.enable": "false"}).start()
    try:
        create_topic(k.bootstrap, "hang")
        pid, epoch = asyncio.run(write_unknown_transaction(k.bootstrap, "ghost", "hang", 0))
        assert asyncio.run(lso_and_high_watermark(k.bootstrap, "hang", 0)) == (0, 1), (
            "the hanging transaction pins the LSO"
        )

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
        assert asyncio.run(lso_and_high_watermark(k.bootstrap, "hang", 0)) == (2, 2), (
            "the abort marker released the LSO"
        )
        assert rows(cli(k, "find-hanging", "--topic", "hang", "--max-transaction-timeout", "0").stdout) == []

        missing = cli(k, "describe", "--transactional-id", "nope")
        assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
        usage = cli(k, "find-hanging", "--partition", "0")
        assert usage.returncode == 1 and "--partition needs --topic" in usage.stderr
    finally:
        k.kill()
