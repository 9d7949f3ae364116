"""The autoscaling policy (issue 15) on synthetic and generated metric traces: the HPA formula
per metric, tolerance, the stabilization windows (a spike or dip shorter than its window does
nothing), cooldown, min/max, max step, busy clusters never shrinking, missing and stale data,
and a closed loop over noisy load that settles without ever reversing direction (where the
same loop without windows and tolerance oscillates). The recorded trace of a real broker is
replayed in test_autoscale_trace.py."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Mapping

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kopfka_operator.autoscale.policy import (
    AUTOSCALING_SCHEMA,
    AutoscalingSpec,
    decide,
    recommend,
    trim,
)
from kopfka_operator.autoscale.samples import (
    BYTES_IN,
    LOG_DIR_USAGE,
    METRIC_NAMES,
    NETWORK_IDLE,
    REQUEST_HANDLER_IDLE,
    Sample,
)
from kopfka_operator.spec import SpecError
from operator_testlib import to_jsonschema

MB = 1_000_000
STEP = 15.0  # seconds between samples, as the operator's timer would scrape


def spec(**kw: object) -> AutoscalingSpec:
    raw: dict[str, object] = {"minBrokers": 3, "maxBrokers": 12, "targets": {BYTES_IN: 20 * MB}}
    raw.update(kw)
    return AutoscalingSpec.from_mapping(raw)


def even(at: float, brokers: int, metric: str = BYTES_IN, value: float = 0.0) -> Sample:
    """Every broker at the same value."""
    return Sample(at, brokers, {metric: dict.fromkeys(range(brokers), value)})


def trace(levels: Iterable[tuple[float, float]], brokers: int, metric: str = BYTES_IN) -> list[Sample]:
    """A sample every STEP seconds from `start` to `end` at each (start..end, value) level."""
    out = []
    t = 0.0
    for duration, value in levels:
        end = t + duration
        while t < end:
            out.append(even(t, brokers, metric, value))
            t += STEP
    return out


# --- the spec ------------------------------------------------------------------------------


def test_spec_defaults_and_quantities() -> None:
    s = AutoscalingSpec.from_mapping({"minBrokers": 3, "maxBrokers": 6, "targets": {BYTES_IN: "20Mi"}})
    assert s.targets == ((BYTES_IN, 20 * 2**20),)
    assert (s.scale_up_window, s.scale_down_window, s.cooldown, s.max_step, s.tolerance) == (60, 300, 300, 1, 0.1)
    assert spec(targets={BYTES_IN: "1.5M"}).targets == ((BYTES_IN, 1.5e6),)
    full = spec(
        targets={LOG_DIR_USAGE: 75, REQUEST_HANDLER_IDLE: 0.3, NETWORK_IDLE: 0.25, BYTES_IN: 50 * MB},
        scaleUpStabilizationWindowSeconds=0,
        scaleDownStabilizationWindowSeconds=600,
        cooldownSeconds=120,
        maxStep=2,
        tolerance=0.05,
    )
    assert [m for m, _ in full.targets] == [LOG_DIR_USAGE, REQUEST_HANDLER_IDLE, NETWORK_IDLE, BYTES_IN]
    assert (full.scale_up_window, full.scale_down_window, full.cooldown, full.max_step) == (0, 600, 120, 2)


BAD_SPECS = [
    ({"maxBrokers": 2}, "maxBrokers (2) is below minBrokers (3)"),
    ({"minBrokers": 0}, "minBrokers must be a number between 1"),
    ({"targets": {}}, "targets needs at least one of"),
    ({"targets": {"cpu": 0.5}}, "targets.cpu is not a known metric"),
    ({"targets": {REQUEST_HANDLER_IDLE: 1.0}}, "must be a number from 0.01 to 0.99"),
    ({"targets": {NETWORK_IDLE: "0.3"}}, "must be a number from 0.01 to 0.99"),
    ({"targets": {LOG_DIR_USAGE: 100}}, "must be a number from 1 to 99"),
    ({"targets": {BYTES_IN: "20 MB"}}, "is not a quantity such as 20Mi"),
    ({"targets": {BYTES_IN: 0}}, "at least 1 byte per second"),
    ({"maxStep": 0}, "maxStep must be a number between 1"),
    ({"maxStep": 1.5}, "maxStep must be a whole number"),
    ({"cooldownSeconds": True}, "cooldownSeconds must be a number"),
    ({"scaleDownStabilizationWindowSeconds": -1}, "scaleDownStabilizationWindowSeconds must be a number"),
    ({"tolerance": 1}, "tolerance must be a number between 0 and 0.99"),
    ({"prometheus": {"url": "prometheus:9090"}}, "prometheus.url must be an http:// or https:// URL"),
]


@pytest.mark.parametrize(("change", "message"), BAD_SPECS)
def test_a_bad_spec_is_refused_with_the_reason(change: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as err:
        spec(**change)
    assert err.value.reason == "InvalidSpec"
    assert message in err.value.message
    assert err.value.message.startswith("spec.brokers.autoscaling.")


def test_the_crd_schema_agrees_with_the_parser() -> None:
    """What the API server's schema refuses the parser refuses too (and the reverse), so a
    server that skips validation still gets a status message, not a crash."""
    validator = jsonschema.Draft7Validator(to_jsonschema(AUTOSCALING_SCHEMA))
    base = {"minBrokers": 3, "maxBrokers": 12, "targets": {BYTES_IN: 20 * MB}}
    assert not list(validator.iter_errors(base))
    for change, _ in BAD_SPECS:
        if change in ({"maxBrokers": 2}, {"maxStep": 1.5}):
            continue  # a CEL rule and the integer type: the API server's, not jsonschema's
        assert list(validator.iter_errors({**base, **change})), change
    good = {
        **base,
        "targets": {BYTES_IN: "20Mi", REQUEST_HANDLER_IDLE: 0.3, NETWORK_IDLE: 0.3, LOG_DIR_USAGE: 80},
        "scaleUpStabilizationWindowSeconds": 30,
        "scaleDownStabilizationWindowSeconds": 600,
        "cooldownSeconds": 60,
        "maxStep": 2,
        "tolerance": 0.05,
        "prometheus": {"url": "http://prometheus.monitoring:9090"},
    }
    assert not list(validator.iter_errors(good))
    assert AutoscalingSpec.from_mapping(good).prometheus_url == "http://prometheus.monitoring:9090"
    assert spec().prometheus_url is None


# --- one sample's recommendation -----------------------------------------------------------


def test_the_hpa_formula_per_metric() -> None:
    s = spec(targets={BYTES_IN: 20 * MB})
    rec = recommend(even(0, 3, BYTES_IN, 41 * MB), s)
    assert rec is not None and rec.count == 7  # ceil(3 * 41 / 20)
    assert rec.text() == "bytes in per broker 41 MB/s over target 20 MB/s on 3 brokers -> 7"
    rec = recommend(Sample(0, 4, {BYTES_IN: {0: 30 * MB, 1: 10 * MB, 2: 0, 3: 0}}), s)
    assert rec is not None and rec.count == 2  # 40 MB/s in all needs 2 brokers at 20
    # idle-like: busy share 1 - idle against 1 - target
    s = spec(targets={REQUEST_HANDLER_IDLE: 0.3})
    rec = recommend(even(0, 3, REQUEST_HANDLER_IDLE, 0.1), s)
    assert rec is not None and rec.count == 4  # ceil(3 * 0.9 / 0.7)
    assert rec.text() == "request handler idle 0.10 under target 0.30 on 3 brokers -> 4"
    rec = recommend(even(0, 6, REQUEST_HANDLER_IDLE, 0.86), s)
    assert rec is not None and rec.count == 2  # ceil(6 * 0.14 / 0.7) = ceil(1.2)
    s = spec(targets={LOG_DIR_USAGE: 70})
    rec = recommend(even(0, 3, LOG_DIR_USAGE, 91), s)
    assert rec is not None and rec.count == 4  # ceil(3 * 91 / 70) = ceil(3.9)
    assert rec.text() == "log dir usage 91.0% over target 70.0% on 3 brokers -> 4"


def test_within_tolerance_nothing_changes() -> None:
    s = spec(targets={BYTES_IN: 20 * MB}, tolerance=0.1)
    for value in (18.01 * MB, 20 * MB, 21.99 * MB):
        rec = recommend(even(0, 3, BYTES_IN, value), s)
        assert rec is not None and rec.count == 3, value
    assert "within 10% of target 20 MB/s on 3 brokers" in rec.text()
    up, down = recommend(even(0, 3, BYTES_IN, 22.1 * MB), s), recommend(even(0, 3, BYTES_IN, 17.9 * MB), s)
    assert up is not None and up.count == 4
    assert down is not None and down.count == 3  # ceil(2.685): outside the band but not a broker less
    down = recommend(even(0, 3, BYTES_IN, 13 * MB), s)
    assert down is not None and down.count == 2


def test_the_scarcest_resource_decides() -> None:
    s = spec(targets={BYTES_IN: 20 * MB, NETWORK_IDLE: 0.3, LOG_DIR_USAGE: 80})
    sample = Sample(
        0,
        3,
        {
            BYTES_IN: dict.fromkeys(range(3), 10 * MB),  # -> 2
            NETWORK_IDLE: dict.fromkeys(range(3), 0.02),  # -> ceil(3 * 0.98 / 0.7) = 5
            LOG_DIR_USAGE: dict.fromkeys(range(3), 85.0),  # -> 4
        },
    )
    rec = recommend(sample, s)
    assert rec is not None and (rec.count, rec.metric) == (5, NETWORK_IDLE)
    assert recommend(Sample(0, 3, {REQUEST_HANDLER_IDLE: {0: 0.1}}), s) is None  # no targeted metric


def test_missing_brokers_never_cause_a_scale_down_nor_inflate_a_scale_up() -> None:
    s = spec(targets={BYTES_IN: 20 * MB})
    # two of three report almost nothing: the third (not scraped) is taken as at target
    rec = recommend(Sample(0, 3, {BYTES_IN: {0: 1 * MB, 1: 1 * MB}}), s)
    assert rec is not None and rec.count == 2  # ceil((1 + 1 + 20) / 20), never 1
    rec = recommend(Sample(0, 3, {BYTES_IN: {0: 5 * MB}}), s)
    assert rec is not None and rec.count == 3  # (5 + 40) / 20 within tolerance of 3 -> stay
    # two of three are hot: the missing one is taken as unloaded
    rec = recommend(Sample(0, 3, {BYTES_IN: {0: 50 * MB, 1: 50 * MB}}), s)
    assert rec is not None and rec.count == 5  # ceil(100 / 20)
    rec = recommend(Sample(0, 3, {BYTES_IN: {0: 25 * MB, 1: 25 * MB}}), s)
    assert rec is not None and rec.count == 3  # hot only counting the missing at target: no change


# --- the windows -----------------------------------------------------------------------------


def test_a_spike_shorter_than_the_scale_up_window_does_nothing() -> None:
    s = spec(scaleUpStabilizationWindowSeconds=60, cooldownSeconds=0)
    history = trace([(600, 20 * MB), (45, 80 * MB)], 3)
    now = history[-1].at
    d = decide(history, 3, s, now)
    assert not d.scale and d.held is None
    assert d.reason == (
        "bytes in per broker 80 MB/s over target 20 MB/s on 3 brokers -> 12; up once it lasts the 60 s scale-up window"
    )
    history = trace([(600, 20 * MB), (75, 80 * MB)], 3)
    d = decide(history, 3, s, history[-1].at)
    assert (d.desired, d.direction) == (4, "up")
    assert d.reason == (
        "bytes in per broker 80 MB/s over target 20 MB/s on 3 brokers -> 12 (lowest over 60 s), "
        "limited by maxStep 1 -> 4"
    )


def test_scale_up_goes_to_the_lowest_recommendation_of_the_window() -> None:
    s = spec(scaleUpStabilizationWindowSeconds=60, cooldownSeconds=0, maxStep=10)
    history = trace([(600, 20 * MB), (30, 100 * MB), (15, 50 * MB), (30, 100 * MB)], 3)
    d = decide(history, 3, s, history[-1].at)
    assert d.desired == 8  # ceil(3 * 50 / 20): the least the whole window asked for


def test_a_dip_shorter_than_the_scale_down_window_does_nothing() -> None:
    s = spec(scaleDownStabilizationWindowSeconds=300, cooldownSeconds=0)
    history = trace([(600, 20 * MB), (285, 2 * MB)], 6)
    d = decide(history, 6, s, history[-1].at)
    assert not d.scale
    assert d.reason.endswith("; down once it lasts the 300 s scale-down window")
    history = trace([(600, 20 * MB), (315, 2 * MB)], 6)
    d = decide(history, 6, s, history[-1].at)
    assert (d.desired, d.direction) == (5, "down")
    assert d.reason.startswith("bytes in per broker 2 MB/s under target 20 MB/s on 6 brokers -> 1 (highest over 300 s)")


def test_a_window_counts_only_once_the_history_covers_it() -> None:
    """After an operator restart the history is short: a quiet minute is no reason to shrink."""
    s = spec(cooldownSeconds=0)
    history = trace([(90, 1 * MB)], 6)
    assert not decide(history, 6, s, history[-1].at).scale
    assert decide(trace([(330, 1 * MB)], 6), 6, s, 330).desired == 5
    # scale-up likewise needs its (shorter) window
    assert not decide(trace([(45, 90 * MB)], 3), 3, s, 45).scale
    assert decide(trace([(75, 90 * MB)], 3), 3, s, 75).desired == 4
    # a zero window acts on the latest sample alone
    assert decide([even(0, 3, BYTES_IN, 90 * MB)], 3, spec(scaleUpStabilizationWindowSeconds=0), 0).desired == 4


# --- cooldown, min/max, max step, busy, stale ------------------------------------------------


def test_cooldown_after_any_change_holds_both_directions() -> None:
    s = spec(cooldownSeconds=300, scaleUpStabilizationWindowSeconds=0, scaleDownStabilizationWindowSeconds=0)
    hot = [even(1000, 3, BYTES_IN, 90 * MB)]
    d = decide(hot, 3, s, 1000, last_change=800)
    assert (d.desired, d.held) == (3, "cooldown")
    assert d.reason.endswith("; held by the cooldown for 100 s")
    assert decide(hot, 3, s, 1000, last_change=700).desired == 4
    cold = [even(1000, 6, BYTES_IN, 1 * MB)]
    assert decide(cold, 6, s, 1000, last_change=900).held == "cooldown"
    assert decide(cold, 6, s, 1000, last_change=700).desired == 5


def test_min_max_and_max_step() -> None:
    s = spec(minBrokers=3, maxBrokers=5, maxStep=2, cooldownSeconds=0, scaleUpStabilizationWindowSeconds=0)
    d = decide([even(0, 3, BYTES_IN, 200 * MB)], 3, s, 0)
    assert d.desired == 5 and d.recommendation == 30
    assert d.reason.endswith("-> 30, limited by maxBrokers 5")
    d = decide([even(0, 4, BYTES_IN, 200 * MB)], 4, s, 0)
    assert d.desired == 5
    d = decide([even(0, 5, BYTES_IN, 200 * MB)], 5, s, 0)
    assert not d.scale  # at the maximum
    s = spec(minBrokers=3, maxBrokers=12, maxStep=2, cooldownSeconds=0, scaleDownStabilizationWindowSeconds=0)
    d = decide([even(0, 10, BYTES_IN, 0)], 10, s, 0)
    assert d.desired == 8 and d.reason.endswith("raised to minBrokers 3, limited by maxStep 2 -> 8")
    assert decide([even(0, 4, BYTES_IN, 0)], 4, s, 0).desired == 3
    assert not decide([even(0, 3, BYTES_IN, 0)], 3, s, 0).scale  # at the minimum
    # outside the bounds (the spec changed): back inside, a step at a time, even without metrics
    d = decide([], 1, s, 0)
    assert (d.desired, d.reason) == (3, "no metrics yet, raised to minBrokers 3")
    assert decide([], 20, s, 0).desired == 18


def test_a_busy_cluster_never_shrinks_but_may_grow() -> None:
    s = spec(cooldownSeconds=0, scaleUpStabilizationWindowSeconds=0, scaleDownStabilizationWindowSeconds=0)
    busy = "a reassignment of 12 partitions is in progress"
    d = decide([even(0, 6, BYTES_IN, 1 * MB)], 6, s, 0, busy=busy)
    assert (d.desired, d.held) == (6, "busy")
    assert d.reason.endswith("; not scaling down while a reassignment of 12 partitions is in progress")
    d = decide([even(0, 3, BYTES_IN, 90 * MB)], 3, s, 0, busy=busy)
    assert (d.desired, d.held) == (4, None)


def test_stale_or_missing_metrics_change_nothing() -> None:
    s = spec(cooldownSeconds=0, scaleUpStabilizationWindowSeconds=0)
    d = decide([even(0, 3, BYTES_IN, 90 * MB)], 3, s, 200)
    assert (d.scale, d.reason) == (False, "no metrics for 200 s")
    d = decide([Sample(0, 3, {}, errors={0: "connection refused"})], 3, s, 0)
    assert (d.scale, d.reason) == (False, "no metrics yet")
    d = decide([even(500, 3, BYTES_IN, 90 * MB)], 3, s, 100)  # samples from "the future" are ignored
    assert not d.scale


# --- closed loop over noisy load -------------------------------------------------------------


def simulate(
    s: AutoscalingSpec,
    load: list[float],
    *,
    start: int = 3,
    seed: int = 0,
    skew: float = 0.2,
    spread_after: float = 120.0,
    busy_for: float = 0.0,
) -> list[int]:
    """Run the policy against a cluster whose total bytes in per sample is `load`: brokers
    share it unevenly (`skew`), and a new broker takes its share only `spread_after` seconds
    after it was added (a rebalance), during which the cluster is busy if `busy_for`. Returns
    the broker count after each sample."""
    rng = random.Random(seed)
    n, last_change, added_at = start, None, -math.inf
    history: list[Sample] = []
    counts = []
    for i, total in enumerate(load):
        now = i * STEP
        settled = now - added_at >= spread_after
        sharing = n if settled else max(1, n - 1)
        weights = [1 + rng.uniform(-skew, skew) for _ in range(sharing)]
        per = {b: total * w / sum(weights) for b, w in enumerate(weights)}
        per.update({b: 0.0 for b in range(sharing, n)})
        history.append(Sample(now, n, {BYTES_IN: per}))
        history = trim(history, s, now)
        busy = "a reassignment is in progress" if now - added_at < busy_for else None
        d = decide(history, n, s, now, last_change, busy)
        if d.scale:
            if d.desired > n:
                added_at = now
            n, last_change = d.desired, now
        counts.append(n)
    return counts


def reversals(counts: list[int]) -> int:
    moves = [b - a for a, b in itertools.pairwise(counts) if b != a]
    return sum(1 for a, b in itertools.pairwise(moves) if (a > 0) != (b > 0))


def noisy(level: float, noise: float, samples: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.uniform(-noise, noise)) for _ in range(samples)]


@pytest.mark.parametrize("level", [70 * MB, 90 * MB, 100 * MB, 150 * MB])
def test_noise_around_a_level_settles_without_oscillating(level: float) -> None:
    """Six hours of load with +-25% noise around a level (plus uneven brokers): the cluster
    grows to the level and stays, for every seed. The same loop without windows, tolerance or
    cooldown flaps, which shows the trace is hard enough to catch oscillation."""
    s = spec(maxStep=1)
    naive = spec(
        maxStep=1,
        tolerance=0,
        cooldownSeconds=0,
        scaleUpStabilizationWindowSeconds=0,
        scaleDownStabilizationWindowSeconds=0,
    )
    flaps = 0
    for seed in range(8):
        load = noisy(level, 0.25, 6 * 240, seed)
        counts = simulate(s, load, seed=seed)
        assert reversals(counts) == 0, (seed, counts)
        assert counts[-1] >= math.ceil(level / (20 * MB) * 0.9) - 1, counts[-1]
        flaps += reversals(simulate(naive, load, seed=seed))
    assert flaps > 50


def test_a_burst_scales_up_step_by_step_and_back_down_after_the_window() -> None:
    s = spec(maxStep=1, cooldownSeconds=120)
    load = noisy(30 * MB, 0.1, 120, 1) + noisy(120 * MB, 0.1, 240, 2) + noisy(30 * MB, 0.1, 240, 3)
    counts = simulate(s, load, seed=4, busy_for=90)
    assert counts[119] == 3  # 30 MB/s on 3 brokers: within target
    peak = max(counts)
    assert peak == 6 or peak == 7  # 120 MB/s at 20 MB/s per broker
    up_samples = [i for i in range(1, len(counts)) if counts[i] > counts[i - 1]]
    assert all(b - a >= 120 / STEP for a, b in itertools.pairwise(up_samples))  # cooldown
    assert up_samples[0] * STEP >= 120 * STEP + 60  # after the scale-up window
    down_samples = [i for i in range(1, len(counts)) if counts[i] < counts[i - 1]]
    assert down_samples and down_samples[0] * STEP >= 360 * STEP + 300  # after the scale-down window
    assert counts[-1] == 3
    assert reversals(counts) == 1


# --- generated traces: the invariants --------------------------------------------------------

METRIC_VALUES = {
    BYTES_IN: st.floats(0, 200 * MB),
    REQUEST_HANDLER_IDLE: st.floats(0, 1),
    NETWORK_IDLE: st.floats(0, 1),
    LOG_DIR_USAGE: st.floats(0, 100),
}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Sample], int, AutoscalingSpec, float, float | None, str | None]:
    lo = draw(st.integers(1, 6))
    hi = draw(st.integers(lo, 12))
    metrics = draw(st.lists(st.sampled_from(METRIC_NAMES), min_size=1, max_size=4, unique=True))
    targets: dict[str, float] = {}
    for m in metrics:
        if m == BYTES_IN:
            targets[m] = draw(st.floats(1 * MB, 100 * MB))
        elif m == LOG_DIR_USAGE:
            targets[m] = draw(st.floats(1, 99))
        else:
            targets[m] = draw(st.floats(0.01, 0.99))
    s = AutoscalingSpec.from_mapping(
        {
            "minBrokers": lo,
            "maxBrokers": hi,
            "targets": targets,
            "scaleUpStabilizationWindowSeconds": draw(st.sampled_from([0, 30, 60, 120])),
            "scaleDownStabilizationWindowSeconds": draw(st.sampled_from([0, 60, 300])),
            "cooldownSeconds": draw(st.sampled_from([0, 60, 300])),
            "maxStep": draw(st.integers(1, 4)),
            "tolerance": draw(st.sampled_from([0, 0.05, 0.1, 0.3])),
        }
    )
    current = draw(st.integers(lo, hi))
    history = []
    t = 0.0
    for _ in range(draw(st.integers(0, 40))):
        t += draw(st.sampled_from([5.0, 15.0, 15.0, 30.0]))
        n = draw(st.integers(1, 12))
        values: dict[str, Mapping[int, float]] = {}
        for m in draw(st.lists(st.sampled_from(METRIC_NAMES), max_size=4, unique=True)):
            brokers = draw(st.lists(st.integers(0, n), max_size=n + 1, unique=True))
            values[m] = {b: draw(METRIC_VALUES[m]) for b in brokers}
        history.append(Sample(t, n, values))
    now = t + draw(st.sampled_from([0.0, 1.0, 10.0, 200.0]))
    last_change = draw(st.one_of(st.none(), st.floats(0, max(now, 1.0))))
    busy = draw(st.one_of(st.none(), st.just("a roll is in progress")))
    return history, current, s, now, last_change, busy


@given(scenarios())
@settings(max_examples=200, deadline=None)
def test_generated_traces_respect_every_rule(
    scenario: tuple[list[Sample], int, AutoscalingSpec, float, float | None, str | None],
) -> None:
    history, current, s, now, last_change, busy = scenario
    d = decide(history, current, s, now, last_change, busy)
    assert d.current == current
    assert s.min_brokers <= d.desired <= s.max_brokers
    assert abs(d.desired - current) <= s.max_step
    if last_change is not None and now - last_change < s.cooldown:
        assert not d.scale
    if busy:
        assert d.desired >= current
    recs = [(h.at, r.count) for h in sorted(history, key=lambda h: h.at) if (r := recommend(h, s)) is not None]
    if d.scale:
        assert recs and now - recs[-1][0] <= 120  # fresh metrics
        window = s.scale_up_window if d.desired > current else s.scale_down_window
        start = now - window
        in_force = [c for at, c in recs if at <= start]
        assert window == 0 or in_force, "a window the history does not cover"
        seen = [c for at, c in recs if at > start] + in_force[-1:] if window else [recs[-1][1]]
        if d.desired > current:
            assert all(c > current for c in seen), (seen, current)
        else:
            assert all(c < current for c in seen), (seen, current)
    # the same history in any order decides the same, and so does the trimmed history
    assert decide(list(reversed(history)), current, s, now, last_change, busy) == d
    assert decide(trim(history, s, now), current, s, now, last_change, busy) == d


@given(scenarios(), st.floats(1.0, 5.0))
@settings(max_examples=200, deadline=None)
def test_more_load_never_means_fewer_brokers(
    scenario: tuple[list[Sample], int, AutoscalingSpec, float, float | None, str | None], factor: float
) -> None:
    history, current, s, now, last_change, busy = scenario

    def heavier(sample: Sample) -> Sample:
        values = {}
        for m, per in sample.values.items():
            if m in (BYTES_IN, LOG_DIR_USAGE):
                values[m] = {b: v * factor for b, v in per.items()}
            else:  # idle ratios: less idle
                values[m] = {b: v / factor for b, v in per.items()}
        return Sample(sample.at, sample.brokers, values)

    before = decide(history, current, s, now, last_change, busy)
    after = decide([heavier(h) for h in history], current, s, now, last_change, busy)
    assert after.desired >= before.desired
