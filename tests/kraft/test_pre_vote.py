"""Pre-vote (KIP-996): a voter that lost touch with the quorum asks whether it would be elected
before it bumps the epoch, so it cannot disrupt a healthy leader when it comes back.

The multi-process test cuts one controller off with the test-only fault hook
(`internal.raft.isolation.file`: while the file exists the node's quorum RPCs are lost both ways).
Without pre-vote the cut-off voter kept raising its epoch and, once back, forced the leader out.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from cluster import Cluster, Node, describe_quorum, run, wait_until
from kio.index import load_request_schema
from kopfka.metadata import records as mr
from kopfka.protocol.entity_builder import build
from kopfka.protocol.errors import ErrorCode
from kopfka.raft.kafka_raft import METADATA_TOPIC, KafkaRaftClient, Voter


def _vote(
    epoch: int, candidate: int, last_epoch: int, last_offset: int, pre_vote: bool, voter_dir: uuid.UUID | None = None
) -> Any:
    body = {
        "cluster_id": "c",
        "voter_id": 1,
        "topics": [
            {
                "topic_name": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "replica_epoch": epoch,
                        "replica_id": candidate,
                        "replica_directory_id": None,
                        "voter_directory_id": voter_dir,
                        "last_offset_epoch": last_epoch,
                        "last_offset": last_offset,
                        "pre_vote": pre_vote,
                    }
                ],
            }
        ],
    }
    return build(load_request_schema(52, 2), body)


def _answer(raft: KafkaRaftClient, req: Any) -> tuple[bool, int, int]:
    p = raft.handle_vote(req)["topics"][0]["partitions"][0]
    return bool(p["vote_granted"]), int(p["leader_epoch"]), int(p["leader_id"])


def test_pre_vote_rules(tmp_path: Path) -> None:
    """Granting a pre-vote binds nothing; a follower that hears from its leader refuses it; a
    leader refuses it; a stale log is refused; a real vote still needs no leader and no other vote."""

    async def scenario() -> None:
        raft = KafkaRaftClient(
            node_id=1,
            cluster_id="c",
            metadata_dir=tmp_path,
            directory_id="",
            static_voters={1: ("127.0.0.1", 1), 2: ("127.0.0.1", 1), 3: ("127.0.0.1", 1)},
        )
        try:
            raft._become_unattached(5)
            assert _answer(raft, _vote(5, 2, 0, 0, pre_vote=True)) == (True, 5, -1)
            assert (raft.epoch, raft.voted_id, raft.role) == (5, -1, "unattached")  # nothing recorded
            assert _answer(raft, _vote(5, 3, 0, 0, pre_vote=True))[0]  # several prospectives may hear yes
            raft._become_follower(3, 5)
            assert _answer(raft, _vote(5, 2, 0, 0, pre_vote=True)) == (True, 5, 3)  # not heard from 3 yet
            raft._fetched_from_leader = True  # a fetch from leader 3 succeeded: it is alive
            assert _answer(raft, _vote(5, 2, 0, 0, pre_vote=True)) == (False, 5, 3)
            assert (raft.epoch, raft.leader_id, raft.role) == (5, 3, "follower")
            assert not _answer(raft, _vote(5, 2, 0, 0, pre_vote=False))[0]  # a leader is known
            # a stale log gets no pre-vote either
            await raft._append_local([mr.NoOpRecord()])  # our log: one entry in epoch 5
            raft._become_unattached(6)
            assert not _answer(raft, _vote(6, 2, 0, 0, pre_vote=True))[0]
            assert _answer(raft, _vote(6, 2, 5, 1, pre_vote=True))[0]
            # a real vote in a higher epoch is granted once, to one candidate
            assert _answer(raft, _vote(7, 2, 5, 1, pre_vote=False)) == (True, 7, -1)
            assert raft.voted_id == 2 and not _answer(raft, _vote(7, 3, 5, 1, pre_vote=False))[0]
            raft.epoch += 1
            await raft._become_leader()
            assert not _answer(raft, _vote(raft.epoch, 2, raft._last_epoch(), 99, pre_vote=True))[0]
        finally:
            await raft.close()

    asyncio.run(scenario())


def _quorum(node: Node) -> Any:
    return run(describe_quorum(node.address)).topics[0].partitions[0]


def test_partitioned_voter_does_not_disrupt_the_quorum_on_return(tmp_path: Path) -> None:
    c = Cluster(tmp_path / "c", 3, 0)
    for n in c.controllers:
        n.props = {**c.props, "internal.raft.isolation.file": str(n.dir / "isolated")}
    try:
        c.format_all()
        c.start()
        leader = c.leader()
        epoch = int(_quorum(leader).leader_epoch)
        victim = next(n for n in c.controllers if n is not leader)
        logged_before = len(victim.log_text())  # the first election may have asked for pre-votes too
        (victim.dir / "isolated").touch()
        # several fetch timeouts (2 s) and election timeouts (0.8-1.6 s) without the quorum
        time.sleep(9)
        cut_off = _quorum(victim)
        assert int(cut_off.leader_epoch) == epoch, "the cut-off voter raised its epoch"
        assert victim.alive and "pre-votes" in victim.log_text()[logged_before:]
        (victim.dir / "isolated").unlink()

        def rejoined() -> bool:
            q = _quorum(leader)
            me = {int(v.replica_id): v for v in q.current_voters}
            caught_up = int(me[victim.node_id].log_end_offset) >= int(me[leader.node_id].log_end_offset)
            return caught_up and time.time() * 1000 - int(me[victim.node_id].last_fetch_timestamp) < 1000

        wait_until(rejoined, 20, "the cut-off voter to fetch from the leader again")
        time.sleep(3)  # time for a disruption to show
        q = _quorum(leader)
        assert (int(q.leader_id), int(q.leader_epoch)) == (leader.node_id, epoch), "the leader was disrupted"
        back = _quorum(victim)
        assert (int(back.leader_id), int(back.leader_epoch)) == (leader.node_id, epoch)
        assert "starting election" not in victim.log_text()[logged_before:]
    finally:
        c.stop()


def test_pre_vote_respects_replica_keys(tmp_path: Path) -> None:
    """KIP-853 + KIP-996: a pre-vote addressed to this node's old directory id is refused with
    INVALID_VOTER_KEY, and a node whose id is a voter only under another directory id (its disk
    was lost) never becomes prospective: it would otherwise ask for votes with an empty log."""

    async def scenario() -> None:
        raft = KafkaRaftClient(
            node_id=1,
            cluster_id="c",
            metadata_dir=tmp_path,
            directory_id="AAAAAAAAAAAAAAAAAAAAAQ",
            static_voters={1: ("127.0.0.1", 1), 2: ("127.0.0.1", 1), 3: ("127.0.0.1", 1)},
        )
        try:
            raft._become_unattached(5)
            req = _vote(5, 2, 0, 0, pre_vote=True, voter_dir=uuid.UUID(int=2))  # another directory
            p = raft.handle_vote(req)["topics"][0]["partitions"][0]
            assert (p["error_code"], p["vote_granted"]) == (ErrorCode.invalid_voter_key, False)
            assert (raft.epoch, raft.voted_id) == (5, -1)
            # our id stays a voter under a stale directory id: no pre-vote round, no epoch bump
            raft.voters[1] = Voter(1, "AAAAAAAAAAAAAAAAAAAAAg", "127.0.0.1", 1)
            assert not raft.is_voter
            raft.role = "prospective"
            assert await raft._collect_votes(pre_vote=True) is None
            assert (raft.role, raft.epoch) == ("unattached", 5)
        finally:
            await raft.close()

    asyncio.run(scenario())
