"""Every API key/version a Kafka 4.3 broker advertises is either served by kopfka or listed in
docs/api-coverage.md with the reason it is not (in progress elsewhere, or left out)."""

from __future__ import annotations

from api_coverage import STATUSES, coverage_table
from kopfka.protocol.api_versions import advertised_apis
from kopfka.server.apis import load_all


def test_doc_lists_exactly_what_kopfka_advertises() -> None:
    load_all()
    table = coverage_table()
    documented = {k: r[2] for k, r in table.items() if r[2] is not None}
    assert documented == advertised_apis()


def test_every_difference_from_kafka_has_a_reason() -> None:
    table = coverage_table()
    assert len(table) > 70
    for key, (name, kafka, kopfka, status) in table.items():
        assert status.startswith(STATUSES), f"{key} {name}: unknown status {status!r}"
        if kafka == kopfka:
            assert status.startswith("served") and not status.startswith("served beyond"), f"{key} {name}"
        else:
            assert status.startswith(("in progress elsewhere", "left out", "served beyond Kafka")), (
                f"{key} {name}: Kafka 4.3 advertises {kafka}, kopfka {kopfka}, but the status says {status!r}"
            )
            assert len(status) > len("left out: ") + 10, f"{key} {name}: give the reason"
