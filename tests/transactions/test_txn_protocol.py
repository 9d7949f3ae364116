"""The transaction APIs on the wire (kio-based requests against a real broker): the error code
Kafka answers on each path, KIP-890's server-side verification and transaction version 2
(implicit partition adds, an epoch bump per transaction), the last stable offset, stale
coordinator markers, and the admin views (DescribeTransactions, ListTransactions,
DescribeProducers)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kopfka.protocol.errors import ErrorCode
from kopfka_process import KopfkaProcess

from transactions.helpers import create_topic
from transactions.raw import Txn, run


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(tmp_path_factory.mktemp("txnproto") / "data").start()
    create_topic(proc.bootstrap, "tp", 2)
    try:
        yield proc
    finally:
        proc.kill()


def test_init_producer_id_errors_and_epochs(broker: KopfkaProcess) -> None:
    async def scenario(t: Txn) -> None:
        assert (await t.init("")).error_code == ErrorCode.invalid_request
        assert (await t.init("x", timeout_ms=0)).error_code == ErrorCode.invalid_transaction_timeout
        assert (await t.init("x", timeout_ms=900_001)).error_code == ErrorCode.invalid_transaction_timeout
        first = await t.init("epochs")
        second = await t.init("epochs")
        assert (first.error_code, second.error_code) == (0, 0)
        assert second.producer_id == first.producer_id and second.producer_epoch == first.producer_epoch + 1
        # v3+: a producer id that is not the transactional id's is fenced (PRODUCER_FENCED since v4)
        stale = await t.init("epochs", producer_id=first.producer_id + 1000, producer_epoch=0)
        assert stale.error_code == ErrorCode.producer_fenced
        old = await t.init("epochs", version=3, producer_id=first.producer_id + 1000, producer_epoch=0)
        assert old.error_code == ErrorCode.invalid_producer_epoch
        # the retry of a bump whose answer was lost is answered with the same epoch
        resumed = await t.init("epochs", producer_id=second.producer_id, producer_epoch=second.producer_epoch)
        assert resumed.producer_epoch == second.producer_epoch + 1

    run(broker.bootstrap, scenario)


def test_add_partitions_and_end_txn_errors(broker: KopfkaProcess) -> None:
    async def scenario(t: Txn) -> None:
        assert await t.add("nobody", 1, 0, [("tp", 0)]) == {("tp", 0): ErrorCode.invalid_producer_id_mapping}
        r = await t.init("adds")
        pid, epoch = r.producer_id, r.producer_epoch
        assert await t.add("adds", pid + 1, epoch, [("tp", 0)]) == {("tp", 0): ErrorCode.invalid_producer_id_mapping}
        assert await t.add("adds", pid, epoch + 1, [("tp", 0)]) == {("tp", 0): ErrorCode.producer_fenced}
        assert await t.add("adds", pid, epoch + 1, [("tp", 0)], version=1) == {
            ("tp", 0): ErrorCode.invalid_producer_epoch
        }
        assert await t.add("adds", pid, epoch, [("tp", 0), ("nope", 0)]) == {
            ("tp", 0): ErrorCode.operation_not_attempted,
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
        }
        assert (await t.end("adds", pid, epoch, True)).error_code == ErrorCode.invalid_txn_state  # nothing open
        assert await t.add("adds", pid, epoch, [("tp", 0)]) == {("tp", 0): ErrorCode.none}
        assert (await t.end("adds", pid + 1, epoch, True)).error_code == ErrorCode.invalid_producer_id_mapping
        assert (await t.end("adds", pid, epoch + 1, True)).error_code == ErrorCode.producer_fenced
        assert (await t.end("adds", pid, epoch, True)).error_code == ErrorCode.none
        await t.wait_state("adds", "CompleteCommit")
        assert (await t.end("adds", pid, epoch, True)).error_code == ErrorCode.none  # a retried commit
        assert (await t.end("adds", pid, epoch, False)).error_code == ErrorCode.invalid_txn_state

    run(broker.bootstrap, scenario)


def test_init_over_an_open_transaction_answers_concurrent_transactions_until_fenced(broker: KopfkaProcess) -> None:
    """Kafka's InitProducerId over an Ongoing transaction: the coordinator bumps the epoch (fencing
    the open producer), starts aborting its transaction, and answers CONCURRENT_TRANSACTIONS; the
    caller retries (still CONCURRENT_TRANSACTIONS while the abort's markers are pending) until the
    abort is complete and it gets the next epoch. The first answer is always the retriable error:
    it is sent once the abort has been prepared, never after a completed init."""

    async def scenario(t: Txn) -> None:
        r = await t.init("fence-init")
        pid, e0 = r.producer_id, r.producer_epoch
        assert await t.add("fence-init", pid, e0, [("tp", 1)]) == {("tp", 1): ErrorCode.none}
        assert (await t.produce("fence-init", pid, e0, 0, ("tp", 1), b"fenced"))[0] == ErrorCode.none
        again = await t.init("fence-init")
        assert again.error_code == ErrorCode.concurrent_transactions
        (d,) = await t.describe("fence-init")
        assert d.state in ("PrepareAbort", "CompleteAbort") and d.producer_epoch > e0
        answers = [int(again.error_code)]
        deadline = time.monotonic() + 15
        while again.error_code == ErrorCode.concurrent_transactions:
            assert time.monotonic() < deadline, "the fencing abort never completed"
            time.sleep(0.02)
            again = await t.init("fence-init")
            answers.append(int(again.error_code))
        assert answers[-1] == ErrorCode.none and set(answers[:-1]) == {ErrorCode.concurrent_transactions}, answers
        # +1 fencing the open producer, +1 by the abort (transaction.version 2, as in the zombie
        # test of test_txn_clients.py), +1 for the new init
        assert (again.producer_id, again.producer_epoch) == (pid, e0 + 3)
        # the fenced producer's commit is refused; the new producer starts with no transaction open
        assert (await t.end("fence-init", pid, e0, True)).error_code == ErrorCode.producer_fenced
        assert (await t.describe("fence-init"))[0].state == "Empty"
        lso, hw = await t.offsets(("tp", 1))
        assert lso == hw, "the fenced transaction was aborted (its marker written)"

    run(broker.bootstrap, scenario)


def test_kip890_verification_and_the_last_stable_offset(broker: KopfkaProcess) -> None:
    async def scenario(t: Txn) -> None:
        r = await t.init("verify")
        pid, epoch = r.producer_id, r.producer_epoch
        tp = ("tp", 1)
        # not added to the transaction: refused, so no transaction the coordinator ignores can open
        assert (await t.produce("verify", pid, epoch, 0, tp, b"x"))[0] == ErrorCode.invalid_txn_state
        assert (await t.produce("verify", pid, epoch, 0, tp, b"x", version=11))[0] == ErrorCode.transaction_abortable
        assert await t.add("verify", pid, epoch, [tp]) == {tp: ErrorCode.none}
        code, first = await t.produce("verify", pid, epoch, 0, tp, b"open")
        assert code == ErrorCode.none
        assert (await t.produce("verify", pid, epoch, 1, tp, b"more"))[0] == ErrorCode.none  # no re-verification
        lso, hw = await t.offsets(tp)
        assert (lso, hw) == (first, first + 2), "read_committed ends where the open transaction starts"
        assert (await t.end("verify", pid, epoch, False)).error_code == ErrorCode.none
        await t.wait_state("verify", "CompleteAbort")
        lso, hw = await t.offsets(tp)
        assert lso == hw == first + 3, "the abort marker closed it"

    run(broker.bootstrap, scenario)


def test_transaction_version_2_adds_implicitly_and_bumps_the_epoch(broker: KopfkaProcess) -> None:
    async def scenario(t: Txn) -> None:
        r = await t.init("tv2", version=5)
        pid, e0 = r.producer_id, r.producer_epoch
        tp = ("tp", 0)
        code, _ = await t.produce("tv2", pid, e0, 0, tp, b"tv2-a", version=12)
        assert code == ErrorCode.none, "Produce v12 adds the partition itself"
        (d,) = await t.describe("tv2")
        assert (d.state, d.partitions) == ("Ongoing", [("tp", 0)])
        end = await t.end("tv2", pid, e0, True, version=5)
        assert (end.error_code, end.producer_id, end.producer_epoch) == (0, pid, e0 + 1)
        await t.wait_state("tv2", "CompleteCommit")
        # the old epoch is fenced; the next transaction uses the bumped one
        assert (await t.produce("tv2", pid, e0, 1, tp, b"zombie", version=12))[0] == ErrorCode.invalid_producer_epoch
        assert (await t.produce("tv2", pid, e0 + 1, 0, tp, b"tv2-b", version=12))[0] == ErrorCode.none
        # an EndTxn with the pre-commit epoch while the next transaction is open is fenced
        assert (await t.end("tv2", pid, e0, True, version=5)).error_code == ErrorCode.producer_fenced
        end2 = await t.end("tv2", pid, e0 + 1, False, version=5)
        assert (end2.error_code, end2.producer_epoch) == (0, e0 + 2)
        await t.wait_state("tv2", "CompleteAbort")
        # a retried EndTxn (the epoch before the bump) of a completed abort is answered as done
        retry = await t.end("tv2", pid, e0 + 1, False, version=5)
        assert (retry.error_code, retry.producer_epoch) == (0, e0 + 2)
        # version 2 also aborts a transaction that added nothing (an epoch bump), but never commits one
        assert (await t.end("tv2", pid, e0 + 2, True, version=5)).error_code == ErrorCode.invalid_txn_state
        empty = await t.end("tv2", pid, e0 + 2, False, version=5)
        assert (empty.error_code, empty.producer_epoch) == (0, e0 + 3)
        await t.wait_state("tv2", "CompleteAbort")
        # version 1 (EndTxn v3) does not commit in CompleteAbort either
        assert (await t.end("tv2", pid, e0 + 3, True)).error_code == ErrorCode.invalid_txn_state

    run(broker.bootstrap, scenario)


def test_stale_coordinator_and_producer_markers_are_refused(broker: KopfkaProcess) -> None:
    async def scenario(t: Txn) -> None:
        r = await t.init("markers")
        pid, epoch = r.producer_id, r.producer_epoch
        await t.add("markers", pid, epoch, [("tp", 0)])
        await t.produce("markers", pid, epoch, 0, ("tp", 0), b"m")
        assert (await t.end("markers", pid, epoch, True)).error_code == ErrorCode.none
        await t.wait_state("markers", "CompleteCommit")

        async def marker(coordinator_epoch: int, producer_epoch: int, topic: str = "tp") -> int:
            resp = await t.conn.request(
                27,
                1,
                {
                    "markers": [
                        {
                            "producer_id": pid,
                            "producer_epoch": producer_epoch,
                            "transaction_result": False,
                            "coordinator_epoch": coordinator_epoch,
                            "topics": [{"name": topic, "partition_indexes": [0]}],
                        }
                    ]
                },
            )
            return int(resp.markers[0].topics[0].partitions[0].error_code)

        assert await marker(-1, epoch) == ErrorCode.transaction_coordinator_fenced
        assert await marker(0, epoch - 1) == ErrorCode.invalid_producer_epoch
        assert await marker(0, epoch, topic="nope") == ErrorCode.unknown_topic_or_partition

    run(broker.bootstrap, scenario)


def test_describe_list_transactions_and_producers(broker: KopfkaProcess) -> None:
    async def scenario(t: Txn) -> None:
        a = await t.init("desc-a")
        await t.add("desc-a", a.producer_id, a.producer_epoch, [("tp", 1)])
        _, first = await t.produce("desc-a", a.producer_id, a.producer_epoch, 0, ("tp", 1), b"d")
        b = await t.init("desc-b")
        await t.add("desc-b", b.producer_id, b.producer_epoch, [("tp", 0)])
        await t.end("desc-b", b.producer_id, b.producer_epoch, True)
        await t.wait_state("desc-b", "CompleteCommit")
        da, db, dx = await t.describe("desc-a", "desc-b", "desc-nope")
        assert (da.error, da.state, da.producer_id, da.partitions) == (0, "Ongoing", a.producer_id, [("tp", 1)])
        assert da.timeout_ms == 60000 and 0 <= time.time() * 1000 - da.start_ms < 60_000
        assert (db.state, db.partitions) == ("CompleteCommit", [])
        assert (dx.error, dx.start_ms, dx.producer_id) == (ErrorCode.transactional_id_not_found, -1, -1)

        async def listed(version: int = 0, **filters: Any) -> tuple[int, list[str], list[str]]:
            body = {"state_filters": [], "producer_id_filters": [], **filters}
            r = await t.conn.request(66, version, body)
            ids = sorted(s.transactional_id for s in r.transaction_states if s.transactional_id.startswith("desc-"))
            return int(r.error_code), ids, list(r.unknown_state_filters)

        assert await listed() == (0, ["desc-a", "desc-b"], [])
        assert await listed(state_filters=["Ongoing", "Bogus"]) == (0, ["desc-a"], ["Bogus"])
        assert await listed(producer_id_filters=[b.producer_id]) == (0, ["desc-b"], [])
        assert (await listed(1, duration_filter=3_600_000))[1] == []  # none has been open an hour
        assert await listed(2, transactional_id_pattern="desc-[b]") == (0, ["desc-b"], [])
        assert (await listed(2, transactional_id_pattern="("))[0] == ErrorCode.invalid_regular_expression
        r = await t.conn.request(61, 0, {"topics": [{"name": "tp", "partition_indexes": [1]}]})
        producers = {p.producer_id: p for p in r.topics[0].partitions[0].active_producers}
        assert producers[a.producer_id].current_txn_start_offset == first
        await t.end("desc-a", a.producer_id, a.producer_epoch, False)

    run(broker.bootstrap, scenario)
