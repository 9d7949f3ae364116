"""Client telemetry (KIP-714): subscriptions, GetTelemetrySubscriptions / PushTelemetry, OTLP."""

from kopfka.telemetry.client_metrics import ClientMetricsManager

__all__ = ["ClientMetricsManager"]
