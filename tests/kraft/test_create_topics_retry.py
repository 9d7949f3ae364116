"""RemoteController CreateTopics retried after a lost answer (controller failover): a
TOPIC_ALREADY_EXISTS caused by our own earlier attempt is reported as success when the topic
matches the spec exactly; anything else keeps the error."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kopfka.controller.quorum_controller import CreateTopicSpec
from kopfka.metadata import records as mr
from kopfka.metadata.image import TOPIC_RESOURCE, MetadataImage, replay
from kopfka.protocol.errors import ErrorCode
from kopfka.server.node_to_controller import RemoteController

TID = "AAAAAAAAAAAAAAAAAAAAAQ"


def created(name: str, partitions: int, configs: dict[str, str]) -> MetadataImage:
    recs: list[mr.MetadataRecord] = [mr.TopicRecord(name, TID)]
    recs += [mr.ConfigRecord(TOPIC_RESOURCE, name, k, v) for k, v in configs.items()]
    recs += [mr.PartitionRecord(p, TID, (1,), (1,), 1) for p in range(partitions)]
    return replay(recs)


def run_case(spec: CreateTopicSpec, existing: MetadataImage, *, lost: bool) -> Any:
    img = [MetadataImage()]
    raft = SimpleNamespace(leader_id=1000, leader_endpoint=lambda: ("127.0.0.11", 1))
    rc = RemoteController(raft, node_id=1, cluster_id="c", image=lambda: img[0], timeout_s=3.0)  # type: ignore[arg-type]
    attempts: list[int] = []

    async def request(*args: Any, **kw: Any) -> Any:
        attempts.append(1)
        if lost and len(attempts) == 1:
            img[0] = existing  # the first attempt was applied, then the connection dropped
            raise ConnectionError("controller died before answering")
        img[0] = existing
        topic = SimpleNamespace(
            name=spec.name, error_code=ErrorCode.topic_already_exists, error_message="exists",
            topic_id=None, num_partitions=-1, replication_factor=-1, configs=(),
        )
        return SimpleNamespace(error_code=None, topics=[topic])

    rc.peers.request = request  # type: ignore[method-assign]
    return asyncio.run(rc.create_topics([spec]))[0]


def test_retry_after_lost_answer_reports_the_earlier_success() -> None:
    spec = CreateTopicSpec("orders", 3, 1, configs={"retention.ms": "1000"})
    res = run_case(spec, created("orders", 3, {"retention.ms": "1000"}), lost=True)
    assert res.error == ErrorCode.none and res.topic_id == TID and res.num_partitions == 3


def test_different_spec_or_no_lost_attempt_keeps_the_error() -> None:
    spec = CreateTopicSpec("orders", 3, 1, configs={"retention.ms": "1000"})
    # no attempt was lost: somebody else created it
    assert run_case(spec, created("orders", 3, {"retention.ms": "1000"}), lost=False).error == (
        ErrorCode.topic_already_exists
    )
    # lost attempt, but the existing topic differs (partitions, configs)
    assert run_case(spec, created("orders", 4, {"retention.ms": "1000"}), lost=True).error == (
        ErrorCode.topic_already_exists
    )
    assert run_case(spec, created("orders", 3, {"retention.ms": "5"}), lost=True).error == (
        ErrorCode.topic_already_exists
    )
