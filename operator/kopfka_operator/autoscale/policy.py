"""Autoscaling policy (issue 15): how many brokers a cluster should run, from its load.

Pure and deterministic (no I/O, no clock). The operator keeps a history of `Sample`s, one per
scrape, and on each timer tick calls

    decision = decide(history, current, spec, now, last_change, busy)

then, when `decision.scale`, writes `decision.reason` to status and an Event and executes
`decision.desired` through the safe scale paths. `AutoscalingSpec.from_mapping` parses
spec.brokers.autoscaling; `AUTOSCALING_SCHEMA` is its openAPIV3 schema for the CRD.

The rule follows the HPA's:
1. Each sample recommends, per metric, ceil(total load / target): the n brokers' values summed
   against one broker's target, i.e. ceil(n * mean / target). Utilisation-like metrics (bytes in
   per broker, log dir usage %) are the load themselves; idle-like ones (request handler and
   network processor idle ratio, where lower idle means busier) count their busy share
   1 - idle against 1 - target. Within the tolerance band (|mean / target - 1| <= tolerance,
   in load terms) a metric recommends n. The sample recommends the most over its metrics (the
   scarcest resource decides). A broker without a value counts as exactly at target when that
   argues for fewer brokers and as unloaded when for more, so missing data never causes a
   scale-down and never inflates a scale-up.
2. Up to the *smallest* recommendation over the scale-up window, down to the *largest* over the
   scale-down window: only a load that lasted a whole window moves the cluster, so a spike or a
   dip shorter than it does nothing, and noise around a level cannot make it oscillate. A window
   counts once the history covers it (the sample in force at its start is part of it).
3. Clamp to [minBrokers, maxBrokers], then to at most maxStep brokers from the current count.
4. Hold during the cooldown after any change, and never go down while the cluster is busy (a
   reassignment, a roll, under-replicated partitions); going up stays allowed.

The recommendation is a total capacity, not a delta, so samples taken before the last change
(at another broker count) stay meaningful, and a new broker that has no partitions yet does not
make the policy believe the load fell.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..naming import MAX_BROKERS
from ..spec import SpecError
from .samples import BYTES_IN, LOG_DIR_USAGE, METRIC_NAMES, NETWORK_IDLE, REQUEST_HANDLER_IDLE, Sample

DEFAULT_SCALE_UP_WINDOW = 60.0
DEFAULT_SCALE_DOWN_WINDOW = 300.0
DEFAULT_COOLDOWN = 300.0
DEFAULT_MAX_STEP = 1
DEFAULT_TOLERANCE = 0.1
DEFAULT_MAX_SAMPLE_AGE = 120.0  # older metrics than this: no decision from metrics


def format_bytes_rate(value: float) -> str:
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B/s"


@dataclass(frozen=True)
class MetricInfo:
    title: str
    idle_like: bool  # lower is busier: the load is 1 - value
    fmt: Callable[[float], str]
    schema: dict[str, Any]  # the target's openAPIV3 schema

    def load(self, value: float) -> float:
        return 1.0 - value if self.idle_like else value


RATIO_RANGE = (0.01, 0.99)
PERCENT_RANGE = (1.0, 99.0)
_RATIO_SCHEMA = {"type": "number", "minimum": RATIO_RANGE[0], "maximum": RATIO_RANGE[1]}
METRICS: dict[str, MetricInfo] = {
    BYTES_IN: MetricInfo(
        "bytes in per broker",
        False,
        format_bytes_rate,
        {
            "x-kubernetes-int-or-string": True,
            "pattern": r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$",
            "minimum": 1,
            "description": "Bytes per second producers may append per broker (a quantity, e.g. 20Mi).",
        },
    ),
    REQUEST_HANDLER_IDLE: MetricInfo(
        "request handler idle",
        True,
        lambda v: f"{v:.2f}",
        {**_RATIO_SCHEMA, "description": "Lowest request handler idle ratio before adding brokers (e.g. 0.3)."},
    ),
    NETWORK_IDLE: MetricInfo(
        "network processor idle",
        True,
        lambda v: f"{v:.2f}",
        {**_RATIO_SCHEMA, "description": "Lowest network processor idle ratio before adding brokers (e.g. 0.3)."},
    ),
    LOG_DIR_USAGE: MetricInfo(
        "log dir usage",
        False,
        lambda v: f"{v:.1f}%",
        {
            "type": "number",
            "minimum": PERCENT_RANGE[0],
            "maximum": PERCENT_RANGE[1],
            "description": "Highest fullness of a broker's fullest log dir, in percent (e.g. 75).",
        },
    ),
}
assert tuple(METRICS) == METRIC_NAMES

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_SUFFIX = {None: 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _quantity(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise SpecError("InvalidSpec", f"{where} must be a number or a quantity such as 20Mi")
    if isinstance(raw, str):
        m = _QUANTITY.match(raw.strip())
        if m is None:
            raise SpecError("InvalidSpec", f"{where} {raw!r} is not a quantity such as 20Mi")
        return float(m.group(1)) * _SUFFIX[m.group(2)]
    return float(raw)


@dataclass(frozen=True)
class AutoscalingSpec:
    """spec.brokers.autoscaling. `targets` keeps the spec's order (it breaks ties in reasons)."""

    min_brokers: int
    max_brokers: int
    targets: tuple[tuple[str, float], ...]
    scale_up_window: float = DEFAULT_SCALE_UP_WINDOW
    scale_down_window: float = DEFAULT_SCALE_DOWN_WINDOW
    cooldown: float = DEFAULT_COOLDOWN
    max_step: int = DEFAULT_MAX_STEP
    tolerance: float = DEFAULT_TOLERANCE
    prometheus_url: str | None = None  # read the metrics from this Prometheus, not the brokers

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], path: str = "spec.brokers.autoscaling") -> AutoscalingSpec:
        """Validate as the CRD schema does (not every API server enforces it) and fill defaults."""
        if not isinstance(raw, Mapping):
            raise SpecError("InvalidSpec", f"{path} must be an object")

        def number(key: str, default: float | None, lo: float, hi: float = math.inf) -> float:
            value = raw.get(key, default)
            if value is None:
                raise SpecError("InvalidSpec", f"{path}.{key} is required")
            if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
                raise SpecError("InvalidSpec", f"{path}.{key} must be a number between {lo} and {hi}, got {value!r}")
            return float(value)

        def integer(key: str, default: int | None, lo: int, hi: int) -> int:
            value = number(key, default, lo, hi)
            if value != int(value):
                raise SpecError("InvalidSpec", f"{path}.{key} must be a whole number, got {value!r}")
            return int(value)

        lo = integer("minBrokers", None, 1, MAX_BROKERS)
        hi = integer("maxBrokers", None, 1, MAX_BROKERS)
        if hi < lo:
            raise SpecError("InvalidSpec", f"{path}.maxBrokers ({hi}) is below minBrokers ({lo})")
        raw_targets = raw.get("targets")
        if not isinstance(raw_targets, Mapping) or not raw_targets:
            raise SpecError("InvalidSpec", f"{path}.targets needs at least one of {', '.join(METRIC_NAMES)}")
        targets = []
        for name, value in raw_targets.items():
            where = f"{path}.targets.{name}"
            if name not in METRICS:
                raise SpecError("InvalidSpec", f"{where} is not a known metric ({', '.join(METRIC_NAMES)})")
            if name == BYTES_IN:
                target = _quantity(value, where)
                if target < 1:
                    raise SpecError("InvalidSpec", f"{where} must be at least 1 byte per second, got {value!r}")
            else:
                low, high = PERCENT_RANGE if name == LOG_DIR_USAGE else RATIO_RANGE
                if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                    raise SpecError("InvalidSpec", f"{where} must be a number from {low:g} to {high:g}, got {value!r}")
                target = float(value)
            targets.append((name, target))
        prometheus = raw.get("prometheus")
        url = None
        if prometheus is not None:
            url = prometheus.get("url") if isinstance(prometheus, Mapping) else None
            if not isinstance(url, str) or not re.match(r"^https?://\S+$", url):
                raise SpecError("InvalidSpec", f"{path}.prometheus.url must be an http:// or https:// URL")
        return cls(
            min_brokers=lo,
            max_brokers=hi,
            targets=tuple(targets),
            scale_up_window=number("scaleUpStabilizationWindowSeconds", DEFAULT_SCALE_UP_WINDOW, 0, 3600),
            scale_down_window=number("scaleDownStabilizationWindowSeconds", DEFAULT_SCALE_DOWN_WINDOW, 0, 86400),
            cooldown=number("cooldownSeconds", DEFAULT_COOLDOWN, 0, 86400),
            max_step=integer("maxStep", DEFAULT_MAX_STEP, 1, MAX_BROKERS),
            tolerance=number("tolerance", DEFAULT_TOLERANCE, 0, 0.99),
            prometheus_url=url,
        )


AUTOSCALING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "Scale the brokers from their own metrics (scraped from each broker's /metrics, or from "
        "prometheus.url). Every step moves data safely; never down during a reassignment, roll "
        "or under-replication."
    ),
    "required": ["minBrokers", "maxBrokers", "targets"],
    "properties": {
        "minBrokers": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_BROKERS,
            "description": "Fewest brokers the autoscaler keeps.",
        },
        "maxBrokers": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_BROKERS,
            "description": "Most brokers the autoscaler runs.",
        },
        "targets": {
            "type": "object",
            "minProperties": 1,
            "description": "Per-broker targets; the metric that needs the most brokers decides.",
            "properties": {name: info.schema for name, info in METRICS.items()},
        },
        "tolerance": {
            "type": "number",
            "minimum": 0,
            "maximum": 0.99,
            "default": DEFAULT_TOLERANCE,
            "description": "No change while every metric is within this fraction of its target.",
        },
        "scaleUpStabilizationWindowSeconds": {
            "type": "integer",
            "minimum": 0,
            "maximum": 3600,
            "default": int(DEFAULT_SCALE_UP_WINDOW),
            "description": "Scale up to the lowest recommendation over this window.",
        },
        "scaleDownStabilizationWindowSeconds": {
            "type": "integer",
            "minimum": 0,
            "maximum": 86400,
            "default": int(DEFAULT_SCALE_DOWN_WINDOW),
            "description": "Scale down to the highest recommendation over this window.",
        },
        "cooldownSeconds": {
            "type": "integer",
            "minimum": 0,
            "maximum": 86400,
            "default": int(DEFAULT_COOLDOWN),
            "description": "No change for this long after any change of the broker count.",
        },
        "maxStep": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_BROKERS,
            "default": DEFAULT_MAX_STEP,
            "description": "Most brokers added or removed in one change.",
        },
        "prometheus": {
            "type": "object",
            "description": "Read the metrics from this Prometheus server instead of scraping the brokers.",
            "required": ["url"],
            "properties": {
                "url": {
                    "type": "string",
                    "pattern": r"^https?://\S+$",
                    "description": "The Prometheus server's base URL.",
                }
            },
        },
    },
    "x-kubernetes-validations": [{"rule": "self.maxBrokers >= self.minBrokers", "message": "maxBrokers < minBrokers"}],
}


def trim(history: Iterable[Sample], spec: AutoscalingSpec, now: float) -> list[Sample]:
    """The samples `decide` can still use at `now` (oldest first): those inside the longer
    window, the one in force at its start, and none older. Keep the history this short."""
    ordered = sorted(history, key=lambda s: s.at)
    start = now - max(spec.scale_up_window, spec.scale_down_window, DEFAULT_MAX_SAMPLE_AGE)
    first = 0
    for i, s in enumerate(ordered):
        if s.at <= start and recommend(s, spec) is not None:
            first = i
    return ordered[first:]


@dataclass(frozen=True)
class Recommendation:
    """What one sample says: `count` brokers, decided by `metric` at mean `level` on `brokers`."""

    at: float
    brokers: int
    count: int
    metric: str
    level: float
    target: float
    tolerance: float

    def text(self) -> str:
        info = METRICS[self.metric]
        where = f"on {self.brokers} broker{'s' if self.brokers != 1 else ''}"
        if self.count == self.brokers:
            return (
                f"{info.title} {info.fmt(self.level)} within {self.tolerance:.0%} of target "
                f"{info.fmt(self.target)} {where}"
            )
        side = "over" if self.level > self.target else "under"
        return f"{info.title} {info.fmt(self.level)} {side} target {info.fmt(self.target)} {where} -> {self.count}"


def _metric_recommendation(sample: Sample, metric: str, target: float, tolerance: float) -> Recommendation | None:
    values = list((sample.values.get(metric) or {}).values())
    if not values:
        return None
    info = METRICS[metric]
    n = max(sample.brokers, len(values))
    missing = n - len(values)
    per_broker = info.load(target)
    load = sum(info.load(v) for v in values)
    ratio = (load + missing * per_broker) / (n * per_broker)  # the missing at target: never down
    if ratio > 1:
        ratio = load / (n * per_broker)  # the missing unloaded: up only for the load we saw
        if ratio < 1:
            ratio = 1.0
    count = sample.brokers if abs(ratio - 1) <= tolerance else max(1, math.ceil(n * ratio - 1e-9))
    return Recommendation(sample.at, sample.brokers, count, metric, sum(values) / len(values), target, tolerance)


def recommend(sample: Sample, spec: AutoscalingSpec) -> Recommendation | None:
    """The broker count one sample asks for (the most over the metrics), or None without data."""
    best: Recommendation | None = None
    for metric, target in spec.targets:
        rec = _metric_recommendation(sample, metric, target, spec.tolerance)
        if rec is not None and (best is None or rec.count > best.count):
            best = rec
    return best


@dataclass(frozen=True)
class Decision:
    """`desired` brokers (== `current` to hold) and why. `recommendation` is what the metrics
    asked for after the windows, before min/max, maxStep and the gates; `held` names the gate
    that stopped a change ("cooldown" or "busy"); `levels` are the latest sample's means."""

    current: int
    desired: int
    reason: str
    recommendation: int | None = None
    held: str | None = None
    levels: Mapping[str, float] | None = None

    @property
    def scale(self) -> bool:
        return self.desired != self.current

    @property
    def direction(self) -> str:
        return "up" if self.desired > self.current else "down" if self.desired < self.current else "none"


def _window(
    recs: list[Recommendation], now: float, seconds: float, latest: Recommendation
) -> list[Recommendation] | None:
    """The recommendations in force during the last `seconds`, or None if the history does not
    reach back that far yet."""
    if seconds <= 0:
        return [latest]
    start = now - seconds
    before = [r for r in recs if r.at <= start]
    if not before:
        return None
    return [before[-1], *(r for r in recs if r.at > start)]


def _seconds(value: float) -> str:
    return f"{value:.0f} s"


def decide(
    history: Iterable[Sample],
    current: int,
    spec: AutoscalingSpec,
    now: float,
    last_change: float | None = None,
    busy: str | None = None,
    *,
    max_age: float = DEFAULT_MAX_SAMPLE_AGE,
) -> Decision:
    """The broker count to run now. `history`: samples (any order; later than `now` ignored);
    `current`: the broker count now; `last_change`: when the count last changed (None: not
    since the operator started); `busy`: why the cluster cannot lose a broker now (e.g.
    "a reassignment of 12 partitions is in progress"), None when it can."""
    samples = sorted((s for s in history if s.at <= now), key=lambda s: s.at)
    recs: list[Recommendation] = []
    levels: dict[str, float] | None = None
    for sample in samples:
        rec = recommend(sample, spec)
        if rec is not None:
            recs.append(rec)
            levels = {m: sum(v.values()) / len(v) for m, v in sample.values.items() if v and m in METRICS}
    recommendation: int | None = None
    if not recs:
        proposal, why = current, "no metrics yet"
    elif now - recs[-1].at > max_age:
        proposal, why = current, f"no metrics for {_seconds(now - recs[-1].at)}"
    else:
        latest = recs[-1]
        up = _window(recs, now, spec.scale_up_window, latest)
        down = _window(recs, now, spec.scale_down_window, latest)
        up_rec = min(up, key=lambda r: r.count) if up else None
        down_rec = max(down, key=lambda r: r.count) if down else None
        if up_rec is not None and up_rec.count > current:
            proposal, why = up_rec.count, up_rec.text()
            if spec.scale_up_window > 0:
                why += f" (lowest over {_seconds(spec.scale_up_window)})"
        elif down_rec is not None and down_rec.count < current:
            proposal, why = down_rec.count, down_rec.text()
            if spec.scale_down_window > 0:
                why += f" (highest over {_seconds(spec.scale_down_window)})"
        else:
            proposal, why = current, latest.text()
            if latest.count > current:
                why += f"; up once it lasts the {_seconds(spec.scale_up_window)} scale-up window"
            elif latest.count < current:
                why += f"; down once it lasts the {_seconds(spec.scale_down_window)} scale-down window"
        recommendation = proposal
    desired = proposal
    if desired > spec.max_brokers:
        desired = spec.max_brokers
        why += f", limited by maxBrokers {desired}"
    elif desired < spec.min_brokers:
        desired = spec.min_brokers
        why += f", raised to minBrokers {desired}"
    if abs(desired - current) > spec.max_step:
        desired = current + spec.max_step if desired > current else current - spec.max_step
        why += f", limited by maxStep {spec.max_step} -> {desired}"
    held: str | None = None
    if desired != current:
        if last_change is not None and now - last_change < spec.cooldown:
            held = "cooldown"
            why += f"; held by the cooldown for {_seconds(spec.cooldown - (now - last_change))}"
        elif desired < current and busy:
            held = "busy"
            why += f"; not scaling down while {busy}"
        if held is not None:
            desired = current
    return Decision(current, desired, why, recommendation, held, levels)
