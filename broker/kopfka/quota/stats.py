"""The metric primitives every quota is built on: a sampled Rate, a TokenBucket and a Sensor.

A Rate keeps `samples` windows of `window_ms`; its value is the sum over live windows divided
by their elapsed time, padded to at least `samples - 1` whole windows so that a fresh window
cannot report an absurd instantaneous rate. A TokenBucket refills continuously and tolerates
bursts (controller mutations). A Sensor binds one stat to an optional upper bound and answers
"record this, and tell me by how much the bound is now exceeded". Not thread-safe: the broker
runs all of this on its event loop.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricConfig:
    """Kafka's MetricConfig as quotas use it: a Rate keeps `samples` windows of `window_ms` each."""

    samples: int = 11
    window_ms: int = 1000


class QuotaViolation(Exception):
    """The measured value crossed the bound; carries both so the caller can compute a delay."""

    def __init__(self, value: float, bound: float) -> None:
        super().__init__(f"observed {value:.3f} exceeds bound {bound:.3f}")
        self.value = value
        self.bound = bound


class Rate:
    """Windowed rate (units per second)."""

    __slots__ = ("_counts", "_current", "_starts", "_values", "config")

    def __init__(self, config: MetricConfig) -> None:
        self.config = config
        self._starts: list[float] = []
        self._values: list[float] = []
        self._counts: list[int] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        if not self._starts:
            self._starts.append(now_ms)
            self._values.append(0.0)
            self._counts.append(0)
            self._current = 0
        elif now_ms - self._starts[self._current] >= self.config.window_ms:
            # the current window is complete: advance, reusing the oldest slot once all exist
            self._current = (self._current + 1) % self.config.samples
            if self._current >= len(self._starts):
                self._starts.append(now_ms)
                self._values.append(0.0)
                self._counts.append(0)
            else:
                self._starts[self._current] = now_ms
                self._values[self._current] = 0.0
                self._counts[self._current] = 0
        self._values[self._current] += value
        self._counts[self._current] += 1

    def _purge(self, now_ms: float) -> None:
        expire = self.config.samples * self.config.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._starts[i] = now_ms
                self._values[i] = 0.0
                self._counts[i] = 0

    def total(self, now_ms: float) -> float:
        self._purge(now_ms)
        return sum(self._values)

    def window_size_ms(self, now_ms: float) -> float:
        """Elapsed time the rate is measured over (the W of X = (O - T) / T * W)."""
        self._purge(now_ms)
        if not self._starts:
            elapsed = 0.0
        else:
            elapsed = now_ms - min(self._starts)
        win = self.config.window_ms
        full = int(elapsed // win)
        min_full = self.config.samples - 1
        if full < min_full:
            elapsed += (min_full - full) * win
        return elapsed if elapsed > 0 else 1.0

    def measure(self, now_ms: float) -> float:
        return self.total(now_ms) / (self.window_size_ms(now_ms) / 1000.0)


class TokenBucket:
    """Credits refilled at `quota` per second up to a burst of samples * window * quota."""

    __slots__ = ("_last_ms", "config", "tokens")

    def __init__(self, config: MetricConfig) -> None:
        self.config = config
        self.tokens: float | None = None  # full on first use
        self._last_ms = 0.0

    def burst(self, quota: float) -> float:
        return self.config.samples * (self.config.window_ms / 1000.0) * quota

    def _refill(self, quota: float, now_ms: float) -> None:
        burst = self.burst(quota)
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * max(0.0, now_ms - self._last_ms) / 1000.0)
        self._last_ms = now_ms

    def record(self, value: float, quota: float, now_ms: float) -> None:
        self._refill(quota, now_ms)
        assert self.tokens is not None
        self.tokens = min(self.burst(quota), self.tokens - value)

    def measure(self, quota: float, now_ms: float) -> float:
        self._refill(quota, now_ms)
        assert self.tokens is not None
        return self.tokens


def throttle_time_ms(violation: QuotaViolation, window_ms: float) -> int:
    """X = (O - T) / T * W: the delay that dilutes the observed rate O back to the target T."""
    if violation.bound <= 0:
        return int(window_ms)
    return max(0, round((violation.value - violation.bound) / violation.bound * window_ms))


class Sensor:
    """One stat (Rate or TokenBucket) with an optional upper bound; tracks its last use."""

    __slots__ = (
        "bound",
        "bucket",
        "last_record_ms",
        "last_violation_ms",
        "name",
        "pace_next_ms",
        "rate",
        "tags",
        "throttle_count",
        "throttle_ms_total",
    )

    def __init__(
        self,
        name: str,
        config: MetricConfig,
        bound: float | None,
        *,
        token_bucket: bool = False,
        tags: tuple[str, str] = ("", ""),
    ) -> None:
        self.name = name
        self.tags = tags
        self.bound = bound
        self.rate: Rate | None = None if token_bucket else Rate(config)
        self.bucket: TokenBucket | None = TokenBucket(config) if token_bucket else None
        self.last_record_ms = 0.0
        self.throttle_ms_total = 0.0
        self.throttle_count = 0
        self.last_violation_ms = float("-inf")  # fetch pacing: when the entity last crossed its quota
        self.pace_next_ms = float("-inf")  # fetch pacing: when the paced schedule next allows data

    def record(self, value: float, now_ms: float, check: bool = True) -> None:
        """Record, then raise QuotaViolation if the bound is crossed (when `check`)."""
        self.last_record_ms = now_ms
        bound = self.bound
        if self.bucket is not None:
            if bound is None:
                return
            self.bucket.record(value, bound, now_ms)
            if check:
                self.check(now_ms)
            return
        assert self.rate is not None
        self.rate.record(value, now_ms)
        if check and bound is not None:
            observed = self.rate.measure(now_ms)
            if observed > bound:
                raise QuotaViolation(observed, bound)

    def check(self, now_ms: float) -> None:
        bound = self.bound
        if bound is None:
            return
        if self.bucket is not None:
            tokens = self.bucket.measure(bound, now_ms)
            if tokens < 0:
                raise QuotaViolation(tokens, bound)
        elif self.rate is not None:
            observed = self.rate.measure(now_ms)
            if observed > bound:
                raise QuotaViolation(observed, bound)

    def value(self, now_ms: float) -> float:
        """The usage figure: rate per second, or remaining tokens for a bucket."""
        if self.bucket is not None:
            return self.bucket.measure(self.bound, now_ms) if self.bound is not None else 0.0
        assert self.rate is not None
        return self.rate.measure(now_ms)

    def window_size_ms(self, now_ms: float) -> float:
        return self.rate.window_size_ms(now_ms) if self.rate is not None else 1000.0
