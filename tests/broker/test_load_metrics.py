"""How busy a broker is, on /metrics: request handler idle, network processor (event loop) idle,
log dir size and usable bytes. The clocks on a scripted time source, the selector on a real
event loop, and the exported figures on a real `kopfka serve` at rest and under a producer."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from kopfka.metrics.load import WINDOW_NS, IdleClock, timed_loop_factory
from kopfka_process import KopfkaProcess, free_port
from prometheus_client.parser import text_string_to_metric_families

from tests.log.helpers import FAST, create_topic

S = 1_000_000_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_busy_spans_make_the_rest_idle_and_the_ratio_covers_the_last_windows() -> None:
    clock = FakeClock()
    handler = IdleClock(records_idle=False, clock=clock)
    clock.now = 10 * S
    handler.add_busy(4 * S)
    assert handler.idle_ns() == 6 * S
    assert handler.ratio() == 0.6
    clock.now = WINDOW_NS  # the first window closes: a snapshot at 30 s, 26 s idle
    assert handler.ratio() == 26 / 30
    clock.now = WINDOW_NS + 10 * S
    handler.add_busy(10 * S)  # the last 10 s fully busy
    assert handler.idle_ns() == 26 * S
    assert handler.ratio() == 26 / 40  # still measured from the start: two windows are kept
    clock.now = 2 * WINDOW_NS + 10 * S
    assert handler.ratio() == 30 / 40  # from the 30 s snapshot: the busy 10 s stay in view
    clock.now = 3 * WINDOW_NS + 20 * S
    assert handler.ratio() == 1.0  # both windows after the busy stretch: idle again


def test_idle_spans_are_counted_as_given() -> None:
    clock = FakeClock()
    network = IdleClock(records_idle=True, clock=clock)
    clock.now = 5 * S
    network.add_idle(2 * S)
    assert network.idle_ns() == 2 * S
    assert network.ratio() == 0.4
    busy = IdleClock(records_idle=False, clock=clock)
    clock.now = 6 * S
    busy.add_busy(5 * S)  # more busy time than elapsed: never a negative idle
    assert busy.idle_ns() == 0 and busy.ratio() == 0.0


def test_the_timed_selector_counts_waiting_not_working() -> None:
    idle = IdleClock(records_idle=True)
    with asyncio.Runner(loop_factory=timed_loop_factory(idle)) as runner:
        runner.run(asyncio.sleep(0.3))
        waited = idle.idle_ns()
        assert waited >= 0.25 * S

        async def spin() -> None:
            end = time.perf_counter() + 0.3
            while time.perf_counter() < end:
                pass

        runner.run(spin())
        assert idle.idle_ns() - waited < 0.05 * S


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def one(m: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str) -> float:
    (value,) = m[name].values()
    return value


HANDLER = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_total"
NETWORK = "kafka_server_socket_server_metrics_io_wait_time_ns_total"


def idle_ratios(port: int, seconds: float) -> tuple[float, float]:
    """(request handler, network) idle ratios between two scrapes `seconds` apart."""
    a, t0 = scrape(port), time.perf_counter()
    time.sleep(seconds)
    b, t1 = scrape(port), time.perf_counter()
    dt = (t1 - t0) * S
    return (one(b, HANDLER) - one(a, HANDLER)) / dt, (one(b, NETWORK) - one(a, NETWORK)) / dt


def test_a_broker_exports_its_idle_time_and_log_dir_capacity(tmp_path: Path) -> None:
    http = free_port()
    proc = KopfkaProcess(tmp_path / "data", overrides={**FAST, "kopfka.http.listener": f"127.0.0.1:{http}"}).start()
    stop = threading.Event()
    producer: threading.Thread | None = None
    try:
        # the load runs flat out for seconds: retention keeps it from writing a gigabyte
        create_topic(proc.bootstrap, "load", 1, **{"segment.bytes": str(1 << 20), "retention.bytes": str(4 << 20)})
        m = scrape(http)
        for gauge in (
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
            "kafka_network_socketserver_networkprocessoravgidle_percent",
        ):
            assert 0.0 <= one(m, gauge) <= 1.0, gauge
        ((labels, total),) = m["kafka_log_logmanager_logdirectorytotalbytes"].items()
        assert labels == (("logdirectory", str(tmp_path / "data")),)
        du = shutil.disk_usage(tmp_path)
        assert total == du.total
        usable = one(m, "kafka_log_logmanager_logdirectoryusablebytes")
        assert abs(usable - du.free) < 0.02 * du.total

        handler_rest, network_rest = idle_ratios(http, 2.0)
        assert handler_rest > 0.95, handler_rest  # nothing to handle
        assert network_rest > 0.7, network_rest  # the loop mostly waits (timers and the scrape)

        def load() -> None:
            p = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 5, "acks": "1"})
            value = b"x" * 1000
            while not stop.is_set():
                try:
                    p.produce("load", value)
                except BufferError:
                    p.poll(0.01)
                p.poll(0)
            p.flush(10)

        producer = threading.Thread(target=load, daemon=True)
        producer.start()
        time.sleep(1.0)
        handler_busy, network_busy = idle_ratios(http, 3.0)
        print(
            f"idle at rest: handlers {handler_rest:.3f}, network {network_rest:.3f}; "
            f"under load: handlers {handler_busy:.3f}, network {network_busy:.3f}"
        )
        assert handler_busy < handler_rest - 0.05, (handler_rest, handler_busy)
        assert network_busy < network_rest - 0.2, (network_rest, network_busy)
        assert 0.0 <= network_busy <= handler_busy <= 1.0  # handler work is part of the loop's work
    finally:
        stop.set()
        if producer is not None:
            producer.join(30)
        proc.kill()
