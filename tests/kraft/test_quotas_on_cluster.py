"""Client quotas on a KRaft cluster: AlterClientQuotas sent to a broker is forwarded to the
active controller, every broker learns the limit from the metadata log, and a broker other
than the one that took the request throttles the client."""

from __future__ import annotations

import time
from typing import Any

from cluster import Cluster, create_topic, metadata, request, run, wait_until


def alter(addr: str, client_id: str, rate: float | None) -> Any:
    op = {"key": "producer_byte_rate", "value": rate or 0.0, "remove": rate is None}
    body = {"validate_only": False,
            "entries": [{"entity": [{"entity_type": "client-id", "entity_name": client_id}], "ops": [op]}]}
    return run(request(addr, 49, 1, body))


def describe(addr: str, client_id: str) -> dict[str, float]:
    body = {"components": [{"entity_type": "client-id", "match_type": 0, "match": client_id}], "strict": False}
    resp = run(request(addr, 48, 1, body))
    assert resp.error_code == 0
    return {v.key: v.value for e in resp.entries for v in e.values}


def test_quota_set_through_one_broker_throttles_on_another(make_cluster: Any) -> None:
    from confluent_kafka import Producer

    # two 1 s windows: the throttle reacts within a couple of seconds (default 11 allow a long burst)
    c: Cluster = make_cluster(1, 2, props={"quota.window.num": "2"}).start()
    entry, other = c.brokers[0], c.brokers[1]
    resp = alter(entry.address, "slow-app", 200_000.0)
    assert [int(e.error_code) for e in resp.entries] == [0]
    wait_until(lambda: describe(other.address, "slow-app").get("producer_byte_rate") == 200_000.0, 10,
               "the quota to reach the other broker through the metadata log")

    # quotas are per broker: produce only to a partition the *other* broker leads
    assert run(create_topic(entry.address, "q", partitions=4, rf=1)).error_code == 0
    md = run(metadata(other.address, ["q"]))
    target = next(p.partition_index for p in md.topics[0].partitions if p.leader_id == other.node_id)
    p = Producer({"bootstrap.servers": other.address, "client.id": "slow-app", "linger.ms": 5,
                  "batch.size": 65536, "acks": 1, "queue.buffering.max.kbytes": 2048})
    payload = b"x" * 10_000
    delivered = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            delivered[0] += len(msg.value())

    t0 = time.monotonic()
    while time.monotonic() - t0 < 6:
        try:
            p.produce("q", payload, partition=target, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    rate = delivered[0] / (time.monotonic() - t0)
    p.purge()
    p.flush(5)
    # about the quota (the first window allows one window's burst); unthrottled is tens of MB/s
    assert rate < 400_000, f"{rate:.0f} B/s delivered: the 200 kB/s producer quota was not enforced"
    assert delivered[0] > 0

    resp = alter(entry.address, "slow-app", None)
    assert [int(e.error_code) for e in resp.entries] == [0]
    wait_until(lambda: "producer_byte_rate" not in describe(other.address, "slow-app"), 10, "the quota removal")
