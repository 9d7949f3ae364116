"""The coordinator's state across restarts and time:

- a transaction whose PrepareCommit is in `__transaction_state` but whose markers were never
  written (the coordinator died between the two) is completed by the coordinator that loads it:
  markers written, CompleteCommit recorded, the records visible to read_committed;
- a transactional id idle for transactional.id.expiration.ms is expired (a tombstone) and comes
  back as a new producer id;
- while its partition loads, the coordinator answers COORDINATOR_LOAD_IN_PROGRESS, and
  NOT_COORDINATOR for partitions it does not lead.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kopfka.config.log_config import LogConfig
from kopfka.coordinator.group.coordinator import partition_for
from kopfka.coordinator.transaction import records as rec
from kopfka.coordinator.transaction.metadata import TxnState
from kopfka.coordinator.transaction.state_manager import ShardState, TransactionStateManager, TxnShard
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.record_codec import Record, decode_records, encode_batch
from kopfka.protocol.records import iter_batches
from kopfka.storage.producer_state import AppendOrigin
from kopfka.storage.unified_log import UnifiedLog
from kopfka_process import KopfkaProcess

from transactions.helpers import create_topic, read_values
from transactions.raw import Txn, run

TXN_PARTITIONS = 5


def _state_records(data: Path, tid: str) -> list[rec.TxnLogValue | None]:
    part = data / f"__transaction_state-{partition_for(tid, TXN_PARTITIONS)}"
    out: list[rec.TxnLogValue | None] = []
    for seg in sorted(part.glob("*.log")):
        raw = seg.read_bytes()
        for h in iter_batches(raw, allow_partial_tail=True):
            for r in decode_records(raw, h):
                if r.key is not None and rec.decode_key(r.key) == tid:
                    out.append(None if r.value is None else rec.decode_value(r.value))
    return out


def test_prepare_commit_without_markers_is_completed_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    k = KopfkaProcess(data, overrides={"transaction.state.log.num.partitions": str(TXN_PARTITIONS)}).start()
    try:
        create_topic(k.bootstrap, "tp", 2)

        async def open_transaction(t: Txn) -> tuple[int, int]:
            r = await t.init("resume")
            await t.add("resume", r.producer_id, r.producer_epoch, [("tp", 0)])
            assert (await t.produce("resume", r.producer_id, r.producer_epoch, 0, ("tp", 0), b"pending"))[0] == 0
            return r.producer_id, r.producer_epoch

        pid, epoch = run(k.bootstrap, open_transaction)
        k.kill()
        (*_, ongoing) = _state_records(data, "resume")
        assert ongoing is not None and ongoing.state == TxnState.ONGOING
        # the coordinator wrote PrepareCommit and died before any marker: append it by hand
        prepare = rec.TxnLogValue(
            pid,
            epoch,
            ongoing.timeout_ms,
            TxnState.PREPARE_COMMIT,
            {"tp": [0]},
            int(time.time() * 1000),
            ongoing.start_ms,
        )
        _append_state(data, "resume", prepare)
        k.start()

        async def completed(t: Txn) -> tuple[int, int]:
            await t.wait_state("resume", "CompleteCommit")
            return await t.offsets(("tp", 0))

        lso, hw = run(k.bootstrap, completed)
        assert lso == hw == 2, "the COMMIT marker was written by the coordinator that loaded PrepareCommit"
        assert read_values("confluent", k.bootstrap, "tp", 2, committed=True) == ["pending"]
    finally:
        k.kill()


def _append_state(data: Path, tid: str, value: rec.TxnLogValue) -> None:
    """Write a `__transaction_state` record by hand while the broker is down."""
    part = data / f"__transaction_state-{partition_for(tid, TXN_PARTITIONS)}"
    ulog = UnifiedLog.load(part, LogConfig.defaults(), recovery_point=0)
    now = int(time.time() * 1000)
    batch = encode_batch([Record(0, now, rec.encode_key(tid), rec.encode_value(value, 1))])
    ulog.append_as_leader(batch, 0, origin=AppendOrigin.COORDINATOR)
    ulog.flush()
    ulog.close()


def test_exhausted_epoch_rotates_to_a_new_producer_id(tmp_path: Path) -> None:
    """Transaction version 2 bumps the epoch at every end: at Short.MAX_VALUE - 1 the end moves
    the transactional id to a new producer id at epoch 0, answered in EndTxn, and a retry of
    that EndTxn (old id, old epoch) is answered with the new identity."""
    data = tmp_path / "data"
    k = KopfkaProcess(data, overrides={"transaction.state.log.num.partitions": str(TXN_PARTITIONS)}).start()
    try:
        create_topic(k.bootstrap, "tp", 1)
        pid = run(k.bootstrap, lambda t: t.init("overflow", version=5)).producer_id
        k.kill()
        last = int(time.time() * 1000)
        _append_state(
            data,
            "overflow",
            rec.TxnLogValue(pid, 32766, 60000, TxnState.COMPLETE_COMMIT, {}, last, last, client_transaction_version=2),
        )
        k.start()

        async def scenario(t: Txn) -> tuple[Any, Any, Any]:
            assert (await t.produce("overflow", pid, 32766, 0, ("tp", 0), b"last", version=12))[0] == 0
            end = await t.end("overflow", pid, 32766, True, version=5)
            await t.wait_state("overflow", "CompleteCommit")
            retry = await t.end("overflow", pid, 32766, True, version=5)
            (d,) = await t.describe("overflow")
            return end, retry, d

        end, retry, d = run(k.bootstrap, scenario)
        assert end.error_code == 0 and end.producer_id != pid and end.producer_epoch == 0
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, end.producer_id, 0)
        assert (d.producer_id, d.producer_epoch, d.state) == (end.producer_id, 0, "CompleteCommit")

        async def next_transaction(t: Txn) -> int:
            return (await t.produce("overflow", end.producer_id, 0, 0, ("tp", 0), b"first", version=12))[0]

        assert run(k.bootstrap, next_transaction) == 0
    finally:
        k.kill()


def test_idle_transactional_id_expires(tmp_path: Path) -> None:
    k = KopfkaProcess(
        tmp_path / "data",
        overrides={
            "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            "transactional.id.expiration.ms": "1000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "300",
        },
    ).start()
    try:

        async def scenario(t: Txn) -> tuple[int, int]:
            first = await t.init("short-lived")
            assert first.error_code == ErrorCode.none
            for _ in range(100):
                (d,) = await t.describe("short-lived")
                if d.error == ErrorCode.transactional_id_not_found:
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the idle transactional id was not expired")
            again = await t.init("short-lived")
            return first.producer_id, again.producer_id

        first, again = run(k.bootstrap, scenario)
        assert again != first, "an expired transactional id starts over with a new producer id"
        records = _state_records(tmp_path / "data", "short-lived")
        assert None in records, "expiry writes a tombstone"
    finally:
        k.kill()


def test_loading_and_foreign_partitions_answer_retriable_errors() -> None:
    services = SimpleNamespace(node_id=1, config={"transaction.state.log.num.partitions": 5})
    sm = TransactionStateManager(services, lambda key: services.config[key])
    loading = partition_for("a", 5)
    sm.shards[loading] = TxnShard(loading, 0, writer=SimpleNamespace(close=lambda e: None))  # type: ignore[arg-type]
    with pytest.raises(KafkaError) as exc:
        sm.get("a")
    assert exc.value.code == ErrorCode.coordinator_load_in_progress
    other = next(t for t in (f"id-{i}" for i in range(100)) if partition_for(t, 5) != loading)
    with pytest.raises(KafkaError) as exc:
        sm.get(other)
    assert exc.value.code == ErrorCode.not_coordinator
    sm.shards[loading].state = ShardState.ACTIVE
    assert sm.get("a")[1] is None
