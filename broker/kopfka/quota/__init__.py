"""Quotas and throttling (seed 003): sensors, client quota managers, connection quotas."""

from kopfka.quota.client_quota_manager import (
    ClientFetchQuotaManager,
    ClientQuotaManager,
    ClientRequestQuotaManager,
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
    QuotaExceeded,
    QuotaType,
)
from kopfka.quota.connection_quotas import ConnectionQuotas, ConnectionRejected
from kopfka.quota.manager import QuotaManagers, user_of
from kopfka.quota.stats import MetricConfig, QuotaViolation, Rate, Sensor, TokenBucket, throttle_time_ms

__all__ = [
    "ClientFetchQuotaManager",
    "ClientQuotaManager",
    "ClientRequestQuotaManager",
    "ConnectionQuotas",
    "ConnectionRejected",
    "ControllerMutationQuota",
    "ControllerMutationQuotaManager",
    "MetricConfig",
    "QuotaExceeded",
    "QuotaManagers",
    "QuotaType",
    "QuotaViolation",
    "Rate",
    "Sensor",
    "TokenBucket",
    "throttle_time_ms",
    "user_of",
]
