"""The coordinators are built on first need (kopfka.server.coordinator_slots): a fresh broker
starts without importing them, a client's first group request builds the group coordinator,
and a coordinator built late sees the same metadata it would have seen from the start."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kopfka.metadata.image import MetadataDelta, MetadataImage, PartitionRegistration, Provenance, TopicImage
from kopfka.server.coordinator_slots import CoordinatorSlot
from kopfka_process import free_port

OFFSETS = "__consumer_offsets"


class _Recorder:
    """A coordinator that records what it is told."""

    def __init__(self) -> None:
        self.deltas: list[MetadataDelta] = []

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.deltas.append(delta)


class _Loader:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image


def _image(offset: int, *topics: str) -> MetadataImage:
    by_name = {
        name: TopicImage(name, f"AAAAAAAAAAAAAAAAAAAAA{i}", {0: PartitionRegistration((1,), (1,), 1, 0, 0)})
        for i, name in enumerate(topics)
    }
    return MetadataImage(
        provenance=Provenance(offset, 1, 0),
        topics_by_name=by_name,
        topics_by_id={t.topic_id: t for t in by_name.values()},
    )


def _slot(loader: Any = None) -> tuple[CoordinatorSlot, list[_Recorder]]:
    built: list[_Recorder] = []

    def build() -> _Recorder:
        built.append(_Recorder())
        return built[-1]

    return CoordinatorSlot("group_coordinator", build, loader, OFFSETS), built


def test_built_when_its_internal_topic_appears_and_told_the_whole_image() -> None:
    slot, built = _slot()
    slot.on_metadata_update(MetadataDelta(MetadataImage()), _image(3, "orders"))
    assert built == [] and slot.built is None
    with_offsets = _image(7, "orders", OFFSETS)
    slot.on_metadata_update(MetadataDelta(_image(3, "orders")), with_offsets)
    assert len(built) == 1 and slot.built is built[0]
    (first,) = built[0].deltas
    # the whole image, not just this delta: both topics, as a publisher installed late is told
    changed = first.topic_changes.changed_partitions
    assert set(changed) == {t.topic_id for t in with_offsets.topics_by_name.values()}
    later = MetadataDelta(with_offsets)
    slot.on_metadata_update(later, _image(9, "orders", OFFSETS))
    assert built[0].deltas[-1] is later and len(built) == 1


def test_built_on_first_use_up_to_date_with_the_loader() -> None:
    loader = _Loader(_image(5, "orders"))
    slot, built = _slot(loader)
    assert slot.get() is slot.get() is built[0]
    assert len(built) == 1 and len(built[0].deltas) == 1
    assert set(built[0].deltas[0].topic_changes.changed_partitions) == {"AAAAAAAAAAAAAAAAAAAAA0"}


def test_a_failed_catch_up_leaves_it_unbuilt() -> None:
    class Failing(_Recorder):
        def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
            raise RuntimeError("cannot load")

    loader: Any = _Loader(_image(5, "orders"))
    slot = CoordinatorSlot("txn_coordinator", Failing, loader)
    with pytest.raises(RuntimeError):
        slot.get()
    assert slot.built is None


def test_a_fresh_broker_imports_the_group_coordinator_only_for_a_group(tmp_path: Path) -> None:
    """`-X importtime` lists each module as it is imported: none of the coordinators while the
    broker starts and serves Metadata and a produce, the group coordinator once a consumer group
    commits; the group works (its committed offset is read back)."""
    port = free_port()
    log = tmp_path / "imports.txt"
    cmd = [sys.executable, "-X", "importtime", "-m", "kopfka.cli.main", "serve"]
    cmd += ["--data-dir", str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}"]
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        bootstrap = f"127.0.0.1:{port}"
        p = Producer({"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 30000})
        p.produce("orders", b"one")
        assert p.flush(60) == 0

        def imported(module: str) -> bool:
            return any(
                line.rstrip().endswith(f"| {module}") or line.rstrip().endswith(f" {module}")
                for line in log.read_text().splitlines()
            )

        coordinators = (
            "kopfka.coordinator.group.coordinator",
            "kopfka.coordinator.transaction.coordinator",
            "kopfka.coordinator.share.coordinator",
        )
        assert not [m for m in coordinators if imported(m)], "a coordinator was imported at start"
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
        c.subscribe(["orders"])
        deadline = time.monotonic() + 60
        msg = None
        while msg is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            msg = m if m is not None and m.error() is None else None
        assert msg is not None and msg.value() == b"one"
        c.commit(message=msg, asynchronous=False)
        (tp,) = c.committed([c.assignment()[0]], timeout=30)
        assert tp.offset == 1
        c.close()
        assert imported("kopfka.coordinator.group.coordinator")
        assert not imported("kopfka.coordinator.share.coordinator")
    finally:
        proc.terminate()
        proc.wait(30)
