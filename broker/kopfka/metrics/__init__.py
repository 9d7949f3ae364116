"""Broker metrics for Prometheus, named after Kafka's JMX exporter conventions."""

from kopfka.metrics.broker_metrics import BrokerMetrics

__all__ = ["BrokerMetrics"]
