"""prometheus-client is imported only when something exports metrics (kopfka.metrics.exposition):
its import costs ~27 ms of a broker's cold start. A real `kopfka serve` without
`kopfka.http.listener` serves clients without ever importing it; with the listener, /metrics
serves every collector's families. `-X importtime` lists each module as the broker imports it."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kopfka_process import KopfkaProcess, free_port
from prometheus_client.parser import text_string_to_metric_families

from tests.log.helpers import FAST

_PROMETHEUS_IMPORT = re.compile(r"^import time:.*\|\s*prometheus_client(\.\S+)?\s*$", re.MULTILINE)


class ImportTimedProcess(KopfkaProcess):
    """`kopfka serve` under `-X importtime`: its stderr, in the process log, lists its imports."""

    def command(self) -> list[str]:
        python, *rest = super().command()
        return [python, "-X", "importtime", *rest]

    def imported_prometheus_client(self) -> bool:
        return _PROMETHEUS_IMPORT.search(self.log_text()) is not None


def serve_a_client(bootstrap: str) -> None:
    """A Metadata request and a produce, answered: the broker is up and has counted requests."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    assert md.brokers, md
    p = Producer({"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 30000})
    p.produce("orders", b"one")
    assert p.flush(60) == 0


def test_a_broker_without_an_http_listener_never_imports_prometheus_client(tmp_path: Path) -> None:
    proc = ImportTimedProcess(tmp_path / "data", overrides=FAST).start()
    try:
        serve_a_client(proc.bootstrap)
        assert "import time:" in proc.log_text()  # the imports are listed
        assert not proc.imported_prometheus_client()
    finally:
        proc.kill()


def test_with_the_http_listener_metrics_serves_every_collectors_families(tmp_path: Path) -> None:
    http = free_port()
    overrides = {**FAST, "kopfka.http.listener": f"127.0.0.1:{http}"}
    proc = ImportTimedProcess(tmp_path / "data", overrides=overrides).start()
    try:
        serve_a_client(proc.bootstrap)
        assert proc.imported_prometheus_client()  # the check above can see the import
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10) as r:
            families = {fam.name: fam for fam in text_string_to_metric_families(r.read().decode())}
    finally:
        proc.kill()
    for name in (
        "kafka_server_replicamanager_isrshrinks",  # EventCollector: counters once prometheus-client's
        "kafka_server_quota_throttled_requests",
        "kafka_network_requestmetrics_requests",
        "kafka_server_brokertopicmetrics_bytesin",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",  # LoadCollector
        "kafka_network_socketserver_networkprocessoravgidle_percent",
        "kafka_server_replicamanager_partitioncount",  # BrokerStateCollector
        "kafka_log_log_size",
        "kafka_log_logmanager_remaininglogstorecover",  # LogManagerCollector
        "kafka_server_client_metrics_instance_count",  # TelemetryCollector
    ):
        assert name in families, name
    assert [s.value for s in families["kafka_server_replicamanager_isrshrinks"].samples] == [0.0]
    produced = {s.labels["topic"]: s.value for s in families["kafka_server_brokertopicmetrics_messagesin"].samples}
    assert produced.get("orders") == 1.0
