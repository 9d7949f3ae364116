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

sys.path.insert(0, str(Path(__file__).parents[1] / "replication"))

from harness import broker, create_topic, describe, new_cluster, wait_full_isr

from transactions.eos import GROUP, IN, OUT, Worker, audit, feed
from transactions.helpers import wait_for_coordinator

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
        worker = workers(c.bootstrap(), tmp_path, "worker", txn_id, "--abort-every", "4")
        _kill_and_restart(c, other, worker, "mid 3", "mid 7")  # the leader of one output partition
        wait_full_isr(c, OUT, timeout=90)
        _kill_and_restart(c, txn_coordinator, worker, "mid 10", "mid 13")  # and of another
        worker.wait_done(300)
        audit(c.bootstrap(), N, 3, aborted_in_log=True)  # read_committed filters them on the new leaders
    finally:
        c.stop()
