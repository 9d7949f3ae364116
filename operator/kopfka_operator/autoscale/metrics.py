"""Where the autoscaler's samples come from: each broker's own /metrics, or a Prometheus server.

    targets = pod_targets(pods)                  # the broker pods (Kubernetes objects)
    scraper = BrokerScraper()                    # keep one: rates need the previous scrape
    sample = await scraper.sample(targets, brokers=spec_replicas)
    ...
    await scraper.close()

`BrokerScraper` GETs http://<pod IP>:8080/metrics from every broker at once, parses the
Prometheus text with prometheus_client's parser (only the lines it needs) and turns counters
into rates between its own consecutive scrapes:
- bytes in per broker: rate of kafka_server_brokertopicmetrics_bytesin_total summed over topics
  (a series that went down restarted from zero, as Prometheus' rate() takes it);
- request handler idle: rate of ..._requesthandleravgidlepercent_total (idle ns) / 1e9;
- network processor idle: rate of kafka_server_socket_server_metrics_io_wait_time_ns_total / 1e9;
  either falls back to its 30-60 s `_percent` gauge where the counter is not exported;
- log dir usage %: the fullest log dir, from ..._logdirectorytotalbytes and ..._usablebytes.
A broker whose process restarted since the last scrape (process_start_time_seconds changed), or
is scraped for the first time, has no rates in that sample; a broker that cannot be scraped has
none at all and its error in `Sample.errors`. Nothing here raises for a bad broker.

`PrometheusSource(url, namespace=...)` answers the same `sample()` from PromQL instant queries
(overridable per metric), for clusters whose metrics already go to a Prometheus server;
`source_for(spec, namespace)` picks the one spec.brokers.autoscaling asks for.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from ..naming import HTTP_PORT
from ..roll.plan import pod_view
from .policy import AutoscalingSpec
from .samples import BYTES_IN, LOG_DIR_USAGE, NETWORK_IDLE, REQUEST_HANDLER_IDLE, Sample

NS = 1e9
BYTES_IN_TOTAL = "kafka_server_brokertopicmetrics_bytesin_total"
HANDLER_IDLE_NS_TOTAL = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent_total"
HANDLER_IDLE_RATIO = "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent"
NETWORK_IDLE_NS_TOTAL = "kafka_server_socket_server_metrics_io_wait_time_ns_total"
NETWORK_IDLE_RATIO = "kafka_network_socketserver_networkprocessoravgidle_percent"
LOG_DIR_TOTAL_BYTES = "kafka_log_logmanager_logdirectorytotalbytes"
LOG_DIR_USABLE_BYTES = "kafka_log_logmanager_logdirectoryusablebytes"
PROCESS_START = "process_start_time_seconds"
_WANTED = (
    BYTES_IN_TOTAL.removesuffix("_total"),
    HANDLER_IDLE_NS_TOTAL.removesuffix("_total"),
    HANDLER_IDLE_RATIO,
    NETWORK_IDLE_NS_TOTAL.removesuffix("_total"),
    NETWORK_IDLE_RATIO,
    LOG_DIR_TOTAL_BYTES,
    LOG_DIR_USABLE_BYTES,
    PROCESS_START,
)
_LINE = re.compile(rf"^(?:# (?:HELP|TYPE) )?(?:{'|'.join(_WANTED)})[\s{{_]")


@dataclass(frozen=True)
class ScrapeTarget:
    """One broker to sample: its node id, pod name (Prometheus' `pod` label) and metrics URL."""

    broker_id: int
    pod: str
    url: str


def pod_targets(pods: Iterable[Mapping[str, Any]], port: int = HTTP_PORT) -> list[ScrapeTarget]:
    """The broker pods (Kubernetes Pod objects) that have an IP, as scrape targets by node id."""
    out = []
    for pod in pods:
        view = pod_view(pod)
        ip = (pod.get("status") or {}).get("podIP")
        if view.is_broker and ip and not view.deleting:
            host = f"[{ip}]" if ":" in ip else ip
            out.append(ScrapeTarget(view.node_id, view.name, f"http://{host}:{port}/metrics"))
    return sorted(out, key=lambda t: t.broker_id)


class MetricsSource(Protocol):
    async def sample(self, targets: Sequence[ScrapeTarget], brokers: int | None = None) -> Sample: ...

    async def close(self) -> None: ...


@dataclass
class _Scrape:
    """What one broker's /metrics said: counters (per series) and gauges we use."""

    at: float  # monotonic seconds when the answer arrived
    started: float | None  # process_start_time_seconds
    counters: dict[str, dict[tuple[tuple[str, str], ...], float]] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    log_dir_usage: float | None = None


def parse_metrics(text: str, at: float) -> _Scrape:
    """The figures the autoscaler uses from one Prometheus text exposition (ValueError if it is
    not one)."""
    lines = [line for line in text.splitlines() if _LINE.match(line)]
    scrape = _Scrape(at, None)
    totals: dict[str, float] = {}
    usable: dict[str, float] = {}
    counters = (BYTES_IN_TOTAL, HANDLER_IDLE_NS_TOTAL, NETWORK_IDLE_NS_TOTAL)
    for family in text_string_to_metric_families("\n".join(lines) + "\n"):
        if family.type == "counter" and family.name + "_total" in counters:
            scrape.counters.setdefault(family.name + "_total", {})  # exported, maybe no series yet
        for s in family.samples:
            if s.name in counters:
                scrape.counters.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
            elif s.name in (HANDLER_IDLE_RATIO, NETWORK_IDLE_RATIO):
                scrape.gauges[s.name] = s.value
            elif s.name == LOG_DIR_TOTAL_BYTES:
                totals[s.labels.get("logdirectory", "")] = s.value
            elif s.name == LOG_DIR_USABLE_BYTES:
                usable[s.labels.get("logdirectory", "")] = s.value
            elif s.name == PROCESS_START:
                scrape.started = s.value
    usage = [100.0 * (total - usable[d]) / total for d, total in totals.items() if total > 0 and d in usable]
    scrape.log_dir_usage = max(usage) if usage else None
    if not lines and "# TYPE" not in text:
        raise ValueError("not a Prometheus text exposition")
    return scrape


def _increase(now: Mapping[Any, float], before: Mapping[Any, float]) -> float:
    """Sum of the series' increases; a series lower than before was reset (counts from 0), a
    series new since the last scrape counts whole (it was created since)."""
    total = 0.0
    for key, value in now.items():
        prev = before.get(key, 0.0)
        total += value - prev if value >= prev else value
    return total


class BrokerScraper:
    """Samples brokers by scraping their /metrics; one instance per cluster (it keeps each
    broker's previous scrape for the rates)."""

    def __init__(
        self,
        *,
        timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.timeout = timeout
        self._clock = clock
        self._monotonic = monotonic
        self._session = session
        self._own_session = session is None
        self._last: dict[int, _Scrape] = {}

    async def _get(self, url: str) -> str:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        async with self._session.get(url, timeout=aiohttp.ClientTimeout(total=self.timeout)) as resp:
            if resp.status != 200:
                raise ValueError(f"HTTP {resp.status}")
            return await resp.text()

    async def _scrape(self, target: ScrapeTarget) -> _Scrape | str:
        try:
            text = await self._get(target.url)
        except TimeoutError:
            return f"{target.url}: no answer within {self.timeout:g} s"
        except (aiohttp.ClientError, OSError, ValueError, UnicodeDecodeError) as exc:
            return f"{target.url}: {exc or type(exc).__name__}"
        try:
            return parse_metrics(text, self._monotonic())
        except Exception as exc:  # the parser raises assorted errors on text that is not an exposition
            return f"{target.url}: cannot parse the answer ({exc or type(exc).__name__})"

    async def sample(self, targets: Sequence[ScrapeTarget], brokers: int | None = None) -> Sample:
        """Scrape every target at once. `brokers`: the cluster's broker count now (default: the
        number of targets), which the policy compares its recommendation with."""
        at = self._clock()
        results = await asyncio.gather(*(self._scrape(t) for t in targets))
        values: dict[str, dict[int, float]] = {
            m: {} for m in (BYTES_IN, REQUEST_HANDLER_IDLE, NETWORK_IDLE, LOG_DIR_USAGE)
        }
        errors: dict[int, str] = {}
        for target, result in zip(targets, results, strict=True):
            b = target.broker_id
            if isinstance(result, str):
                errors[b] = result
                self._last.pop(b, None)
                continue
            prev = self._last.get(b)
            self._last[b] = result
            if result.log_dir_usage is not None:
                values[LOG_DIR_USAGE][b] = result.log_dir_usage
            rated = prev is not None and prev.started == result.started and result.at > prev.at
            for metric, counter, gauge, scale in (
                (BYTES_IN, BYTES_IN_TOTAL, None, 1.0),
                (REQUEST_HANDLER_IDLE, HANDLER_IDLE_NS_TOTAL, HANDLER_IDLE_RATIO, 1 / NS),
                (NETWORK_IDLE, NETWORK_IDLE_NS_TOTAL, NETWORK_IDLE_RATIO, 1 / NS),
            ):
                now_series = result.counters.get(counter)
                if now_series is not None and rated and prev is not None:
                    rate = _increase(now_series, prev.counters.get(counter, {})) / (result.at - prev.at) * scale
                    values[metric][b] = min(max(rate, 0.0), 1.0) if gauge is not None else rate
                elif now_series is None and gauge is not None and gauge in result.gauges:
                    values[metric][b] = result.gauges[gauge]
        for gone in set(self._last) - {t.broker_id for t in targets}:
            del self._last[gone]
        return Sample(at, len(targets) if brokers is None else brokers, values, errors)

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None


DEFAULT_QUERIES: dict[str, str] = {
    BYTES_IN: "sum by ({pod}) (rate(" + BYTES_IN_TOTAL + "{{{selector}}}[{window}]))",
    REQUEST_HANDLER_IDLE: "sum by ({pod}) (rate(" + HANDLER_IDLE_NS_TOTAL + "{{{selector}}}[{window}])) / 1e9",
    NETWORK_IDLE: "sum by ({pod}) (rate(" + NETWORK_IDLE_NS_TOTAL + "{{{selector}}}[{window}])) / 1e9",
    LOG_DIR_USAGE: (
        "max by ({pod}) (100 * (1 - "
        + LOG_DIR_USABLE_BYTES
        + "{{{selector}}} / "
        + LOG_DIR_TOTAL_BYTES
        + "{{{selector}}}))"
    ),
}


class PrometheusSource:
    """Samples brokers from a Prometheus server's HTTP API (instant queries at one time).

    Each query is a template with `{pod}` (the pod label's name), `{selector}` (label matchers
    for the targets' pods, and `namespace` if given) and `{window}` (the rate window); its
    result series must carry the pod label, which maps them to brokers."""

    def __init__(
        self,
        url: str,
        *,
        namespace: str | None = None,
        pod_label: str = "pod",
        namespace_label: str = "namespace",
        window: str = "1m",
        queries: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.namespace = namespace
        self.pod_label = pod_label
        self.namespace_label = namespace_label
        self.window = window
        self.queries = {**DEFAULT_QUERIES, **(queries or {})}
        self.timeout = timeout
        self._clock = clock
        self._session = session
        self._own_session = session is None

    def query(self, metric: str, targets: Sequence[ScrapeTarget]) -> str:
        # pod names are DNS subdomains: "." is their only regex metacharacter (\\. in a PromQL string)
        pods = "|".join(t.pod.replace(".", "\\\\.") for t in targets)
        matchers = [f'{self.pod_label}=~"{pods}"']
        if self.namespace is not None:
            matchers.insert(0, f'{self.namespace_label}="{self.namespace}"')
        return self.queries[metric].format(pod=self.pod_label, selector=",".join(matchers), window=self.window)

    async def _instant(self, promql: str, at: float) -> list[dict[str, Any]]:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        async with self._session.get(
            f"{self.url}/api/v1/query",
            params={"query": promql, "time": f"{at:.3f}"},
            timeout=aiohttp.ClientTimeout(total=self.timeout),
        ) as resp:
            body = await resp.json(content_type=None)
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise ValueError(f"Prometheus answered {resp.status}: {error or body!r}"[:300])
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            raise ValueError(f"Prometheus answered a {data.get('resultType')}, not an instant vector")
        return list(data.get("result") or [])

    async def sample(self, targets: Sequence[ScrapeTarget], brokers: int | None = None) -> Sample:
        at = self._clock()
        by_pod = {t.pod: t.broker_id for t in targets}
        values: dict[str, dict[int, float]] = {m: {} for m in self.queries}
        errors: dict[int, str] = {}
        if targets:

            async def one(metric: str) -> None:
                try:
                    result = await self._instant(self.query(metric, targets), at)
                except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
                    for t in targets:
                        errors.setdefault(t.broker_id, f"{self.url} ({metric}): {exc or type(exc).__name__}")
                    return
                for series in result:
                    broker = by_pod.get((series.get("metric") or {}).get(self.pod_label, ""))
                    try:
                        value = float(series["value"][1])
                    except (KeyError, IndexError, TypeError, ValueError):
                        continue
                    if broker is not None and math.isfinite(value):
                        values[metric][broker] = value

            await asyncio.gather(*(one(m) for m in self.queries))
        return Sample(at, len(targets) if brokers is None else brokers, values, errors)

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None


def source_for(spec: AutoscalingSpec, namespace: str) -> MetricsSource:
    """The source spec.brokers.autoscaling asks for: its Prometheus, or the brokers themselves."""
    if spec.prometheus_url:
        return PrometheusSource(spec.prometheus_url, namespace=namespace)
    return BrokerScraper()
