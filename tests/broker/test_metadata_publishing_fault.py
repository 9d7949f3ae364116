"""A metadata publisher that raises is a fault, as Kafka's metadata publishing fault handler
treats it: an ERROR line, metadata-apply-error-count on /metrics, the other publishers still
get the image; on the broker's first (whole-image) publish it stops the broker from starting."""

from __future__ import annotations

import logging
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataDelta, MetadataImage
from kopfka.metadata.loader import InitialMetadataLoadError, MetadataLoader
from kopfka.raft.raft_client import CommittedBatch
from kopfka_process import KopfkaProcess, free_port

TOPIC_ID = "MUsD4cB9QhWjT5r3wBvBBw"


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.images: list[MetadataImage] = []

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.images.append(image)


class Boom:
    name = "boom"

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        raise RuntimeError("publisher bug")


def batch(offset: int, *records: Any, snapshot: bool = False) -> CommittedBatch:
    return CommittedBatch(offset, offset, 1, 0, tuple(records), is_snapshot=snapshot)


def test_a_failing_publisher_is_a_counted_error_and_the_others_still_apply(caplog: pytest.LogCaptureFixture) -> None:
    loader = MetadataLoader()
    rec = Recorder()
    loader.install_publishers([Boom(), rec])
    with caplog.at_level(logging.ERROR, logger="kopfka.metadata.loader"):
        loader.handle_commit(batch(0, mr.TopicRecord("t", TOPIC_ID)))
        loader.handle_commit(batch(1, mr.FeatureLevelRecord("metadata.version", 30), snapshot=True))
    assert loader.apply_error_count == 2
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "Encountered metadata publishing fault: Unhandled error publishing the new metadata image ending at "
        "offset 0 with boom",
        "Encountered metadata publishing fault: Unhandled error publishing the new metadata image from the "
        "snapshot ending at offset 1 with boom",
    ]
    assert all(r.exc_info is not None for r in errors)
    assert [set(i.topics_by_name) for i in rec.images] == [{"t"}, set()]


def test_a_failing_publisher_on_the_first_publish_is_fatal() -> None:
    loader = MetadataLoader()
    loader.handle_commit(batch(0, mr.TopicRecord("t", TOPIC_ID)))
    with pytest.raises(InitialMetadataLoadError, match="publisher boom failed loading the metadata image"):
        loader.install_publishers([Boom()])
    assert loader.apply_error_count == 1 and not loader.publishers


def test_apply_error_count_is_exported(tmp_path: Path) -> None:
    http = free_port()
    k = KopfkaProcess(tmp_path / "data", overrides={"kopfka.http.listener": f"127.0.0.1:{http}"}).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert "\nkafka_server_broker_metadata_metrics_metadata_apply_error_count 0.0\n" in text
    finally:
        k.kill()
