"""The policy replayed over a recorded trace (autoscale_trace.json, made by
record_autoscale_trace.py): a real 3-broker cluster scraped every 3 s by BrokerScraper while a
producer ran 0.3 MB/s, then a 1.5 MB/s burst for about a minute, then 0.3 MB/s again. With a
target of 250 kB/s per broker the autoscaler must add brokers during the burst (after its
scale-up window, one step per cooldown), never during the baseline, and come back to 3 only
once the quiet has lasted the scale-down window; a busy cluster delays that; a scale-up window
longer than the burst means no change at all."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from kopfka_operator.autoscale.policy import AutoscalingSpec, decide, trim
from kopfka_operator.autoscale.samples import BYTES_IN, NETWORK_IDLE, REQUEST_HANDLER_IDLE, Sample

TRACE = json.loads((Path(__file__).parent / "autoscale_trace.json").read_text())
SAMPLES = [Sample.from_json(row) for row in TRACE["samples"]]
PHASES = {p["name"]: p["start"] for p in TRACE["phases"]}
BURST, AFTER = PHASES["burst"], PHASES["after"]
UP_WINDOW, DOWN_WINDOW, COOLDOWN = 15, 45, 20


def spec(**kw: Any) -> AutoscalingSpec:
    raw: dict[str, Any] = {
        "minBrokers": 3,
        "maxBrokers": 6,
        "targets": {BYTES_IN: "250k", NETWORK_IDLE: 0.3, REQUEST_HANDLER_IDLE: 0.3},
        "scaleUpStabilizationWindowSeconds": UP_WINDOW,
        "scaleDownStabilizationWindowSeconds": DOWN_WINDOW,
        "cooldownSeconds": COOLDOWN,
        "maxStep": 1,
    }
    raw.update(kw)
    return AutoscalingSpec.from_mapping(raw)


def replay(s: AutoscalingSpec, busy_until: float = 0.0) -> list[tuple[float, int, str]]:
    """The changes (time, new count, reason) as the operator's timer would make them, one
    decision per recorded sample."""
    current, last_change = 3, None
    history: list[Sample] = []
    changes = []
    for sample in SAMPLES:
        now = sample.at
        history = trim([*history, sample], s, now)
        busy = "a reassignment of 6 partitions is in progress" if now < busy_until else None
        d = decide(history, current, s, now, last_change, busy)
        if d.scale:
            changes.append((now, d.desired, d.reason))
            current, last_change = d.desired, now
    return changes


def test_the_recording_is_what_it_claims() -> None:
    produced = TRACE["producedBytesPerSecond"]
    assert len(produced) == len(SAMPLES) >= 60
    assert all(s.brokers == 3 and not s.errors for s in SAMPLES)
    interval = TRACE["interval"]
    starts = sorted(PHASES.values())
    for start, end in zip(starts, [*starts[1:], SAMPLES[-1].at + 1], strict=True):
        steady = [  # the samples of a phase whose scrape interval did not straddle a change of rate
            i for i, s in enumerate(SAMPLES) if start + 2 * interval <= s.at < end
        ]
        scraped = sum(sum(SAMPLES[i].values[BYTES_IN].values()) for i in steady) / len(steady)
        acked = sum(produced[i] for i in steady) / len(steady)
        assert acked <= scraped < 1.1 * acked, (start, scraped, acked)  # leaders' bytes in frame the values
    burst = [sum(s.values[BYTES_IN].values()) for s in SAMPLES if BURST + 3 < s.at <= AFTER]
    assert min(burst) > 1.2e6


def test_a_burst_scales_up_and_the_quiet_scales_back_down_after_the_window() -> None:
    changes = replay(spec())
    for at, count, reason in changes:
        print(f"{at:6.1f}s -> {count}: {reason}")
    counts = [3] + [n for _, n, _ in changes]
    ups = [(at, n) for (at, n, _), before in zip(changes, counts, strict=False) if n > before]
    downs = [(at, n) for (at, n, _), before in zip(changes, counts, strict=False) if n < before]
    assert ups + downs == [(at, n) for at, n, _ in changes]  # all up, then all down: one reversal
    assert ups and all(BURST + UP_WINDOW <= at <= AFTER + 3 for at, _ in ups)  # nothing in the baseline
    assert ups[0][0] <= BURST + UP_WINDOW + 2 * TRACE["interval"]  # promptly once the window is over
    assert [n for _, n in ups] == list(range(4, 4 + len(ups)))  # one broker a step
    assert len(ups) >= 2
    assert all(b - a >= COOLDOWN for (a, _, _), (b, _, _) in itertools.pairwise(changes))
    assert downs and downs[0][0] >= AFTER + DOWN_WINDOW
    assert [n for _, n in downs] == list(range(ups[-1][1] - 1, 2, -1))  # step by step back to 3
    assert all("bytes in per broker" in reason for _, _, reason in changes)
    assert changes[0][2].startswith("bytes in per broker ")
    assert "over target 250 kB/s on 3 brokers -> 6 (lowest over 15 s), limited by maxStep 1 -> 4" in changes[0][2]


def test_a_busy_cluster_holds_the_scale_down() -> None:
    free = replay(spec())
    busy = replay(spec(), busy_until=AFTER + 80)
    first_down = next(at for at, n, _ in busy if at >= AFTER)
    assert first_down >= AFTER + 80
    assert first_down > next(at for at, n, _ in free if at >= AFTER) >= AFTER + DOWN_WINDOW
    assert [n for at, n, _ in busy if at < AFTER] == [n for at, n, _ in free if at < AFTER]  # ups unaffected
    assert busy[-1][1] == 3


def test_a_burst_shorter_than_the_scale_up_window_changes_nothing() -> None:
    assert replay(spec(scaleUpStabilizationWindowSeconds=90)) == []
