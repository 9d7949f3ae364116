"""Helpers for the quota end-to-end tests: a broker with the metrics endpoint, scraping, raw
admin requests, and rate-measuring confluent-kafka clients."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from kopfka.client.admin import Admin
from kopfka.client.quotas import alter_client_quotas
from kopfka_process import KopfkaProcess, free_port
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")
MB = 1_000_000


def start_broker(data_dir: Path, **overrides: str) -> tuple[KopfkaProcess, int]:
    http = free_port()
    proc = KopfkaProcess(data_dir, overrides={"kopfka.http.listener": f"127.0.0.1:{http}", **overrides}).start()
    return proc, http


def scrape_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample, parsed by prometheus-client's own parser."""
    out = {}
    for fam in text_string_to_metric_families(scrape_text(port)):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def run(coro: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(coro())  # type: ignore[arg-type]


def admin_call(bootstrap: str, fn: Callable[[Admin], Awaitable[T]]) -> T:
    async def main() -> T:
        admin = await Admin.connect(bootstrap)
        try:
            return await fn(admin)
        finally:
            await admin.close()

    return asyncio.run(main())


def set_quota(
    bootstrap: str,
    entity: list[tuple[str, str | None]],
    values: dict[str, float] | None = None,
    remove: list[str] | None = None,
) -> None:
    admin_call(bootstrap, lambda a: alter_client_quotas(a, entity, values, remove))


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin_call(bootstrap, lambda a: a.create_topic(name, partitions, 1))


class RateProducer(threading.Thread):
    """Produces as fast as librdkafka allows for `seconds` (stopping at `max_bytes`, so an unlimited one does not
    fill the disk: unthrottled it reaches several hundred MB/s); counts acknowledged bytes."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        client_id: str,
        seconds: float,
        value_size: int = 10_000,
        max_bytes: int = 1 << 62,
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.client_id, self.seconds = bootstrap, topic, client_id, seconds
        self.max_bytes = max_bytes
        self.value = b"x" * value_size
        self.acked = 0
        self.elapsed = 0.0
        self.errors: list[str] = []
        self.throttle_events = 0

    def run(self) -> None:
        from confluent_kafka import Producer

        start = 0.0
        deadline = [0.0]

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
            elif time.monotonic() <= deadline[0]:
                self.acked += len(msg.value())

        def on_throttle(event: Any) -> None:
            self.throttle_events += 1

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": self.client_id,
                "linger.ms": 5,
                "queue.buffering.max.kbytes": 2048,
                "batch.size": 256 * 1024,
                "acks": 1,
                "enable.metrics.push": False,
                "throttle_cb": on_throttle,
            }
        )
        p.list_topics(self.topic, timeout=10)
        start = time.monotonic()
        deadline[0] = start + self.seconds
        sent = 0
        while time.monotonic() < deadline[0]:
            if sent >= self.max_bytes:
                p.poll(0.05)
                continue
            try:
                p.produce(self.topic, self.value, on_delivery=on_delivery)
                sent += len(self.value)
            except BufferError:
                p.poll(0.005)
            p.poll(0)
        self.elapsed = time.monotonic() - start
        p.flush(60)

    @property
    def rate(self) -> float:
        return self.acked / self.seconds


class RateConsumer(threading.Thread):
    """Consumes from the beginning for `seconds`; counts value bytes received."""

    def __init__(
        self, bootstrap: str, topic: str, client_id: str, seconds: float, fetch_bytes: int = 256 * 1024
    ) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.client_id, self.seconds = bootstrap, topic, client_id, seconds
        self.fetch_bytes = fetch_bytes
        self.received = 0
        self.errors: list[str] = []

    def run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"unused-{self.client_id}",
                "client.id": self.client_id,
                "enable.auto.commit": False,
                "enable.metrics.push": False,
                "fetch.max.bytes": self.fetch_bytes,
                "max.partition.fetch.bytes": self.fetch_bytes,
                "fetch.wait.max.ms": 100,
                "fetch.error.backoff.ms": 0,
                "message.max.bytes": min(self.fetch_bytes, 1_000_000),
            }
        )
        try:
            c.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            first: list[Any] = []
            while not first:  # the clock starts with the first record (connection set-up is not the quota's)
                first = [m for m in c.consume(1, 10.0) if m.error() is None]
            self.received = len(first[0].value() or b"")
            deadline = time.monotonic() + self.seconds
            while (left := deadline - time.monotonic()) > 0:
                for m in c.consume(500, min(left, 0.5)):
                    if m.error() is not None:
                        self.errors.append(str(m.error()))
                    elif time.monotonic() <= deadline:
                        self.received += len(m.value() or b"")
        finally:
            c.close()

    @property
    def rate(self) -> float:
        return self.received / self.seconds


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class KafkaPythonRateConsumer(RateConsumer):
    """The same measurement with kafka-python, which applies throttle_time_ms client-side too.
    `client_failures`: what kafka-python logged as errors of its own meanwhile."""

    client_failures: list[str]

    def run(self) -> None:
        records = _Records()
        logging.getLogger("kafka").addHandler(records)
        try:
            self._measure()
        finally:
            logging.getLogger("kafka").removeHandler(records)
            self.client_failures = records.messages

    def _measure(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            client_id=self.client_id,
            enable_auto_commit=False,
            fetch_max_bytes=self.fetch_bytes,
            max_partition_fetch_bytes=self.fetch_bytes,
            fetch_max_wait_ms=100,
            max_poll_records=1000,
        )
        try:
            tp = TopicPartition(self.topic, 0)
            c.assign([tp])
            c.seek_to_beginning(tp)
            first: list[Any] = []
            give_up = time.monotonic() + 20
            while not first and time.monotonic() < give_up:
                first = [m for recs in c.poll(1000, max_records=1).values() for m in recs]
            if not first:
                self.errors.append("no record within 20 s")
                return
            self.received = len(first[0].value or b"")
            deadline = time.monotonic() + self.seconds
            while (left := deadline - time.monotonic()) > 0:
                for recs in c.poll(int(min(left, 0.5) * 1000)).values():
                    for m in recs:
                        if time.monotonic() <= deadline:
                            self.received += len(m.value or b"")
        finally:
            c.close()


def fill_topic(bootstrap: str, topic: str, nbytes: int, value_size: int = 10_000) -> int:
    """Write about `nbytes` of values quickly (unthrottled client id); returns records written."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "filler",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "enable.metrics.push": False,
        }
    )
    n = nbytes // value_size
    value = b"y" * value_size
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(60) == 0
    return n
