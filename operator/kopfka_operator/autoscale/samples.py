"""What the autoscaler sees of a cluster at one moment: per-broker values of the load metrics.

A `Sample` is produced by a metrics source (kopfka_operator.autoscale.metrics) and consumed by
the policy (kopfka_operator.autoscale.policy); it is plain data so that a history of them can be
recorded as JSON and replayed (tests/operator/autoscale_trace.json).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The metrics the policy understands (the keys of spec.brokers.autoscaling.targets).
BYTES_IN = "bytesInPerBroker"  # bytes/s producers append to partitions the broker leads
REQUEST_HANDLER_IDLE = "requestHandlerIdleRatio"  # 0-1, lower is busier
NETWORK_IDLE = "networkProcessorIdleRatio"  # 0-1, lower is busier
LOG_DIR_USAGE = "logDirUsagePercent"  # 0-100, the broker's fullest log dir
METRIC_NAMES = (BYTES_IN, REQUEST_HANDLER_IDLE, NETWORK_IDLE, LOG_DIR_USAGE)


@dataclass(frozen=True)
class Sample:
    """Per-broker metric values at time `at` (seconds, on the clock the caller gives the policy
    as `now`), taken while the cluster had `brokers` brokers. A broker missing from a metric's
    map had no value (not scraped yet, scrape failed, or a rate needs a second scrape); `errors`
    says why for the brokers whose scrape failed."""

    at: float
    brokers: int
    values: Mapping[str, Mapping[int, float]]
    errors: Mapping[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "at": round(self.at, 3),
            "brokers": self.brokers,
            "values": {m: {str(b): v for b, v in sorted(per.items())} for m, per in self.values.items()},
        }
        if self.errors:
            out["errors"] = {str(b): e for b, e in sorted(self.errors.items())}
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Sample:
        return cls(
            at=float(raw["at"]),
            brokers=int(raw["brokers"]),
            values={m: {int(b): float(v) for b, v in per.items()} for m, per in raw["values"].items()},
            errors={int(b): str(e) for b, e in raw.get("errors", {}).items()},
        )
