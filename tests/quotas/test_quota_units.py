"""Unit tests over the quota primitives and managers (no broker).

Without SASL every real client is User:ANONYMOUS, so the user levels of the eight-level
precedence are tested here, over the manager, with arbitrary user names.
"""

from __future__ import annotations

import pytest
from kopfka.quota.client_quota_manager import (
    INACTIVE_SENSOR_EXPIRATION_MS,
    NO_QUOTAS,
    USER_QUOTA_ENABLED,
    ClientFetchQuotaManager,
    ClientQuotaManager,
    ClientRequestQuotaManager,
    ControllerMutationQuotaManager,
    QuotaExceeded,
    QuotaType,
    resolve_level,
)
from kopfka.quota.stats import MetricConfig, Rate, Sensor, TokenBucket, throttle_time_ms


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


U, C = "user", "client-id"
LEVELS = [
    ((U, "alice"), (C, "app")),  # 1
    ((U, "alice"), (C, None)),  # 2
    ((U, "alice"),),  # 3
    ((U, None), (C, "app")),  # 4
    ((U, None), (C, None)),  # 5
    ((U, None),),  # 6
    ((C, "app"),),  # 7
    ((C, None),),  # 8
]


def ent(*comps: tuple[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(comps))


# --- primitives -------------------------------------------------------------------------------
def test_rate_pads_to_samples_minus_one_windows() -> None:
    r = Rate(MetricConfig(11, 1000))
    r.record(1000, 0)
    assert r.window_size_ms(0) == 10_000  # a fresh window is padded to 10 whole windows
    assert r.measure(0) == pytest.approx(100.0)
    r.record(1000, 15_000)  # the first sample expired (older than 11 windows)
    assert r.total(15_000) == 1000


def test_rate_steady_state_is_exact() -> None:
    r = Rate(MetricConfig(11, 1000))
    for t in range(0, 30_000, 100):
        r.record(100, t)  # 1000 units per second
    assert r.measure(29_999) == pytest.approx(1000, rel=0.1)


def test_throttle_formula() -> None:
    s = Sensor("s", MetricConfig(11, 1000), bound=100.0)
    with pytest.raises(Exception) as info:
        s.record(3000, 0)  # 3000 / 10 s = 300/s against 100/s
    v = info.value
    # X = (O - T) / T * W = (300 - 100) / 100 * 10 s = 20 s: the excess diluted back to 100/s
    assert throttle_time_ms(v, s.window_size_ms(0)) == 20_000  # type: ignore[arg-type]


def test_token_bucket_worked_example() -> None:
    b = TokenBucket(MetricConfig(100, 1000))  # Q = 5/s, B = 100 * 1 s * 5 = 500
    b.record(560, 5.0, 0)
    assert b.measure(5.0, 0) == pytest.approx(-60)
    mgr = ControllerMutationQuotaManager(MetricConfig(100, 1000))
    from kopfka.quota.stats import QuotaViolation

    assert mgr.throttle_time(QuotaViolation(-60, 5.0), None, 0) == 12_000  # type: ignore[arg-type]
    assert b.measure(5.0, 12_000) == pytest.approx(0)


# --- precedence -------------------------------------------------------------------------------
@pytest.mark.parametrize("level", range(1, 9))
def test_each_level_wins_over_all_less_specific_ones(level: int) -> None:
    quotas = {ent(*LEVELS[i - 1]): float(i * 1000) for i in range(level, 9)}
    hit = resolve_level(quotas, "alice", "app")
    assert hit is not None and hit[0] == level and hit[2] == level * 1000


@pytest.mark.parametrize("level", range(1, 9))
def test_level_only_applies_to_its_entity(level: int) -> None:
    """A quota for alice/app must not reach bob/other unless it is a default level."""
    quotas = {ent(*LEVELS[level - 1]): 1.0}
    hit = resolve_level(quotas, "bob", "other")
    defaults = {5, 6, 8}  # <default>/<default>, <default> user, <default> client-id
    assert (hit is not None) == (level in defaults)


def test_metric_tags_share_or_split_sensors() -> None:
    m = ClientQuotaManager(QuotaType.PRODUCE, MetricConfig())
    m.update_quotas({ent((U, "alice")): 100.0})  # user level: all alice's clients share
    a = m.sensors_for("alice", "app1")
    b = m.sensors_for("alice", "app2")
    assert a is not None and b is not None and a.quota is b.quota and a.tags == ("alice", "")
    m.update_quotas({ent((C, None)): 100.0})  # <default> client-id: one sensor per client-id
    a = m.sensors_for("alice", "app1")
    b = m.sensors_for("alice", "app2")
    assert a is not None and b is not None and a.quota is not b.quota and a.tags == ("", "app1")


def test_quota_types_enabled_fast_path() -> None:
    m = ClientQuotaManager(QuotaType.PRODUCE, MetricConfig())
    assert m.quota_types_enabled == NO_QUOTAS
    assert m.record_and_get_throttle_ms("u", "c", 10**9) == 0
    assert not m.sensors  # nothing recorded, nothing allocated
    m.update_quotas({ent((U, None)): 5.0})
    assert m.quota_types_enabled == USER_QUOTA_ENABLED


def test_changing_a_limit_keeps_usage_and_removing_lifts_it() -> None:
    clock = Clock(0)
    m = ClientQuotaManager(QuotaType.PRODUCE, MetricConfig(11, 1000), clock)
    m.update_quotas({ent((C, "app")): 1000.0})
    assert m.record_and_get_throttle_ms("ANONYMOUS", "app", 5000) == 0  # 500/s
    m.update_quotas({ent((C, "app")): 100.0})  # tighter: the same usage now violates
    assert m.record_and_get_throttle_ms("ANONYMOUS", "app", 1) > 0
    sensor = m.sensors[("", "app")]
    assert sensor.rate is not None and sensor.rate.total(0) == 5001
    m.update_quotas({})
    assert m.record_and_get_throttle_ms("ANONYMOUS", "app", 10**9) == 0


def test_sensors_expire_after_an_hour_idle() -> None:
    clock = Clock(0)
    m = ClientQuotaManager(QuotaType.FETCH, MetricConfig(), clock)
    m.update_quotas({ent((C, None)): 10.0})
    m.record_and_get_throttle_ms("u", "idle", 1)
    clock.t = INACTIVE_SENSOR_EXPIRATION_MS - 1
    m.record_and_get_throttle_ms("u", "busy", 1)
    assert set(m.sensors) == {("", "idle"), ("", "busy")}
    clock.t = INACTIVE_SENSOR_EXPIRATION_MS + 1
    assert m.expire_idle(clock.t) == [("", "idle")]


def test_fetch_unrecord_and_max_bytes_precap() -> None:
    clock = Clock(0)
    m = ClientQuotaManager(QuotaType.FETCH, MetricConfig(11, 1000), clock)
    assert m.max_value_in_quota_window("u", "c") == float("inf")
    m.update_quotas({ent((C, "c")): 100.0})
    assert m.max_value_in_quota_window("u", "c") == 100 * 10  # limit * (samples - 1) * window
    assert m.record_and_get_throttle_ms("u", "c", 5000) > 0
    m.unrecord("u", "c", 5000)  # the throttled response carried no data
    assert m.sensors[("", "c")].rate.total(0) == 0  # type: ignore[union-attr]


def test_fetch_send_then_throttle_and_empty_when_already_over() -> None:
    clock = Clock(0)
    m = ClientFetchQuotaManager(MetricConfig(11, 1000), clock)
    assert m.record_fetch("u", "c", 10**9) == (True, 0)  # no quota: nothing recorded
    m.update_quotas({ent((C, "c")): 100.0})
    sensor_total = lambda: m.sensors[("", "c")].rate.total(clock.t)  # type: ignore[union-attr]  # noqa: E731
    send, delay = m.record_fetch("u", "c", 5000)  # within quota before it: sent, charged, throttled
    assert send and delay > 0 and sensor_total() == 5000
    clock.t += 10
    send, delay = m.record_fetch("u", "c", 5000)  # already over: empty response, nothing charged
    assert not send and delay > 0 and sensor_total() == 5000


def test_fetch_pacing_only_after_crossing_the_quota() -> None:
    clock = Clock(0)
    m = ClientFetchQuotaManager(MetricConfig(3, 1000), clock)
    m.update_quotas({ent((C, "c")): 1000.0})
    assert m.record_fetch("u", "c", 100) == (True, 0)  # far within quota: idle credit, no pacing
    clock.t += 100
    assert m.record_fetch("u", "c", 100) == (True, 0)
    clock.t = 20_000
    # crosses the quota (3000 B over a padded 2 s): X = 1000 ms, but pacing holds for 3000 B at 1000 B/s
    assert m.record_fetch("u", "c", 3000) == (True, 2800)  # (less the 0.2-window slack)
    clock.t = 23_000  # that sample has expired, the rate is 0 again, but the entity is still paced
    assert m.record_fetch("u", "c", 500) == (True, 300)
    clock.t = 26_000  # 2 * samples * window after the last crossing: pacing ends
    assert m.record_fetch("u", "c", 500) == (True, 0)


def _greedy_fetcher(m: ClientFetchQuotaManager | ClientQuotaManager, clock: Clock, chunk: int, seconds: float) -> float:
    """A consumer that re-fetches 2 ms after each response plus its throttle; returns bytes/s delivered."""
    got, end = 0, clock.t + seconds * 1000
    while clock.t < end:
        if isinstance(m, ClientFetchQuotaManager):
            send, delay = m.record_fetch("u", "c", chunk)
        else:  # Kafka: record, and if that crosses the quota un-record it and answer empty
            delay = m.record_and_get_throttle_ms("u", "c", chunk)
            send = delay == 0
            if not send:
                m.unrecord("u", "c", chunk)
        got += chunk if send else 0
        clock.t += delay + 2
    return got / seconds


@pytest.mark.parametrize("samples", [3, 11])
@pytest.mark.parametrize("chunk", [1_000_000, 262_144])
def test_greedy_consumer_gets_its_quota_within_ten_percent(samples: int, chunk: int) -> None:
    fetch = ClientFetchQuotaManager(MetricConfig(samples, 1000), Clock(0))
    fetch.update_quotas({ent((C, "c")): 1e6})
    assert 0.9e6 <= _greedy_fetcher(fetch, fetch.clock, chunk, 20) <= 1.1e6  # type: ignore[arg-type]
    assert 0.95e6 <= _greedy_fetcher(fetch, fetch.clock, chunk, 100) <= 1.05e6  # type: ignore[arg-type]


def test_kafka_discard_and_retry_under_delivers_with_second_sized_responses() -> None:
    """Why the fetch manager does not discard: 1 MB responses at 1 MB/s, 3 samples -> ~0.75 of the quota."""
    kafka = ClientQuotaManager(QuotaType.FETCH, MetricConfig(3, 1000), Clock(0))
    kafka.update_quotas({ent((C, "c")): 1e6})
    assert _greedy_fetcher(kafka, kafka.clock, 1_000_000, 100) < 0.8e6  # type: ignore[arg-type]


def test_request_quota_caps_throttle_at_one_window() -> None:
    m = ClientRequestQuotaManager(MetricConfig(11, 1000), Clock(0))
    m.update_quotas({ent((C, "c")): 1.0})  # 1 % of a second
    assert m.record_time_and_get_throttle_ms("u", "c", 5 * 10**9) == 1000


def test_strict_and_permissive_mutation_quotas() -> None:
    clock = Clock(0)
    m = ControllerMutationQuotaManager(MetricConfig(11, 1000), clock)
    m.update_quotas({ent((C, "admin")): 2.0})  # burst 22
    strict = m.new_quota_for("u", "admin", version=6, strict_since=6)
    strict.record(20)
    strict.record(5)  # bucket was positive: accepted, now -3
    with pytest.raises(QuotaExceeded) as info:
        strict.record(1)
    assert info.value.throttle_ms == 1500  # 3 tokens at 2/s
    permissive = m.new_quota_for("u", "admin", version=5, strict_since=6)
    permissive.record(1)  # never rejects, only throttles
    assert permissive.throttle_time_ms() == 2000
    clock.t += 500
    assert permissive.throttle_time_ms() == 1500  # decays with elapsed time
    unlimited = m.new_quota_for("u", "other", version=6, strict_since=6)
    unlimited.record(10**6)
    assert unlimited.throttle_time_ms() == 0
