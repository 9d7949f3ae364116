"""AssignmentsManager in isolation: intents from reconciling local logs with the image, retry with
backoff after a failed batch, a newer intent for the same partition wins, stale intents dropped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataImage, replay
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.assignments_manager import AssignmentsManager

TID = "AAAAAAAAAAAAAAAAAAAAAQ"


class FakeController:
    def __init__(self, fail_first: int) -> None:
        self.calls: list[list[tuple[str, str, int]]] = []
        self.fail_first = fail_first

    async def assign_replicas_to_dirs(
        self, broker_id: int, epoch: int, assignments: list[tuple[str, str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        self.calls.append(sorted(assignments))
        if len(self.calls) <= self.fail_first:
            raise KafkaError(ErrorCode.not_controller, "no controller")
        return {(t, p): ErrorCode.none for _, t, p in assignments}


def image(directories: tuple[str, ...] = (), metadata_version: int = 30) -> MetadataImage:
    return replay(
        [
            mr.FeatureLevelRecord("metadata.version", metadata_version),
            mr.TopicRecord("t", TID),
            mr.PartitionRecord(0, TID, (1,), (1,), 1, directories=directories),
            mr.PartitionRecord(1, TID, (2,), (2,), 2),  # not ours
        ]
    )


def manager(ctl: Any, img: list[MetadataImage]) -> AssignmentsManager:
    logs = SimpleNamespace(
        directory_ids={Path("/d1"): "dir-one", Path("/d2"): "dir-two"},
        current_logs={("t", 0): SimpleNamespace(dir=Path("/d1/t-0")), ("t", 1): SimpleNamespace(dir=Path("/d2/t-1"))},
    )
    return AssignmentsManager(
        1, logs, ctl, broker_epoch=lambda: 7, image=lambda: img[0], backoff_base_ms=20, resync_interval_s=0.05
    )


def test_reconcile_retries_with_backoff_until_recorded() -> None:
    async def go() -> tuple[FakeController, AssignmentsManager]:
        ctl = FakeController(fail_first=2)
        img = [image()]
        m = manager(ctl, img)
        assert m.reconcile(image(metadata_version=16)) == 0  # no directory assignment before 3.7-IV2 (17)
        assert m.reconcile() == 1  # partition 1 is not ours
        m.start()
        for _ in range(200):
            if m.sent:
                break
            await asyncio.sleep(0.01)
        img[0] = image(("dir-one",))  # the controller's record reached our image
        await asyncio.sleep(0.2)
        await m.close()
        return ctl, m

    ctl, m = asyncio.run(go())
    assert m.sent == 1
    assert len(ctl.calls) == 3 and all(c == [("dir-one", TID, 0)] for c in ctl.calls)  # 2 failures, 1 success
    assert not m.ready and not m.inflight


def test_newer_intent_wins_and_stale_ones_are_dropped() -> None:
    async def go() -> FakeController:
        ctl = FakeController(fail_first=0)
        img = [image()]
        m = manager(ctl, img)
        m.on_assignment(TID, 0, "dir-one")
        m.on_assignment(TID, 0, "dir-two")  # moved again before sending: only the newest is sent
        m.on_assignment(TID, 1, "dir-two")  # not a replica here: stale
        m.on_assignment("BBBBBBBBBBBBBBBBBBBBBQ", 0, "dir-one")  # unknown topic: stale
        await m.send_once()
        return ctl

    ctl = asyncio.run(go())
    assert ctl.calls == [[("dir-two", TID, 0)]]
