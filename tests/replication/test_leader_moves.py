"""Leadership moves on a real 3-broker cluster: KIP-951 leader discovery and what a move costs.

A broker that answers NOT_LEADER_OR_FOLLOWER (Produce v10+, Fetch v16+; Fetch also on
FENCED_LEADER_EPOCH) names the partition's current leader and that leader's endpoint on the
listener the request came in on, as Kafka does. librdkafka (2.5+) applies the hint at once: a
producer whose leader moved sends its retry to the new leader without a Metadata request first.

The cluster: brokers 0 and 1 have a second listener, EXTERNAL, besides PLAINTEXT; broker 2 has
PLAINTEXT only and runs with the benchmark-only internal.leader.discovery.enable=false (it answers
as a broker without KIP-951). Replication backs off for 5 s after a fetch error
(replica.fetch.backoff.ms), so a follower that waits it out shows in produce latencies.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster import free_port
from confluent_kafka import Producer
from harness import broker, create_topic, describe, new_cluster, request, run, wait_full_isr, wait_until
from kopfka import uuids
from kopfka.client.admin import Admin
from kopfka.protocol.errors import ErrorCode
from kopfka.protocol.record_codec import Record, encode_batch
from request_bodies import consumer_fetch_body

pytestmark = pytest.mark.timeout(300)

PROPS = {"replica.fetch.backoff.ms": "5000", "replica.lag.time.max.ms": "10000"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    c = new_cluster(tmp_path, 3, PROPS)
    for b in c.brokers[:2]:
        b.external_port = free_port(b.host)
        b.write_config(
            {
                **c.quorum_props(),
                "listeners": f"PLAINTEXT://{b.host}:{b.port},EXTERNAL://{b.host}:{b.external_port}",
                "advertised.listeners": f"PLAINTEXT://{b.host}:{b.port},EXTERNAL://{b.host}:{b.external_port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
            }
        )
    b2 = c.brokers[2]
    b2.isolation_file = tmp_path / "broker-2-isolated"
    b2.write_config(
        {
            **c.quorum_props(),
            "internal.leader.discovery.enable": "false",
            "internal.raft.isolation.file": str(b2.isolation_file),
        }
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


def produce(addr: str, version: int, topic: str, partitions: list[int], topic_id: Any = None, **kw: Any) -> Any:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 10000,
        "topic_data": [
            {
                "name": topic,
                "topic_id": topic_id,
                "partition_data": [
                    {"index": p, "records": encode_batch([Record(0, 0, None, b"v")])} for p in partitions
                ],
            }
        ],
    }
    return run(request(addr, 0, version, body, **kw))


def fetch(addr: str, version: int, topic_id: Any, partition: int, leader_epoch: int = -1) -> Any:
    body = consumer_fetch_body(topic_id=topic_id, partition=partition, leader_epoch=leader_epoch)
    return run(request(addr, 1, version, body)).responses[0].partitions[0]


def endpoints(resp: Any) -> list[tuple[int, str, int, str | None]]:
    return [(int(n.node_id), n.host, int(n.port), n.rack) for n in resp.node_endpoints]


def leader_of(p: Any) -> tuple[int, int]:
    return int(p.current_leader.leader_id), int(p.current_leader.leader_epoch)


def topic_id_of(c: Any, topic: str) -> Any:
    body = {
        "topics": [{"name": topic, "topic_id": uuids.ZERO_UUID}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    return run(request(broker(c, 0).address, 3, 12, body)).topics[0].topic_id


async def _admin(c: Any, reassign: dict[tuple[str, int], list[int]], elect: dict[str, list[int]]) -> None:
    admin = await Admin.connect(broker(c, 0).address)
    try:
        if reassign:
            assert all(e is None for e in (await admin.alter_partition_reassignments(reassign)).values())
        if elect:  # the harness's auto rebalance may have elected the preferred leader already
            done = (ErrorCode.none, ErrorCode.election_not_needed)
            result = await admin.elect_leaders(elect)
            assert all(e in done for e in result.values()), result
    finally:
        await admin.close()


def move_leader(c: Any, topic: str, partition: int, to: int) -> int:
    """A preferred-leader move: `to` first in the replica list (same replicas), then ElectLeaders
    PREFERRED. Returns the new leader epoch, once the cluster's metadata shows it."""
    replicas = describe(c, topic)[partition].replicas
    target = [to, *(r for r in replicas if r != to)]
    run(_admin(c, {(topic, partition): target}, {}))
    wait_until(lambda: describe(c, topic)[partition].replicas == target, 30, "the reordered replicas")
    run(_admin(c, {}, {topic: [partition]}))
    info = wait_until(
        lambda: (lambda p: p if p.leader == to else None)(describe(c, topic)[partition]), 30, "the new leader"
    )
    return int(info.leader_epoch)


def test_misdirected_requests_name_the_new_leader_on_their_listener(cluster: Any) -> None:
    """After a preferred-leader move, the old leader's answers (kio-decoded from the wire) name the
    new leader and its endpoint on the request's listener; a broker that is no replica answers
    from its metadata; a leader without the listener is named without an endpoint."""
    c = cluster
    create_topic(c, "hint", assignments={0: [0, 1, 2], 1: [2, 0, 1], 2: [1, 2, 0]})
    create_topic(c, "far", assignments={0: [1, 2]})  # no replica on broker 0
    wait_full_isr(c, "hint")
    wait_full_isr(c, "far")
    tid, far_tid = topic_id_of(c, "hint"), topic_id_of(c, "far")
    before = describe(c, "hint")[0].leader_epoch
    epoch = move_leader(c, "hint", 0, to=1)
    assert epoch > before
    b0, b1 = broker(c, 0), broker(c, 1)
    ext0 = f"{b0.host}:{b0.external_port}"
    plain1, ext1 = (1, b1.host, b1.port, None), (1, b1.host, b1.external_port, None)
    epoch2 = describe(c, "hint")[2].leader_epoch
    far_epoch = describe(c, "far")[0].leader_epoch

    for version in (10, 12, 13):  # librdkafka 2.16 sends v10; by name up to v12, by topic id from v13
        resp = produce(b0.address, version, "hint", [0, 2], topic_id=tid)
        parts = {int(p.index): p for p in resp.responses[0].partition_responses}
        assert {i: p.error_code for i, p in parts.items()} == {
            0: ErrorCode.not_leader_or_follower,
            2: ErrorCode.not_leader_or_follower,
        }
        assert leader_of(parts[0]) == (1, epoch) and leader_of(parts[2]) == (1, epoch2)
        assert endpoints(resp) == [plain1]  # one entry per leader

        resp = produce(b0.address, version, "far", [0], topic_id=far_tid)
        p = resp.responses[0].partition_responses[0]
        assert p.error_code == ErrorCode.not_leader_or_follower
        assert leader_of(p) == (1, far_epoch)  # broker 0 hosts no replica: from its metadata
        assert endpoints(resp) == [plain1]

        resp = produce(ext0, version, "hint", [0, 1], topic_id=tid)
        parts = {int(p.index): p for p in resp.responses[0].partition_responses}
        assert leader_of(parts[0]) == (1, epoch) and leader_of(parts[1])[0] == 2
        assert endpoints(resp) == [ext1]  # broker 2 has no EXTERNAL listener: named, no endpoint

    # Produce v9 has neither field
    p9 = produce(b0.address, 9, "hint", [0]).responses[0].partition_responses[0]
    assert p9.error_code == ErrorCode.not_leader_or_follower and not hasattr(p9, "current_leader")

    for version in (16, 17, 18):
        p = fetch(b0.address, version, tid, 0)
        assert p.error_code == ErrorCode.not_leader_or_follower and leader_of(p) == (1, epoch)
        resp = run(request(ext0, 1, version, consumer_fetch_body(topic_id=tid, partition=0)))
        assert endpoints(resp) == [ext1]
        # a consumer still on the old epoch, at the new leader: FENCED_LEADER_EPOCH, with the leader
        p = fetch(b1.address, version, tid, 0, leader_epoch=before)
        assert p.error_code == ErrorCode.fenced_leader_epoch and leader_of(p) == (1, epoch)
    # as Kafka, only from Fetch v16: an older answer carries no hint
    p = fetch(b0.address, 15, tid, 0)
    assert p.error_code == ErrorCode.not_leader_or_follower and leader_of(p) == (-1, -1)

    # the new leader answers without either field
    resp = produce(b1.address, 12, "hint", [0])
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert resp.node_endpoints == ()
    # broker 2 runs with internal.leader.discovery.enable=false: the answer of a broker without KIP-951
    resp = produce(broker(c, 2).address, 12, "hint", [0])
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.not_leader_or_follower and leader_of(p) == (-1, -1)
    assert resp.node_endpoints == ()


class LogLines(logging.Handler):
    """librdkafka's debug log, in the order it was written (handle() holds the handler's lock)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.parametrize("move", ["preferred-election", "controlled-shutdown"])
def test_producer_retries_at_the_new_leader_without_a_metadata_request(cluster: Any, tmp_path: Path, move: str) -> None:
    """An idempotent acks=all librdkafka producer writes to partition 0 while its leader, broker
    0, hands leadership to broker 1: by a preferred-leader election, or in its controlled
    shutdown (SIGTERM). Broker 0's last answers are NOT_LEADER_OR_FOLLOWER, and the producer moves
    the partition to broker 1 from that answer alone; without KIP-951 it looks the leader up with
    a Metadata request first. Nothing is lost or fails."""
    c = cluster
    create_topic(c, "moves", assignments={0: [0, 1, 2]})
    assert wait_full_isr(c, "moves")[0].leader == 0
    lines = LogLines()
    logger = logging.getLogger(f"kip951-producer-{move}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(lines)
    logger.propagate = False
    errors: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": c.bootstrap(),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            "debug": "broker,topic,metadata,msg,protocol",
            "error_cb": errors.append,
        },
        logger=logger,
    )
    failed: list[Any] = []
    acked = [0]

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)
        else:
            acked[0] += 1

    sent = [0]

    def produce_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            producer.produce("moves", b"%d" % sent[0], partition=0, on_delivery=report)
            sent[0] += 1
            producer.poll(0.01)

    produce_for(2)
    moved_at = len(lines.lines)  # log lines before this one were written before the move began
    if move == "preferred-election":
        mover = threading.Thread(target=move_leader, args=(c, "moves", 0, 1))
    else:
        mover = threading.Thread(target=broker(c, 0).terminate)
    mover.start()
    while mover.is_alive():
        produce_for(0.1)
    produce_for(1)
    assert producer.flush(60) == 0
    producer.poll(0.5)
    assert not failed, failed
    assert acked[0] == sent[0]
    assert not [e for e in errors if e.fatal()], errors  # "connection refused" from the stopped broker is not
    assert describe(c, "moves")[0].leader == 1

    log = list(lines.lines)
    (tmp_path / "producer.log").write_text("\n".join(log))
    refused = [
        line for line in log[moved_at:] if re.search(r"moves \[0\]: MessageSet .* Not leader for partition", line)
    ]
    assert refused, "the old leader never answered NOT_LEADER_OR_FOLLOWER"
    delegated = next(
        (i for i in range(moved_at, len(log)) if re.search(r"moves \[0\]: delegate to broker [^ ]+/1 ", log[i])),
        None,
    )
    assert delegated is not None, "the partition never moved to the new leader"
    # librdkafka logs the hint it applies (from the Produce response) before it moves the partition
    hinted = [line for line in log[moved_at:delegated] if re.search(r"moves\(.*\)\[0\]: updated with leader 1", line)]
    assert hinted, "the partition moved without a leader hint"
    lookups = [line for line in log[moved_at:delegated] if "Sent MetadataRequest" in line]
    assert not lookups, f"the producer looked the leader up: {lookups}"


def test_followers_fetch_from_a_restarted_leader_on_fresh_connections(cluster: Any) -> None:
    """Leadership leaves broker 0 in its controlled shutdown and comes back (preferred leader) once
    it has restarted. The followers' fetchers for broker 0 stopped with their last partition, so
    they fetch from the new incarnation on new connections: no fetch fails on a connection to the
    old one (which would hold acks=all produces for replica.fetch.backoff.ms)."""
    c = cluster
    create_topic(c, "back", assignments={0: [0, 1, 2]})
    assert wait_full_isr(c, "back")[0].leader == 0
    b0 = broker(c, 0)
    assert b0.terminate() == 0
    b0.start()
    b0.wait_ready(60)
    wait_full_isr(c, "back")
    run(_admin(c, {}, {"back": [0]}))
    wait_until(lambda: describe(c, "back")[0].leader == 0, 60, "the preferred leader to lead again")
    t0 = time.monotonic()
    resp = produce(b0.address, 12, "back", [0])
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert time.monotonic() - t0 < 2.5, "an acks=all produce waited for a follower's fetch backoff"
    for follower in (1, 2):
        lines = broker(c, follower).log_text().splitlines()
        failed = [line for line in lines if f"{follower}->0] fetch failed" in line]
        assert not failed, failed


def test_followers_ask_again_soon_when_the_new_leader_has_not_caught_up(cluster: Any) -> None:
    """Brokers apply a leadership change at slightly different times. Here broker 2 is cut off
    from the metadata quorum (internal.raft.isolation.file; its heartbeats still go through) while
    leadership moves to it, so the followers fetch from it under the new epoch before it knows it
    leads. It answers UNKNOWN_LEADER_EPOCH (Kafka checks the epoch before the leadership), and the
    followers ask again after a short pause instead of replica.fetch.backoff.ms (5 s here): once
    broker 2 catches up, an acks=all produce to it is answered at once."""
    c = cluster
    create_topic(c, "race", assignments={0: [1, 2, 0]})
    wait_full_isr(c, "race")
    tid = topic_id_of(c, "race")
    b2 = broker(c, 2)
    b2.isolation_file.touch()
    time.sleep(1.5)  # a metadata fetch already in flight ends (its long poll is 500 ms at most)
    epoch = move_leader(c, "race", 0, to=2)
    time.sleep(1)  # the followers fetch from broker 2 meanwhile
    p = fetch(b2.address, 17, tid, 0, leader_epoch=epoch)
    assert p.error_code == ErrorCode.unknown_leader_epoch  # not NOT_LEADER_OR_FOLLOWER
    b2.isolation_file.unlink()

    def leads() -> bool:
        body = {
            "topics": [{"name": "race", "topic_id": uuids.ZERO_UUID}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        part = run(request(b2.address, 3, 12, body)).topics[0].partitions[0]
        return int(part.leader_id) == 2 and int(part.leader_epoch) == epoch

    wait_until(leads, 30, "broker 2 to apply its leadership", interval=0.02)
    t0 = time.monotonic()
    resp = produce(b2.address, 12, "race", [0], timeout=15)
    took = time.monotonic() - t0
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert took < 1.5, f"the acks=all produce took {took:.1f} s: a follower waited out its fetch backoff"
