"""Real transactional clients against `kopfka serve`.

The transactional producers of confluent-kafka (librdkafka), kafka-python and aiokafka commit
and abort; the read_committed consumers of each client see the committed records only, the
read_uncommitted ones see everything. A zombie producer is fenced by a newer one with the same
transactional id, a transaction left open past its timeout is aborted by the coordinator, and
consume-transform-produce with offsets sent to the transaction commits input offsets and output
records atomically.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kopfka.protocol.errors import ErrorCode
from kopfka_process import KopfkaProcess

from transactions.helpers import CLIENTS, create_topic, kio_request, read_values, run_transactions

OVERRIDES = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KopfkaProcess]:
    proc = KopfkaProcess(tmp_path_factory.mktemp("txn") / "data", overrides=OVERRIDES).start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.mark.parametrize("producer", CLIENTS)
def test_commit_and_abort_by_isolation_level(broker: KopfkaProcess, producer: str) -> None:
    topic = f"ca-{producer}"
    create_topic(broker.bootstrap, topic, 2)
    run_transactions(
        producer, broker.bootstrap, topic, 2, [("c1", True), ("a1", False), ("c2", True)], txn_id=f"tx-{producer}"
    )
    committed = sorted(f"{p}-{i}" for p in ("c1", "c2") for i in range(6))
    everything = sorted([*committed, *(f"a1-{i}" for i in range(6))])
    for reader in CLIENTS:
        assert sorted(read_values(reader, broker.bootstrap, topic, 2, committed=True)) == committed, reader
    for reader in CLIENTS:
        assert sorted(read_values(reader, broker.bootstrap, topic, 2, committed=False)) == everything, reader


def _describe(bootstrap: str, txn_id: str) -> object:
    resp = asyncio.run(kio_request(bootstrap, 65, 0, {"transactional_ids": [txn_id]}))
    return resp.transaction_states[0]


def test_zombie_producer_is_fenced(broker: KopfkaProcess) -> None:
    topic = "fenced"
    create_topic(broker.bootstrap, topic)
    zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "zombie"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie-1")
    zombie.flush(30)
    successor = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "zombie"})
    successor.init_transactions(30)  # fences the zombie and aborts its open transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"live-1")
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as exc:
        zombie.produce(topic, value=b"zombie-2")
        zombie.commit_transaction(30)
    err = exc.value.args[0]
    assert err.fatal() and err.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), err
    assert read_values("confluent", broker.bootstrap, topic, 1, committed=True) == ["live-1"]
    assert sorted(read_values("confluent", broker.bootstrap, topic, 1, committed=False)) == ["live-1", "zombie-1"]
    state = _describe(broker.bootstrap, "zombie")
    # epoch 0, +1 fencing the zombie, +1 by its abort (transaction.version 2), +1 for the successor
    assert state.transaction_state == "CompleteCommit" and state.producer_epoch == 3


def test_transaction_open_past_its_timeout_is_aborted(broker: KopfkaProcess) -> None:
    topic = "timeout"
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "slow", "transaction.timeout.ms": 1500})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"never-{i}".encode())
    p.flush(30)
    deadline = time.monotonic() + 15
    while _describe(broker.bootstrap, "slow").transaction_state != "CompleteAbort":  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the coordinator did not abort the expired transaction"
        time.sleep(0.2)
    assert read_values("confluent", broker.bootstrap, topic, 1, committed=True) == []
    with pytest.raises(KafkaException):
        p.commit_transaction(10)  # its epoch was fenced by the abort


def test_transaction_timeout_above_the_maximum_is_refused(broker: KopfkaProcess) -> None:
    p = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "too-long", "transaction.timeout.ms": 900_001}
    )
    with pytest.raises(KafkaException) as exc:
        p.init_transactions(20)
    assert exc.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_consume_transform_produce_commits_offsets_with_the_output(broker: KopfkaProcess) -> None:
    create_topic(broker.bootstrap, "ctp-in", 2)
    create_topic(broker.bootstrap, "ctp-out", 2)
    feeder = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        feeder.produce("ctp-in", value=f"in-{i}".encode(), partition=i % 2)
    feeder.flush(30)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "ctp",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["ctp-in"])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ctp-tx"})
    producer.init_transactions(30)
    done = 0
    aborted_once = False
    deadline = time.monotonic() + 60
    while done < 40 and time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(7, 1.0) if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce("ctp-out", value=m.value().replace(b"in-", b"out-"), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        if not aborted_once and done > 0:
            aborted_once = True
            producer.flush(30)  # the records reach the log, then the abort drops them
            producer.abort_transaction(30)  # rewind to the committed offsets and do it again
            committed = consumer.committed(consumer.assignment(), 10)
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
            continue
        producer.commit_transaction(30)
        done += len(msgs)
    consumer.close()
    assert aborted_once and done == 40
    out = read_values("confluent", broker.bootstrap, "ctp-out", 2, committed=True)
    assert sorted(out) == sorted(f"out-{i}" for i in range(40)), "each input exactly once"
    assert len(read_values("confluent", broker.bootstrap, "ctp-out", 2, committed=False)) > 40  # the aborted try
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ctp"})
    offsets = check.committed([TopicPartition("ctp-in", 0), TopicPartition("ctp-in", 1)], 10)
    check.close()
    assert [tp.offset for tp in offsets] == [20, 20]


def test_offsets_of_an_open_transaction_are_unstable(broker: KopfkaProcess) -> None:
    """OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT while a transaction holds
    offsets for the partition, then the committed offset."""
    create_topic(broker.bootstrap, "unstable")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "unstable-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    meta = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unstable-g"}).consumer_group_metadata()
    producer.send_offsets_to_transaction([TopicPartition("unstable", 0, 3)], meta, 30)

    def fetch(stable: bool) -> tuple[int, int]:
        body = {
            "group_id": "unstable-g",
            "topics": [{"name": "unstable", "partition_indexes": [0]}],
            "require_stable": stable,
        }
        r = asyncio.run(kio_request(broker.bootstrap, 9, 7, body))
        p = r.topics[0].partitions[0]
        return int(p.error_code), int(p.committed_offset)

    assert fetch(True) == (ErrorCode.unstable_offset_commit, -1)
    assert fetch(False) == (ErrorCode.none, -1)
    producer.commit_transaction(30)
    deadline = time.monotonic() + 10
    while fetch(True) != (ErrorCode.none, 3):
        assert time.monotonic() < deadline
        time.sleep(0.1)
