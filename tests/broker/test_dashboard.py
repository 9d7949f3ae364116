"""The Grafana dashboard (issue 7): valid JSON, a sane layout, and PromQL that references only metric
names the broker exports, collected from a live /metrics scrape plus the names registered by the
metrics module. Also the ISR shrink/expand counters the replication panels read."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataDelta, MetadataImage, Provenance
from kopfka.metrics.broker_metrics import BrokerMetrics, IsrChangeCounter
from kopfka.metrics.exposition import export
from kopfka_process import KopfkaProcess, free_port
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.log.helpers import FAST, create_topic, produce

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "kopfka-grafana.json"

# PromQL words that look like identifiers but are not metric names
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool"}
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: identifiers that are not functions, keywords,
    label names (in `by (...)`, `on (...)`, `{...}`) or parts of strings and durations."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    e = re.sub(r"\{[^}]*\}", "", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)  # range durations
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    names = set()
    for m in _IDENT.finditer(e):
        rest = e[m.end() :].lstrip()
        if rest.startswith("(") or m.group() in _KEYWORDS:
            continue
        names.add(m.group())
    return names


def panels() -> list[dict]:  # type: ignore[type-arg]
    return json.loads(DASHBOARD.read_text())["panels"]  # type: ignore[no-any-return]


def exported_names(text: str) -> set[str]:
    out = set()
    for fam in text_string_to_metric_families(text):
        out.add(fam.name)
        out.update(s.name for s in fam.samples)
        if fam.type == "counter":
            out.add(fam.name + "_total")
        if fam.type == "histogram":
            out.update(fam.name + sfx for sfx in ("_bucket", "_count", "_sum"))
    return out


def test_metric_name_extraction() -> None:
    assert metric_names('sum by (topic, le) (rate(kafka_a_total{topic="x"}[5m])) / kafka_b or vector(0)') == {
        "kafka_a_total",
        "kafka_b",
    }
    assert metric_names("kafka_c == 1") == {"kafka_c"}


def test_dashboard_layout_is_valid() -> None:
    ps = panels()
    assert len({p["id"] for p in ps}) == len(ps), "duplicate panel ids"
    cells: set[tuple[int, int]] = set()
    for p in ps:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"panel {p['title']!r} overlaps another"
        cells |= mine
        assert p["targets"] and all(t["expr"] and metric_names(t["expr"]) for t in p["targets"]), p["title"]
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"])
    titles = " | ".join(p["title"].lower() for p in ps)
    for wanted in ("cleaner", "recover", "offline log dirs", "under-replicated", "isr", "leaders"):
        assert wanted in titles, wanted


def test_every_panel_queries_exported_metrics(tmp_path: Path) -> None:
    http = free_port()
    proc = KopfkaProcess(tmp_path / "data", overrides={**FAST, "kopfka.http.listener": f"127.0.0.1:{http}"}).start()
    try:
        create_topic(proc.bootstrap, "dash", 1, **{"cleanup.policy": "compact"})
        produce(proc.bootstrap, "dash", [(b"k", b"v")])
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10) as r:
            live = exported_names(r.read().decode())
    finally:
        proc.kill()
    registry = CollectorRegistry()
    export(BrokerMetrics(), registry)
    known = live | exported_names(generate_latest(registry).decode())
    for required in (
        "kafka_log_logcleaner_max_clean_time_secs",
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
        "kafka_log_logmanager_remaininglogstorecover",
        "kafka_log_logmanager_offlinelogdirectorycount",
        "kafka_server_replicamanager_isrexpands_total",
    ):
        assert required in known, required
    missing = {(p["title"], name) for p in panels() for t in p["targets"] for name in metric_names(t["expr"]) - known}
    assert not missing, sorted(missing)


def test_isr_change_counter_counts_led_partitions_only() -> None:
    metrics = BrokerMetrics()
    counter = IsrChangeCounter(metrics, node_id=1)
    delta = MetadataDelta(MetadataImage())
    delta.replay_all(
        [
            mr.TopicRecord("t", "tid"),
            mr.PartitionRecord(0, "tid", (1, 2, 3), (1, 2, 3), 1),
            mr.PartitionRecord(1, "tid", (2, 1, 3), (2, 1, 3), 2),  # led by broker 2
        ]
    )
    image = delta.apply(Provenance(0, 1, 0))
    counter.on_metadata_update(delta, image)  # the first image: nothing changed yet

    def change(*recs: mr.MetadataRecord) -> None:
        nonlocal image
        d = MetadataDelta(image)
        d.replay_all(recs)
        image = d.apply(Provenance(image.provenance.last_offset + 1, 1, 0))
        counter.on_metadata_update(d, image)

    change(mr.PartitionChangeRecord(0, "tid", isr=(1, 2)), mr.PartitionChangeRecord(1, "tid", isr=(2, 1)))
    assert (metrics.isr_shrinks, metrics.isr_expands) == (1, 0)
    change(mr.PartitionChangeRecord(0, "tid", isr=(1, 2, 3)))
    assert (metrics.isr_shrinks, metrics.isr_expands) == (1, 1)
    change(mr.PartitionChangeRecord(0, "tid", leader=2, isr=(2, 3)))  # leadership moved away
    assert (metrics.isr_shrinks, metrics.isr_expands) == (1, 1)
