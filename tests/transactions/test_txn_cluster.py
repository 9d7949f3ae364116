"""Exactly-once on a 3-broker cluster (separate controller and broker processes, RF 3,
min.insync.replicas 2, `__transaction_state` RF 3): while a consume-transform-produce worker runs,
the leader of an output partition is SIGKILLed with a transaction half written, later the
transaction coordinator of the worker's transactional id; both come back. Markers are retried
until the new leaders have them, the coordinator's successor resumes from the replicated
`__transaction_state`, and read_committed output holds every input record exactly once — every
fourth transaction is aborted on purpose, so the new leaders must also have the aborted ranges
(replicated markers, rebuilt transaction index) right.

The group coordinator is never the victim: librdkafka 2.16 can wait forever in
send_offsets_to_transaction when the broker it looked up as group coordinator leaves the
metadata (its handle is decommissioned under the pending request) — a client issue that Kafka
brokers trigger the same way.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kopfka.client.connection import KafkaConnection
from kopfka.coordinator.group.coordinator import partition_for
from kopfka.protocol.errors import ErrorCode

sys.path.insert(0, str(Path(__file__).parents[1] / "replication"))

from harness import broker, create_topic, describe, new_cluster, wait_full_isr

from transactions.eos import DEBUG, GROUP, IN, OUT, Worker, audit, feed
from transactions.helpers import wait_for_coordinator
from transactions.raw import Txn

pytestmark = pytest.mark.timeout(600)

N = 450
PROPS = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
ROTATED = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}  # each broker leads one partition


async def _create_internal_topics(bootstrap: str) -> None:
    conn = await KafkaConnection.open(bootstrap)
    try:
        await wait_for_coordinator(conn, GROUP, key_type=0)
        await wait_for_coordinator(conn, "probe", key_type=1)
    finally:
        await conn.close()


def _kill_and_restart(c: Any, node_id: int, worker: Worker, killed_at: str, back_at: str) -> None:
    victim = broker(c, node_id)
    worker.wait_for(killed_at, timeout=120)
    victim.kill()
    worker.wait_for(back_at, timeout=180)  # the worker carries on with the other two
    victim.start()
    victim.wait_ready(60)


def test_leader_and_coordinator_killed_in_a_3_broker_cluster(tmp_path: Path, workers: Callable[..., Worker]) -> None:
    c = new_cluster(tmp_path / "cluster", 3, PROPS)
    c.start()
    try:
        for t in (IN, OUT):
            create_topic(c, t, configs={"min.insync.replicas": "2"}, assignments=ROTATED)
            wait_full_isr(c, t)
        feed(c.bootstrap(), N, 3)
        asyncio.run(_create_internal_topics(c.bootstrap().split(",")[0]))
        group_coordinator = describe(c, "__consumer_offsets")[partition_for(GROUP, 3)].leader
        txn_states = describe(c, "__transaction_state")
        txn_id = next(
            t
            for t in (f"eos-tx-{i}" for i in range(100))
            if txn_states[partition_for(t, 3)].leader != group_coordinator
        )
        txn_coordinator = txn_states[partition_for(txn_id, 3)].leader
        (other,) = {0, 1, 2} - {group_coordinator, txn_coordinator}
        worker = workers(c.bootstrap(), tmp_path, "worker", txn_id, "--abort-every", "4", *DEBUG)
        _kill_and_restart(c, other, worker, "mid 3", "mid 7")  # the leader of one output partition
        wait_full_isr(c, OUT, timeout=90)
        _kill_and_restart(c, txn_coordinator, worker, "mid 10", "mid 13")  # and of another
        # librdkafka can keep a partition on its old leader until its messages time out (seen in
        # CI: eos-out [2] stayed with broker 0 after the hint that broker 2 leads) and then fence
        # itself; the worker is replaced once, as an application would, and exactly-once is audited
        worker.wait_done(420, restarts=1)
        # read_committed filters them on the new leaders
        audit(c.bootstrap(), N, 3, aborted_in_log=True, node_dirs=[b.dir for b in c.brokers], worker=worker)
    finally:
        c.stop()


VERIFYING = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
}


async def _txn_offset_commit(conn: KafkaConnection, tid: str, pid: int, epoch: int, offset: int) -> int:
    body = {
        "transactional_id": tid,
        "group_id": GROUP,
        "producer_id": pid,
        "producer_epoch": epoch,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": IN,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    return int((await conn.request(28, 3, body)).topics[0].partitions[0].error_code)


def test_txn_offset_commit_across_a_transaction_coordinator_restart(tmp_path: Path) -> None:
    """The group coordinator verifies each TxnOffsetCommit with the transaction coordinator
    (KIP-890) over a pooled inter-broker connection. After the transaction coordinator restarted,
    that connection is dead: the next commit reconnects and succeeds. While the transaction
    coordinator cannot be reached, the answer is COORDINATOR_LOAD_IN_PROGRESS (Kafka's, which
    every client retries in place), never NETWORK_EXCEPTION, on which librdkafka aborts the
    transaction."""
    c = new_cluster(tmp_path / "cluster", 2, VERIFYING)
    c.start()
    try:
        create_topic(c, IN, partitions=1, rf=1, configs={"min.insync.replicas": "1"})

        async def connect(node_id: int) -> KafkaConnection:
            return await KafkaConnection.open(broker(c, node_id).address)

        async def begin() -> tuple[int, str, int, int]:
            conn = await KafkaConnection.open(c.bootstrap().split(",")[0])
            try:
                g = await wait_for_coordinator(conn, GROUP, key_type=0)
                for tid in (f"tx-{i}" for i in range(100)):
                    t = await wait_for_coordinator(conn, tid)
                    if t != g:
                        break
            finally:
                await conn.close()
            to_t = await connect(t)
            try:
                init = await Txn(to_t).init(tid)
                assert init.error_code == 0, init
                pid, epoch = int(init.producer_id), int(init.producer_epoch)
                body = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "group_id": GROUP}
                assert (await to_t.request(25, 3, body)).error_code == 0
            finally:
                await to_t.close()
            to_g = await connect(g)
            try:
                assert await _txn_offset_commit(to_g, tid, pid, epoch, 1) == 0  # opens the pooled connection
            finally:
                await to_g.close()
            return g, tid, pid, epoch

        g, tid, pid, epoch = asyncio.run(begin())
        (t,) = {0, 1} - {g}
        victim = broker(c, t)
        victim.kill()
        victim.start()
        victim.wait_ready(60)

        async def after_restart() -> int:
            conn = await connect(g)
            try:
                assert await wait_for_coordinator(conn, tid) == t
                to_t = await connect(t)
                try:
                    await Txn(to_t).wait_state(tid, "Ongoing")  # loaded again
                finally:
                    await to_t.close()
                return await _txn_offset_commit(conn, tid, pid, epoch, 2)
            finally:
                await conn.close()

        assert asyncio.run(after_restart()) == 0, "the group coordinator reconnected to the restarted broker"

        async def coordinator_gone() -> int:
            conn = await connect(g)
            try:
                victim.kill()  # its leadership outlives it until its session expires
                return await _txn_offset_commit(conn, tid, pid, epoch, 3)
            finally:
                await conn.close()

        assert asyncio.run(coordinator_gone()) == ErrorCode.coordinator_load_in_progress
    finally:
        c.stop()
