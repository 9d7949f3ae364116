"""Eligible leader replicas (KIP-966) on a real cluster: 1 controller + 3 brokers (formatted at
4.3, so ELR is on), a topic with RF=3 and min.insync.replicas=2, acks=all writes.

The whole ISR shuts down, one broker at a time (SIGTERM, controlled shutdown). The replica that left
the ISR while it was below min ISR comes back first: it is elected from the ELR (before ELR the
partition stayed offline until the last ISR member returned) and holds every acknowledged record.
Then it crashes (SIGKILL) and restarts: without a clean shutdown it leaves the ELR and must not lead,
while the other ELR member, back after a clean shutdown, does. DescribeTopicPartitions reports the
ELR and LastKnownElr the controller keeps.
"""

from __future__ import annotations

from typing import Any

from cluster import request, run, wait_until
from confluent_kafka import Producer
from harness import broker, create_topic, wait_full_isr

from tests.log.helpers import read_all

TOPIC = "elr"


def _partition(addr: str) -> Any:
    body = {"topics": [{"name": TOPIC}], "response_partition_limit": 10, "cursor": None}
    resp = run(request(addr, 75, 0, body))
    return resp.topics[0].partitions[0]


def _state(addr: str) -> tuple[int, list[int], list[int], list[int]]:
    p = _partition(addr)
    return int(p.leader_id), sorted(p.isr_nodes), sorted(p.eligible_leader_replicas), list(p.last_known_elr)


def _produce(bootstrap: str, values: range) -> list[tuple[int, bytes]]:
    acked: list[tuple[int, bytes]] = []
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append((msg.offset(), msg.value()))

    for i in values:
        producer.produce(TOPIC, str(i).encode(), partition=0, on_delivery=report)
    assert producer.flush(60) == 0 and not errors, errors
    return acked


def test_elr_member_leads_after_the_isr_shut_down_and_an_unclean_one_does_not(make_cluster: Any) -> None:
    c = make_cluster(3)
    create_topic(c, TOPIC, 1, 3, assignments={0: [0, 1, 2]})
    wait_full_isr(c, TOPIC)
    b0, b1, b2 = broker(c, 0), broker(c, 1), broker(c, 2)
    acked = _produce(c.bootstrap(), range(300))

    assert b2.terminate() == 0
    wait_until(lambda: _state(b0.address)[1] == [0, 1], 20, "broker 2 out of the ISR")
    assert _state(b0.address) == (0, [0, 1], [], [])  # at min ISR: no ELR
    acked += _produce(b0.address, range(300, 600))
    assert b1.terminate() == 0
    wait_until(lambda: _state(b0.address)[1] == [0], 20, "broker 1 out of the ISR")
    assert _state(b0.address) == (0, [0], [1], [])  # below min ISR: broker 1 holds every committed record
    assert b0.terminate() == 0  # the last ISR member: the partition goes offline, ISR empty

    b1.start()
    b1.wait_ready(60)
    wait_until(lambda: _state(b1.address)[0] == 1, 30, "broker 1 elected from the ELR")
    assert _state(b1.address) == (1, [1], [0], [])
    # below min ISR the new leader's high watermark stays where it was: what it serves is a prefix
    # of the acknowledged records (the rest is in its log, visible once the ISR is back at min ISR)
    expected = [(o, None, v) for o, v in sorted(acked)]
    served = read_all(b1.address, TOPIC)
    assert served and served == expected[: len(served)]

    # broker 1 crashes: fenced (session timeout), the ISR empties again, both are eligible
    b1.kill()
    b1.start()  # no clean shutdown marker: it may have lost unflushed records
    b1.wait_ready(60)
    wait_until(lambda: _state(b1.address)[2] == [0], 30, "broker 1 out of the ELR after its unclean restart")
    assert _state(b1.address)[0] == -1, "a broker back from an unclean shutdown was elected"
    b0.start()
    b0.wait_ready(60)
    wait_until(lambda: _state(b1.address)[0] == 0, 30, "broker 0 elected from the ELR")
    assert _state(b0.address)[0] == 0
    # broker 1 catches up and rejoins: at min ISR again, the ELR is cleared and every acknowledged
    # record is served
    wait_until(lambda: _state(b0.address) == (0, [0, 1], [], []), 60, "the ISR back at min ISR")
    wait_until(lambda: read_all(b0.address, TOPIC) == expected, 30, "every acknowledged record served")
