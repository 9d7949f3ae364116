"""Snapshot files: `<end offset>-<epoch>.checkpoint` loaded then the log tail equals replaying the
whole log — through the real file format, the real raft client and the MetadataLoader."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kopfka.metadata import records as r
from kopfka.metadata.image import replay
from kopfka.metadata.loader import MetadataLoader
from kopfka.raft import snapshots
from kopfka.raft.kafka_raft import KafkaRaftClient
from kopfka.raft.raft_client import CommittedBatch
from kopfka.raft.snapshot_generator import SnapshotGenerator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
from test_metadata_image import comparable, record_logs


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record_logs(), st.integers(0, 40), st.integers(0, 5))
def test_snapshot_file_then_tail_equals_whole_log(
    tmp_path: Path, log: list[r.MetadataRecord], cut: int, epoch: int
) -> None:
    cut = min(cut, len(log))
    snap = snapshots.SnapshotId(cut, epoch)
    snapshots.write_snapshot(tmp_path, snap, list(replay(log[:cut]).to_records()))
    assert snapshots.latest_snapshot(tmp_path) == snap
    loader = MetadataLoader()
    loader.handle_commit(
        CommittedBatch(0, cut - 1, epoch, 0, tuple(snapshots.read_snapshot(tmp_path, snap)), is_snapshot=True)
    )
    for off in range(cut, len(log)):
        loader.handle_commit(CommittedBatch(off, off, epoch, 0, (log[off],)))
    assert comparable(loader.image) == comparable(replay(log))
    snapshots.delete_snapshots_before(tmp_path, snapshots.SnapshotId(10**9, 0))


def test_snapshot_names_sort_by_offset(tmp_path: Path) -> None:
    for end, ep in [(5, 1), (120, 2), (30, 9)]:
        snapshots.write_snapshot(tmp_path, snapshots.SnapshotId(end, ep), [r.NoOpRecord()])
    assert (tmp_path / "00000000000000000120-0000000002.checkpoint").exists()
    assert snapshots.latest_snapshot(tmp_path) == snapshots.SnapshotId(120, 2)


def _client(tmp_path: Path) -> KafkaRaftClient:
    return KafkaRaftClient(
        node_id=1,
        cluster_id="c",
        metadata_dir=tmp_path,
        directory_id="",
        static_voters={1: ("127.0.0.1", 1)},
        election_timeout_ms=50,
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record_logs(), st.integers(50, 400))
def test_single_voter_log_with_generated_snapshots_replays_identically(tmp_path_factory, log, max_bytes) -> None:  # type: ignore[no-untyped-def]
    """Append a log in batches through a one-voter quorum that snapshots every `max_bytes`;
    a restarted node (latest snapshot + log tail) builds the same image as a full replay."""
    d = tmp_path_factory.mktemp("raft")

    async def write() -> None:
        raft = _client(d)
        raft.register(SnapshotGenerator(raft, max_bytes=max_bytes, max_interval_ms=0))
        raft.start()
        for i in range(0, len(log), 3):
            for _ in range(200):
                if raft.leader_ready:
                    break
                await asyncio.sleep(0.01)
            await raft.append(log[i : i + 3])
        await raft.close()

    async def reload() -> MetadataLoader:
        raft = _client(d)
        loader = MetadataLoader()
        raft.register(loader)
        raft.start()
        for _ in range(300):
            if raft.leader_ready:
                break
            await asyncio.sleep(0.01)
        await raft.close()
        return loader

    asyncio.run(write())
    loader = asyncio.run(reload())
    assert comparable(loader.image) == comparable(replay(log))
    if sum(len(r.encode(x)) for x in log) > max_bytes * 2:
        assert snapshots.list_snapshots(d / "__cluster_metadata-0"), "expected a snapshot to be written"
