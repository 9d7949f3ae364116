"""Broker autoscaling (issue 15): samples of the brokers' load (`metrics`: scraped from each
broker's /metrics or read from Prometheus) and the policy that turns a history of them into a
broker count and a human reason (`policy`). The operator's timer keeps one source and a trimmed
history per cluster:

    spec = AutoscalingSpec.from_mapping(body["spec"]["brokers"]["autoscaling"])  # SpecError if bad
    source = source_for(spec, namespace)                 # keep it: rates need the last scrape
    history.append(await source.sample(pod_targets(broker_pods), brokers=current))
    history = trim(history, spec, now)
    decision = decide(history, current, spec, now, last_change, busy)
    if decision.scale: ...status, Event, scale to decision.desired through the safe paths...

`now` is on the sources' clock (time.time() by default). Nothing here talks to Kubernetes.
"""

from .metrics import BrokerScraper, MetricsSource, PrometheusSource, ScrapeTarget, pod_targets, source_for
from .policy import AUTOSCALING_SCHEMA, AutoscalingSpec, Decision, decide, recommend, trim
from .samples import METRIC_NAMES, Sample

__all__ = [
    "AUTOSCALING_SCHEMA",
    "METRIC_NAMES",
    "AutoscalingSpec",
    "BrokerScraper",
    "Decision",
    "MetricsSource",
    "PrometheusSource",
    "Sample",
    "ScrapeTarget",
    "decide",
    "pod_targets",
    "recommend",
    "source_for",
    "trim",
]
