"""A producer at a steady, adjustable byte rate (confluent-kafka in a thread) that remembers when
each message was acknowledged, so a test can compare a measured bytes-in rate with what was
really produced over the same interval."""

from __future__ import annotations

import bisect
import threading
import time

from confluent_kafka import Producer


class SteadyProducer:
    """Produces `rate` bytes of values per second to `topic` until stopped; `rate` may change."""

    def __init__(self, bootstrap: str, topic: str, rate: float, value_size: int = 1000) -> None:
        self.topic = topic
        self.rate = rate
        self.value = b"v" * value_size
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"})
        self._acked: list[float] = []  # monotonic ack times, one per value
        self._errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"steady-{topic}")

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def _ack(self, err: object, _msg: object) -> None:
        if err is None:
            self._acked.append(time.monotonic())
        else:
            self._errors.append(str(err))

    def _run(self) -> None:
        sent = 0.0
        last = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            sent -= (now - last) * self.rate  # a token bucket: what the rate allows since last time
            last = now
            sent = max(sent, -self.rate * 0.1)
            while sent < 0:
                try:
                    self._producer.produce(self.topic, self.value, on_delivery=self._ack)
                except BufferError:
                    break
                sent += len(self.value)
            self._producer.poll(0.005)
        self._producer.flush(15)

    def acked_bytes(self, start: float, end: float) -> int:
        """Value bytes acknowledged between two monotonic times."""
        acked = list(self._acked)
        return (bisect.bisect_right(acked, end) - bisect.bisect_left(acked, start)) * len(self.value)

    @property
    def errors(self) -> list[str]:
        return list(self._errors)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
