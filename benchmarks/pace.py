"""Fixed-rate producing without spinning a core.

librdkafka's poll timeout is whole milliseconds: confluent-kafka's poll(0.0005) is poll(0) and
returns at once, so a `while now < due: poll(due - now)` loop spins. On this 2-core machine that
loop took about a core (10 s of CPU in a 10 s run at 2,000 rec/s) from the brokers it measures,
and its thread held the GIL against the consumer thread of the same benchmark.
"""

from __future__ import annotations

import time
from typing import Any


def wait_until(producer: Any, due: float) -> None:
    """Sleep (releasing the CPU and the GIL) until perf_counter() reaches `due`, then serve the
    producer's delivery queue once."""
    delay = due - time.perf_counter()
    if delay > 0:
        time.sleep(delay)
    producer.poll(0)
