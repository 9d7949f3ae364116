"""The autoscaler's metrics sources against real peers: a `kopfka serve` process under a real
confluent-kafka producer (the scraped bytes-in rate within 10% of what was acknowledged over the
same interval), a broker restart, an unreachable broker and an endpoint that is not /metrics;
and the Prometheus source against a real Prometheus server scraping that broker."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kopfka_operator.autoscale.metrics import (
    BrokerScraper,
    PrometheusSource,
    ScrapeTarget,
    pod_targets,
    source_for,
)
from kopfka_operator.autoscale.policy import AutoscalingSpec
from kopfka_operator.autoscale.samples import BYTES_IN, LOG_DIR_USAGE, NETWORK_IDLE, REQUEST_HANDLER_IDLE
from kopfka_process import KopfkaProcess, free_port
from load_testlib import SteadyProducer

from tests.log.helpers import FAST, create_topic

RATE = 1_500_000  # bytes of values per second


class Broker:
    def __init__(self, tmp_path: Path) -> None:
        self.data = tmp_path / "data"
        self.http = free_port()
        self.proc = KopfkaProcess(self.data, overrides={**FAST, "kopfka.http.listener": f"127.0.0.1:{self.http}"})

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.http}/metrics"

    def wait_http(self) -> None:
        wait_url(f"http://127.0.0.1:{self.http}/healthz", lambda: "")


def wait_url(url: str, log: Callable[[], str], alive: Callable[[], bool] = lambda: True) -> None:
    """Until `url` answers (60 s at most, while `alive`)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if not alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{url} never answered\n{log()[-3000:]}") from None
            time.sleep(0.1)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    b.proc.start()
    b.wait_http()
    try:
        yield b
    finally:
        b.proc.kill()


def disk_usage_percent(path: Path) -> float:
    du = shutil.disk_usage(path)
    return 100.0 * (du.total - du.free) / du.total


async def test_bytes_in_rate_matches_what_was_produced(broker: Broker) -> None:
    create_topic(broker.proc.bootstrap, "steady", 3)
    scraper = BrokerScraper()
    target = [ScrapeTarget(0, "kc-broker-0", broker.metrics_url)]
    producer = SteadyProducer(broker.proc.bootstrap, "steady", RATE).start()
    try:
        await asyncio.sleep(2.0)  # the producer's pace settles
        first = await scraper.sample(target)
        t0 = time.monotonic()
        assert first.values[BYTES_IN] == {}  # a rate needs two scrapes
        assert 0 < first.values[LOG_DIR_USAGE][0] < 100
        await asyncio.sleep(6.0)
        second = await scraper.sample(target)
        t1 = time.monotonic()
    finally:
        producer.stop()
        await scraper.close()
    assert not producer.errors
    produced = producer.acked_bytes(t0, t1) / (t1 - t0)
    measured = second.values[BYTES_IN][0]
    print(f"bytes in: produced {produced / 1e6:.3f} MB/s, scraped {measured / 1e6:.3f} MB/s")
    assert produced > 0.8 * RATE
    assert abs(measured - produced) <= 0.10 * produced
    assert measured >= produced  # batches carry headers and record framing on top of the values
    assert 0.0 <= second.values[REQUEST_HANDLER_IDLE][0] < 0.99  # the handlers did some work
    assert 0.0 <= second.values[NETWORK_IDLE][0] <= 1.0
    assert abs(second.values[LOG_DIR_USAGE][0] - disk_usage_percent(broker.data)) < 1.0
    assert (second.brokers, second.errors) == (1, {})
    assert second.at > first.at


async def test_restarts_and_bad_targets_give_no_rates_and_no_errors_raised(broker: Broker, tmp_path: Path) -> None:
    create_topic(broker.proc.bootstrap, "t", 1)
    targets = [
        ScrapeTarget(0, "kc-broker-0", broker.metrics_url),
        ScrapeTarget(1, "kc-broker-1", f"http://127.0.0.1:{free_port()}/metrics"),  # nobody listens
        ScrapeTarget(2, "kc-broker-2", f"http://127.0.0.1:{broker.http}/healthz"),  # not an exposition
    ]
    scraper = BrokerScraper(timeout=3)
    try:
        first = await scraper.sample(targets, brokers=3)
        assert first.brokers == 3
        assert set(first.errors) == {1, 2}
        assert "Cannot connect" in first.errors[1] or "refused" in first.errors[1], first.errors[1]
        assert first.errors[2].startswith(f"http://127.0.0.1:{broker.http}/healthz: cannot parse the answer")
        assert first.values[LOG_DIR_USAGE].keys() == {0}
        producer = SteadyProducer(broker.proc.bootstrap, "t", 200_000).start()
        await asyncio.sleep(2.0)
        producer.stop()
        second = await scraper.sample(targets, brokers=3)
        assert second.values[BYTES_IN].keys() == {0} and second.values[BYTES_IN][0] > 0
        assert second.values[REQUEST_HANDLER_IDLE].keys() == second.values[NETWORK_IDLE].keys() == {0}

        broker.proc.restart()  # counters start again from zero
        broker.wait_http()
        third = await scraper.sample(targets, brokers=3)
        assert third.values[BYTES_IN] == {} and third.values[REQUEST_HANDLER_IDLE] == {}
        assert third.values[LOG_DIR_USAGE].keys() == {0}
        # Two seconds apart, so the idle rate is not one request's share of a few milliseconds.
        await asyncio.sleep(2.0)
        fourth = await scraper.sample(targets, brokers=3)
        assert fourth.values[BYTES_IN] == {0: 0.0}  # nothing produced since the restart
        assert 0.5 < fourth.values[REQUEST_HANDLER_IDLE][0] <= 1.0
    finally:
        await scraper.close()


async def test_the_spec_picks_the_source() -> None:
    raw = {"minBrokers": 3, "maxBrokers": 6, "targets": {BYTES_IN: "20Mi"}}
    scraper = source_for(AutoscalingSpec.from_mapping(raw), "ns")
    assert isinstance(scraper, BrokerScraper)
    prom = source_for(AutoscalingSpec.from_mapping({**raw, "prometheus": {"url": "http://prom:9090/"}}), "ns")
    assert isinstance(prom, PrometheusSource) and (prom.url, prom.namespace) == ("http://prom:9090", "ns")
    await scraper.close()
    await prom.close()


def test_pod_targets_are_the_broker_pods_with_an_ip() -> None:
    def pod(name: str, role: str, ip: str | None, deleting: bool = False) -> dict[str, object]:
        meta: dict[str, object] = {"name": name, "labels": {"kopfka.io/role": role}}
        if deleting:
            meta["deletionTimestamp"] = "2026-11-24T00:00:00Z"
        return {"metadata": meta, "status": {"podIP": ip} if ip else {}}

    pods = [
        pod("kc-broker-1", "broker", "10.0.0.6"),
        pod("kc-broker-0", "broker", "10.0.0.5"),
        pod("kc-broker-2", "broker", None),  # not scheduled yet
        pod("kc-broker-3", "broker", "10.0.0.8", deleting=True),
        pod("kc-controller-0", "controller", "10.0.0.9"),
        pod("kc-combined-4", "combined", "fd00::4"),
    ]
    assert pod_targets(pods) == [
        ScrapeTarget(0, "kc-broker-0", "http://10.0.0.5:8080/metrics"),
        ScrapeTarget(1, "kc-broker-1", "http://10.0.0.6:8080/metrics"),
        ScrapeTarget(4, "kc-combined-4", "http://[fd00::4]:8080/metrics"),
    ]


@pytest.fixture
def prometheus(tmp_path: Path, broker: Broker) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no prometheus binary (Debian package prometheus; scripts/test installs it)")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: kopfka\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{broker.http}']\n"
        "        labels: {namespace: autoscale, pod: kc-broker-0}\n"
    )
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_url(
            f"http://127.0.0.1:{port}/-/ready",
            lambda: (tmp_path / "prometheus.log").read_text(),
            lambda: proc.poll() is None,
        )
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)
        log.close()


async def test_the_prometheus_source_reads_the_same_figures(broker: Broker, prometheus: str) -> None:
    create_topic(broker.proc.bootstrap, "prom", 3)
    targets = [ScrapeTarget(0, "kc-broker-0", broker.metrics_url), ScrapeTarget(1, "kc-broker-1", "unused")]
    source = PrometheusSource(prometheus, namespace="autoscale", window="10s")
    producer = SteadyProducer(broker.proc.bootstrap, "prom", RATE).start()
    try:
        await asyncio.sleep(14.0)  # the 10 s window holds only steady load
        t1 = time.monotonic()
        sample = await source.sample(targets, brokers=2)
    finally:
        producer.stop()
        await source.close()
    produced = producer.acked_bytes(t1 - 10, t1) / 10
    measured = sample.values[BYTES_IN][0]
    print(f"bytes in via Prometheus: produced {produced / 1e6:.3f} MB/s, rate() {measured / 1e6:.3f} MB/s")
    assert abs(measured - produced) <= 0.15 * produced  # rate() extrapolates over 1 s scrapes
    assert 0.0 <= sample.values[REQUEST_HANDLER_IDLE][0] < 0.99
    assert 0.0 <= sample.values[NETWORK_IDLE][0] <= 1.0
    assert abs(sample.values[LOG_DIR_USAGE][0] - disk_usage_percent(broker.data)) < 1.0
    assert all(1 not in per for per in sample.values.values())  # no series for the other pod
    assert (sample.brokers, sample.errors) == (2, {})
    # a query Prometheus refuses is an error per broker, not an exception
    bad = PrometheusSource(prometheus, queries={BYTES_IN: "sum by ({pod}) (rate(x{{{selector}}}"})
    try:
        sample = await bad.sample(targets)
    finally:
        await bad.close()
    assert set(sample.errors) == {0, 1} and "bytesInPerBroker" in sample.errors[0]
    assert "parse error" in sample.errors[0], sample.errors[0]
    assert sample.values[LOG_DIR_USAGE].keys() == {0}  # the other queries still answered
