"""Replication on a real cluster over the wire: min.insync.replicas errors, unclean leader
election off/on, preferred leader election and HW-bounded consumer reads."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from harness import broker, create_topic, describe, request, run, wait_full_isr, wait_until
from kopfka.protocol.record_codec import Record, encode_batch

pytestmark = pytest.mark.timeout(240)


async def _produce(addr: str, topic: str, partition: int, acks: int, timeout_ms: int = 5000) -> int:
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout": timeout_ms,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [
                    {"index": partition, "records": encode_batch([Record(0, int(time.time() * 1000), None, b"v")])}
                ],
            }
        ],
    }
    resp = await request(addr, 0, 9, body, timeout=timeout_ms / 1000 + 10)
    return int(resp.responses[0].partition_responses[0].error_code)


def _addr(c: Any, node_id: int) -> str:
    return str(broker(c, node_id).address)


def test_not_enough_replicas_and_no_commit_below_min_isr(make_cluster: Any) -> None:
    c = make_cluster(3, {"broker.session.timeout.ms": "15000"})
    create_topic(c, "mis", 1, 3, configs={"min.insync.replicas": "3"})
    info = wait_full_isr(c, "mis")[0]
    leader = info.leader
    assert run(_produce(_addr(c, leader), "mis", 0, -1)) == 0
    victim = broker(c, next(r for r in info.replicas if r != leader))
    assert victim.proc is not None
    os.kill(victim.proc.pid, signal.SIGSTOP)  # frozen follower: the write cannot commit
    try:
        # appended, then the ISR shrinks (replica.lag.time.max.ms) below min.insync.replicas: the
        # high watermark holds there (KIP-966's strict min ISR, Kafka 3.7+), so the write never
        # commits and the produce times out (before, it was answered NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        assert run(_produce(_addr(c, leader), "mis", 0, -1, timeout_ms=6000)) == 7  # REQUEST_TIMED_OUT
        wait_until(lambda: victim.node_id not in describe(c, "mis")[0].isr, 10, "the ISR shrink")
        assert run(_produce(_addr(c, leader), "mis", 0, -1)) == 19  # NOT_ENOUGH_REPLICAS, not appended
        assert run(_produce(_addr(c, leader), "mis", 0, 1)) == 0  # acks=1 does not care
    finally:
        os.kill(victim.proc.pid, signal.SIGCONT)
    wait_full_isr(c, "mis")
    # the leader may learn the grown ISR a moment after another broker's metadata shows it
    wait_until(lambda: run(_produce(_addr(c, leader), "mis", 0, -1)) == 0, 10, "acks=all accepted again")


async def _elect(addr: str, topic: str, election_type: int) -> int:
    body = {"election_type": election_type, "timeout": 10000, "topic_partitions": [{"topic": topic, "partitions": [0]}]}
    resp = await request(addr, 43, 2, body, timeout=20)
    return int(resp.replica_election_results[0].partition_result[0].error_code)


def test_unclean_leader_election_off_and_on(make_cluster: Any) -> None:
    """Both replicas die, the one that was out of the ISR comes back: with unclean election off the
    partition stays offline (ElectLeaders PREFERRED can't help, UNCLEAN can); with the topic config
    on, the returning replica is elected by itself."""
    c = make_cluster(3)
    create_topic(c, "clean", 1, 2, configs={"min.insync.replicas": "1"}, assignments={0: [0, 1]})
    create_topic(
        c,
        "dirty",
        1,
        2,
        configs={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
        assignments={0: [0, 1]},
    )
    for t in ("clean", "dirty"):
        wait_full_isr(c, t)
    b0, b1 = broker(c, 0), broker(c, 1)
    b1.kill()
    for t in ("clean", "dirty"):
        wait_until(lambda: describe(c, t)[0].isr == [0], 20, f"{t}: broker 1 out of the ISR")  # noqa: B023
        assert run(_produce(b0.address, t, 0, -1)) == 0
    b0.kill()
    for t in ("clean", "dirty"):
        wait_until(lambda: describe(c, t)[0].leader == -1, 20, f"{t} offline")  # noqa: B023
    b1.start()
    b1.wait_ready(60)
    # the elected leader and its one-member ISR come in one record; a Metadata answer from a broker
    # still behind it (the describe helper asks the first live broker that answers) shows neither
    wait_until(
        lambda: (lambda p: (p.leader, p.isr) == (1, [1]))(describe(c, "dirty")[0]),
        20,
        "unclean election of broker 1 (config on), ISR [1]",
    )
    time.sleep(2)
    assert describe(c, "clean")[0].leader == -1, "unclean election must stay off by default"
    assert run(_elect(b1.address, "clean", 0)) == 80  # PREFERRED_LEADER_NOT_AVAILABLE
    assert run(_elect(b1.address, "clean", 1)) == 0  # ElectLeaders UNCLEAN
    wait_until(lambda: describe(c, "clean")[0].leader == 1, 20, "unclean election by ElectLeaders")


def test_preferred_leader_election_and_consumers_read_below_hw(make_cluster: Any, tmp_path: Path) -> None:
    c = make_cluster(3, {"auto.leader.rebalance.enable": "false"})
    create_topic(c, "pref", 1, 3, configs={"min.insync.replicas": "2"}, assignments={0: [0, 1, 2]})
    wait_full_isr(c, "pref")
    for _ in range(20):
        assert run(_produce(broker(c, 0).address, "pref", 0, -1)) == 0
    b0 = broker(c, 0)
    assert b0.terminate() == 0  # controlled shutdown moves the leadership away
    assert describe(c, "pref")[0].leader in (1, 2)
    b0.start()
    b0.wait_ready(60)
    wait_full_isr(c, "pref")
    assert describe(c, "pref")[0].leader != 0  # auto rebalance is off
    assert run(_elect(broker(c, 1).address, "pref", 0)) == 0
    wait_until(lambda: describe(c, "pref")[0].leader == 0, 10, "preferred leader 0")
    assert run(_elect(broker(c, 1).address, "pref", 0)) == 84  # ELECTION_NOT_NEEDED
    cons = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": "hw", "auto.offset.reset": "earliest"})
    cons.subscribe(["pref"])
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and not m.error():
            got += 1
    cons.close()
    assert got == 20
