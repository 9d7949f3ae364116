"""Three consumers in one group on a 6-partition topic, with real clients in real processes.

Join, leave and crash (SIGKILL, noticed by the session timeout) each rebalance the group; no
partition is ever owned by two consumers at once (so neither within a generation); every
produced record is consumed; and after the consumers and then the broker restart, consumption
resumes exactly at the committed offsets. Run once with one consumer of each Python client on
the classic protocol, and once with three confluent-kafka consumers on KIP-848
(group.protocol=consumer).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kopfka_process import KopfkaProcess

from groups.harness import (
    Producer,
    Worker,
    assert_no_double_ownership,
    balanced,
    committed,
    create_topic,
    describe,
    wait_for,
)

PARTITIONS = 6

MIXES = {
    "classic-three-clients": ["kafka-python", "aiokafka", "confluent"],
    "kip848-confluent": ["confluent-848", "confluent-848", "confluent-848"],
}


@pytest.mark.parametrize("mix", list(MIXES))
def test_join_leave_crash_rebalance_and_resume(broker: KopfkaProcess, tmp_path: Path, mix: str) -> None:
    clients = MIXES[mix]
    topic, group = f"orders-{mix}", f"group-{mix}"
    bs = broker.bootstrap
    create_topic(bs, topic, PARTITIONS)
    producer = Producer(bs)
    producer.send(topic, 300, PARTITIONS)
    workers: list[Worker] = []
    generation = 0

    def new(client: str) -> Worker:
        nonlocal generation
        generation += 1
        w = Worker(client, bs, topic, group, tmp_path / f"w{generation}-{client}.jsonl", f"{generation}-{client}")
        workers.append(w.start())
        return w

    def settle(what: str) -> None:
        wait_for(lambda: balanced(workers, PARTITIONS), 60, what, lambda: describe(workers))

    a = new(clients[0])
    settle("the first consumer owning every partition")
    assert a.owned() == set(range(PARTITIONS))
    b = new(clients[1])
    settle("a rebalance after the second consumer joined")
    producer.send(topic, 300, PARTITIONS)
    c = new(clients[2])
    settle("a rebalance after the third consumer joined")
    assert all(len(w.owned()) == 2 for w in (a, b, c))
    producer.send(topic, 300, PARTITIONS)

    b.stop()  # leave
    settle("a rebalance after a consumer left")
    assert len(a.owned()) == 3 and len(c.owned()) == 3
    producer.send(topic, 300, PARTITIONS)

    c.kill()  # crash: only the session timeout tells the coordinator
    settle("a rebalance after a consumer crashed")
    assert a.owned() == set(range(PARTITIONS))
    producer.send(topic, 300, PARTITIONS)

    new(clients[1])
    new(clients[2])
    settle("a rebalance after two consumers (re)joined")
    producer.send(topic, 300, PARTITIONS)

    def all_consumed() -> bool:
        seen = {r for w in workers for r in w.records()}
        return producer.acked <= seen

    wait_for(all_consumed, 60, "every record consumed", lambda: describe(workers))
    ends = {p: 1 + max(o for q, o in producer.acked if q == p) for p in range(PARTITIONS)}
    wait_for(lambda: committed(bs, group, topic, PARTITIONS) == ends, 30, "offsets committed up to the end",
             lambda: f"{committed(bs, group, topic, PARTITIONS)} != {ends}")
    for w in workers:
        w.stop()
    intervals = assert_no_double_ownership(workers)
    assert intervals >= 2 * PARTITIONS  # ownership really moved around

    # restart everything: consumers are down, the broker restarts, then new records arrive
    broker.restart()
    assert committed(bs, group, topic, PARTITIONS) == ends
    before = len(workers)
    producer2 = Producer(bs)
    producer2.n = producer.n
    producer2.send(topic, 120, PARTITIONS)
    for client in clients:
        new(client)
    restarted = workers[before:]
    wait_for(lambda: producer2.acked <= {r for w in restarted for r in w.records()}, 60,
             "the new records consumed after the restart", lambda: describe(restarted))
    for w in restarted:
        w.stop()
    resumed = [r for w in restarted for r in w.records()]
    assert all(o >= ends[p] for p, o in resumed), "a record committed before the restart was consumed again"
    for p in range(PARTITIONS):
        assert min(o for q, o in resumed if q == p) == ends[p], f"partition {p} did not resume at {ends[p]}"
    assert_no_double_ownership(restarted)
