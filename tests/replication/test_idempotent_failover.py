"""An idempotent producer's state survives a leader failover.

A real idempotent producer (confluent-kafka / librdkafka, acks=all, 5 requests in flight) writes
0, 1, 2, ... to one RF=3 partition (min.insync.replicas=2) while its leader is SIGKILLed twice:

1. with one follower frozen (SIGSTOP) just before: the leader's high watermark cannot advance, so
   the producer's in-flight batches are appended and replicated to the other follower but never
   acknowledged. That follower becomes the leader and receives every one of them again from the
   producer's retries: it must recognise them as duplicates from the producer state it built by
   replication alone, and answer with the offsets they already have;
2. once the killed broker is back in the ISR, the leader that replaced it (so a broker whose
   producer state came from log recovery after a crash may lead).

Every message must be delivered exactly once and in order, every delivery report must name the
offset the value really has, and the producer must see no OutOfOrderSequence or other fatal error.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from harness import broker, create_topic, describe, wait_full_isr, wait_until

TOPIC = "idem"
pytestmark = pytest.mark.timeout(300)


class Writer:
    """Produces str(i) for i = 0, 1, ... from a thread; records every delivery report."""

    def __init__(self, bootstrap: str) -> None:
        self.errors: list[KafkaError] = []
        self.delivered: list[tuple[int, str]] = []  # (offset, value)
        self.failed: list[tuple[str, KafkaError]] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "max.in.flight.requests.per.connection": 5,
                "linger.ms": 5,
                "retry.backoff.ms": 100,
                "message.timeout.ms": 120_000,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": self.errors.append,
            }
        )
        self.sent = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: KafkaError | None, msg: Any) -> None:
        with self._lock:
            if err is not None:
                self.failed.append((msg.value().decode(), err))
            else:
                self.delivered.append((msg.offset(), msg.value().decode()))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(TOPIC, str(self.sent).encode(), partition=0, on_delivery=self._report)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def start(self) -> Writer:
        self._thread.start()
        return self

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.delivered)

    def fatal(self) -> list[KafkaError]:
        return [e for e in self.errors if e.fatal() or e.code() == KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER]

    def wait(self, n: int, timeout: float = 90) -> None:
        wait_until(
            lambda: self.count >= n or self.failed or self.fatal(), timeout, f"{n} delivered messages", interval=0.1
        )
        assert not self.fatal(), self.fatal()
        assert not self.failed, self.failed[:5]

    def stop(self) -> int:
        """Stop producing; the number of messages still undelivered after the flush."""
        self._stop.set()
        self._thread.join(10)
        return int(self.producer.flush(5 if self.fatal() else 120))


def _read_all(bootstrap: str, expected: int) -> list[tuple[int, str]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"audit-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    out: list[tuple[int, str]] = []
    deadline = time.monotonic() + 90
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.offset(), msg.value().decode()))
        time.sleep(1)  # anything past the expected count (a duplicate) shows up too
        while (msg := consumer.poll(1.0)) is not None:
            if not msg.error():
                out.append((msg.offset(), msg.value().decode()))
    finally:
        consumer.close()
    return out


def _fail_over(c: Any, writer: Writer, *, freeze_follower: bool = False) -> int:
    info = describe(c, TOPIC)[0]
    victim = broker(c, info.leader)
    frozen = broker(c, next(r for r in info.isr if r != info.leader)) if freeze_follower else None
    if frozen is not None:
        assert frozen.proc is not None
        os.kill(frozen.proc.pid, signal.SIGSTOP)
        # well within replica.lag.time.max.ms (2 s): the follower stays in the ISR, so nothing is
        # acknowledged while the other follower fetches the producer's in-flight batches
        time.sleep(0.7)
        assert writer.sent > writer.count, "nothing was in flight"
    victim.kill()
    if frozen is not None:
        # the frozen broker is fenced (broker.session.timeout.ms) and the other follower leads
        wait_until(lambda: describe(c, TOPIC)[0].leader not in (-1, victim.node_id, frozen.node_id), 30, "a new leader")
        assert frozen.proc is not None
        os.kill(frozen.proc.pid, signal.SIGCONT)
    else:
        wait_until(lambda: describe(c, TOPIC)[0].leader not in (-1, victim.node_id), 30, "a new leader")
    writer.wait(writer.count + 300)
    victim.start()
    victim.wait_ready(60)
    wait_full_isr(c, TOPIC, 60)
    return victim.node_id


def test_idempotent_producer_survives_leader_sigkill(make_cluster: Any, tmp_path: Path) -> None:
    # no preferred-leader rebalance: the first victim, back in the ISR, must not take its
    # leadership back before the second failover, which is meant to kill the leader that replaced it
    c = make_cluster(3, {"auto.leader.rebalance.enable": "false"})
    create_topic(c, TOPIC, 1, 3)
    wait_full_isr(c, TOPIC, 30)
    writer = Writer(c.bootstrap()).start()
    try:
        writer.wait(500)
        first = _fail_over(c, writer, freeze_follower=True)
        second = _fail_over(c, writer)
        assert first != second
        writer.wait(writer.count + 300)
    finally:
        undelivered = writer.stop()
    assert not writer.fatal(), writer.fatal()
    assert undelivered == 0, f"{undelivered} messages still undelivered"
    assert not writer.failed, writer.failed[:5]
    sent = writer.sent
    assert len(writer.delivered) == sent
    log = _read_all(c.bootstrap(), sent)
    values = [v for _, v in sorted(dict(log).items())]
    print(
        f"[idempotent-failover] sent={sent} delivered={len(writer.delivered)} stored={len(values)} "
        f"client errors={[str(e) for e in writer.errors][:5]}"
    )
    assert values == [str(i) for i in range(sent)], "duplicates, gaps or reordering in the log"
    # every delivery report names the offset the value really has
    assert dict(writer.delivered) == dict(log)
