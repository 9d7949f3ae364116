"""A consume-transform-produce worker (confluent-kafka) with exactly-once semantics: each input
record becomes `out-<value>` on the output topic, in a transaction that also commits the input
offsets. It logs `mid <n>` once the n-th transaction has records in the log but is not yet
committed (the moment a test kills it), `committed <n> <records>` after each commit, and exits
once the group's committed offsets reach the end of the input and nothing came for --idle seconds.

    eos_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PROGRESS_FILE [--batch N] [--idle S]
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

# librdkafka 2.16 re-bootstraps when every broker was down (KIP-899) and can then wait forever in
# send_offsets_to_transaction on the decommissioned coordinator handle; a single-broker restart
# is exactly that, so the worker keeps its brokers
CLIENT = {"metadata.recovery.strategy": "none"}


def _abort_and_rewind(producer: Producer, consumer: Consumer) -> None:
    producer.abort_transaction(60)
    for tp in consumer.committed(consumer.assignment(), 30):
        consumer.seek(tp if tp.offset >= 0 else TopicPartition(tp.topic, tp.partition, 0))


def _all_committed(consumer: Consumer, topic: str) -> bool:
    parts = [TopicPartition(topic, p) for p in consumer.list_topics(topic, 10).topics[topic].partitions]
    ends = [consumer.get_watermark_offsets(tp, 10)[1] for tp in parts]
    return [tp.offset for tp in consumer.committed(parts, 10)] == ends


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "txn_id", "progress"):
        ap.add_argument(name)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--idle", type=float, default=4.0)
    ap.add_argument("--delay", type=float, default=0.01, help="seconds between records of a transaction")
    ap.add_argument("--debug", default="", help="librdkafka debug contexts for the producer")
    ap.add_argument("--abort-every", type=int, default=0, help="abort every n-th transaction on purpose, then redo")
    a = ap.parse_args()
    progress = open(a.progress, "a", buffering=1)
    consumer = Consumer(
        {
            "bootstrap.servers": a.bootstrap,
            "group.id": a.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            **CLIENT,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": a.bootstrap,
            "transactional.id": a.txn_id,
            "transaction.timeout.ms": 60000,
            **CLIENT,
            **({"debug": a.debug} if a.debug else {}),
        }
    )
    producer.init_transactions(60)
    consumer.subscribe([a.input])
    txns = 0
    idle_since = time.monotonic()
    while True:
        polled = consumer.consume(a.batch, 0.5)
        for m in polled:
            if m.error() is not None and m.error().fatal():
                raise KafkaException(m.error())
        msgs = [m for m in polled if m.error() is None]
        if not msgs:
            if time.monotonic() - idle_since > a.idle and _all_committed(consumer, a.input):
                break
            continue
        idle_since = time.monotonic()
        txns += 1
        try:
            producer.begin_transaction()
            for i, m in enumerate(msgs):
                producer.produce(a.output, key=m.key(), value=b"out-" + m.value(), partition=m.partition())
                if i == len(msgs) // 2:
                    producer.flush(30)  # half the transaction is in the log now
                    progress.write(f"mid {txns}\n")
                time.sleep(a.delay)
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
            )
            if a.abort_every and txns % a.abort_every == 0:
                producer.flush(30)
                _abort_and_rewind(producer, consumer)  # its records stay in the log, aborted
                progress.write(f"aborted {txns} on purpose\n")
                continue
            producer.commit_transaction(60)
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal() or err.code() == KafkaError._FENCED:
                raise
            _abort_and_rewind(producer, consumer)  # abortable: redo from the committed offsets
            progress.write(f"aborted {txns} {err.name()}\n")
            continue
        progress.write(f"committed {txns} {len(msgs)}\n")
    consumer.close()
    progress.write("idle\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
