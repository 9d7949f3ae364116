"""Wire quotas, broker metrics and client telemetry into a broker's services (one call)."""

from __future__ import annotations

from typing import Any

from kopfka.metrics.broker_metrics import BrokerMetrics, IsrChangeCounter
from kopfka.quota.manager import QuotaManagers
from kopfka.telemetry.client_metrics import ClientMetricsManager


def install(services: Any, loader: Any) -> QuotaManagers:
    """Construct the managers, subscribe them to metadata, and bind them to the process's
    metrics (exported by kopfka.metrics.exposition once something serves /metrics)."""
    cfg = services.config
    values = dict(cfg.values)
    protected = values.get("inter.broker.listener.name") or None
    quotas = QuotaManagers(values, node_id=services.node_id, protected_listener=protected)
    telemetry = ClientMetricsManager(int(values.get("telemetry.max.bytes", 1_048_576)))
    services.quota_manager = quotas
    services.telemetry = telemetry
    metrics = BrokerMetrics.shared()
    services.metrics = metrics
    metrics.bind_state(services)
    if metrics.telemetry is None:  # a second in-process broker: its telemetry is not exported
        metrics.telemetry = telemetry
    loader.install_publishers([quotas, telemetry, IsrChangeCounter(metrics, services.node_id)])
    return quotas
