"""A QuorumController in-process on a single-voter KafkaRaftClient (the embedded default's quorum,
without the network): the raft client elects itself, the controller writes the bootstrap records."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from kopfka.controller.quorum_controller import QuorumController
from kopfka.metadata import records as mr
from kopfka.metadata.image import METADATA_VERSION
from kopfka.raft.kafka_raft import KafkaRaftClient


async def single_voter_controller(
    metadata_dir: Path,
    bootstrap: list[mr.MetadataRecord],
    *,
    cluster_id: str,
    static_config: Mapping[str, object],
    node_id: int = 1,
    timeout: float = 10.0,
) -> tuple[QuorumController, KafkaRaftClient]:
    """Started and active, with the bootstrap records applied; close both when done (`stop`)."""
    raft = KafkaRaftClient(
        node_id=node_id,
        cluster_id=cluster_id,
        metadata_dir=metadata_dir,
        directory_id="",
        static_voters={node_id: ("127.0.0.1", 1)},  # the only voter: nobody is ever asked
    )
    controller = QuorumController(raft, node_id=node_id, cluster_id=cluster_id, static_config=static_config)
    controller.bootstrap_records = bootstrap
    raft.start()
    async with asyncio.timeout(timeout):
        while not (controller.is_active and METADATA_VERSION in controller.image.features):
            await asyncio.sleep(0.005)
    return controller, raft


async def stop(controller: QuorumController, raft: KafkaRaftClient) -> None:
    await controller.close()
    await raft.close()
